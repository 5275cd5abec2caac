"""Verifying one run trace: the chain, the replay and every property, in one streaming pass.

The trace is read once, a block of lines at a time (:class:`~biasbreaker.trace.lines.LineBlocks`),
and each block goes to:

- :mod:`~biasbreaker.verify.chain` — the hash chain, the seals and their signatures;
- :mod:`~biasbreaker.verify.replay` — every step re-derived from the header and the recorded
  inputs by an independent implementation of the specification;
- one verifier per property (:mod:`biasbreaker.verify.properties`): RLB-v1, anti-thrash,
  must-trip, bounded retries, terminal escalation, recovery after the cool-down.

Memory is O(1) in the trace's length. With ``workers=2`` a worker process replays the trace
(reading the file itself) while this process checks the chain and the properties; measured on
the shared two-core development machine it was slower than one process (1M steps: 28.4 s
against 23.1 s, ``nox -s bench``), so one process is the default.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from biasbreaker.errors import InputError, TraceError
from biasbreaker.trace.lines import AnyLine, LineBlocks, StepLineV1
from biasbreaker.trace.records import PROBATION_MODES, TraceHeader
from biasbreaker.types import JSONValue
from biasbreaker.verify.chain import ChainVerifier
from biasbreaker.verify.properties.anti_thrash import AntiThrashVerifier
from biasbreaker.verify.properties.bounded_retries import BoundedRetriesVerifier
from biasbreaker.verify.properties.cooldown import CooldownVerifier
from biasbreaker.verify.properties.must_trip import MustTripVerifier
from biasbreaker.verify.properties.rlb import RLBReport, RLBVerifier
from biasbreaker.verify.properties.terminal_escalation import TerminalEscalationVerifier
from biasbreaker.verify.replay import Replay
from biasbreaker.verify.report import PropertyReport, Verifier, Violation

DEFAULT_MAX_HISTORY = 32
"""W used for RLB-v1 when neither the caller nor the trace header gives one (the ADR's)."""


@dataclass(frozen=True, slots=True)
class VerificationReport:
    """Every property's verdict on one trace.

    Args:
        path: The trace file.
        trace_sha256: SHA-256 of the file's bytes.
        steps: Whole step records read.
        truncated: Whether a cut last line was ignored.
        rlb: The RLB-v1 report.
        properties: The other properties' reports, in a fixed order (anti-thrash,
            bounded-retries, escalation-terminal, recovery-after-cooldown, must-trip).
        chain: The chain's report (tamper evidence; *unchained* for a version-1 trace).
        replay: The replay's report.
        version: The trace's schema version.
        head: The chain head: the digest of the trace's last whole line (for a finished run,
            its final seal), as ``results.jsonl`` lists it.
    """

    path: Path
    trace_sha256: str
    steps: int
    truncated: bool
    rlb: RLBReport
    properties: tuple[PropertyReport, ...]
    chain: PropertyReport
    replay: PropertyReport
    version: int
    head: str

    @property
    def holds(self) -> bool:
        """Whether the chain, the replay and every property hold."""
        return (
            self.chain.holds
            and self.replay.holds
            and self.rlb.holds
            and all(p.holds for p in self.properties)
        )

    def all_reports(self) -> tuple[PropertyReport, ...]:
        """Every verdict in one shape, in the order printed: chain, replay, RLB-v1, the rest."""
        return (self.chain, self.replay, self.rlb.as_property_report(), *self.properties)

    def to_json(self) -> dict[str, JSONValue]:
        """Return the whole report as plain JSON."""
        return {
            "path": str(self.path),
            "trace_sha256": self.trace_sha256,
            "head": self.head,
            "version": self.version,
            "steps": self.steps,
            "truncated": self.truncated,
            "holds": self.holds,
            "chain": self.chain.to_json(),
            "replay": self.replay.to_json(),
            "rlb": self.rlb.to_json(),
            "properties": [p.to_json() for p in self.properties],
        }


def verify_trace(
    path: str | os.PathLike[str],
    *,
    max_history: int | None = None,
    public_key: str | None = None,
    workers: int = 1,
) -> VerificationReport:
    """Check the chain, replay every step and check every control property on a run trace.

    Args:
        path: The trace file (JSON Lines, see :mod:`biasbreaker.trace`).
        max_history: ``W`` for RLB-v1; default the trace header's window length, else
            :data:`DEFAULT_MAX_HISTORY`.
        public_key: The Ed25519 public key (base64, as
            :func:`~biasbreaker.trace.signing.load_public_key` returns it) every seal must be
            signed with, or ``None``.
        workers: 1 to verify in this process, 2 to replay in a worker process meanwhile
            (worth it only on a machine with a core to spare). The verdicts do not depend on
            it.

    Returns:
        The report; ``report.holds`` is true when the chain, the replay and every property
        hold.

    Raises:
        TraceError: If the trace is malformed or its steps are out of order (the message names
            file and line).
        InputError: If ``max_history`` is not an int >= 1.
    """
    if max_history is not None and (
        isinstance(max_history, bool) or not isinstance(max_history, int) or max_history < 1
    ):
        raise InputError(f"max_history={max_history!r} must be an int >= 1")
    blocks = LineBlocks(path)
    header = blocks.header
    window_length = (
        max_history
        if max_history is not None
        else (header.max_history if header.max_history is not None else DEFAULT_MAX_HISTORY)
    )
    chain = ChainVerifier(blocks.header_line, blocks.version, public_key)
    if workers not in (1, 2):
        raise InputError(f"workers={workers!r} must be 1 or 2")
    worker = _start_worker(path) if workers == 2 else None
    replays = [] if worker is not None else _replays(header)
    rlb = RLBVerifier(header.control, window_length, header.max_history)
    others: tuple[Verifier, ...] = (
        AntiThrashVerifier(header.thresholds, node_trip=header.node_trip),
        BoundedRetriesVerifier(header.max_retries),
        TerminalEscalationVerifier(),
        CooldownVerifier(header.cooldown_steps),
        MustTripVerifier(header.thresholds, node_trip=header.node_trip),
    )
    consumers: tuple[Verifier | Replay | RLBVerifier, ...] = (*replays, rlb, *others)
    steps = 0
    try:
        for number, raw, decoded in blocks:
            chain.observe(raw, decoded)
            records = [line for line in decoded if isinstance(line, StepLineV1)]
            _check_order(blocks, number, decoded, steps)
            steps += len(records)
            for consumer in consumers:
                consumer.observe(records)
        replay = _best(replays) if worker is None else _worker_report(worker, path)
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait()
    sha256 = blocks.sha256
    return VerificationReport(
        path=blocks.path,
        trace_sha256=sha256,
        steps=steps,
        truncated=blocks.truncated,
        rlb=rlb.report(sha256),
        properties=tuple(v.report() for v in others),
        chain=chain.report(),
        replay=replay,
        version=blocks.version,
        head=chain.head,
    )


def _replays(header: TraceHeader) -> list[Replay]:
    # a version-1 header does not say how RECOVERY treated new outputs: replay both modes and
    # keep the one the trace fits
    if header.probation is not None:
        return [Replay(header)]
    return [Replay(header, probation=mode) for mode in PROBATION_MODES]


def _best(replays: list[Replay]) -> PropertyReport:
    return min(replays, key=lambda r: r.violations).report()


def _start_worker(path: str | os.PathLike[str]) -> subprocess.Popen[bytes] | None:
    """Start ``python -m biasbreaker.verify.worker PATH``, or ``None`` if it cannot start."""
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "biasbreaker.verify.worker", os.fspath(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError:
        return None


def _worker_report(worker: subprocess.Popen[bytes], path: str | os.PathLike[str]) -> PropertyReport:
    """The worker's replay report; the replay is redone here if the worker did not give one."""
    out, err = worker.communicate()
    if worker.returncode == 0:
        data = json.loads(out)
        return PropertyReport(
            data["name"],
            data["version"],
            data["checked"],
            data["violation_count"],
            tuple(Violation(v["step"], v["message"]) for v in data["violations"]),
            data["note"],
            what=data["what"],
            vacuous=data["vacuous"],
        )
    if worker.returncode == 1 and err:
        raise TraceError(err.decode("utf-8", "replace").strip())
    return replay_file(os.fspath(path))  # killed or broken: the same replay, in this process


def replay_file(path: str) -> PropertyReport:
    """Replay one trace file on its own (what the worker process of :func:`verify_trace` runs).

    Raises:
        TraceError: If the trace is malformed.
    """
    blocks = LineBlocks(path, warn=False)
    replays = _replays(blocks.header)
    for _, _, decoded in blocks:
        records = [line for line in decoded if isinstance(line, StepLineV1)]
        for replay in replays:
            replay.observe(records)
    return _best(replays)


def _check_order(blocks: LineBlocks, number: int, decoded: Sequence[AnyLine], steps: int) -> None:
    """Steps are numbered from 0 without gaps (seals do not count), as the reader requires."""
    expected = steps
    for offset, line in enumerate(decoded):
        if not isinstance(line, StepLineV1):
            continue
        step = line.step
        if step != expected:
            raise TraceError(
                f"{blocks.path}:{number + offset}: step {step} is out of order; expected step "
                f"{expected}"
            )
        expected += 1


__all__ = ["DEFAULT_MAX_HISTORY", "VerificationReport", "verify_trace"]
