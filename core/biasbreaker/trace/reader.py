"""Reading a run trace: streamed in O(1) memory, or loaded; a cut last line is tolerated.

Source:
    ``ARCHITECTURE.md`` §6; ``docs/control.md`` §6.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from biasbreaker.errors import TraceError
from biasbreaker.trace.records import StepRecord, TraceHeader


class TraceTruncatedWarning(UserWarning):
    """A trace's last line was cut mid-way (a crash while writing); it was ignored."""


class TraceReader:
    """Stream a run trace record by record, in O(1) memory.

    The header is read on construction. Iterating yields the step records in order (once);
    afterwards :attr:`sha256` (of the file's bytes, including a cut last line),
    :attr:`truncated`, :attr:`whole_bytes`, :attr:`newline_missing` and :attr:`n_records` are
    set. A last line without its newline is a whole record if it parses as a JSON object (a
    proper prefix of a one-line JSON object never does), and cut otherwise.

    Args:
        path: The trace file.
        warn: Emit :class:`TraceTruncatedWarning` if the last line was cut mid-record.

    Raises:
        TraceError: If the file cannot be read or has no valid header; while iterating, if a
            line (other than a cut last line) is malformed, has an unknown kind, or breaks the
            step order. Messages name the file and line.
    """

    def __init__(self, path: str | os.PathLike[str], *, warn: bool = True) -> None:
        self.path = Path(path)
        self._warn = warn
        self._hash = hashlib.sha256()
        self.truncated = False
        self.newline_missing = False
        self.whole_bytes = 0
        self.n_records = 0
        self._done = False
        try:
            self._file: IO[bytes] = self.path.open("rb")
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot read the trace: {exc}") from exc
        self._line_number = 0
        first = self._next_object()
        if first is None:
            self._file.close()
            raise TraceError(
                f"{self.path}: empty trace, or its header line is cut; nothing to read"
            )
        try:
            self.header = TraceHeader.from_json(first)
        except TraceError as exc:
            self._file.close()
            raise TraceError(f"{self.path}:1: {exc}") from exc

    @property
    def sha256(self) -> str:
        """SHA-256 hex digest of the file's bytes; complete once iteration has finished."""
        if not self._done:
            raise TraceError(f"{self.path}: the digest is known only after reading every record")
        return self._hash.hexdigest()

    def _next_object(self) -> dict[str, Any] | None:
        raw = self._file.readline()
        if not raw:
            return None
        self._hash.update(raw)
        self._line_number += 1
        if not raw.endswith(b"\n"):
            # The writer emits each record and its newline in one write, so a line without its
            # newline was either being written when the process died (cut: not a JSON object)
            # or lost only its newline afterwards (whole: a JSON object).
            try:
                whole = json.loads(raw)
            except ValueError:
                whole = None
            if isinstance(whole, dict):
                self.newline_missing = True
                self.whole_bytes += len(raw)
                return whole
            self.truncated = True
            if self._warn:
                warnings.warn(
                    f"{self.path}:{self._line_number}: the last line is cut mid-record (the "
                    f"writer crashed?); read the {self._line_number - 1} whole lines before it",
                    TraceTruncatedWarning,
                    stacklevel=3,
                )
            return None
        try:
            parsed = json.loads(raw)
        except ValueError as exc:
            raise TraceError(f"{self.path}:{self._line_number}: not valid JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise TraceError(f"{self.path}:{self._line_number}: a trace line must be a JSON object")
        self.whole_bytes += len(raw)
        return parsed

    def __iter__(self) -> Iterator[StepRecord]:
        try:
            while True:
                parsed = self._next_object()
                if parsed is None:
                    break
                try:
                    record = StepRecord.from_json(parsed)
                except TraceError as exc:
                    raise TraceError(f"{self.path}:{self._line_number}: {exc}") from exc
                if record.step != self.n_records:
                    raise TraceError(
                        f"{self.path}:{self._line_number}: step {record.step} is "
                        f"out of order; expected step {self.n_records}"
                    )
                self.n_records += 1
                yield record
            self._done = True
        finally:
            self._file.close()


@dataclass(frozen=True, slots=True)
class Trace:
    """A trace read into memory (see :func:`read_trace`).

    Args:
        path: The file.
        sha256: SHA-256 hex digest of the file's bytes as read (including any cut last line).
        header: The header.
        records: The whole step records, in order.
        truncated: Whether a cut last line was dropped.
        whole_bytes: Length in bytes of the file up to the end of its last whole line.
        newline_missing: Whether the last whole line lacks its newline.
    """

    path: Path
    sha256: str
    header: TraceHeader
    records: tuple[StepRecord, ...]
    truncated: bool
    whole_bytes: int
    newline_missing: bool = False


def read_trace(path: str | os.PathLike[str], *, warn: bool = True) -> Trace:
    """Read and validate a whole run trace into memory (use :class:`TraceReader` to stream).

    Args:
        path: The trace file.
        warn: Emit :class:`TraceTruncatedWarning` if the last line was cut mid-record.

    Returns:
        The trace, with every whole record.

    Raises:
        TraceError: As :class:`TraceReader`.
    """
    reader = TraceReader(path, warn=warn)
    records = tuple(reader)
    return Trace(
        reader.path,
        reader.sha256,
        reader.header,
        records,
        reader.truncated,
        reader.whole_bytes,
        reader.newline_missing,
    )


__all__ = ["Trace", "TraceReader", "TraceTruncatedWarning", "read_trace"]
