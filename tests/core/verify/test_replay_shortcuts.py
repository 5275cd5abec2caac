"""The replay's shortcuts against its general path, one edited field at a time.

:meth:`Replay.observe` re-derives the commonest steps (a fresh step's inputs, a calm or an
escalated step's decision) inline, and must derive exactly what the general path
(:meth:`Replay._inputs`, then :meth:`Replay._decide`, for every step) derives. These tests run
both over real machine traces with B_net, the EWMAs and a calibration window — and over every
single-field edit of a sample of their steps (applied to the decoded records, so nothing else
sees them) — and compare the violations, the report and the state they end with. A shortcut
that takes a step the general path would flag, or leaves another state behind, fails here.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from biasbreaker.breaker import freeze
from biasbreaker.calibration import ControlStatistics
from biasbreaker.errors import TraceError
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.trace import TraceWriter
from biasbreaker.trace.lines import LineBlocks, ProbeLine, StepLine, StepLineV1, WindowLine
from biasbreaker.trace.records import TraceHeader
from biasbreaker.types import (
    BreakerAction,
    BreakerState,
    InterventionContext,
    InterventionResult,
    Thresholds,
)
from biasbreaker.verify.chain import ChainVerifier
from biasbreaker.verify.checks import Checks
from biasbreaker.verify.replay import Replay, sigmoid_ratio

TH = Thresholds(0.5, 0.35, 0.25, 0.05)
# "d" is never scored: the scored nodes' weights sum to less than 1
WEIGHTS = {"a": 0.4, "b": 0.3, "c": 0.2, "d": 0.1}
LATER_WEIGHTS = {"a": 0.2, "b": 0.3, "c": 0.4, "d": 0.1}
# one node's B_net, step by step: fast exactly at the window's 3-sigma and 5-sigma lines
# (0.25 and 0.35 with CONTROL), then a trip whose window holds only 5-sigma outcomes while
# fast is already back below both lines: the window is dirty with beyond_3 == beyond_5
BOUNDARIES = [0.25, 0.25, 0.4499999999999999, 0.05, 0.05, 0.05, 0.99, 0.3, *[0.05] * 10]
UNREADABLE = {"status": "unreadable", "reason": "the probe cannot read the input"}
SCORED = {"status": "scored", "reason": "scored"}


def passing(context: InterventionContext) -> InterventionResult:
    return InterventionResult(freeze({"fixed": context.step}), True, "madera", (), 0.05)


def failing(context: InterventionContext) -> InterventionResult:
    return InterventionResult(freeze({"fixed": context.step}), True, "madera", (), 0.5)


def write(
    path: Path,
    *,
    steps: int = 100,
    node_trip: bool = False,
    probation: str = "hold",
    hook: Callable[[InterventionContext], InterventionResult] = passing,
    seed: int = 5,
    thresholds: Thresholds = TH,
    max_history: int = 6,
    levels: Sequence[float] | None = None,
    level_weights: dict[str, float] | None = None,
    smoothing: tuple[float, float] = (0.5, 0.1),
) -> Path:
    """A real run of three nodes with EWMAs and a window: bursts, warnings, held steps.

    With ``levels``: a run of one node (weight 1) scoring them, nothing held. ``smoothing``:
    the EWMAs' ``(fast, slow)`` factors.
    """
    a_fast, a_slow = smoothing
    config = MachineConfig(
        thresholds,
        cooldown_steps=2,
        max_retries=2,
        control=ControlStatistics(0.1, 0.05, 1000),
        max_history=max_history,
        probation=probation,  # type: ignore[arg-type]
        node_trip=node_trip,
        ewma_smoothing=smoothing,
        seed=1,
    )
    rng = random.Random(seed)
    scores: dict[str, float] = {}
    fast = slow = None
    weights = WEIGHTS if levels is None else level_weights or {"a": 1.0}
    steps = steps if levels is None else len(levels)
    with TraceWriter(path, config.trace_header({"writer": "test"})) as writer:
        machine = ControlMachine(config, hook=hook, recorder=writer.write)
        for step in range(steps):
            node = "abc"[step % 3]
            phase = step % 50
            level = 0.9 if 20 <= phase < 23 else 0.45 if 35 <= phase < 42 else 0.05
            if node_trip and phase == 10:
                level = 0.8  # one node alone: a node trip (fast stays low)
            scores[node] = level + rng.random() * 0.05
            if levels is not None:
                node, scores = "a", {"a": levels[step]}
            elif step == 60:
                weights = LATER_WEIGHTS
            total = math.fsum(weights[n] * s for n, s in scores.items())
            b = total / math.fsum(weights[n] for n in scores)
            b = min(max(b, min(scores.values())), max(scores.values()))
            fast = b if fast is None else a_fast * b + (1.0 - a_fast) * fast
            slow = b if slow is None else a_slow * b + (1.0 - a_slow) * slow
            held = phase == 5 and levels is None
            machine.step(
                fast,
                slow,
                node=node,
                local_scores=dict(scores),
                weights=weights,
                payload={"i": step},
                probe=UNREADABLE if held else SCORED,
                hold=UNREADABLE["reason"] if held else None,
            )
        writer.seal()
    return path


def decoded(path: Path) -> tuple[TraceHeader, list[StepLineV1]]:
    blocks = LineBlocks(path)
    records = [line for _, _, lines in blocks for line in lines if isinstance(line, StepLineV1)]
    return blocks.header, records


def general(header: TraceHeader, records: Sequence[StepLineV1]) -> Replay:
    """The replay without its shortcuts: every step through _inputs and _decide."""
    replay = Replay(header)
    for record in records:
        replay._decide(record, replay._inputs(record))
    return replay


def shortcut(header: TraceHeader, records: Sequence[StepLineV1], block: int) -> Replay:
    replay = Replay(header)
    for start in range(0, len(records), block):
        replay.observe(records[start : start + block])
    return replay


def outcome(replay: Replay) -> tuple[Any, ...]:
    """Everything a replay ends with: its report, every violation and its state."""
    report = replay.report()
    state = {k: v for k, v in vars(replay).items() if k != "_log"}
    state["_levels"] = list(state["_levels"])
    return report.what, report.violation_count, report.violations, state


def edits(record: StepLineV1, th: Thresholds) -> Iterator[tuple[str, dict[str, Any]]]:
    """Single-field edits of one record: nudges, every other enum value, drops, additions."""
    up, down = math.inf, -math.inf
    for name in ("fast", "slow"):
        value = getattr(record, name)
        yield name, {name: math.nextafter(value, up)}
        if value > 0.0:
            yield name, {name: math.nextafter(value, down)}
    ratio = record.mixing_ratio
    yield "mixing_ratio", {"mixing_ratio": min(1.0, ratio + 2e-12)}
    yield "mixing_ratio", {"mixing_ratio": max(0.0, ratio - 2e-12)}
    yield "mixing_ratio", {"mixing_ratio": min(1.0, ratio + 5e-13)}  # within the tolerance
    own = None if record.node is None else record.scores.get(record.node)
    for statistic in (record.fast, own):  # the ratio of the other trip statistic
        if statistic is not None:
            yield "mixing_ratio", {"mixing_ratio": sigmoid_ratio(statistic, th.tau_enter, th.kappa)}
    window = record.window
    if window is not None:
        for field in ("size", "beyond_3", "beyond_5"):
            yield (
                field,
                {"window": msgspec.structs.replace(window, **{field: 1 + getattr(window, field)})},
            )
            if getattr(window, field):
                yield (
                    field,
                    {
                        "window": msgspec.structs.replace(
                            window, **{field: getattr(window, field) - 1}
                        )
                    },
                )
    yield (
        "window",
        {"window": None if window is not None else WindowLine(size=1, beyond_3=0, beyond_5=0)},
    )
    scores = record.scores
    for node, value in scores.items():
        yield "scores", {"scores": {**scores, node: math.nextafter(value, up)}}
        yield "scores", {"scores": {n: s for n, s in scores.items() if n != node}}
    yield "scores", {"scores": {**scores, "z": 0.1}}
    yield "scores", {"scores": {}}
    yield "node", {"node": None}
    yield "node", {"node": "z"}
    for node in WEIGHTS:
        if node != record.node:
            yield "node", {"node": node}
    yield "weights", {"weights": WEIGHTS}
    yield "weights", {"weights": {}}
    for state in BreakerState:
        if state is not record.state:
            yield "state", {"state": state}
    for action in BreakerAction:
        if action is not record.action:
            yield "action", {"action": action}
    for transition in ("hold", "trip", "warn", "calm", "recover", "held-for-review"):
        if transition != record.transition:
            yield "transition", {"transition": transition}
    yield "reason", {"reason": record.reason + "x"}
    yield "reason", {"reason": "normal" if record.reason != "normal" else "normalx"}
    yield "reason", {"reason": "escalated: terminal"}
    yield "episode", {"episode": record.episode + 1}
    yield "attempt", {"attempt": record.attempt + 1}
    if record.episode:
        yield "episode", {"episode": record.episode - 1}
    if record.attempt:
        yield "attempt", {"attempt": record.attempt - 1}
    yield "payload_sha256", {"payload_sha256": None if record.payload_sha256 else "0" * 64}
    yield "intervention", {"intervention": None if record.intervention else {"strategy": "none"}}
    for status in ("unreadable", "failed", "unsupported_language", "scored", "not_probed"):
        yield "probe", {"probe": ProbeLine(status=status, reason="the probe cannot read the input")}
    yield "probe", {"probe": None}


TRACES = {
    "hold": {},
    "node-trip": {"node_trip": True},
    "half-open": {"probation": "half-open", "node_trip": True},
    "escalating": {"hook": failing, "steps": 70},
    # a sharp sigmoid: exp(-x) of a closed step overflows (the ratio is computed without it)
    "sharp": {"node_trip": True, "thresholds": Thresholds(0.5, 0.35, 0.25, 1e-4)},
    "boundaries": {"levels": BOUNDARIES},
    # one node scored, with a weight below 1: w*b/w rounds off b, and B_net is clamped to it
    "clamped": {
        "levels": [0.05 + k * 0.0137 for k in range(30)],
        "level_weights": {"a": 0.3, "z": 0.7},
    },
    # a window longer than 256: its counts are not CPython's cached small ints
    "long-window": {"steps": 280, "max_history": 260},
    # smoothing factors whose complements differ from them (0.5 is its own): a replay that
    # confused a with 1 - a would still re-derive a fast smoothing of 0.5
    "smoothing": {"smoothing": (0.3, 0.07)},
}
EDITED = sorted(set(TRACES) - {"long-window"})


@pytest.fixture(scope="module")
def traces(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[TraceHeader, list[StepLineV1]]]:
    root = tmp_path_factory.mktemp("shortcuts")
    return {
        name: decoded(write(root / f"{name}.jsonl", **options)) for name, options in TRACES.items()
    }


def counted(replay: Replay) -> dict[str, int]:
    """Count the calls of the general path's two methods on this replay."""
    calls = {"_inputs": 0, "_decide": 0}
    for name in calls:
        method = getattr(replay, name)

        def wrapper(*args: Any, _method: Any = method, _name: str = name) -> Any:
            calls[_name] += 1
            return _method(*args)

        setattr(replay, name, wrapper)
    return calls


@pytest.mark.parametrize("name", sorted(TRACES))
def test_the_shortcuts_take_every_fresh_and_every_calm_step(
    traces: dict[str, tuple[TraceHeader, list[StepLineV1]]], name: str
) -> None:
    """The general path runs only where a shortcut cannot apply: they are not dead code.

    Inputs: the first step, and the first step of each set of scored nodes after the weights
    are recorded (the weight sums are not known yet). Decisions: every step but a NORMAL or
    ESCALATED step that holds its state (a held step, a trip, a warning, a recovery ...).
    """
    header, records = traces[name]
    replay = Replay(header)
    calls = counted(replay)
    replay.observe(records)
    assert replay.violations == 0
    keys: set[tuple[str, ...]] = set()
    inputs = 0
    for record in records:
        if record.weights is not None:
            keys.clear()
            inputs += 1
        elif tuple(record.scores) not in keys:
            inputs += 1
        keys.add(tuple(record.scores))
    states = [BreakerState.NORMAL, *(r.state for r in records)]
    decide = sum(
        1
        for before, r in zip(states, records, strict=False)
        if not (
            before is r.state
            and r.state in (BreakerState.NORMAL, BreakerState.ESCALATED)
            and r.transition == "hold"
        )
    )
    assert calls == {"_inputs": inputs, "_decide": decide}
    assert inputs < 6


@pytest.mark.parametrize("name", sorted(TRACES))
def test_an_untouched_trace_replays_as_the_general_path_does(
    traces: dict[str, tuple[TraceHeader, list[StepLineV1]]], name: str
) -> None:
    header, records = traces[name]
    expected = outcome(general(header, records))
    assert expected[1] == 0, expected[2]  # the machine's trace replays clean
    assert "re-derived on every step" in expected[0]
    transitions = {r.transition for r in records}
    assert {"hold", "trip"} <= transitions or name == "clamped", transitions
    if name == "boundaries":
        assert [r.fast for r in records[1:3]] == [0.25, 0.35]
        assert any(
            r.reason.startswith("recovery holds: calibration window dirty")
            and r.window is not None
            and r.window.beyond_3 == r.window.beyond_5 > 0
            for r in records
        )
    elif name != "clamped":
        assert "held-for-review" in transitions
    for block in (1, 7, len(records)):
        assert outcome(shortcut(header, records, block)) == expected


@pytest.mark.parametrize("name", EDITED)
def test_every_single_field_edit_replays_as_the_general_path_does(
    traces: dict[str, tuple[TraceHeader, list[StepLineV1]]], name: str
) -> None:
    header, records = traces[name]
    checked = 0
    stride = {"boundaries": 1, "clamped": 2, "escalating": 3}.get(name, 4)
    for index in range(1, len(records), stride):
        for field, change in edits(records[index], header.thresholds):
            if isinstance(records[index], StepLine) or field not in ("weights", "probe"):
                edited = [
                    *records[:index],
                    msgspec.structs.replace(records[index], **change),
                    *records[index + 1 :],
                ]
            else:
                continue
            expected = outcome(general(header, edited))
            got = outcome(shortcut(header, edited, 5))
            assert got == expected, (index, field, change)
            if field in ("fast", "slow", "window", "size", "beyond_3", "beyond_5"):
                assert expected[1] > 0, (index, field, change)  # detected
            checked += expected[1] > 0
    assert checked > 150


def test_a_header_without_ewma_or_window_takes_the_general_path(tmp_path: Path) -> None:
    header, records = decoded(write(tmp_path / "run.jsonl", steps=60))
    for changes in ({"ewma": None}, {"control": None, "max_history": None}):
        other = TraceHeader.from_json({**header.to_json(), **changes})
        assert outcome(shortcut(other, records, 9)) == outcome(general(other, records))
    # a window recorded although the header has none: the shortcut must not take its counts
    other = TraceHeader.from_json({**header.to_json(), "control": None, "max_history": None})
    windowed = [
        msgspec.structs.replace(r, window=WindowLine(size=1, beyond_3=0, beyond_5=0))
        for r in records
    ]
    expected = outcome(general(other, windowed))
    assert expected[1] >= len(records)
    assert outcome(shortcut(other, windowed, 9)) == expected


def test_blocks_with_a_seal_and_without_feed_the_same_checks(tmp_path: Path) -> None:
    """A seal inside a block: the block is sorted out line by line; the counts still add up."""
    path = write(tmp_path / "run.jsonl", steps=30)
    text = path.read_bytes().split(b"\n")[:-1]
    blocks = LineBlocks(path)
    lines = [
        (raw, line) for _, raws, decoded in blocks for raw, line in zip(raws, decoded, strict=True)
    ]
    one = Checks.for_blocks(blocks, max_history=None, public_key=None)
    one.feed([(2, [r for r, _ in lines], [d for _, d in lines])])
    many = Checks.for_blocks(blocks, max_history=None, public_key=None)
    many.feed([(2 + i, [r], [d]) for i, (r, d) in enumerate(lines)])
    for checks in (one, many):
        assert checks.steps == 30
        assert checks.chain.report().holds
        assert checks.chain.report().checked == len(text)
        assert checks.replay_report().holds


def chain_outcome(lines: list[tuple[bytes, Any]], header_line: bytes, seals: bool) -> Any:
    chain = ChainVerifier(header_line, 2)
    for start in range(0, len(lines), 4):
        block = lines[start : start + 4]
        chain.observe([r for r, _ in block], [d for _, d in block], seals=seals)
    return chain.head, vars(chain), chain.report()


def test_the_chain_checked_as_lists_reports_as_line_by_line(tmp_path: Path) -> None:
    """Without seals among the lines, an edit anywhere is found and named as line by line."""
    path = write(tmp_path / "run.jsonl", steps=20)
    blocks = LineBlocks(path)
    lines = [(raw, line) for _, raws, dec in blocks for raw, line in zip(raws, dec, strict=True)]
    steps = lines[:-1]  # the seal dropped: the rest are steps
    expected = chain_outcome(steps, blocks.header_line, seals=True)
    assert chain_outcome(steps, blocks.header_line, seals=False) == expected
    for index in range(len(steps)):
        raw, line = steps[index]
        for edited in (
            (raw + b" ", line),  # its bytes: the next prev breaks
            (raw, msgspec.structs.replace(line, prev="0" * 64)),  # its prev
        ):
            changed = [*steps[:index], edited, *steps[index + 1 :]]
            expected = chain_outcome(changed, blocks.header_line, seals=True)
            assert expected[2].violation_count >= 1 or index == len(steps) - 1
            assert chain_outcome(changed, blocks.header_line, seals=False) == expected


def test_a_clean_block_without_seals_hashes_each_line_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list comparison is taken (not dead code): a clean block is not re-checked line by line."""
    import hashlib

    from biasbreaker.verify import chain as chain_module

    calls = []

    def sha256(data: bytes) -> Any:
        calls.append(data)
        return hashlib.sha256(data)

    monkeypatch.setattr(chain_module, "hashlib", SimpleNamespace(sha256=sha256))
    path = write(tmp_path / "run.jsonl", steps=20)
    blocks = LineBlocks(path)
    lines = [(raw, line) for _, raws, dec in blocks for raw, line in zip(raws, dec, strict=True)]
    steps = lines[:-1]
    chain = ChainVerifier(blocks.header_line, 2)
    calls.clear()  # the header's digest
    for start in range(0, len(steps), 4):
        block = steps[start : start + 4]
        chain.observe([r for r, _ in block], [d for _, d in block], seals=False)
    assert calls == [raw for raw, _ in steps]
    assert chain.head == hashlib.sha256(steps[-1][0]).hexdigest()


def test_a_block_of_steps_in_order_is_not_sorted_out_line_by_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the block with the seal is filtered and its order checked line by line."""
    path = write(tmp_path / "run.jsonl", steps=30)
    blocks = LineBlocks(path)
    lines = [(raw, line) for _, raws, dec in blocks for raw, line in zip(raws, dec, strict=True)]
    checks = Checks.for_blocks(blocks, max_history=None, public_key=None)
    sorted_out: list[int] = []
    order = checks._check_order

    def check_order(number: int, decoded: Sequence[Any]) -> None:
        sorted_out.append(number)
        order(number, decoded)

    monkeypatch.setattr(checks, "_check_order", check_order)
    observed: list[bool] = []
    observe = checks.chain.observe

    def chain_observe(raw: Any, decoded: Any, *, seals: bool = True) -> None:
        observed.append(seals)
        observe(raw, decoded, seals=seals)

    monkeypatch.setattr(checks.chain, "observe", chain_observe)
    feed = [
        (2 + i, [r for r, _ in lines[i : i + 4]], [d for _, d in lines[i : i + 4]])
        for i in range(0, 28, 4)
    ]
    checks.feed([*feed, (30, [r for r, _ in lines[28:]], [d for _, d in lines[28:]])])
    assert sorted_out == [30]  # steps 28, 29 and the seal
    assert observed == [False] * 7 + [True]  # the chain is told which blocks hold no seal
    assert checks.steps == 30
    assert checks.chain.report().holds
    assert checks.replay_report().holds
    other = Checks.for_blocks(blocks, max_history=None, public_key=None)
    with pytest.raises(TraceError, match=r"run.jsonl:3: step 2 is out of order; expected step 1"):
        other.feed([(2, [lines[0][0], lines[2][0]], [lines[0][1], lines[2][1]])])
    again = Checks.for_blocks(blocks, max_history=None, public_key=None)
    with pytest.raises(TraceError, match=r"run.jsonl:3: step 0 is out of order; expected step 1"):
        again.feed([(2, [lines[0][0], lines[0][0]], [lines[0][1], lines[0][1]])])  # a repeat
