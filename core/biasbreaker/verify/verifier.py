"""Verifying one run trace: every property's verifier over one streaming pass.

One module per property (:mod:`biasbreaker.verify.properties`); each verifier streams over the
trace's records once, so a trace of millions of steps is checked in O(1) memory:

- :mod:`~biasbreaker.verify.properties.rlb` — RLB-v1, the recovery latency bound (corrected).
- :mod:`~biasbreaker.verify.properties.anti_thrash` — no flip while fast stays in the dead-band
  (a node trip, when the header says node trips are on, is the one allowed exception).
- :mod:`~biasbreaker.verify.properties.bounded_retries` — at most ``max_retries`` interventions
  per episode.
- :mod:`~biasbreaker.verify.properties.terminal_escalation` — ESCALATED is terminal.
- :mod:`~biasbreaker.verify.properties.cooldown` — recovery only after the cool-down.

:func:`verify_trace` runs them all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from biasbreaker.errors import InputError
from biasbreaker.trace import TraceReader
from biasbreaker.types import JSONValue
from biasbreaker.verify.properties.anti_thrash import AntiThrashVerifier
from biasbreaker.verify.properties.bounded_retries import BoundedRetriesVerifier
from biasbreaker.verify.properties.cooldown import CooldownVerifier
from biasbreaker.verify.properties.rlb import RLBReport, RLBVerifier
from biasbreaker.verify.properties.terminal_escalation import TerminalEscalationVerifier
from biasbreaker.verify.report import PropertyReport, Verifier

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
        properties: The other properties' reports, in a fixed order.
    """

    path: Path
    trace_sha256: str
    steps: int
    truncated: bool
    rlb: RLBReport
    properties: tuple[PropertyReport, ...]

    @property
    def holds(self) -> bool:
        """Whether every property holds."""
        return self.rlb.holds and all(p.holds for p in self.properties)

    def to_json(self) -> dict[str, JSONValue]:
        """Return the whole report as plain JSON."""
        return {
            "path": str(self.path),
            "trace_sha256": self.trace_sha256,
            "steps": self.steps,
            "truncated": self.truncated,
            "holds": self.holds,
            "rlb": self.rlb.to_json(),
            "properties": [p.to_json() for p in self.properties],
        }


def verify_trace(
    path: str | os.PathLike[str], *, max_history: int | None = None
) -> VerificationReport:
    """Check every control property on a run trace.

    Args:
        path: The trace file (JSON Lines, see :mod:`biasbreaker.trace`).
        max_history: ``W`` for RLB-v1; default the trace header's window length, else
            :data:`DEFAULT_MAX_HISTORY`.

    Returns:
        The report; ``report.holds`` is true when every property holds.

    Raises:
        TraceError: If the trace is malformed (the message names file and line).
        InputError: If ``max_history`` is not an int >= 1.
    """
    reader = TraceReader(path)
    header = reader.header
    if max_history is not None and (
        isinstance(max_history, bool) or not isinstance(max_history, int) or max_history < 1
    ):
        raise InputError(f"max_history={max_history!r} must be an int >= 1")
    window_length = (
        max_history
        if max_history is not None
        else (header.max_history if header.max_history is not None else DEFAULT_MAX_HISTORY)
    )
    rlb = RLBVerifier(header.control, window_length, header.max_history)
    others: tuple[Verifier, ...] = (
        AntiThrashVerifier(header.thresholds, node_trip=header.node_trip),
        BoundedRetriesVerifier(header.max_retries),
        TerminalEscalationVerifier(),
        CooldownVerifier(header.cooldown_steps),
    )
    for record in reader:
        rlb.observe(record)
        for verifier in others:
            verifier.observe(record)
    return VerificationReport(
        path=reader.path,
        trace_sha256=reader.sha256,
        steps=reader.n_records,
        truncated=reader.truncated,
        rlb=rlb.report(reader.sha256),
        properties=tuple(v.report() for v in others),
    )


__all__ = ["DEFAULT_MAX_HISTORY", "VerificationReport", "verify_trace"]
