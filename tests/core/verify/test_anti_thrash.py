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
    assert report.version == "v2"
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


# -- node trips (v2) -------------------------------------------------------------------------------


def test_a_node_trip_below_tau_enter_holds_when_the_header_says_node_trips_are_on(
    tmp_path: Path,
) -> None:
    # fast 0.1 (below tau_exit) and 0.4 (in the dead-band); the node's own score is 0.9
    steps = [(N, 0.1, 0.0), (IV, 0.1, 0.9), (R, 0.1, 0.0), (R, 0.1, 0.0), (N, 0.1, 0.0)]
    steps += [(N, 0.4, 0.0), (IV, 0.4, 0.5)]  # own score exactly tau_enter 0.5 trips too
    report = anti_thrash(forge(tmp_path / "node.jsonl", steps, node_trip=True))
    assert report.holds, report.violations


def test_a_node_trip_is_a_violation_when_the_header_says_node_trips_are_off(
    tmp_path: Path,
) -> None:
    steps = [(N, 0.1, 0.0), (IV, 0.4, 0.9)]
    report = anti_thrash(forge(tmp_path / "off.jsonl", steps, node_trip=False))
    assert [v.step for v in report.violations] == [1]
    assert "the header says node trips are off" in report.violations[0].message


def test_with_node_trips_on_a_trip_needs_the_own_score_at_tau_enter(tmp_path: Path) -> None:
    # own score just below tau_enter, and a step without a node: neither may trip
    steps = [(N, 0.1, 0.0), (IV, 0.4, 0.4999), (R, 0.1, 0.0), (R, 0.1, 0.0), (N, 0.1, 0.0)]
    steps += [(N, 0.4), (IV, 0.45)]
    report = anti_thrash(forge(tmp_path / "low.jsonl", steps, node_trip=True))
    assert [v.step for v in report.violations] == [1, 6]
    assert "the own score 0.4999 of node 'n' is not >= tau_enter" in report.violations[0].message
    assert "the step has no own score" in report.violations[1].message


def test_node_trips_do_not_relax_clearing(tmp_path: Path) -> None:
    # the node's own score is clean, but fast is in the dead-band: clearing is still a violation
    steps = [(N, 0.1, 0.0), (IV, 0.1, 0.9), (R, 0.1, 0.0), (R, 0.1, 0.0), (N, 0.4, 0.0)]
    report = anti_thrash(forge(tmp_path / "clear.jsonl", steps, node_trip=True))
    assert [v.step for v in report.violations] == [4]
    assert "not below tau_exit" in report.violations[0].message
