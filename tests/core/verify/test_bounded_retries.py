from __future__ import annotations

from pathlib import Path

from tracegen import forge

from biasbreaker.types import BreakerState
from biasbreaker.verify import verify_trace

N, IV, R, E = (
    BreakerState.NORMAL,
    BreakerState.INTERVENTION,
    BreakerState.RECOVERY,
    BreakerState.ESCALATED,
)


def bounded(path: Path):  # type: ignore[no-untyped-def]
    [report] = [p for p in verify_trace(path).properties if p.name == "bounded-retries"]
    return report


def test_counts_interventions_per_episode(tmp_path: Path) -> None:
    episode = [(IV, 0.6), (R, 0.2), (R, 0.2), (IV, 0.2), (R, 0.2), (R, 0.2)]
    path = forge(
        tmp_path / "ok.jsonl", [(N, 0.1), *episode, (N, 0.1), *episode, (E, 0.1)], max_retries=2
    )
    report = bounded(path)
    assert report.holds
    assert report.checked == 2


def test_a_third_intervention_with_max_retries_two_is_a_violation(tmp_path: Path) -> None:
    cycle = [(IV, 0.6), (R, 0.2), (R, 0.2)]
    path = forge(tmp_path / "bad.jsonl", [(N, 0.1), *cycle * 3, (E, 0.1)], max_retries=2)
    report = bounded(path)
    assert report.violation_count == 1
    assert report.violations[0].step == 7
    assert "intervention 3 in episode 1 exceeds max_retries 2" in report.violations[0].message


def test_vacuous_without_episodes(tmp_path: Path) -> None:
    report = bounded(forge(tmp_path / "calm.jsonl", [(N, 0.1)] * 3))
    assert report.holds
    assert report.note == "vacuous: the breaker never tripped"
