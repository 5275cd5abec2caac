"""Decoding a trace's lines fast: typed msgspec structs, read in blocks, in O(1) memory.

:class:`LineBlocks` reads a trace file in blocks of whole lines and decodes each block with
one msgspec call into :class:`StepLine` and :class:`SealLine` structs, validating types and
ranges in C. This is what :class:`~biasbreaker.trace.TraceReader` and ``biasbreaker verify``
read with: a million-step trace (≈ 0.4 GB) is decoded in about the time ``json.loads`` takes
for a third of it (``nox -s bench``). msgspec was chosen on measurement: a 475-byte step line
decodes and validates into a typed struct in ≈ 1.7 µs, as fast as orjson parses it into a dict
(which would still need validating in Python) and ≈ 4× faster than ``json.loads``. The structs
are declared ``gc=False`` (not tracked by the cyclic garbage collector): decoded JSON cannot
form a reference cycle, and tracking a million short-lived structs cost ≈ 30 % of the decoding
time (measured on 100 k steps: 1.7 µs → 1.2 µs a line, CPU time).

A line msgspec rejects is decoded again with :mod:`json` and
:meth:`~biasbreaker.trace.records.StepRecord.from_json`, so the error names the field as the
reader always did.

Source:
    ``docs/control.md`` §6 (schema); msgspec (Crist, https://jcristharif.com/msgspec/).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Annotated, Any, Final, Union

import msgspec

from biasbreaker.errors import TraceError
from biasbreaker.trace.records import HELD_FOR_REVIEW, StepRecord, TraceHeader
from biasbreaker.types import ALLOWED_ACTIONS, BreakerAction, BreakerState, WindowCounts

SQLITE_MAGIC: Final = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""


def sqlite_url(path: Path) -> str:
    """The ``sqlite:///`` URL of a database file (four slashes for an absolute path)."""
    return f"sqlite:///{path.as_posix()}"


BLOCK_BYTES: Final = 1 << 22
"""Bytes read at a time (whole lines are decoded together)."""

NonNegative = Annotated[float, msgspec.Meta(ge=0.0)]
Count = Annotated[int, msgspec.Meta(ge=0)]
Ratio = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
Digest = Annotated[str, msgspec.Meta(min_length=64, max_length=64)]


class TraceTruncatedWarning(UserWarning):
    """A trace's last line was cut mid-way (a crash while writing); it was ignored."""


class WindowLine(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, gc=False):
    """A step's window counts, as decoded (see :class:`~biasbreaker.types.WindowCounts`)."""

    beyond_3: Count
    beyond_5: Count
    size: Count


class StepLineV1(
    msgspec.Struct,
    frozen=True,
    forbid_unknown_fields=True,
    tag="step",
    tag_field="kind",
    kw_only=True,
    gc=False,
):
    """A version-1 step line, decoded (the fields of :class:`~biasbreaker.trace.StepRecord`).

    The fields are declared in the order of the keys of a line (RFC 8785 sorts them): msgspec
    looks each key up from the field after the last one found, so a key in field order is
    found at once (≈ 7 % of a line's decoding, measured). Keyword-only, so that no caller
    depends on the order.
    """

    action: BreakerAction
    attempt: Count
    episode: Count
    fast: NonNegative
    intervention: Union[dict[str, Any], None]  # noqa: UP007 (msgspec reads it at runtime, 3.10)
    mixing_ratio: Ratio
    node: Union[str, None]  # noqa: UP007
    payload_sha256: Union[str, None]  # noqa: UP007
    reason: str
    scores: dict[str, NonNegative]
    slow: NonNegative
    state: BreakerState
    step: Count
    transition: str
    window: Union[WindowLine, None]  # noqa: UP007

    @property
    def weights(self) -> Mapping[str, float] | None:
        """Version 1 records no Katz weights."""
        return None

    @property
    def probe(self) -> ProbeLine | None:
        """Version 1 records no probe outcome."""
        return None


class ProbeLine(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, gc=False):
    """What the probe made of a step (see :class:`~biasbreaker.trace.StepRecord`)."""

    reason: str
    status: str


class StepLine(
    StepLineV1,
    frozen=True,
    forbid_unknown_fields=True,
    tag="step",
    tag_field="kind",
    kw_only=True,
    gc=False,
):
    """A version-2 step line: a step record, its chain link, the weights where they changed.

    A probing writer (the LangGraph adapter) adds the probe's outcome.
    """

    prev: Digest
    probe: Union[ProbeLine, None] = None  # noqa: UP007
    weights: Union[dict[str, NonNegative], None] = None  # noqa: UP007


class SignatureLine(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A seal's signature, as decoded (see :class:`~biasbreaker.trace.records.Signature`)."""

    key: str
    sig: str


class SealLine(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="seal", tag_field="kind", gc=False
):
    """A seal line, decoded (see :class:`~biasbreaker.trace.records.SealRecord`)."""

    prev: Digest
    steps: Count
    signature: Union[SignatureLine, None] = None  # noqa: UP007


AnyLine = Union[StepLineV1, SealLine]  # noqa: UP007
"""A decoded line after the header: a step (either version) or a seal."""

_DECODERS: Final[dict[int, msgspec.json.Decoder[Any]]] = {
    1: msgspec.json.Decoder(list[StepLineV1]),
    2: msgspec.json.Decoder(list[Union[StepLine, SealLine]]),  # noqa: UP007
}
_ONE: Final[dict[int, msgspec.json.Decoder[Any]]] = {
    1: msgspec.json.Decoder(StepLineV1),
    2: msgspec.json.Decoder(Union[StepLine, SealLine]),  # noqa: UP007
}


def to_record(line: StepLineV1) -> StepRecord:
    """The public :class:`~biasbreaker.trace.StepRecord` of a decoded step line."""
    window = line.window
    return StepRecord(
        step=line.step,
        node=line.node,
        scores=line.scores,
        fast=line.fast,
        slow=line.slow,
        window=None
        if window is None
        else WindowCounts(window.size, window.beyond_3, window.beyond_5),
        state=line.state,
        action=line.action,
        mixing_ratio=line.mixing_ratio,
        reason=line.reason,
        transition=line.transition,
        episode=line.episode,
        attempt=line.attempt,
        payload_sha256=line.payload_sha256,
        intervention=line.intervention,
        weights=line.weights,
        probe=None
        if line.probe is None
        else {"status": line.probe.status, "reason": line.probe.reason},
    )


def _explain(raw: bytes, version: int) -> str:
    """Why a line does not decode: the reader's own message, naming the field."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        return f"not valid JSON: {exc}"
    if not isinstance(data, dict):
        return "a trace line must be a JSON object"
    kind = data.get("kind")
    if kind == "seal" and version >= 2:
        try:
            _ONE[version].decode(raw)
        except msgspec.MsgspecError as exc:
            return f"seal record is invalid: {exc}"
        return "seal record is invalid"
    extra = set(data) - _STEP_KEYS[version]
    try:
        StepRecord.from_json(data)
    except TraceError as exc:
        return str(exc)
    if extra:
        return f"step record has unknown field(s) {', '.join(map(repr, sorted(extra)))}"
    try:
        _ONE[version].decode(raw)
    except msgspec.MsgspecError as exc:
        return f"step record is invalid: {exc}"
    return "step record is invalid"


_V1_STEP_KEYS: Final = frozenset(StepLineV1.__struct_fields__) | {"kind"}
_STEP_KEYS: Final = {1: _V1_STEP_KEYS, 2: _V1_STEP_KEYS | {"prev", "weights", "probe"}}


class LineBlocks:
    """Read a trace's header, then its other lines in decoded blocks, in O(1) memory.

    Iterating yields ``(first_line_number, raw_lines, decoded)`` per block: the whole lines'
    bytes (each with its newline, except a last line that lacks one) and their decoded structs,
    in file order. Afterwards :attr:`sha256` (of the file's bytes, a cut last line included),
    :attr:`truncated`, :attr:`newline_missing` and :attr:`whole_bytes` are set.

    A byte range of the lines can be read instead of all of them (``biasbreaker verify`` reads
    a large trace in two ranges at once, :mod:`biasbreaker.verify.split`): the header is
    always read, then the lines from ``start`` up to ``stop``, in the blocks one pass over the
    whole file would decode them in (so a malformed line is reported as one pass reports it);
    :meth:`read_to_end` then reads on to the end. :attr:`sha256` is known only without
    ``start``, once the end is read (:meth:`digest_to_end` hashes it without reading it).

    Args:
        path: The trace file.
        warn: Emit :class:`TraceTruncatedWarning` if the last line was cut mid-record.
        start: Byte offset of the first line to read (the start of a line after the header),
            or ``None`` for the line after the header.
        stop: Byte offset at which to stop (the start of a line), or ``None`` for the end of
            the file.
        first_number: The line number of the first line read (2 without ``start``).

    Raises:
        TraceError: If the file cannot be read or has no valid header; while iterating, if a
            line (other than a cut last line) is malformed, with the file and line. A line is
            malformed when it is not a JSON object, has an unknown kind or field, a value of the
            wrong type or range, or an action inconsistent with its state.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        warn: bool = True,
        start: int | None = None,
        stop: int | None = None,
        first_number: int = 2,
    ) -> None:
        self.path = Path(path)
        self._warn = warn
        self._stop = stop
        self._number = first_number
        self._from_start = start is None  # the hash covers the file from its first byte
        self._to_end = stop is None  # ... and up to its last (see read_to_end)
        self._hash = hashlib.sha256()
        self.truncated = False
        self.newline_missing = False
        self.whole_bytes = 0
        self.done = False
        try:
            self._file: IO[bytes] = self.path.open("rb")
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot read the trace: {exc}") from exc
        if self._file.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC:
            self._file.close()
            raise TraceError(
                f"{self.path} is a SQLite database, not a JSON Lines run trace; for the traces "
                f"a sqlite trace sink stored there, give its URL: {sqlite_url(self.path)}"
            )
        self._file.seek(0)
        first = self._file.readline()
        self._hash.update(first)
        header: object = None
        if first.endswith(b"\n"):
            try:
                header = json.loads(first)
            except UnicodeDecodeError:
                self._file.close()
                raise TraceError(
                    f"{self.path}:1: not UTF-8 text, so not a JSON Lines run trace (a binary file?)"
                ) from None
            except ValueError as exc:
                self._file.close()
                raise TraceError(f"{self.path}:1: not valid JSON: {exc}") from exc
            if not isinstance(header, dict):
                self._file.close()
                raise TraceError(f"{self.path}:1: a trace line must be a JSON object")
        elif first:
            try:
                header = json.loads(first)
            except ValueError:
                header = None
        if not isinstance(header, dict):
            self._file.close()
            raise TraceError(
                f"{self.path}: empty trace, or its header line is cut; nothing to read"
            )
        try:
            self.header = TraceHeader.from_json(header)
        except TraceError as exc:
            self._file.close()
            raise TraceError(f"{self.path}:1: {exc}") from exc
        self.header_line = first
        self.whole_bytes = len(first)
        if not first.endswith(b"\n"):
            self.newline_missing = True
        self.version = self.header.version
        self._decoder = _ONE[self.version]
        self._position = self._header_bytes = len(first)
        if start is not None:
            self._file.seek(start)
            self._position = start

    @property
    def sha256(self) -> str:
        """SHA-256 hex digest of the file's bytes; complete once iteration has finished."""
        if not (self.done and self._from_start and self._to_end):
            raise TraceError(f"{self.path}: the digest is known only after reading every record")
        return self._hash.hexdigest()

    def digest_to_end(self) -> str:
        """After iterating up to ``stop``: the file's SHA-256, hashing the rest unread.

        The reader's own state does not change (:meth:`read_to_end` can still follow).

        Raises:
            TraceError: If the file cannot be read, or the reader was given ``start``.
        """
        if not self._from_start:
            raise TraceError(f"{self.path}: the digest needs the file from its first byte")
        digest = self._hash.copy()
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._position)
                while block := fh.read(BLOCK_BYTES * 4):
                    digest.update(block)
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot read the trace: {exc}") from exc
        return digest.hexdigest()

    def read_to_end(self) -> None:
        """After iterating up to ``stop``: iterating again reads on from there to the end.

        The blocks, line numbers, digest and end-of-file handling are then those of one pass
        over the whole file.
        """
        self._stop = None
        self._to_end = True

    def __iter__(self) -> Iterator[tuple[int, list[bytes], list[AnyLine]]]:
        number = self._number  # the next line's number
        rest = b""
        stop = self._stop
        # read from a start: the file's digest can never be known, so it is not computed
        update = self._hash.update if self._from_start else None
        try:
            if self.newline_missing:  # the header was the last line
                self.done = True
                return
            if self._file.closed:  # iterated up to stop before
                self._file = self.path.open("rb")
                self._file.seek(self._position)
            while True:
                # blocks end where one pass from the header would end them, whatever the start
                size = BLOCK_BYTES - (self._position - self._header_bytes) % BLOCK_BYTES
                if stop is not None:
                    size = min(size, stop - self._position)
                block = self._file.read(size) if size > 0 else b""
                self._position += len(block)
                if update is not None:
                    update(block)
                data = rest + block if rest else block
                if not block and stop is not None:
                    if data:
                        raise TraceError(f"{self.path}: byte {stop} is not the start of a line")
                    break
                if not block:
                    if data:
                        tail = self._tail(data, number)
                        if tail is not None:
                            yield number, [data], [tail]
                    self.done = True
                    break
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    rest = data
                    continue
                lines = data.split(b"\n")
                rest = lines.pop()  # what follows the last newline (data[cut:]), not copied twice
                decoded = self._decode(data, cut, lines, number)
                self._check_actions(decoded, number)
                self.whole_bytes += cut
                yield number, lines, decoded
                number += len(lines)
                self._number = number
        finally:
            self._file.close()

    def _tail(self, raw: bytes, number: int) -> AnyLine | None:
        """The last line, which has no newline: a whole record, or cut while being written."""
        try:
            decoded = _ONE[self.version].decode(raw)
        except msgspec.MsgspecError:
            try:
                whole = json.loads(raw)
            except ValueError:
                whole = None
            if isinstance(whole, dict):  # a whole object that does not validate
                raise TraceError(f"{self.path}:{number}: {_explain(raw, self.version)}") from None
            self.truncated = True
            if self._warn:
                warnings.warn(
                    f"{self.path}:{number}: the last line is cut mid-record (the writer "
                    f"crashed?); read the {number - 1} whole lines before it",
                    TraceTruncatedWarning,
                    stacklevel=4,
                )
            return None
        self._check_actions([decoded], number)
        self.newline_missing = True
        self.whole_bytes += len(raw)
        return decoded  # type: ignore[no-any-return]

    def _decode(self, data: bytes, cut: int, lines: list[bytes], number: int) -> list[AnyLine]:
        """Decode the whole lines ``data[:cut]`` (``lines``, split) in one msgspec call.

        ``decode_lines`` reads the buffer in place (joining the lines into one JSON array
        cost three copies of the block, ≈ 0.35 µs a line), but it skips blank lines and reads
        two values on one line as two records. So its result is taken only when no line
        starts with whitespace or is empty (the smallest line starts with ``{``, which every
        byte of JSON whitespace sorts before) and there is one record per line; otherwise
        the lines are decoded one by one, which names a bad line as before.
        """
        try:
            decoded: list[AnyLine] = self._decoder.decode_lines(memoryview(data)[:cut])
        except msgspec.MsgspecError:
            return self._find_bad(lines, number)
        if len(decoded) != len(lines) or not min(lines).startswith(b"{"):
            return self._find_bad(lines, number)
        return decoded

    def _find_bad(self, lines: list[bytes], number: int) -> list[AnyLine]:
        one = _ONE[self.version]
        out: list[AnyLine] = []
        for offset, raw in enumerate(lines):
            try:
                out.append(one.decode(raw))
            except msgspec.MsgspecError:
                where = f"{self.path}:{number + offset}"
                raise TraceError(f"{where}: {_explain(raw, self.version)}") from None
        return out

    def _check_actions(self, decoded: list[AnyLine], number: int) -> None:
        for offset, line in enumerate(decoded):
            if type(line) is SealLine:
                continue
            step: StepLineV1 = line  # type: ignore[assignment]
            held = step.transition == HELD_FOR_REVIEW and step.action is BreakerAction.ESCALATE
            if step.action not in ALLOWED_ACTIONS[step.state] and not held:
                raise TraceError(
                    f"{self.path}:{number + offset}: step record has action "
                    f"{step.action.value!r}, inconsistent with state {step.state.value!r}"
                )

    def close(self) -> None:
        """Close the file (iterating to the end closes it too)."""
        self._file.close()


__all__ = [
    "AnyLine",
    "LineBlocks",
    "SealLine",
    "SignatureLine",
    "StepLine",
    "StepLineV1",
    "TraceTruncatedWarning",
    "WindowLine",
    "to_record",
]
