"""What the database sinks share: the table's name, and reading and refusing its rows."""

from __future__ import annotations

from biasbreaker.errors import TraceError

TABLE = "biasbreaker_trace_lines"
"""The table of trace lines: ``(thread_id, seq, line)``, primary key ``(thread_id, seq)``."""


def contiguous(location: str, thread_id: str, rows: list[tuple[object, ...]]) -> list[bytes]:
    """The lines of ``(seq, line)`` rows, checking the seqs run 0, 1, 2, ….

    Raises:
        TraceError: A missing seq (a deleted row), naming the thread and the seq.
    """
    lines = []
    for expected, (seq, line) in enumerate(rows):
        if seq != expected:
            raise TraceError(
                f"{location}: thread {thread_id!r} has no line at seq {expected} (the next is "
                f"seq {seq}): a row was deleted, the trace is not whole"
            )
        lines.append(bytes(line))  # type: ignore[call-overload]
    return lines


def taken(location: str, thread_id: str, seq: int) -> TraceError:
    """The error of an append at a seq another writer took, naming the store, thread and seq."""
    return TraceError(
        f"{location}: thread {thread_id!r} already has a trace line at seq {seq}: another "
        "writer appended to this thread first (two workers ran the same step, or two runs "
        "share a thread id). Nothing was written; the thread's trace is as that writer left it"
    )


__all__ = ["TABLE", "contiguous", "taken"]
