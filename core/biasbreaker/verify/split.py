"""Verifying a large trace in two halves at once, and joining them into the one-pass report.

A trace of :data:`SPLIT_MIN_BYTES` or more, on a machine with two cores, is cut at the start
of a line near :data:`SPLIT_FRACTION` of its bytes. A worker process (``python -m
biasbreaker.verify.worker``, a fresh interpreter) checks the lines from the cut to the end
while this process checks the lines before it, then hashes the rest of the file for the
trace's digest. Each half streams its lines (O(1) memory in each process).

The worker has to start its verifiers in the state they would have at the cut. It brings them
there by **warming up**: it feeds the replay and the properties the lines of the
:data:`WARMUP_BYTES` before the cut (the calibration window, the per-node EWMA history, the
current episode), and, if no line there records the Katz weights, the weights recorded last
in the :data:`GUESS_BYTES` before it, or else in the first :data:`GUESS_BYTES` of the trace (a
guess: a run records them on its first step and where its topology changes). The warm-up is
not trusted: it only has to be right for the halves to **join**, and the
join checks that it was. At the cut, every attribute of every verifier in this process must
equal the worker's after its warm-up — the machine's state and counters, the window, the
weights, the EWMAs, each property's state — except those that count (added up: steps, flips,
episodes, …) and pure caches; the chain continues from the digest of the line before the cut
(computed by the worker from the bytes), and the step records this process counted must be
the number the worker's first step record carries. Every attribute not listed in
:data:`_COUNTED` or :data:`_CACHED` is compared, so a state added to a verifier later is
compared too. Since each verifier is deterministic, equal states at the cut and the same lines
after it give the same verdicts as one pass.

The cut is the end of a block of lines where one pass would end it, and both halves read
their lines in the blocks one pass reads them in, so this process's half is exactly the
beginning of one pass: an error in it is the one-pass error, raised as is. When the halves do
not join, when the worker finds any violation or error (its messages would carry line and
episode numbers it does not know), when the last line is cut or lacks its newline, or when
the worker cannot run, this process simply reads on from the cut with its own verifiers —
the rest of one pass — so the report, every violation message, every warning and every error
are always the one-pass ones. That costs the worker's time on a trace that does not join;
the wall time is then about one pass.

Source:
    ``docs/control.md`` §7 and §10 (measured: ``nox -s bench``).
"""

from __future__ import annotations

import math
import os
import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, Union

import msgspec

from biasbreaker.trace.lines import _DECODERS, _ONE, BLOCK_BYTES, LineBlocks, StepLineV1
from biasbreaker.types import BreakerState
from biasbreaker.verify.chain import ChainVerifier
from biasbreaker.verify.checks import Checks
from biasbreaker.verify.properties.anti_thrash import AntiThrashVerifier
from biasbreaker.verify.properties.bounded_retries import BoundedRetriesVerifier
from biasbreaker.verify.properties.cooldown import CooldownVerifier
from biasbreaker.verify.properties.must_trip import MustTripVerifier
from biasbreaker.verify.properties.rlb import RLBVerifier
from biasbreaker.verify.properties.terminal_escalation import TerminalEscalationVerifier
from biasbreaker.verify.replay import Replay

SPLIT_MIN_BYTES: Final = 32 << 20
"""Traces smaller than this (≈ 60 k steps) are verified in one process: a worker's start-up
(≈ 0.15 s) would cost more than it saves."""

SPLIT_FRACTION: Final = 0.48
"""Where the cut falls, as a fraction of the file's bytes. This process also hashes the
worker's half for the file's digest; the worker starts an interpreter and warms up: measured
in CPU time on the 1M-step bench trace (alternated, load 5-6), the two halves cost about the
same with this process taking a little less than half of the lines (2.55-2.58 s and
2.57-2.62 s; at 0.52, 2.77-2.82 s and 2.39-2.49 s)."""

WARMUP_BYTES: Final = 1 << 21
"""Bytes before the cut the worker replays to warm up (≈ 4,000 steps of 500 bytes; more than
any calibration window, cool-down or retry episode of a typical run)."""

GUESS_BYTES: Final = 1 << 23
"""How far the worker searches for the Katz weights in force at its cut, back from its warm-up
and forward from the header (8 MiB, ≈ 16,000 steps each; :func:`_guess_weights`)."""

_N: Final = BreakerState.NORMAL

_COUNTED: Final[dict[type, tuple[str, ...]]] = {
    Replay: ("_steps", "_derived", "_resteps"),
    RLBVerifier: ("_cycles", "_transitions", "_literal_exceeded", "_windowless"),
    AntiThrashVerifier: ("_in_band", "_flips"),
    BoundedRetriesVerifier: ("_episodes",),
    CooldownVerifier: ("_recoveries",),
    MustTripVerifier: ("_checked",),
    TerminalEscalationVerifier: ("_after",),
}
"""Per verifier, the attributes that count: the joined value is this process's plus what the
worker counted after its warm-up."""

_CACHED: Final[dict[type, tuple[str, ...]]] = {Replay: ("_weight_sums", "_dirty")}
"""Per verifier, the attributes that are not state: a memo of the weights (a function of
them) and the replayed step's own window flag (set before it is read, at every step)."""

_IDLE_WHEN_CLOSED: Final[dict[type, tuple[str, ...]]] = {
    BoundedRetriesVerifier: ("_interventions",),
}
"""Per verifier, state that is reset before it is next read once the breaker is closed (the
interventions of an episode that ended): compared only while ``_previous`` is tripped."""

_SPECIAL: Final = ("_log", "_first", "_escalated_at")
"""Joined by rule: the violation log (the worker's must hold none), RLB-v1's first recovery
transition, and the first escalation's step (which only messages and the note show: both
halves must agree on whether the run had escalated; the joined value is the first's)."""


@dataclass(frozen=True, slots=True)
class Half:
    """What the worker reports on its half (pickled to this process).

    Args:
        steps_before: The step records before the cut, as the worker's first line says.
        head_before: The digest of the line before the cut.
        warmed: The replays, RLB-v1 and the other verifiers after the warm-up, pickled.
        checks: The worker's checks after its last line.
        truncated: Whether the last line was cut.
        newline_missing: Whether the last line lacks its newline.
    """

    steps_before: int
    head_before: str
    warmed: bytes
    checks: Checks
    truncated: bool
    newline_missing: bool


@dataclass(frozen=True, slots=True)
class Split:
    """The outcome of :func:`verify_in_two`.

    Args:
        checks: The checks after the trace's last line: the two halves joined, or, when they
            did not join, this process's, read on from the cut.
        sha256: The file's SHA-256.
        truncated: Whether a cut last line was ignored.
        joined: Whether the halves joined (else this process read the second half too).
    """

    checks: Checks
    sha256: str
    truncated: bool
    joined: bool


def worth_splitting(path: Path) -> bool:
    """Whether ``verify_trace`` splits this trace by default: large enough, two cores free."""
    try:
        size = path.stat().st_size
    except OSError:
        return False
    return size >= SPLIT_MIN_BYTES and _cores() >= 2


def _cores() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


def cut_point(path: Path, header_bytes: int) -> int | None:
    """Where to cut: the end of a block of lines near :data:`SPLIT_FRACTION` of the file.

    A block ends at the last newline before ``header_bytes + k·BLOCK_BYTES``, where one pass
    would end it (:class:`~biasbreaker.trace.lines.LineBlocks`), so each half reads its lines
    in the blocks one pass reads them in.

    Args:
        path: The trace file.
        header_bytes: The header line's length, newline included.

    Returns:
        The byte offset of the first line after the cut, or ``None`` if the file has no
        such block end after its first block (too small, or a line longer than a block).
    """
    size = path.stat().st_size
    k = round((size - header_bytes) * SPLIT_FRACTION / BLOCK_BYTES)
    if k < 1:
        return None
    boundary = header_bytes + k * BLOCK_BYTES
    with path.open("rb") as fh:
        cut = _Bytes(fh).rfind(b"\n", boundary - BLOCK_BYTES, min(boundary, size)) + 1
    return cut if header_bytes < cut < size else None


def verify_in_two(
    path: Path,
    *,
    max_history: int | None,
    public_key: str | None,
    cut: int | None = None,
    warmup_bytes: int = WARMUP_BYTES,
) -> Split | None:
    """Verify a trace in two halves at once (module docstring).

    Args:
        path: The trace file.
        max_history: ``W`` for RLB-v1, or ``None`` (the header's).
        public_key: The public key every seal must be signed with, or ``None``.
        cut: The byte offset of the line the worker starts at, the end of a block (see
            :func:`cut_point`, the default).
        warmup_bytes: How many bytes before the cut the worker warms up on.

    Returns:
        The outcome, or ``None`` if the trace has no place to cut (nothing was read).

    Raises:
        TraceError: As one pass over the trace raises it.
    """
    blocks = LineBlocks(path)
    blocks.close()
    if cut is None:
        cut = cut_point(path, len(blocks.header_line))
        if cut is None:
            return None
    command = [sys.executable, "-m", "biasbreaker.verify.worker", os.fspath(path), str(cut)]
    command += ["--warmup-bytes", str(warmup_bytes)]
    if max_history is not None:
        command += ["--max-history", str(max_history)]
    if public_key is not None:
        command += ["--public-key", public_key]
    try:
        worker: subprocess.Popen[bytes] | None = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
    except OSError:
        worker = None
    try:
        first = LineBlocks(path, stop=cut)
        checks = Checks.for_blocks(first, max_history=max_history, public_key=public_key)
        checks.feed(first)  # an error here is the one-pass error: the blocks are the same
        joined = None
        if worker is not None:
            sha256 = first.digest_to_end()
            out, _ = worker.communicate()
            if worker.returncode == 0:
                half: Half = pickle.loads(out)  # our own worker's output, over our own pipe
                joined = join(checks, half)
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait()
    if joined is not None:
        return Split(joined, sha256, truncated=False, joined=True)
    first.read_to_end()  # no join: read on from the cut, as one pass does
    checks.feed(first)
    return Split(checks, first.sha256, truncated=first.truncated, joined=False)


def verify_half(
    path: Path,
    cut: int,
    *,
    max_history: int | None,
    public_key: str | None,
    warmup_bytes: int = WARMUP_BYTES,
) -> Half | None:
    """The worker's part: warm up on the lines before ``cut``, verify the lines from it.

    Args:
        path: The trace file.
        cut: The byte offset of a line after the header.
        max_history: ``W`` for RLB-v1, or ``None`` (the header's).
        public_key: The public key every seal must be signed with, or ``None``.
        warmup_bytes: How many bytes before the cut to warm up on (at most; whole lines).

    Returns:
        The half's report, or ``None`` if the lines around the cut cannot start a half (then
        the trace is verified in one pass).

    Raises:
        TraceError: If a line of the half is malformed (the caller verifies in one pass).
    """
    head = LineBlocks(path, warn=False)
    head.close()
    header, version, start = head.header, head.version, len(head.header_line)
    with path.open("rb") as fh:
        data = _Bytes(fh)
        if not start < cut < len(data) or data[cut - 1 : cut] != b"\n":
            return None
        low = _line_start(data, start, cut - warmup_bytes)
        lines = data[low : cut - 1].split(b"\n")
        line_before = lines[-1]
        end = data.find(b"\n", cut)
        try:
            warm = _DECODERS[version].decode(b"[" + b",".join(lines) + b"]")
            first = _ONE[version].decode(data[cut : len(data) if end < 0 else end])
        except msgspec.MsgspecError:
            return None
        records = [r for r in warm if isinstance(r, StepLineV1)]
        control = header.control
        over_3 = math.inf if control is None else control.mean + 3.0 * control.std
        need_weights = header.ewma is not None and all(r.weights is None for r in records)
        need_over = control is not None and all(r.fast <= over_3 for r in records)
        weights, last_over = _look_back(data, start, low, over_3, need_weights, need_over)
    steps_before = first.step if isinstance(first, StepLineV1) else first.steps
    checks = Checks.create(
        path, header, head.header_line, max_history=max_history, public_key=public_key
    )
    if weights is not None:
        for replay in checks.replays:
            replay.resume_weights(weights)
    if need_over:
        checks.rlb.resume(last_over)
    checks.warm(records)
    warmed = pickle.dumps((checks.replays, checks.rlb, checks.others))
    checks.chain.resume(line_before, steps_before)
    head_before = checks.chain.head
    checks.steps = steps_before
    # line numbers are not known here: they are never shown (an error is verified again)
    rest = LineBlocks(path, warn=False, start=cut, first_number=0)
    checks.feed(rest)
    return Half(
        steps_before=steps_before,
        head_before=head_before,
        warmed=warmed,
        checks=checks,
        truncated=rest.truncated,
        newline_missing=rest.newline_missing,
    )


class _Brief(msgspec.Struct, gc=False):
    """The fields of a line :func:`_look_back` reads (the others are skipped unread)."""

    kind: str
    step: Union[int, None] = None  # noqa: UP007 (msgspec reads the annotation at runtime, 3.10)
    fast: Union[float, None] = None  # noqa: UP007
    weights: Union[dict[str, float], None] = None  # noqa: UP007


_BRIEF: Final = msgspec.json.Decoder(list[_Brief])
_ONE_BRIEF: Final = msgspec.json.Decoder(_Brief)
_WEIGHTS_KEY: Final = b'"weights":'


class _Bytes:
    """Byte ranges of an open file, read when asked for (O(1) memory, unlike a mapping).

    Args:
        fh: The file, opened in binary mode.
    """

    STEP: Final = 1 << 16

    def __init__(self, fh: IO[bytes]) -> None:
        self._fh = fh
        self._size = os.fstat(fh.fileno()).st_size

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: slice) -> bytes:
        start, stop, _ = index.indices(self._size)
        self._fh.seek(start)
        return self._fh.read(max(0, stop - start))

    def rfind(self, sub: bytes, low: int, high: int) -> int:
        """The last offset of ``sub`` (one byte) in ``[low, high)``, or -1."""
        high = min(high, self._size)
        while high > low:
            begin = max(low, high - self.STEP)
            hit = self[begin:high].rfind(sub)
            if hit >= 0:
                return begin + hit
            high = begin
        return -1

    def find(self, sub: bytes, low: int) -> int:
        """The first offset of ``sub`` (one byte) at or after ``low``, or -1."""
        while low < self._size:
            hit = self[low : low + self.STEP].find(sub)
            if hit >= 0:
                return low + hit
            low += self.STEP
        return -1


def _line_start(data: _Bytes, start: int, offset: int) -> int:
    """The start of the line holding byte ``offset``, not before ``start`` (a line start)."""
    if offset <= start:
        return start
    return max(start, data.rfind(b"\n", start - 1, offset) + 1)


def _look_back(
    data: _Bytes, start: int, end: int, over_3: float, need_weights: bool, need_over: bool
) -> tuple[dict[str, float] | None, int | None]:
    """Scan ``data[start:end]`` backwards for what the warm-up did not see.

    Returns:
        The last recorded Katz weights (if ``need_weights``) and the step of the last
        over-threshold outcome, ``fast > over_3`` (if ``need_over``); ``None`` for what was not
        needed or not found. A line that does not decode ends the scan (the first half's own
        reading reports it).
    """
    weights: dict[str, float] | None = None
    last_over: int | None = None
    if need_weights and not need_over:
        return _guess_weights(data, start, end), None
    while (need_weights or need_over) and end > start:
        low = _line_start(data, start, end - BLOCK_BYTES)
        region = data[low : end - 1]
        end = low
        try:
            lines = _BRIEF.decode(b"[" + region.replace(b"\n", b",") + b"]")
        except msgspec.MsgspecError:
            return weights, last_over
        for line in reversed(lines):
            if line.kind != "step":
                continue
            if need_weights and line.weights is not None:
                weights, need_weights = line.weights, False
            if need_over and line.fast is not None and line.fast > over_3:
                last_over, need_over = line.step, False
    return weights, last_over


def _guess_weights(data: _Bytes, start: int, end: int) -> dict[str, float] | None:
    """The Katz weights in force at ``end``, searched for in at most twice :data:`GUESS_BYTES`.

    The last weights recorded in the :data:`GUESS_BYTES` before ``end``; if none are, the last
    recorded in the first :data:`GUESS_BYTES` of ``data[start:end]`` (a run records them on
    its first step, and again only where the topology changes). The rest is not searched: a
    search through the whole first half cost the worker ≈ 0.3 s of CPU on the 1M-step bench
    trace, the largest part of its start. The weights are a guess, as all of the warm-up is:
    if others were recorded in between, the replay's weights at the cut differ from this
    process's, the halves do not join, and this process reads on from the cut.
    """
    near = max(start, end - GUESS_BYTES)
    weights = _weights_before(data, near, end)
    if weights is None and near > start:
        weights = _weights_before(data, start, min(near, start + GUESS_BYTES))
    return weights


def _weights_before(data: _Bytes, start: int, end: int) -> dict[str, float] | None:
    """The Katz weights of the last step line in ``data[start:end]`` that records them.

    What :func:`_look_back` scans for when only the weights are needed (the run recorded them
    long before the cut, typically on its first step only): instead of decoding every line
    back to them, each block is searched for the bytes ``"weights":`` and only the lines
    holding them are decoded (a node or an intervention key named ``weights`` holds them too,
    so a line counts only if it decodes as a step recording weights). ``None`` if none does,
    or the line holding the bytes does not decode (the first half's own reading reports it).
    """
    while end > start:
        low = _line_start(data, start, end - BLOCK_BYTES)
        region = data[low:end]
        end = low
        at = len(region)
        while (at := region.rfind(_WEIGHTS_KEY, 0, at)) >= 0:
            at = region.rfind(b"\n", 0, at) + 1  # the start of its line
            stop = region.find(b"\n", at)
            try:
                line = _ONE_BRIEF.decode(region[at : len(region) if stop < 0 else stop])
            except msgspec.MsgspecError:
                return None
            if line.kind == "step" and line.weights is not None:
                return line.weights
    return None


def join(checks: Checks, half: Half) -> Checks | None:
    """This process's checks, up to the cut, joined with the worker's half; ``None`` if not.

    Returns:
        The checks one pass over the whole trace would end with, or ``None`` when the states
        at the cut differ, the worker logged a violation, or the last line is not whole.
    """
    later = half.checks
    if (
        half.truncated
        or half.newline_missing
        or half.steps_before != checks.steps
        or half.head_before != checks.chain.head
        or later.chain._log.count
        or len(later.replays) != len(checks.replays)
    ):
        return None
    warmed: tuple[list[Replay], RLBVerifier, tuple[Any, ...]] = pickle.loads(half.warmed)
    pairs = [
        *zip(checks.replays, warmed[0], later.replays, strict=True),
        (checks.rlb, warmed[1], later.rlb),
        *zip(checks.others, warmed[2], later.others, strict=True),
    ]
    for before, at_cut, after in pairs:
        if not _joins(before, at_cut, after):
            return None
    chain = _join_chain(checks.chain, later.chain)
    return Checks(
        path=checks.path,
        chain=chain,
        replays=later.replays,
        rlb=later.rlb,
        others=later.others,
        steps=later.steps,
    )


def _joins(before: Any, at_cut: Any, after: Any) -> bool:
    """Check one verifier's state at the cut and turn ``after`` into the joined verifier.

    ``before`` is this process's verifier at the cut, ``at_cut`` the worker's after its
    warm-up, ``after`` the worker's at the end. On success ``after`` holds the one-pass
    values: counts added up, this process's violation log.
    """
    kind = type(before)
    if type(at_cut) is not kind or type(after) is not kind:
        return False
    counted, cached = _COUNTED.get(kind, ()), _CACHED.get(kind, ())
    mine, theirs, last = vars(before), vars(at_cut), vars(after)
    if mine.keys() != theirs.keys() or mine.keys() != last.keys():
        return False
    idle = _IDLE_WHEN_CLOSED.get(kind, ()) if not mine.get("_previous", _N).tripped else ()
    for name, value in mine.items():
        if name in counted or name in cached or name in _SPECIAL or name in idle:
            continue
        if not _same(value, theirs[name]):
            return False
    if last["_log"].count != theirs["_log"].count:
        return False  # the worker found a violation: its message may need what it cannot know
    if "_first" in mine:  # RLB-v1's first recovery transition
        if theirs["_first"] is not None and mine["_first"] is None:
            return False  # one the warm-up saw, but this process did not
        first = mine["_first"] if mine["_first"] is not None else last["_first"]
        after._first = first
    if "_escalated_at" in mine:  # terminal escalation: the first escalation
        if (mine["_escalated_at"] is None) != (theirs["_escalated_at"] is None):
            return False
        if mine["_escalated_at"] is not None:
            after._escalated_at = mine["_escalated_at"]
    for name in counted:
        setattr(after, name, mine[name] + last[name] - theirs[name])
    after._log = mine["_log"]
    return True


def _same(a: Any, b: Any) -> bool:
    """Equal values; objects without their own equality (a tracker) by their attributes."""
    if type(a) is not type(b):
        return False
    equality: object = type(a).__eq__
    if equality is object.__eq__ and hasattr(a, "__dict__"):
        mine, theirs = vars(a), vars(b)
        return mine.keys() == theirs.keys() and all(_same(v, theirs[k]) for k, v in mine.items())
    return bool(a == b)


def _join_chain(before: ChainVerifier, after: ChainVerifier) -> ChainVerifier:
    """The chain verifier one pass would end with: the worker's, with the lines before added."""
    if not after._seals:  # no seal after the cut: the last one is this process's
        after._last_seal_steps = before._last_seal_steps
    after._lines += before._lines
    after._seals += before._seals
    after._signed += before._signed
    after._keys |= before._keys
    after._log = before._log
    return after


__all__ = [
    "SPLIT_FRACTION",
    "SPLIT_MIN_BYTES",
    "WARMUP_BYTES",
    "Half",
    "Split",
    "cut_point",
    "join",
    "verify_half",
    "verify_in_two",
    "worth_splitting",
]
