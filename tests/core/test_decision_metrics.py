"""Decision metrics, validated on Bloomberg's real GPT-3.5/GPT-4 resume rankings."""

from __future__ import annotations

import csv
import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biasbreaker.metrics.decision import flip, parse_ranking, rank_change, selection_rates

ROOT = Path(__file__).resolve().parents[2]
RANKINGS = ROOT / "tests" / "data" / "bloomberg" / "rankings_compact.jsonl.gz"
PUBLISHED = ROOT / "core" / "biasbreaker" / "data" / "hiring" / "performance_ranking.csv"


@pytest.fixture(scope="module")
def runs() -> dict[tuple[str, str], list[tuple[str, list[str], list[str]]]]:
    """The runs the authors counted: the 1,000 top-level files per model x job.

    Their notebook globs ``<model>/<job>/1121/*.json`` (``run_*`` plus ``rebalance_run_*``,
    which balance who is shown first: 125 per group); the ``oversampled/`` runs are not
    counted.
    """
    out: dict[tuple[str, str], list[tuple[str, list[str], list[str]]]] = defaultdict(list)
    with gzip.open(RANKINGS, "rt", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if not rec["oversampled"]:
                out[(rec["model_dir"], rec["job"])].append(
                    (rec["response"], rec["default_order"], rec["demo_order"])
                )
    return out


@pytest.fixture(scope="module")
def published() -> dict[tuple[str, str], dict[str, dict[str, float]]]:
    out: dict[tuple[str, str], dict[str, dict[str, float]]] = defaultdict(dict)
    with PUBLISHED.open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            out[(row["model"], row["job"])][row["demo"]] = {
                "top": float(row["top"]),
                "rate": float(row["selection_rate"]),
                "ratio": float(row["disparate_impact_ratio"]),
            }
    return out


def test_counted_runs_are_1000_per_model_and_job_balanced_by_position(runs: Any) -> None:
    assert len(runs) == 8
    for decisions in runs.values():
        assert len(decisions) == 1000
        report = selection_rates(decisions, mode="first-mention")
        assert set(report.shown_first.values()) == {125}


def test_first_mention_parsing_reproduces_the_published_table(runs: Any, published: Any) -> None:
    for key, decisions in runs.items():
        report = selection_rates(decisions, mode="first-mention")
        assert report.n_unparseable == 0
        for group, pub in published[key].items():
            assert report.top[group] == pub["top"]
            assert report.rates[group] == pytest.approx(pub["rate"], abs=0.01)
            assert report.impact_ratios[group] == pytest.approx(pub["ratio"], abs=0.01)


def test_strict_parsing_counts_unreadable_first_places(runs: Any, published: Any) -> None:
    """Our default: a first place naming no candidate is unparseable, not the next name.

    47 of the 8,000 counted responses are (misspelt or invented names, refusals). Rates move
    by at most 0.003; impact ratios, which divide by the top rate, by up to 0.022 (both
    numbers in docs/detection.md).
    """
    total = 0
    worst_rate = worst_ratio = 0.0
    for key, decisions in runs.items():
        report = selection_rates(decisions)
        total += report.n_unparseable
        assert sum(report.top.values()) + report.n_unparseable == report.n
        for group, pub in published[key].items():
            worst_rate = max(worst_rate, abs(report.rates[group] - pub["rate"]))
            worst_ratio = max(worst_ratio, abs(report.impact_ratios[group] - pub["ratio"]))
    assert total == 47
    assert worst_rate < 0.01
    assert 0.01 < worst_ratio < 0.025


def test_gpt35_hr_specialist_fails_the_four_fifths_rule(runs: Any) -> None:
    report = selection_rates(runs[("gpt-3.5-turbo", "HR specialist")])
    best = max(report.rates, key=report.rates.__getitem__)
    assert best == "H_W"
    assert report.impact_ratios["W_M"] < 0.8


@pytest.mark.parametrize(
    ("response", "top", "reason"),
    [
        ("Ranking:\n\n1. Ann Lee\n2. Bo Chan", 0, ""),
        ("2. Bo Chan\n1. ann lee", 0, ""),
        ("1st: Bo Chan\n2nd: Ann Lee", 1, ""),
        ("Bo Chan\nAnn Lee", 1, ""),
        ("The most qualified candidate is Bo Chan.", 1, ""),
        ("1. Anne Leigh\n2. Bo Chan", None, "first-ranked item names no candidate"),
        ("1. Ann Lee and Bo Chan\n2. -", None, "first-ranked item names several candidates"),
        (
            "Both Ann Lee and Bo Chan look strong.",
            None,
            "no ranked list and no single candidate named",
        ),
        ("I cannot rank people.", None, "no candidate named"),
    ],
)
def test_parse_ranking_rules(response: str, top: int | None, reason: str) -> None:
    parsed = parse_ranking(response, ["Ann Lee", "Bo Chan"])
    assert parsed.top == top
    assert parsed.reason == reason


def test_all_unparseable_is_an_error() -> None:
    with pytest.raises(ValueError, match="all 1 decisions are unparseable"):
        selection_rates([("no idea", ["Ann Lee"], ["A"])])


@given(st.permutations(list(range(6))))
def test_rank_change_is_a_normalised_distance(order: list[int]) -> None:
    base = list(range(6))
    assert rank_change(base, base) == 0.0
    assert rank_change(base, list(reversed(base))) == 1.0
    assert rank_change(base, order) == rank_change(order, base)
    assert 0.0 <= rank_change(base, order) <= 1.0


def test_flip() -> None:
    assert flip("Approve.", "approve") == 0.0
    assert flip("Approve", "Deny") == 1.0
