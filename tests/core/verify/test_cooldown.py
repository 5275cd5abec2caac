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


def cooldown(path: Path):  # type: ignore[no-untyped-def]
    [report] = [p for p in verify_trace(path).properties if p.name == "recovery-after-cooldown"]
    return report


def test_holds_after_enough_recovery_steps(tmp_path: Path) -> None:
    report = cooldown(
        forge(
            tmp_path / "ok.jsonl",
            [(IV, 0.6), (R, 0.1), (R, 0.1), (R, 0.1), (N, 0.1)],
            cooldown_steps=3,
        )
    )
    assert report.holds
    assert report.checked == 1


def test_recovering_before_the_cooldown_is_a_violation(tmp_path: Path) -> None:
    report = cooldown(
        forge(tmp_path / "bad.jsonl", [(IV, 0.6), (R, 0.1), (R, 0.1), (N, 0.1)], cooldown_steps=3)
    )
    assert [v.step for v in report.violations] == [3]
    assert (
        "recovered after 2 RECOVERY step(s); the cool-down needs 3" in report.violations[0].message
    )


def test_closing_straight_from_intervention_is_a_violation(tmp_path: Path) -> None:
    report = cooldown(
        forge(tmp_path / "bad.jsonl", [(N, 0.1), (IV, 0.6), (N, 0.1)], cooldown_steps=0)
    )
    assert (
        "closed (normal) straight from intervention, without RECOVERY"
        in report.violations[0].message
    )


def test_vacuous_without_recovery(tmp_path: Path) -> None:
    report = cooldown(forge(tmp_path / "esc.jsonl", [(IV, 0.6), (R, 0.1), (E, 0.1)]))
    assert report.holds
    assert report.note == "vacuous: the breaker never recovered"
