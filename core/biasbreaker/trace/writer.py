"""Writing a run trace: one flushed JSON line per record, continued after a restore.

Source:
    ``ARCHITECTURE.md`` §6; ``docs/control.md`` §6.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from biasbreaker.errors import TraceError
from biasbreaker.trace.reader import read_trace
from biasbreaker.trace.records import StepRecord, TraceHeader, record_line


class TraceWriter:
    """Append run-trace records to a JSON Lines file, one flushed line per record.

    Use it as a context manager, and pass it (or its :meth:`write`) as the control machine's
    ``recorder``.

    Args:
        path: The trace file, or an open text stream (e.g. ``sys.stdout``; it is flushed per
            record but not closed, and ``fsync`` and ``append`` do not apply).
        header: The run's header, written as line 1 of a new file.
        fsync: Also ``os.fsync`` after every record (durable against power loss; slower).
        append: Continue an existing trace (e.g. after restoring a machine from a snapshot):
            its header must equal ``header``; a last line cut by a crash is removed, a whole
            last line without its newline gets one; the next record must continue the step
            numbering. Without ``append`` an existing file is
            overwritten.

    Raises:
        TraceError: With ``append``, if the existing file is not a trace or its header
            differs.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | IO[str],
        header: TraceHeader,
        *,
        fsync: bool = False,
        append: bool = False,
    ) -> None:
        self.header = header
        self._next_step = 0
        self._closed = False
        self._owned = not hasattr(path, "write")
        if not self._owned:
            self.path = Path(getattr(path, "name", "<stream>"))
            self._fsync = False
            self._file: IO[str] = path  # type: ignore[assignment]
            self._emit(record_line(header.to_json()))
            return
        self.path = Path(path)  # type: ignore[arg-type]
        self._fsync = fsync
        if append and self.path.exists() and self.path.stat().st_size > 0:
            existing = read_trace(self.path, warn=False)
            if existing.header != header:
                raise TraceError(
                    f"{self.path}: cannot append, its header differs from this "
                    "run's (different thresholds, window or seed)"
                )
            with self.path.open("r+b") as raw:
                raw.truncate(existing.whole_bytes)
                if existing.newline_missing:
                    raw.seek(existing.whole_bytes)
                    raw.write(b"\n")
            self._next_step = existing.records[-1].step + 1 if existing.records else 0
            self._file = self.path.open("a", encoding="utf-8", newline="\n")
        else:
            self._file = self.path.open("w", encoding="utf-8", newline="\n")
            self._emit(record_line(header.to_json()))

    def _emit(self, line: str) -> None:
        self._file.write(line)
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())

    def write(self, record: StepRecord) -> None:
        """Append one step record and flush it.

        Raises:
            TraceError: If the record's step is not the next one (steps are consecutive from
                0), or the writer is closed.
        """
        if self._closed:
            raise TraceError(f"{self.path}: the trace writer is closed")
        if record.step != self._next_step:
            raise TraceError(
                f"{self.path}: step {record.step} written out of order; expected "
                f"step {self._next_step}"
            )
        self._emit(record_line(record.to_json()))
        self._next_step += 1

    __call__ = write

    def close(self) -> None:
        """Close the file (idempotent); a stream passed in is flushed, not closed."""
        self._closed = True
        if self._owned:
            self._file.close()
        else:
            self._file.flush()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


__all__ = ["TraceWriter"]
