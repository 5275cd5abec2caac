"""What the database sinks share: the table, and reading, appending and refusing its rows."""

from __future__ import annotations

import threading
from typing import Any

from biasbreaker.errors import TraceError

TABLE = "biasbreaker_trace_lines"
"""The table of trace lines: ``(thread_id, seq, line)``, primary key ``(thread_id, seq)``."""


def contiguous(location: str, thread_id: str, rows: list[tuple[object, ...]]) -> list[bytes]:
    """The lines of ``(seq, line)`` rows, checking the seqs run 0, 1, 2, ….

    Raises:
        TraceError: A missing seq (a deleted row), or a line that is not bytes (a row edited
            by hand as text), naming the thread and the seq.
    """
    lines = []
    for expected, (seq, line) in enumerate(rows):
        if seq != expected:
            raise TraceError(
                f"{location}: thread {thread_id!r} has no line at seq {expected} (the next is "
                f"seq {seq}): a row was deleted, the trace is not whole"
            )
        if not isinstance(line, (bytes, bytearray, memoryview)):
            raise TraceError(
                f"{location}: thread {thread_id!r} seq {seq}: the line is stored as "
                f"{type(line).__name__}, not bytes: the row was written by something other "
                "than a trace sink (an edit by hand?), the trace is not as it was written"
            )
        lines.append(bytes(line))
    return lines


def taken(location: str, thread_id: str, seq: int) -> TraceError:
    """The error of an append at a seq another writer took, naming the store, thread and seq."""
    return TraceError(
        f"{location}: thread {thread_id!r} already has a trace line at seq {seq}: another "
        "writer appended to this thread first (two workers ran the same step, or two runs "
        "share a thread id). Nothing was written; the thread's trace is as that writer left it"
    )


class SqlLines:
    """The line store over one DB-API connection: what the SQLite and PostgreSQL stores share.

    A subclass sets ``location`` (for messages; no secret in it), ``_db`` (an autocommit
    connection whose ``execute`` returns a cursor), ``_mark`` (the driver's placeholder, ``?``
    or ``%s``) and ``_errors`` (the driver's error classes). Calls on the one connection are
    serialised by a lock (the adapter's threads share the store).
    """

    location: str
    _db: Any
    _mark: str
    _errors: type[BaseException] | tuple[type[BaseException], ...]

    def __init__(self) -> None:
        self._lock = threading.Lock()

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
            f"SELECT seq, line FROM {TABLE} WHERE thread_id = {self._mark} ORDER BY seq",
            (thread_id,),
        )
        return contiguous(self.location, thread_id, rows)

    def append(self, thread_id: str, seq: int, line: bytes) -> None:
        """Insert and commit one line; a taken ``(thread_id, seq)`` is a :class:`TraceError`."""
        mark = self._mark
        try:
            with self._lock:
                cursor = self._db.execute(
                    f"INSERT INTO {TABLE} (thread_id, seq, line) VALUES ({mark}, {mark}, {mark}) "
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
        with self._lock:
            self._db.close()


__all__ = ["TABLE", "SqlLines", "contiguous", "taken"]
