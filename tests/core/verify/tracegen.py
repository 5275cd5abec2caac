"""Helpers to write real and forged run traces for the property verifiers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from biasbreaker.calibration import CalibrationWindow, ControlStatistics
from biasbreaker.trace import StepRecord, TraceHeader, TraceWriter
from biasbreaker.types import BreakerAction, BreakerState, Thresholds

TH = Thresholds(0.5, 0.35, 0.25, 0.05)
CONTROL = ControlStatistics(0.1, 0.05, 1000)  # over 3σ: > 0.25

ACTION = {
    BreakerState.NORMAL: BreakerAction.PROCEED,
    BreakerState.WARNING: BreakerAction.PROCEED,
    BreakerState.INTERVENTION: BreakerAction.HALT,
    BreakerState.RECOVERY: BreakerAction.HALT,
    BreakerState.ESCALATED: BreakerAction.ESCALATE,
}


def forge(
    path: Path,
    steps: Sequence[tuple[BreakerState, float] | tuple[BreakerState, float, float]],
    *,
    cooldown_steps: int = 2,
    max_retries: int = 2,
    max_history: int | None = 3,
    window_length: int | None = None,
    node_trip: bool = False,
) -> Path:
    """Write a trace with the given (state, fast) sequence, whatever a machine would do.

    The trace is sealed, so its chain holds; its replay does not (no machine wrote it), which
    is what the replay is for: these traces test the other properties one at a time.

    A step given as (state, fast, own) is a step of node ``"n"`` with local score ``own``;
    (state, fast) is a step without a node. The window counts come from a real
    :class:`CalibrationWindow` of ``window_length`` (default the header's ``max_history``), so
    a mismatch simulates a broken window builder.
    """
    control = CONTROL if max_history is not None else None
    header = TraceHeader(
        TH, cooldown_steps, max_retries, max_history, control, seed=0, node_trip=node_trip
    )
    window = (
        None
        if control is None or max_history is None
        else CalibrationWindow(control, window_length or max_history)
    )
    with TraceWriter(path, header) as writer:
        for index, (state, fast, *own) in enumerate(steps):
            counts = None if window is None else window.observe(fast)
            writer.write(
                StepRecord(
                    step=index,
                    node="n" if own else None,
                    scores={"n": own[0]} if own else {},
                    fast=fast,
                    slow=0.0,
                    window=counts,
                    state=state,
                    action=ACTION[state],
                    mixing_ratio=0.5,
                    reason="forged",
                    transition="forged",
                    episode=0,
                    attempt=0,
                    payload_sha256=None,
                    intervention=None,
                )
            )
        writer.seal()
    return path


def edited(path: Path, line: int, **changes: Any) -> Path:
    """A copy of the trace at ``path`` with the JSON record on ``line`` (0: the header) updated
    by ``changes``, not re-chained (so the chain sees the edit too)."""
    lines = path.read_text().splitlines()
    record = json.loads(lines[line])
    record.update(changes)
    lines[line] = json.dumps(record, sort_keys=True, separators=(",", ":"))
    out = path.with_name(f"edited-{line}-{'-'.join(changes)}.jsonl")
    out.write_text("\n".join(lines) + "\n")
    return out
