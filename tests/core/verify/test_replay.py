"""The replay against real machine traces: every row of the table replays clean, and an edit of
a recorded decision (re-chained, so only the replay can see it) is caught at its step.

The traces are written by :class:`~biasbreaker.machine.ControlMachine` itself, so a replay that
flags one of them (or misses an edit of one) disagrees with the machine on that row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from biasbreaker.breaker import freeze
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.trace import TraceWriter, read_trace
from biasbreaker.trace.chain import line_digest
from biasbreaker.types import InterventionContext, InterventionResult, Thresholds
from biasbreaker.verify import verify_trace

TH = Thresholds(tau_enter=0.5, tau_exit=0.35, tau_warn=0.25, kappa=0.05)
Hook = Callable[[InterventionContext], InterventionResult]


def passing(context: InterventionContext) -> InterventionResult:
    """A repair whose re-check scores below ``tau_exit``: the re-check passes."""
    return InterventionResult(freeze({"fixed": True}), True, "madera", (), 0.05)


def failing(context: InterventionContext) -> InterventionResult:
    """A repair whose re-check scores at ``tau_enter``: the re-check fails (a relapse)."""
    return InterventionResult(freeze({"fixed": False}), True, "madera", (), 0.5)


Step = tuple[float, float] | tuple[float, float, float]


def write(
    path: Path,
    steps: Sequence[Step],
    *,
    hook: Hook = passing,
    cooldown_steps: int = 2,
    max_retries: int = 2,
    probation: str = "hold",
    node_trip: bool = False,
) -> Path:
    """A trace of ``ControlMachine`` over ``(fast, slow)`` or ``(fast, slow, own)`` steps."""
    config = MachineConfig(
        thresholds=TH,
        cooldown_steps=cooldown_steps,
        max_retries=max_retries,
        probation=probation,  # type: ignore[arg-type]
        node_trip=node_trip,
        seed=1,
    )
    with TraceWriter(path, config.trace_header({"writer": "test"})) as writer:
        machine = ControlMachine(config, hook=hook, recorder=writer.write)
        for index, (fast, slow, *own) in enumerate(steps):
            scores = {"a": own[0]} if own else None
            node = "a" if own else None
            machine.step(fast, slow, node=node, local_scores=scores, payload={"i": index})
        writer.seal()
    return path


# fmt: off
SCENARIOS: dict[str, tuple[Sequence[Step], dict[str, Any]]] = {
    # NORMAL -> WARNING -> NORMAL (warn, calm) and a warning step that holds
    "warn-calm": ([(0.1, 0.1), (0.1, 0.3), (0.1, 0.3), (0.1, 0.1), (0.1, 0.1)], {}),
    # slow exactly tau_warn: NORMAL warns, WARNING holds
    "at-tau-warn": ([(0.1, 0.25), (0.1, 0.25), (0.1, 0.1), (0.1, 0.1)], {}),
    # trip, recover-start, cool down, recover
    "recover": ([(0.1, 0.1), (0.6, 0.1), (0.2, 0.1), (0.1, 0.1), (0.1, 0.1), (0.1, 0.1)], {}),
    # trip from WARNING, and a warning after the recovery
    "trip-from-warning": ([(0.1, 0.3), (0.6, 0.3), (0.2, 0.1), (0.1, 0.1), (0.1, 0.1),
                           (0.1, 0.3)], {}),
    # the re-check fails: retry, then the budget is spent: escalate, and ESCALATED holds
    "retry-escalate": ([(0.6, 0.1), *[(0.2, 0.1)] * 8], {"hook": failing}),
    # cool-down elapsed with a passed re-check but fast still >= tau_exit: RECOVERY holds
    "recovery-holds": ([(0.6, 0.1), (0.4, 0.1), (0.4, 0.1), (0.4, 0.1), (0.1, 0.1),
                        (0.1, 0.1)], {}),
    # node trips: the node's own score trips with fast below tau_enter
    "node-trip": ([(0.1, 0.1, 0.1), (0.2, 0.1, 0.9), (0.1, 0.1, 0.1), (0.1, 0.1, 0.1),
                   (0.1, 0.1, 0.1), (0.1, 0.1, 0.1)], {"node_trip": True}),
    # node trips on: WARNING holds go through the table (no fast path), and a node's own
    # score exactly tau_enter trips
    "node-trip-warning": ([(0.1, 0.3, 0.1), (0.1, 0.3, 0.2), (0.2, 0.3, 0.5), (0.1, 0.1, 0.1)],
                          {"node_trip": True}),
    # node trips off: a node's own score above tau_enter in WARNING does not trip
    "own-high-without-node-trip": ([(0.1, 0.3, 0.9), (0.1, 0.3, 0.9)], {}),
    # fast exactly tau_exit after the cool-down: RECOVERY holds
    "recovery-at-tau-exit": ([(0.6, 0.1), (0.35, 0.1), (0.35, 0.1), (0.35, 0.1), (0.1, 0.1),
                              (0.1, 0.1)], {}),
    # half-open, own score exactly tau_exit: held on leaving INTERVENTION, a relapse later
    "half-open-at-tau-exit": ([(0.6, 0.1, 0.6), (0.2, 0.1, 0.35), (0.2, 0.1, 0.1),
                               (0.2, 0.1, 0.35), (0.2, 0.1, 0.1)],
                              {"probation": "half-open", "max_retries": 3}),
    # half-open: a passed re-check lets a clean output through; a dirty one relapses
    "half-open-relapse": ([(0.6, 0.1, 0.6), (0.2, 0.1, 0.1), (0.2, 0.1, 0.4), (0.2, 0.1, 0.1),
                           (0.1, 0.1, 0.1), (0.1, 0.1, 0.1), (0.1, 0.1, 0.1)],
                          {"probation": "half-open", "max_retries": 3}),
    # half-open: relapses until the budget is spent: relapse-escalate
    "half-open-relapse-escalate": ([(0.6, 0.1, 0.6), (0.2, 0.1, 0.4), (0.2, 0.1, 0.4),
                                    (0.2, 0.1, 0.4), (0.2, 0.1, 0.4), (0.2, 0.1, 0.1)],
                                   {"probation": "half-open", "max_retries": 2}),
}
# fmt: on


def transitions(path: Path) -> list[str]:
    return [r.transition for r in read_trace(path).records]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_machine_trace_replays_clean(tmp_path: Path, name: str) -> None:
    steps, options = SCENARIOS[name]
    path = write(tmp_path / f"{name}.jsonl", steps, **options)
    report = verify_trace(path)
    assert report.replay.holds, report.replay.violations
    assert report.chain.holds, report.chain.violations


def test_the_scenarios_take_every_row_of_the_table(tmp_path: Path) -> None:
    taken: set[str] = set()
    for name, (steps, options) in SCENARIOS.items():
        taken |= set(transitions(write(tmp_path / f"{name}.jsonl", steps, **options)))
    assert taken >= {
        "hold", "warn", "calm", "trip", "recover-start", "recover", "retry", "escalate",
        "relapse", "relapse-escalate",
    }  # fmt: skip


def rechained(path: Path, index: int, **changes: Any) -> Path:
    """``path`` with step record ``index`` edited and every later ``prev`` re-linked.

    The seals are dropped: an unsigned chain can be rebuilt by whoever edits it, so only the
    replay (which re-derives each decision) can catch the edit.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    out = [lines[0]]
    step = 0
    for line in lines[1:]:
        record = json.loads(line)
        if record.get("kind") == "seal":
            continue
        if step == index:
            record.update(changes)
        step += 1
        record["prev"] = line_digest(out[-1].encode())
        out.append(json.dumps(record, sort_keys=True, separators=(",", ":")))
    edited = path.with_name(f"edited-{index}-{'-'.join(changes)}.jsonl")
    edited.write_text("\n".join(out) + "\n", encoding="utf-8")
    return edited


def test_rechained_without_an_edit_replays_clean(tmp_path: Path) -> None:
    steps, options = SCENARIOS["retry-escalate"]
    path = rechained(write(tmp_path / "run.jsonl", steps, **options), 0)
    report = verify_trace(path)
    assert report.replay.holds, report.replay.violations
    # the chain sees only that the seals are gone (no key was given, so no key complaint)
    [cut] = report.chain.violations
    assert cut.message.startswith("the trace ends without a seal after step 8"), cut


def test_a_long_trace_replays_clean_and_its_seal_counts_every_step(tmp_path: Path) -> None:
    """Past 256 steps the counts read back are not CPython's cached small ints."""
    steps: Sequence[Step] = [*[(0.1, 0.1)] * 300, (0.6, 0.1), *[(0.1, 0.1)] * 5]
    report = verify_trace(write(tmp_path / "long.jsonl", steps))
    assert report.chain.holds, report.chain.violations
    assert report.replay.holds, report.replay.violations


@pytest.mark.parametrize(
    ("name", "index", "changes", "field"),
    [
        # a warning step recorded as normal, and a calm recorded as a hold
        ("warn-calm", 1, {"state": "normal", "transition": "hold"}, "transition"),
        ("warn-calm", 3, {"state": "warning", "transition": "hold"}, "transition"),
        # the trip let through, and a rerouted trip recorded as halted
        ("recover", 1, {"state": "normal", "transition": "hold", "action": "proceed"}, "state"),
        ("trip-from-warning", 1, {"action": "halt"}, "action"),
        # a held RECOVERY output recorded as let through
        ("recovery-holds", 2, {"action": "proceed"}, "action"),
        # a recover-start recorded as still in INTERVENTION
        ("recover", 2, {"state": "intervention"}, "state"),
        # a node trip not taken
        ("node-trip", 1, {"state": "normal", "transition": "hold", "action": "proceed"}, "state"),
        # a retry recorded as a recovery, an escalation recorded as a retry
        ("retry-escalate", 3, {"state": "normal", "transition": "recover", "action": "proceed"},
         "transition"),
        ("retry-escalate", 6, {"state": "intervention", "transition": "retry", "action": "reroute"},
         "transition"),
        # an escalated output let through
        ("retry-escalate", 8, {"state": "normal", "transition": "hold", "action": "proceed"},
         "state"),
        # RECOVERY left while fast is still above tau_exit
        ("recovery-holds", 3, {"state": "normal", "transition": "recover", "action": "proceed"},
         "transition"),
        # half-open: a relapse not taken, and a relapse past the budget recorded as a retry
        ("half-open-relapse", 2, {"state": "recovery", "transition": "hold", "action": "halt"},
         "transition"),
        ("half-open-relapse-escalate", 4, {"state": "intervention", "transition": "relapse",
                                         "action": "reroute"},
         "transition"),
    ],
)  # fmt: skip
def test_a_rechained_decision_edit_is_caught_at_its_step(
    tmp_path: Path, name: str, index: int, changes: dict[str, Any], field: str
) -> None:
    steps, options = SCENARIOS[name]
    path = write(tmp_path / "run.jsonl", steps, **options)
    assert read_trace(path).records[index].state.value != changes.get("state", "?")
    report = verify_trace(rechained(path, index, **changes))
    assert not report.replay.holds
    violations = report.replay.violations
    assert violations[0].step == index, violations  # nothing before the edit is flagged
    assert any(v.step == index and v.message.startswith(f"{field}:") for v in violations)


@pytest.mark.parametrize(
    ("name", "index", "changes", "field"),
    [
        ("warn-calm", 4, {"reason": "forged"}, "reason"),  # a NORMAL step off the fast path
        ("warn-calm", 2, {"reason": "forged"}, "reason"),  # a WARNING hold
        ("retry-escalate", 7, {"reason": "forged"}, "reason"),  # an ESCALATED hold
        # the counters of the last step (a counter edited earlier shifts the later steps)
        ("retry-escalate", 8, {"attempt": 3}, "attempt"),
        ("retry-escalate", 8, {"attempt": 1}, "attempt"),
        ("retry-escalate", 8, {"episode": 2}, "episode"),
        ("retry-escalate", 8, {"episode": 0}, "episode"),
    ],
)  # fmt: skip
def test_a_one_field_edit_is_one_violation_and_the_replay_goes_on_from_the_record(
    tmp_path: Path, name: str, index: int, changes: dict[str, Any], field: str
) -> None:
    steps, options = SCENARIOS[name]
    path = write(tmp_path / "run.jsonl", steps, **options)
    [violation] = verify_trace(rechained(path, index, **changes)).replay.violations
    assert violation.step == index and violation.message.startswith(f"{field}:"), violation


def test_a_budget_past_256_retries_then_escalates(tmp_path: Path) -> None:
    """Counts read back from the trace past 256 are not CPython's cached small ints."""
    retries = 260
    steps: Sequence[Step] = [(0.6, 0.1), *[(0.2, 0.1)] * (2 * retries + 1)]
    path = write(tmp_path / "run.jsonl", steps, hook=failing, cooldown_steps=1,
                 max_retries=retries)  # fmt: skip
    records = read_trace(path).records
    escalation = records[2 * retries]  # trip, then a recover-start and a retry per attempt
    assert (escalation.transition, escalation.attempt) == ("escalate", retries)
    report = verify_trace(path)
    assert report.replay.holds, report.replay.violations


@pytest.mark.parametrize(
    ("name", "index", "changes", "expected"),
    [
        # the state alone forged, its transition kept: the replay goes on from INTERVENTION,
        # so the next step's recover-start is expected, and the cool-down counts from there
        ("recover", 2, {"state": "intervention"},
         [(2, "state"), (3, "transition"), (3, "reason"), (4, "transition"), (4, "state"),
          (4, "action"), (4, "attempt"), (4, "payload_sha256"), (4, "reason")]),
        # the transition alone forged, its state kept: one violation, nothing after it
        ("recover", 2, {"transition": "hold"}, [(2, "transition")]),
        # a RECOVERY hold recorded as a recover-start: the cool-down counts again from the
        # record, so the recovery two steps later comes too early
        ("recover", 3, {"transition": "recover-start"},
         [(3, "transition"), (4, "transition"), (4, "state"), (4, "action"), (4, "attempt"),
          (4, "payload_sha256"), (4, "reason")]),
        # an attempt count forged past the budget: the replay goes on from the recorded count,
        # so the next failed re-check escalates where the record retried
        ("retry-escalate", 2, {"attempt": 5},
         [(2, "attempt"), (3, "intervention"), (3, "transition"), (3, "state"), (3, "action"),
          (3, "attempt"), (3, "reason")]),
        # a trip let through: the replay goes on from NORMAL (no re-check was ever read)
        ("recover", 1, {"state": "normal", "transition": "hold", "action": "proceed"},
         [(1, "transition"), (1, "state"), (1, "action"), (2, "transition"), (2, "state"),
          (2, "action"), (2, "payload_sha256"), (2, "reason"), (4, "intervention"),
          (4, "transition"), (4, "state"), (4, "action"), (4, "attempt"),
          (4, "payload_sha256"), (4, "reason")]),
        # a retry recorded as a recovery: the replay goes on from NORMAL
        ("retry-escalate", 3, {"state": "normal", "transition": "recover", "action": "proceed"},
         [(3, "transition"), (3, "state"), (3, "action"), (4, "transition"), (4, "state"),
          (4, "action"), (4, "payload_sha256"), (4, "reason")]),
        # a relapse not taken: the replay goes on from RECOVERY
        ("half-open-relapse", 2, {"state": "recovery", "transition": "hold", "action": "halt"},
         [(2, "transition"), (2, "state"), (2, "action"), (3, "transition"), (3, "reason")]),
    ],
)  # fmt: skip
def test_after_a_difference_the_replay_goes_on_from_the_recorded_state(
    tmp_path: Path,
    name: str,
    index: int,
    changes: dict[str, Any],
    expected: list[tuple[int, str]],
) -> None:
    """Every violation of an edit, in order: pins how the replay continues after a difference.

    The verdict and the first violation do not depend on it; what is reported after them
    does: from a difference in state or transition on, the replay takes the record's state
    and counters (``Replay._resync``), so an edit is followed only by the violations the
    recorded state implies, never by a replay that drifts on from its own state.
    """
    steps, options = SCENARIOS[name]
    path = write(tmp_path / "run.jsonl", steps, **options)
    violations = verify_trace(rechained(path, index, **changes)).replay.violations
    assert [(v.step, v.message.split(":", 1)[0]) for v in violations] == expected, violations
