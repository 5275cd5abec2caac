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


def terminal(path: Path):  # type: ignore[no-untyped-def]
    [report] = [p for p in verify_trace(path).properties if p.name == "escalation-terminal"]
    return report


def test_holds_when_escalated_stays_escalated(tmp_path: Path) -> None:
    report = terminal(
        forge(tmp_path / "ok.jsonl", [(IV, 0.6), (R, 0.1), (E, 0.1), (E, 0.0), (E, 0.9)])
    )
    assert report.holds
    assert report.checked == 2
    assert report.note == "escalated at step 2"


def test_leaving_escalated_is_a_violation(tmp_path: Path) -> None:
    report = terminal(forge(tmp_path / "bad.jsonl", [(IV, 0.6), (E, 0.1), (N, 0.0), (E, 0.1)]))
    assert [v.step for v in report.violations] == [2]
    assert (
        "state normal / action proceed after escalation at step 1" in report.violations[0].message
    )


def test_vacuous_without_escalation(tmp_path: Path) -> None:
    report = terminal(forge(tmp_path / "calm.jsonl", [(N, 0.1)] * 2))
    assert report.holds
    assert report.note == "vacuous: the run never escalated"
