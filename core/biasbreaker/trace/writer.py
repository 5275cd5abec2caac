"""Writing a run trace: one flushed, hash-chained line per record, sealed at pauses and ends.

:class:`TraceWriter` writes the header, then one step record per :meth:`~TraceWriter.write`,
each line carrying the digest of the line before it (:mod:`biasbreaker.trace.chain`).
:meth:`~TraceWriter.seal` writes a seal — the step count and the chain head, signed when a
signing key is configured — and is called at every pause for human review and at the end of
every run; :func:`seal_trace` seals a trace file that no writer holds open. A writer that
continues a file (``append=True``) continues its chain from the file's last line.

Source:
    ``ARCHITECTURE.md`` §6; ``docs/control.md`` §6.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Final, Literal, Union

from biasbreaker.errors import TraceError
from biasbreaker.trace.chain import line_digest, seal_message
from biasbreaker.trace.reader import read_trace
from biasbreaker.trace.records import (
    SealRecord,
    Signature,
    StepRecord,
    TraceHeader,
    record_line,
)
from biasbreaker.trace.signing import Signer, signer_from_environment

FROM_ENVIRONMENT: Final = "environment"
"""``signer`` default: sign with the key file named by ``BIASBREAKER_SIGNING_KEY_FILE``, if set."""

SignerChoice = Union[Signer, Literal["environment"], None]  # noqa: UP007 (runtime alias, 3.10)
"""A :class:`~biasbreaker.trace.signing.Signer`, :data:`FROM_ENVIRONMENT`, or ``None``."""


class TraceWriter:
    """Append run-trace records to a JSON Lines file, one flushed, chained line per record.

    Use it as a context manager, and pass it (or its :meth:`write`) as the control machine's
    ``recorder``. Call :meth:`seal` when the run pauses for review and when it ends: a trace
    that does not end with a seal does not verify (its end cannot be told from a cut). Closing
    never seals by itself.

    Args:
        path: The trace file, or an open text stream (e.g. ``sys.stdout``; it is flushed per
            record but not closed, and ``fsync`` and ``append`` do not apply).
        header: The run's header, written as line 1 of a new file.
        fsync: Also ``os.fsync`` after every record (durable against power loss; slower).
        append: Continue an existing trace (e.g. after restoring a machine from a snapshot):
            its header must equal ``header`` and its schema version must be the current one;
            a last line cut by a crash is removed, a whole last line without its newline gets
            one; the chain continues from the file's last line and the next record must
            continue the step numbering. Without ``append`` an existing file is overwritten.
        signer: Who signs the seals: a :class:`~biasbreaker.trace.signing.Signer`, ``None``
            (unsigned), or by default :data:`FROM_ENVIRONMENT` (the key file named by
            ``BIASBREAKER_SIGNING_KEY_FILE`` if that variable is set, else unsigned).

    Raises:
        TraceError: With ``append``, if the existing file is not a trace, is a version-1 trace,
            or its header differs.
        InputError: If the signing key cannot be loaded (the message names the file).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | IO[str],
        header: TraceHeader,
        *,
        fsync: bool = False,
        append: bool = False,
        signer: SignerChoice = FROM_ENVIRONMENT,
    ) -> None:
        self.header = header
        self._signer = signer_from_environment() if signer == FROM_ENVIRONMENT else signer
        self._next_step = 0
        self._closed = False
        self._unsealed = True  # written since the last seal (a new file: the header)
        self._last_seal: SealRecord | None = None
        self._owned = not hasattr(path, "write")
        if not self._owned:
            self.path = Path(getattr(path, "name", "<stream>"))
            self._fsync = False
            self._file: IO[str] = path  # type: ignore[assignment]
            self._head = self._emit(record_line(header.to_json()))
            return
        self.path = Path(path)  # type: ignore[arg-type]
        self._fsync = fsync
        if append and self.path.exists() and self.path.stat().st_size > 0:
            existing = read_trace(self.path, warn=False)
            if existing.header.version != header.version:
                raise TraceError(
                    f"{self.path}: cannot append, it is a version-{existing.header.version} "
                    f"trace (no hash chain); this biasbreaker writes version {header.version}: "
                    "write the run to a new file"
                )
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
            self._next_step = len(existing.records)
            self._head = existing.head
            self._unsealed = not existing.ends_sealed
            self._last_seal = existing.seals[-1] if existing.ends_sealed else None
            self._file = self.path.open("a", encoding="utf-8", newline="\n")
        else:
            self._file = self.path.open("w", encoding="utf-8", newline="\n")
            self._head = self._emit(record_line(header.to_json()))

    @property
    def head(self) -> str:
        """The chain head: the digest of the last line written (:mod:`biasbreaker.trace.chain`)."""
        return self._head

    @property
    def steps(self) -> int:
        """Step records in the trace so far."""
        return self._next_step

    def _emit(self, line: str) -> str:
        self._file.write(line)
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())
        return line_digest(line.encode("utf-8"))

    def write(self, record: StepRecord) -> None:
        """Append one step record, chained to the line before it, and flush it.

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
        data = record.to_json()
        data["prev"] = self._head
        self._head = self._emit(record_line(data))
        self._next_step += 1
        self._unsealed = True

    __call__ = write

    def seal(self) -> SealRecord:
        """Seal the trace: write the step count and the chain head, signed if a key is set.

        Call it at every pause for human review and at the end of every run. Idempotent: if
        nothing was written since the last seal, nothing is written and that seal is returned.

        Returns:
            The seal written (or the last one).

        Raises:
            TraceError: If the writer is closed.
        """
        if self._closed:
            raise TraceError(f"{self.path}: the trace writer is closed")
        if not self._unsealed and self._last_seal is not None:
            return self._last_seal
        steps, head = self._next_step, self._head
        signature = None
        if self._signer is not None:
            signature = Signature(
                self._signer.public_key, self._signer.sign(seal_message(steps, head))
            )
        seal = SealRecord(steps, head, signature)
        self._head = self._emit(record_line(seal.to_json()))
        self._unsealed = False
        self._last_seal = seal
        return seal

    def close(self) -> None:
        """Close the file (idempotent); a stream passed in is flushed, not closed. Never seals."""
        self._closed = True
        if self._owned:
            self._file.close()
        else:
            self._file.flush()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def seal_trace(
    path: str | os.PathLike[str], *, signer: SignerChoice = FROM_ENVIRONMENT, fsync: bool = False
) -> str:
    """Seal a trace file that no writer holds open (e.g. after a thread paused or finished).

    Idempotent like :meth:`TraceWriter.seal`: a trace that already ends with a seal is left as
    it is.

    Args:
        path: The trace file (version 2).
        signer: As :class:`TraceWriter`.
        fsync: ``os.fsync`` after writing.

    Returns:
        The trace's head after sealing: the digest of its seal line, what ``results.jsonl``
        lists for the trace.

    Raises:
        TraceError: The file is not a version-2 trace.
        InputError: The signing key cannot be loaded.
    """
    header = read_trace(path, warn=False).header
    with TraceWriter(path, header, fsync=fsync, append=True, signer=signer) as writer:
        writer.seal()
        return writer.head


__all__ = ["FROM_ENVIRONMENT", "SignerChoice", "TraceWriter", "seal_trace"]
