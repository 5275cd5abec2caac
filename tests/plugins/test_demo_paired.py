"""The hiring demo's paired comparison: point estimates, intervals, pairing, determinism."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from biasbreaker.errors import InputError
from biasbreaker_plugins.demo.paired import Interval, compare, quantile
from biasbreaker_plugins.demo.summary import selection

GROUPS = ("a", "b", "c")


def _posting(phase: str, n: int, shortlist: list[str], status: str = "done") -> dict[str, Any]:
    return {
        "phase": phase,
        "thread": f"posting-{n:04d}",
        "status": status,
        "job": "job",
        "groups": {"Ann": "a", "Bob": "b", "Cy": "c"},
        "shortlist": shortlist,
    }


def _records(seed: int, n: int, *, after_favours: str | None = None) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    names = ["Ann", "Bob", "Cy"]
    out = []
    for i in range(n):
        short = rng.sample(names, 1)
        out.append(_posting("unguarded", i, short))
        if after_favours is None:
            out.append(_posting("guarded", i, short))
        else:
            out.append(_posting("guarded", i, [after_favours]))
    return out


WEIGHTS = {("job", "a"): 1.5, ("job", "b"): 1.0, ("job", "c"): 0.5}


def test_the_estimates_are_the_summary_selection_and_fairlearns() -> None:
    fairlearn_metrics = pytest.importorskip("fairlearn.metrics")
    records = _records(1, 60)
    paired = compare(records, GROUPS, weights=WEIGHTS, seed=3, replicates=200)
    for phase, index in (("unguarded", 0), ("guarded", 1)):
        sel = selection(records, phase, GROUPS)
        for g in GROUPS:
            assert paired.rates[g][index].estimate == pytest.approx(sel.rates[g])
        assert paired.impact[index].estimate == pytest.approx(sel.min_impact)
        # fairlearn: one row per (posting, candidate), selected or not
        rows = [r for r in records if r["phase"] == phase]
        y_pred = [int(name in r["shortlist"]) for r in rows for name in r["groups"]]
        groups = [g for r in rows for g in r["groups"].values()]
        frame = fairlearn_metrics.MetricFrame(
            metrics=fairlearn_metrics.selection_rate,
            y_true=y_pred,
            y_pred=y_pred,
            sensitive_features=groups,
        )
        for g in GROUPS:
            assert paired.rates[g][index].estimate == pytest.approx(frame.by_group[g])
        assert paired.impact[index].estimate == pytest.approx(
            fairlearn_metrics.demographic_parity_ratio(y_pred, y_pred, sensitive_features=groups)
        )
    assert paired.postings == 60 and paired.left_out == 0


def test_an_unchanged_phase_changes_nothing_and_a_large_effect_is_beyond_noise() -> None:
    same = compare(_records(4, 80), GROUPS, weights=WEIGHTS, seed=0, replicates=300)
    assert same.lean is not None
    for change in (same.impact[2], same.lean[2], *(v[2] for v in same.rates.values())):
        assert change == Interval(0.0, 0.0, 0.0)
        assert not change.excludes(0.0)
    moved = compare(
        _records(4, 80, after_favours="Ann"), GROUPS, weights=WEIGHTS, seed=0, replicates=300
    )
    assert moved.lean is not None
    assert moved.rates["a"][1] == Interval(1.0, 1.0, 1.0)
    assert moved.rates["a"][2].excludes(0.0) and moved.rates["a"][2].low > 0.5
    assert moved.lean[2].excludes(0.0) and moved.lean[2].estimate > 0
    # every guarded shortlist is Ann (weight 1.5): the lean moves away from 1, by its distance
    assert moved.distance is not None
    b, a, c = moved.distance
    assert b.estimate == pytest.approx(abs(moved.lean[0].estimate - 1))
    assert a == Interval(0.5, 0.5, 0.5)
    assert c.estimate == pytest.approx(0.5 - b.estimate) and c.excludes(0.0) and c.low > 0
    for before, after, change in (*moved.rates.values(), moved.impact, moved.lean):
        assert before.low <= before.estimate <= before.high
        assert after.low <= after.estimate <= after.high
        assert change.estimate == pytest.approx(after.estimate - before.estimate)


def test_the_pairs_resample_together() -> None:
    """Paired, the change's interval is narrower than the one of two independent draws."""
    rng = random.Random(5)
    records = []
    for i in range(100):  # the guard swaps b for a on a fifth of the postings
        short = [rng.choice(["Ann", "Bob", "Cy"])]
        records.append(_posting("unguarded", i, short))
        records.append(
            _posting("guarded", i, ["Ann"] if short == ["Bob"] and i % 5 == 0 else short)
        )
    paired = compare(records, GROUPS, seed=1, replicates=1000)
    b, a, c = paired.rates["a"]
    assert c.high - c.low < 0.5 * ((b.high - b.low) + (a.high - a.low))
    assert paired.lean is None


def test_postings_without_a_shortlist_on_either_side_are_left_out() -> None:
    records = _records(6, 10)
    records[1] = _posting("guarded", 0, [], status="review")
    records[2] = _posting("unguarded", 1, [])
    paired = compare(records, GROUPS, seed=0, replicates=100)
    assert paired.postings == 8 and paired.left_out == 2


def test_the_same_seed_gives_the_same_intervals_and_another_seed_others() -> None:
    records = _records(7, 50, after_favours="Bob")
    one = compare(records, GROUPS, weights=WEIGHTS, seed=11, replicates=200)
    assert one == compare(records, GROUPS, weights=WEIGHTS, seed=11, replicates=200)
    assert one != compare(records, GROUPS, weights=WEIGHTS, seed=12, replicates=200)


def test_the_percentile_interval_agrees_with_scipys_bootstrap() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(8)
    records = []
    for i in range(120):
        records.append(_posting("unguarded", i, [rng.choice(["Ann", "Bob", "Cy"])]))
        records.append(_posting("guarded", i, [rng.choice(["Ann", "Ann", "Bob", "Cy"])]))
    ours = compare(records, GROUPS, seed=2, replicates=4000).rates["a"][1]
    picked = np.array([int(r["shortlist"] == ["Ann"]) for r in records if r["phase"] == "guarded"])
    theirs = stats.bootstrap(
        (picked,), np.mean, n_resamples=4000, method="percentile", random_state=0
    ).confidence_interval
    assert ours.low == pytest.approx(theirs.low, abs=0.02)
    assert ours.high == pytest.approx(theirs.high, abs=0.02)


def test_quantile_is_numpys_linear_quantile() -> None:
    rng = random.Random(9)
    for n in (1, 2, 7, 100):
        values = sorted(rng.random() for _ in range(n))
        for q in (0.0, 0.025, 0.5, 0.975, 1.0):
            assert quantile(values, q) == pytest.approx(float(np.quantile(values, q)))
    with pytest.raises(InputError):
        quantile([], 0.5)
    with pytest.raises(InputError):
        quantile([1.0], 1.5)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(InputError, match="replicates=99"):
        compare([], GROUPS, replicates=99)
    with pytest.raises(InputError, match="confidence=1.0"):
        compare([], GROUPS, confidence=1.0)
