from __future__ import annotations

import json
from pathlib import Path

import pytest
from tracegen import forge

from biasbreaker.errors import InputError, TraceError
from biasbreaker.types import BreakerState
from biasbreaker.verify import verify_trace
from biasbreaker.verify.report import MAX_KEPT_VIOLATIONS

N, IV, R = BreakerState.NORMAL, BreakerState.INTERVENTION, BreakerState.RECOVERY


def test_report_covers_every_property_and_is_plain_json(tmp_path: Path) -> None:
    path = forge(
        tmp_path / "run.jsonl",
        [(N, 0.1), (IV, 0.6), (R, 0.3), (R, 0.2), (R, 0.1), (R, 0.1), (N, 0.1)],
    )
    report = verify_trace(path)
    # every decision property holds on this forged trace; only the replay sees that no
    # machine wrote it (transition "forged", no intervention summary, ...)
    assert report.chain.holds and report.rlb.holds
    assert all(p.holds for p in report.properties)
    assert not report.replay.holds and not report.holds
    assert report.steps == 7
    assert not report.truncated
    assert [p.name for p in report.properties] == [
        "anti-thrash",
        "bounded-retries",
        "escalation-terminal",
        "recovery-after-cooldown",
        "must-trip",
    ]
    data = json.loads(json.dumps(report.to_json()))
    assert data["rlb"]["recovery_transitions"] == 1
    assert data["trace_sha256"] == report.rlb.trace_sha256


def test_any_violation_makes_the_report_fail(tmp_path: Path) -> None:
    path = forge(tmp_path / "run.jsonl", [(N, 0.1), (IV, 0.6), (N, 0.1)])
    report = verify_trace(path)
    assert report.rlb.holds
    assert not report.holds


def test_violations_are_all_counted_but_only_the_first_kept(tmp_path: Path) -> None:
    flips = [(N, 0.4), (IV, 0.4)] * (MAX_KEPT_VIOLATIONS + 10)
    [anti] = [
        p
        for p in verify_trace(forge(tmp_path / "x.jsonl", flips)).properties
        if p.name == "anti-thrash"
    ]
    assert anti.violation_count == 2 * (MAX_KEPT_VIOLATIONS + 10) - 1
    assert len(anti.violations) == MAX_KEPT_VIOLATIONS


def test_bad_max_history(tmp_path: Path) -> None:
    path = forge(tmp_path / "run.jsonl", [(N, 0.1)])
    with pytest.raises(InputError, match="max_history=0"):
        verify_trace(path, max_history=0)


def test_the_replay_worker_gives_the_same_verdicts(tmp_path: Path) -> None:
    """workers=2 (two halves at once, or one pass for a trace too small to cut): same report."""
    path = forge(tmp_path / "run.jsonl", [(N, 0.1), (IV, 0.6), (R, 0.3), (R, 0.2), (N, 0.1)])
    alone, split = verify_trace(path, workers=1), verify_trace(path, workers=2)
    assert split.replay == alone.replay and not split.replay.holds  # a forged trace
    assert split.to_json() == alone.to_json()


def test_a_malformed_trace_is_the_same_error_with_a_worker(tmp_path: Path) -> None:
    path = forge(tmp_path / "run.jsonl", [(N, 0.1), (N, 0.2)])
    lines = path.read_text().splitlines()
    lines[2] = lines[2].replace('"state":"normal"', '"state":"nowhere"')
    path.write_text("\n".join(lines) + "\n")
    for workers in (1, 2):
        with pytest.raises(TraceError, match=r"run.jsonl:3: .*nowhere"):
            verify_trace(path, workers=workers)


def test_workers_must_be_one_or_two(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="workers=3"):
        verify_trace(forge(tmp_path / "run.jsonl", [(N, 0.1)]), workers=3)
