from __future__ import annotations

from pathlib import Path

from tracegen import forge

from biasbreaker.properties import verify_trace
from biasbreaker.types import BreakerState

N, IV, R, E = (
    BreakerState.NORMAL,
    BreakerState.INTERVENTION,
    BreakerState.RECOVERY,
    BreakerState.ESCALATED,
)


def anti_thrash(path: Path):  # type: ignore[no-untyped-def]
    [report] = [p for p in verify_trace(path).properties if p.name == "anti-thrash"]
    return report


def test_holds_when_changes_happen_only_on_crossings(tmp_path: Path) -> None:
    path = forge(
        tmp_path / "ok.jsonl",
        [(N, 0.1), (N, 0.45), (IV, 0.5), (R, 0.45), (R, 0.52), (R, 0.4), (N, 0.3)],
    )
    report = anti_thrash(path)
    assert report.holds
    assert report.version == "v1"
    assert report.checked == 3  # steps with fast in [0.35, 0.5)


def test_a_trip_inside_the_dead_band_is_a_violation(tmp_path: Path) -> None:
    path = forge(
        tmp_path / "bad.jsonl", [(N, 0.1), (N, 0.4), (IV, 0.45), (R, 0.2), (R, 0.1), (N, 0.1)]
    )
    report = anti_thrash(path)
    assert not report.holds
    assert report.violation_count == 1
    assert report.violations[0].step == 2
    assert (
        "tripped (normal -> intervention) with fast 0.45 below tau_enter 0.5"
        in report.violations[0].message
    )


def test_a_clear_inside_the_dead_band_is_a_violation(tmp_path: Path) -> None:
    path = forge(tmp_path / "bad.jsonl", [(N, 0.1), (IV, 0.6), (R, 0.4), (R, 0.4), (N, 0.36)])
    report = anti_thrash(path)
    assert [v.step for v in report.violations] == [4]
    assert (
        "cleared (recovery -> normal) with fast 0.36 not below tau_exit 0.35"
        in report.violations[0].message
    )
