"""A trace verified in two halves at once gives exactly the one-pass report (verify/split.py)."""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from biasbreaker.breaker import freeze
from biasbreaker.calibration import ControlStatistics
from biasbreaker.cli import app
from biasbreaker.errors import TraceError
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.propagation import NetworkEwma, network_score
from biasbreaker.trace import TraceWriter
from biasbreaker.trace.lines import LineBlocks
from biasbreaker.types import InterventionContext, InterventionResult, Thresholds
from biasbreaker.verify import VerificationReport, verify_trace
from biasbreaker.verify import split as split_module
from biasbreaker.verify.checks import Checks
from biasbreaker.verify.split import join, verify_half, verify_in_two

TH = Thresholds(0.5, 0.35, 0.25, 0.05)
WEIGHTS = {"intake": 0.5, "screener": 0.3, "decider": 0.2}
LATER_WEIGHTS = {"intake": 0.4, "screener": 0.4, "decider": 0.2}
WARMUP = 40 * 520  # about 40 lines: less than a burst's episode, more than the window


def _repair(context: InterventionContext) -> InterventionResult:
    return InterventionResult(freeze({"fixed": context.step}), True, "madera", (), 0.05)


def _guarded_run(path: Path, steps: int, *, topology_change: int | None = None) -> Path:
    """A real three-node run (the bench's, shorter): a burst every 300 steps, repaired.

    The Katz weights are recorded on the first step only, so a worker warming up anywhere
    later has to find them far before its cut; with ``topology_change``, again (others) on
    that step.
    """
    ewma = NetworkEwma.create()
    config = MachineConfig(
        TH,
        control=ControlStatistics(0.1, 0.05, 1000),
        max_history=8,
        ewma_smoothing=(ewma.fast.smoothing, ewma.slow.smoothing),
    )
    rng = random.Random(5)
    scores: dict[str, float] = {}
    nodes = tuple(WEIGHTS)
    with TraceWriter(path, config.trace_header({"test": "split"}), signer=None) as writer:
        machine = ControlMachine(config, hook=_repair, recorder=writer)
        for step in range(steps):
            node = nodes[step % 3]
            scores[node] = (0.9 if step % 300 < 12 else 0.05) + rng.random() * 0.05
            weights = WEIGHTS
            if topology_change is not None and step >= topology_change:
                weights = LATER_WEIGHTS
            ewma = ewma.update(network_score(weights, scores).b_net)
            fast, slow = ewma.fast.value, ewma.slow.value
            assert fast is not None and slow is not None
            machine.step(fast, slow, node=node, local_scores=scores, weights=weights)
        writer.seal()
    return path


def _line_start(path: Path, line: int) -> int:
    """The byte offset of 1-based line ``line``."""
    return sum(len(raw) for raw in path.read_bytes().split(b"\n")[: line - 1]) + line - 1


def _joined(path: Path, cut: int, warmup: int = WARMUP) -> dict[str, object] | None:
    """The joined report, or ``None`` if the halves did not join (then the one-pass report)."""
    split = verify_in_two(path, max_history=None, public_key=None, cut=cut, warmup_bytes=warmup)
    assert split is not None
    report = VerificationReport.of(
        split.checks, split.sha256, truncated=split.truncated, version=2
    ).to_json()
    if split.joined:
        return report
    assert report == verify_trace(path, workers=1).to_json()  # read on from the cut
    return None


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _guarded_run(tmp_path_factory.mktemp("split") / "run.jsonl", 1200)


@pytest.mark.parametrize("line", [3, 150, 250, 420, 555, 700, 999, 1150, 1202])
def test_a_clean_trace_joins_at_a_cut_in_a_calm_stretch(run: Path, line: int) -> None:
    """The worker warms up on ~40 lines, finds the weights of step 0, and the halves join."""
    one_pass = verify_trace(run, workers=1)
    assert one_pass.holds
    assert _joined(run, _line_start(run, line)) == one_pass.to_json()


@pytest.mark.parametrize("line", [302, 305, 310, 320, 605, 612])
def test_a_cut_inside_an_episode_joins_or_is_verified_again(run: Path, line: int) -> None:
    """Inside a burst the short warm-up may miss the episode's start: then no join, not a guess."""
    joined = _joined(run, _line_start(run, line))
    assert joined is None or joined == verify_trace(run, workers=1).to_json()
    # with a warm-up that reaches back before the burst, it always joins
    long = _joined(run, _line_start(run, line), warmup=400 * 520)
    assert long == verify_trace(run, workers=1).to_json()


def test_state_the_warm_up_cannot_see_does_not_join(tmp_path: Path) -> None:
    """An escalation long before the cut: the episode's frozen payload is not in the warm-up."""
    path = tmp_path / "persistent.jsonl"
    done = CliRunner().invoke(
        app, ["simulate", "persistent", "--seed", "3", "--steps", "1500", "--out", str(path)]
    )
    assert done.exit_code == 0, done.output
    one_pass = verify_trace(path, workers=1)
    escalated = one_pass.properties[2]
    assert escalated.name == "escalation-terminal" and escalated.checked > 1000
    assert _joined(path, _line_start(path, 1400), warmup=20 * 520) is None


@pytest.mark.parametrize(
    "preset", ["control", "spike", "drift", "oscillate-near-threshold", "recovery", "persistent"]
)
def test_every_preset_gives_the_one_pass_report(tmp_path: Path, preset: str) -> None:
    path = tmp_path / f"{preset}.jsonl"
    done = CliRunner().invoke(
        app, ["simulate", preset, "--seed", "3", "--steps", "600", "--out", str(path)]
    )
    assert done.exit_code == 0, done.output
    one_pass = verify_trace(path, workers=1).to_json()
    # 600 steps are below the size verify cuts at, so workers=2 falls back to one pass; the
    # halves are checked directly below, joined at three cut points
    assert verify_trace(path, workers=2).to_json() == one_pass
    for line in (100, 300, 500):
        joined = _joined(path, _line_start(path, line))
        assert joined is None or joined == one_pass


def _edited(run: Path, tmp_path: Path, line: int, edit: str) -> Path:
    lines = run.read_bytes().split(b"\n")
    record = json.loads(lines[line - 1]) if edit in ("fast", "state", "reason") else {}
    if edit == "fast":
        record["fast"] *= 1.01
    elif edit == "state":
        record["state"] = "warning"
    elif edit == "reason":
        record["reason"] = "calm: nothing to see"
    if edit == "delete":
        del lines[line - 1]
    elif edit == "malformed":
        lines[line - 1] = b'{"kind":"step"}'
    elif edit == "cut":
        lines = [*lines[:-2], lines[-2][:50]]
    else:
        lines[line - 1] = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    path = tmp_path / f"{edit}.jsonl"
    path.write_bytes(b"\n".join(lines))
    return path


@pytest.mark.parametrize("edit", ["fast", "state", "reason"])
def test_an_edit_after_the_cut_gives_the_one_pass_violations(
    run: Path, tmp_path: Path, edit: str
) -> None:
    path = _edited(run, tmp_path, 1000, edit)
    one_pass = verify_trace(path, workers=1)
    assert not one_pass.holds
    assert _joined(path, _line_start(path, 700)) is None  # the worker saw a violation


@pytest.mark.parametrize("edit", ["malformed", "delete"])
def test_a_malformed_trace_after_the_cut_is_the_one_pass_error(
    run: Path, tmp_path: Path, edit: str
) -> None:
    path = _edited(run, tmp_path, 1000, edit)
    with pytest.raises(TraceError) as alone:
        verify_trace(path, workers=1)
    with pytest.raises(TraceError) as split:
        verify_in_two(path, max_history=None, public_key=None, cut=_line_start(path, 700))
    assert str(split.value) == str(alone.value) and f"{edit}.jsonl:1000:" in str(alone.value)


def test_a_cut_last_line_warns_as_in_one_pass(run: Path, tmp_path: Path) -> None:
    path = _edited(run, tmp_path, 0, "cut")
    with warnings.catch_warnings(record=True) as alone:
        warnings.simplefilter("always")
        one_pass = verify_trace(path, workers=1)
    with warnings.catch_warnings(record=True) as split:
        warnings.simplefilter("always")
        two = verify_in_two(path, max_history=None, public_key=None, cut=_line_start(path, 700))
    assert [str(w.message) for w in split] == [str(w.message) for w in alone] != []
    assert two is not None and not two.joined and two.truncated and one_pass.truncated
    report = VerificationReport.of(two.checks, two.sha256, truncated=two.truncated, version=2)
    assert report.to_json() == one_pass.to_json()


def test_the_weights_are_found_back_by_their_key_on_a_step_line_only(tmp_path: Path) -> None:
    """`"weights":` also appears as a node name or an intervention key: only a step recording
    weights counts, the last one before the end, and a range without one has none."""
    from biasbreaker.verify.split import _Bytes, _weights_before

    lines = [
        b'{"kind":"header"}',
        b'{"kind":"step","step":0,"weights":{"a":1.0}}',
        b'{"kind":"step","step":1,"weights":{"a":0.5,"b":0.5}}',
        b'{"kind":"step","step":2,"scores":{"weights":0.1},"weights":null}',
        b'{"kind":"step","step":3,"intervention":{"weights":{"x":1.0}}}',
        b'{"kind":"seal","prev":"p","steps":4}',
    ]
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    starts = [sum(len(x) + 1 for x in lines[:i]) for i in range(len(lines) + 1)]
    with path.open("rb") as fh:
        data = _Bytes(fh)
        assert _weights_before(data, starts[1], starts[6]) == {"a": 0.5, "b": 0.5}
        assert _weights_before(data, starts[1], starts[2]) == {"a": 1.0}
        assert _weights_before(data, starts[3], starts[6]) is None
        assert _weights_before(data, starts[1], starts[1]) is None


def _first_half(path: Path, cut: int) -> Checks:
    first = LineBlocks(path, stop=cut)
    checks = Checks.for_blocks(first, max_history=None, public_key=None)
    checks.feed(first)
    return checks


def test_the_worker_guesses_the_weights_and_a_wrong_guess_does_not_join(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker searches for the weights near its cut and near the header only: weights
    recorded far from both (a topology change in the middle) are missed, and the halves do
    not join; found, they join."""
    path = _guarded_run(tmp_path / "run.jsonl", 1200, topology_change=500)
    cut = _line_start(path, 942)  # step 940: the warm-up sees the burst at 900 (no look-back)
    halves = {}
    for guess in (100 * 520, 1000 * 520):  # misses step 500's weights, or reaches them
        monkeypatch.setattr(split_module, "GUESS_BYTES", guess)
        half = verify_half(path, cut, max_history=None, public_key=None, warmup_bytes=WARMUP)
        assert half is not None
        halves[guess] = join(_first_half(path, cut), half)
    assert halves[100 * 520] is None
    joined = halves[1000 * 520]
    assert joined is not None
    report = VerificationReport.of(joined, "-", truncated=False, version=2).to_json()
    one_pass = verify_trace(path, workers=1).to_json()
    assert one_pass["holds"] and report["replay"] == one_pass["replay"]
