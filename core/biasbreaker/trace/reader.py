"""Reading a run trace: streamed in O(1) memory, or loaded; a cut last line is tolerated.

Both schema versions are read: version 2 (hash-chained, with seals) and version 1 (no chain).
The step records come back as :class:`~biasbreaker.trace.StepRecord`; seals are kept apart
(:attr:`TraceReader.seals`), so ``records`` holds the steps only, numbered from 0.

Source:
    ``ARCHITECTURE.md`` §6; ``docs/control.md`` §6.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from biasbreaker.errors import TraceError
from biasbreaker.trace.chain import line_digest
from biasbreaker.trace.lines import LineBlocks, SealLine, TraceTruncatedWarning, to_record
from biasbreaker.trace.records import SealRecord, Signature, StepRecord, TraceHeader


def to_seal(line: SealLine) -> SealRecord:
    """The public :class:`~biasbreaker.trace.records.SealRecord` of a decoded seal line."""
    signature = line.signature
    return SealRecord(
        line.steps,
        line.prev,
        None if signature is None else Signature(signature.key, signature.sig),
    )


class TraceReader:
    """Stream a run trace record by record, in O(1) memory.

    The header is read on construction. Iterating yields the step records in order (once);
    afterwards :attr:`sha256` (of the file's bytes, including a cut last line),
    :attr:`truncated`, :attr:`whole_bytes`, :attr:`newline_missing`, :attr:`n_records`,
    :attr:`seals` (in file order), :attr:`ends_sealed` and :attr:`head` are set. A last line
    without its newline is a whole record if it parses as a JSON object (a proper prefix of a
    one-line JSON object never does), and cut otherwise.

    Args:
        path: The trace file.
        warn: Emit :class:`TraceTruncatedWarning` if the last line was cut mid-record.

    Raises:
        TraceError: If the file cannot be read or has no valid header; while iterating, if a
            line (other than a cut last line) is malformed, has an unknown kind, or breaks the
            step order. Messages name the file and line.
    """

    def __init__(self, path: str | os.PathLike[str], *, warn: bool = True) -> None:
        self._blocks = LineBlocks(path, warn=warn)
        self.path = self._blocks.path
        self.header: TraceHeader = self._blocks.header
        self.n_records = 0
        self.seals: list[SealRecord] = []
        self.ends_sealed = False
        self._last_line = self._blocks.header_line

    @property
    def version(self) -> int:
        """The trace's schema version (1 or 2)."""
        return self._blocks.version

    @property
    def sha256(self) -> str:
        """SHA-256 hex digest of the file's bytes; complete once iteration has finished."""
        return self._blocks.sha256

    @property
    def truncated(self) -> bool:
        """Whether a cut last line was ignored."""
        return self._blocks.truncated

    @property
    def newline_missing(self) -> bool:
        """Whether the last whole line lacks its newline."""
        return self._blocks.newline_missing

    @property
    def whole_bytes(self) -> int:
        """Length in bytes of the file up to the end of its last whole line."""
        return self._blocks.whole_bytes

    @property
    def head(self) -> str:
        """The digest of the last whole line (the chain head); set once iteration has finished."""
        if not self._blocks.done:
            raise TraceError(f"{self.path}: the head is known only after reading every record")
        return line_digest(self._last_line)

    def __iter__(self) -> Iterator[StepRecord]:
        for number, raw, decoded in self._blocks:
            for offset, line in enumerate(decoded):
                if type(line) is SealLine:
                    self.seals.append(to_seal(line))
                    self.ends_sealed = True
                    continue
                record = to_record(line)  # type: ignore[arg-type]
                if record.step != self.n_records:
                    raise TraceError(
                        f"{self.path}:{number + offset}: step {record.step} is "
                        f"out of order; expected step {self.n_records}"
                    )
                self.n_records += 1
                self.ends_sealed = False
                yield record
            if raw:
                self._last_line = raw[-1]


@dataclass(frozen=True, slots=True)
class Trace:
    """A trace read into memory (see :func:`read_trace`).

    Args:
        path: The file.
        sha256: SHA-256 hex digest of the file's bytes as read (including any cut last line).
        header: The header.
        records: The whole step records, in order (seals are in ``seals``).
        truncated: Whether a cut last line was dropped.
        whole_bytes: Length in bytes of the file up to the end of its last whole line.
        newline_missing: Whether the last whole line lacks its newline.
        seals: The seal records, in file order (version 2).
        head: The digest of the last whole line, the chain head (see
            :mod:`biasbreaker.trace.chain`).
        ends_sealed: Whether the last whole line is a seal.
    """

    path: Path
    sha256: str
    header: TraceHeader
    records: tuple[StepRecord, ...]
    truncated: bool
    whole_bytes: int
    newline_missing: bool = False
    seals: tuple[SealRecord, ...] = ()
    head: str = ""
    ends_sealed: bool = False


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
        tuple(reader.seals),
        reader.head,
        reader.ends_sealed,
    )


__all__ = ["Trace", "TraceReader", "TraceTruncatedWarning", "read_trace", "to_seal"]
