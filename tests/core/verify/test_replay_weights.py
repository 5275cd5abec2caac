"""Steps without Katz weights: the replay never silently stops re-deriving B_net and the EWMAs.

A header that records the EWMA smoothing says fast and slow are the EWMAs of B_net, so every
step must be re-derivable (docs/control.md §7, replay). A step with scores and no Katz weights
in force — none recorded yet, or ``{}`` ("the weights became unknown") recorded last — is a
violation naming the step and ``weights``, and the replay goes on from the recorded fast and
slow; a step without scores leaves the EWMAs, with or without weights. Before, such a stretch
was skipped: a trace re-chained with ``weights: {}`` (or its weights dropped) let its scores,
fast and slow be edited freely, and an honest stretch's end was flagged against stale EWMAs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from test_replay_shortcuts import WEIGHTS, decoded, write

from biasbreaker.trace.chain import line_digest
from biasbreaker.trace.lines import StepLineV1
from biasbreaker.trace.records import TraceHeader
from biasbreaker.verify import verify_trace
from biasbreaker.verify.replay import Replay

STRETCH = range(10, 18)  # steps 10-17: NORMAL, scored, no trip, no held step


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TraceHeader, list[StepLineV1]]:
    """A real run with EWMAs (smoothing 0.3, 0.07), its weights recorded on step 0 only."""
    path = write(tmp_path_factory.mktemp("weights") / "run.jsonl", smoothing=(0.3, 0.07))
    header, records = decoded(path)
    assert [r.step for r in records if r.weights is not None] == [0, 60]
    assert all(r.scores and r.transition == "hold" for r in records[STRETCH.start : STRETCH.stop])
    return path, header, records


def replayed(header: TraceHeader, records: list[StepLineV1]) -> Replay:
    replay = Replay(header)
    for start in range(0, len(records), 7):
        replay.observe(records[start : start + 7])
    return replay


def with_changes(records: list[StepLineV1], **steps: dict[str, Any]) -> list[StepLineV1]:
    """``records`` with the named steps (``s12=...``) changed."""
    out = list(records)
    for name, change in steps.items():
        index = int(name[1:])
        out[index] = msgspec.structs.replace(out[index], **change)
    return out


def test_a_stretch_without_weights_is_a_violation_at_each_of_its_scored_steps(
    run: tuple[Path, TraceHeader, list[StepLineV1]],
) -> None:
    """``{}`` at step 10, the weights again at 18: steps 10-17 are named, nothing else."""
    _, header, records = run
    assert replayed(header, records).violations == 0
    edited = with_changes(records, s10={"weights": {}}, s18={"weights": WEIGHTS})
    replay = replayed(header, edited)
    report = replay.report()
    assert [v.step for v in report.violations] == list(STRETCH)
    assert report.violations[0].message.startswith("weights: recorded {}, replayed ")
    assert report.violations[1].message.startswith("weights: recorded None, replayed ")
    assert "no Katz weights in force" in report.violations[1].message
    assert f"re-derived on {len(records) - len(STRETCH)} of {len(records)} steps" in report.what


def test_an_edit_in_a_stretch_without_weights_is_caught(
    run: tuple[Path, TraceHeader, list[StepLineV1]],
) -> None:
    """The stretch runs to step 60 (the next weights): fast edited in it cannot hide there."""
    _, header, records = run
    fast = records[12].fast
    edited = with_changes(records, s10={"weights": {}}, s12={"fast": fast * 1.01})
    steps = {v.step for v in replayed(header, edited).report().violations}
    assert steps == set(range(10, 60))  # every scored step of the stretch: none is re-derived


def test_a_trace_whose_weights_were_dropped_is_not_replayed_clean(
    run: tuple[Path, TraceHeader, list[StepLineV1]],
) -> None:
    _, header, records = run
    replay = replayed(header, with_changes(records, s0={"weights": None}))
    first = replay.report().violations[0]
    assert first.step == 0
    assert first.message.startswith("weights: recorded None, replayed ")
    assert replay.violations == 60  # steps 0-59, until the weights recorded at step 60


def test_a_step_without_scores_leaves_the_ewmas_with_or_without_weights(
    run: tuple[Path, TraceHeader, list[StepLineV1]],
) -> None:
    _, header, records = run
    for weights in (None, {}):
        edited = with_changes(records, s12={"scores": {}, "weights": weights})
        messages = [(v.step, v.message.split(":")[0]) for v in replayed(header, edited)._log.kept]
        assert (12, "fast") in messages and (12, "slow") in messages, messages
        assert (12, "weights") not in messages


def test_verify_names_the_step_and_the_field_of_a_rechained_trace_without_weights(
    run: tuple[Path, TraceHeader, list[StepLineV1]], tmp_path: Path
) -> None:
    """End to end: ``weights: {}`` on step 1 and a score changed at step 12, re-chained."""
    path = run[0]
    lines = path.read_text(encoding="utf-8").splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        record = json.loads(line)
        if record.get("kind") == "seal":
            continue
        if record["step"] == 1:
            record["weights"] = {}
        if record["step"] == 12:
            node = sorted(record["scores"])[0]
            record["scores"][node] = record["scores"][node] * 0.5
        record["prev"] = line_digest(out[-1].encode())
        out.append(json.dumps(record, sort_keys=True, separators=(",", ":")))
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(out) + "\n", encoding="utf-8")
    report = verify_trace(edited)
    assert not report.holds
    assert report.replay.violations[0].step == 1
    assert report.replay.violations[0].message.startswith("weights: recorded {}")
    assert 12 in {v.step for v in report.replay.violations}
