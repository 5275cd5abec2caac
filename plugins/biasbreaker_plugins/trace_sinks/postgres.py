"""The ``postgresql`` trace sink: every worker's trace lines in one append-only table.

``postgresql://[user@]host[:port]/db[?options=-csearch_path%3Dschema]`` (libpq's URL; psycopg
3, the ``postgres`` extra). The table is created once, under a transaction-scoped advisory lock
so that workers starting together do not race. Each line is inserted in its own committed
statement, ``INSERT ... ON CONFLICT DO NOTHING`` on the primary key ``(thread_id, seq)``: a
line at a seq another worker took is a :class:`~biasbreaker.errors.TraceError`, and nothing is
overwritten.
"""

from __future__ import annotations

import threading
from typing import Any

from biasbreaker.errors import ConfigError, PluginError, TraceError
from biasbreaker.trace.sink import check_scheme, redact_url
from biasbreaker.trace.store import StoreSink
from biasbreaker_plugins.trace_sinks.rows import TABLE, contiguous, taken

CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (thread_id text NOT NULL, "
    "seq bigint NOT NULL CHECK (seq >= 0), line bytea NOT NULL, "
    "PRIMARY KEY (thread_id, seq))"
)
CONNECT_TIMEOUT_S = 10
"""Seconds to wait for the server when connecting."""


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise PluginError(
            "trace_sink 'postgresql' needs psycopg: pip install 'biasbreaker[postgres]'"
        ) from exc
    return psycopg


class PostgresStore:
    """The ``biasbreaker_trace_lines`` table in a PostgreSQL database (its ``search_path``).

    Args:
        url: A ``postgresql://`` URL.
        create: Create the table if missing (a sink); else it must exist.

    Raises:
        ConfigError: Not a PostgreSQL URL, or the server cannot be reached.
        PluginError: psycopg is not installed.
    """

    def __init__(self, url: str, *, create: bool = True) -> None:
        check_scheme(url, "postgresql")
        psycopg = _psycopg()
        self._errors = psycopg.Error
        self.location = redact_url(url)
        self._lock = threading.Lock()
        try:
            self._db = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
            if create:
                with self._db.transaction():
                    self._db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (TABLE,))
                    self._db.execute(CREATE)
        except psycopg.Error as exc:
            raise ConfigError(
                f"{self.location}: cannot open the PostgreSQL trace store: {exc}"
            ) from exc

    def threads(self) -> list[str]:
        """Thread ids with at least one line, sorted (by code point)."""
        rows = self._query(f"SELECT DISTINCT thread_id FROM {TABLE}", ())
        return sorted(str(row[0]) for row in rows)

    def lines(self, thread_id: str) -> list[bytes]:
        """The thread's lines in seq order.

        Raises:
            TraceError: A gap in the seqs.
        """
        rows = self._query(
            f"SELECT seq, line FROM {TABLE} WHERE thread_id = %s ORDER BY seq", (thread_id,)
        )
        return contiguous(self.location, thread_id, rows)

    def append(self, thread_id: str, seq: int, line: bytes) -> None:
        """Insert and commit one line; a taken ``(thread_id, seq)`` is a :class:`TraceError`."""
        try:
            with self._lock:
                cursor = self._db.execute(
                    f"INSERT INTO {TABLE} (thread_id, seq, line) VALUES (%s, %s, %s) "
                    "ON CONFLICT (thread_id, seq) DO NOTHING",
                    (thread_id, seq, line),
                )
        except self._errors as exc:
            raise TraceError(
                f"{self.location}: appending thread {thread_id!r} seq {seq} failed: {exc}"
            ) from exc
        if cursor.rowcount != 1:
            raise taken(self.location, thread_id, seq)

    def _query(self, sql: str, args: tuple[str, ...]) -> list[tuple[object, ...]]:
        try:
            with self._lock:
                return list(self._db.execute(sql, args).fetchall())
        except self._errors as exc:
            raise TraceError(f"{self.location}: reading the trace store failed: {exc}") from exc

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._db.close()


class PostgresBackend:
    """The ``postgresql`` sink's backend."""

    def open_sink(self, location: str, *, adapter: str, fsync: bool) -> StoreSink:
        """A sink writing to the table at ``location`` (created if missing).

        Every line is committed before ``write`` returns, so ``fsync`` adds nothing.
        """
        return StoreSink(PostgresStore(location), adapter=adapter)

    def open_store(self, location: str) -> PostgresStore:
        """The table at ``location``, to read."""
        return PostgresStore(location, create=False)


__all__ = ["PostgresBackend", "PostgresStore"]
