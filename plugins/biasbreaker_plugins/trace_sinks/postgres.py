"""The ``postgresql`` trace sink: every worker's trace lines in one append-only table.

``postgresql://[user@]host[:port]/db[?options=-csearch_path%3Dschema]`` (libpq's URL; psycopg
3, the ``postgres`` extra). The table is created once, under a transaction-scoped advisory lock
so that workers starting together do not race. Each line is inserted in its own committed
statement, ``INSERT ... ON CONFLICT DO NOTHING`` on the primary key ``(thread_id, seq)``: a
line at a seq another worker took is a :class:`~biasbreaker.errors.TraceError`, and nothing is
overwritten.
"""

from __future__ import annotations

from typing import Any

from biasbreaker.errors import ConfigError, PluginError
from biasbreaker.trace.sink import check_scheme, redact_url
from biasbreaker.trace.store import StoreSink
from biasbreaker_plugins.trace_sinks.rows import TABLE, SqlLines

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


class PostgresStore(SqlLines):
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
        super().__init__()
        self._errors = psycopg.Error
        self._mark = "%s"
        self.location = redact_url(url)
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
