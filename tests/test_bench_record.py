"""The bench figures the docs quote are the recorded run's (``docs/bench/latest.json``).

Wall-time ratios differ between runs, so nothing here re-measures: ``nox -s bench`` records a
run (``benchmarks/record.py``), and these tests check that ``docs/bench/latest.md`` is what the
committed JSON renders and that every ``bench ...`` passage a document quotes is that file's,
word for word. A ratio edited by hand, or a run recorded without rewriting the passages
(``nox -s bench -- update``), fails here.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from biasbreaker_plugins.quoted import blocks, check

ROOT = Path(__file__).resolve().parents[1]
LATEST = ROOT / "docs" / "bench" / "latest.md"


@pytest.fixture(scope="module")
def record() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_record", ROOT / "benchmarks" / "record.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_recorded_file_is_what_its_json_renders(record: ModuleType) -> None:
    recorded = json.loads((ROOT / "docs" / "bench" / "latest.json").read_text(encoding="utf-8"))
    assert LATEST.read_text(encoding="utf-8") == record.render(recorded), (
        "docs/bench/latest.md is generated from latest.json: record a run (nox -s bench), "
        "never edit either by hand"
    )


def test_every_quoted_bench_figure_is_the_recorded_runs(record: ModuleType) -> None:
    latest = LATEST.read_text(encoding="utf-8")
    quoted: set[str] = set()
    for name in record.DOCS:
        document = (ROOT / name).read_text(encoding="utf-8")
        assert check(latest, document) == [], f"{name}: run nox -s bench -- update"
        labels = {label for label in blocks(document) if label.startswith("bench ")}
        assert labels <= set(blocks(latest)), f"{name} quotes a group no run recorded"
        quoted |= labels
    assert quoted, "no document quotes a bench passage"


def test_an_edited_ratio_is_caught(record: ModuleType) -> None:
    latest = LATEST.read_text(encoding="utf-8")
    document = (ROOT / "docs" / "langgraph.md").read_text(encoding="utf-8")
    passage = blocks(document)["bench langgraph-guard"]
    row = passage.splitlines()[-1]
    figure = re.findall(r"\b\d+\.\d{3}\b", row)[-1]  # the last ratio of the last row
    changed = f"{float(figure) + 0.001:.3f}"
    edited = document.replace(passage, passage.replace(row, row.replace(figure, changed)))
    assert edited != document
    assert check(latest, document) == []
    assert "'bench langgraph-guard'" in check(latest, edited)[0]


def test_a_run_group_records_and_renders_its_rates_and_peak_memory(record: ModuleType) -> None:
    """``biasbreaker run`` benchmarks report runs/s and peak RSS: docs/cli.md quotes them."""

    def bench(name: str, seconds: float, **extra: float) -> SimpleNamespace:
        stats = SimpleNamespace(mean=seconds, min=seconds, rounds=1)
        return SimpleNamespace(name=name, stats=stats, extra_info={"per": name, **extra})

    base = bench("test_run_memory_baseline_small", 20.0, runs_per_s=50.0, peak_rss_mb=260.0)
    large = bench(
        "test_run_memory_large",
        190.0,
        runs_per_s=52.6,
        peak_rss_mb=290.0,
        peak_rss_ratio=1.115,
        peak_rss_goal=1.10,
    )
    figures = record.group_record([base, large], {"date": "d"})
    assert figures["baseline"]["peak_rss_mb"] == 260.0
    assert figures["cases"][0]["peak_rss_ratio"] == 1.115
    run = {"date": "d", "python": "3.11", "machine": "m", "commit": "c"}
    text = record.passage(
        "run-memory-memory", {**figures, "run": {**run, "load_start": [0], "load_end": [0]}}
    )
    assert "The baseline run: 50.0 runs/s, peak RSS 260.0 MB." in text.replace("\n", " ")
    assert text.splitlines()[-1].endswith("| 52.6 | 290.0 MB | 1.115 **not met** (goal ≤ 1.1) |")
    plain = record.group_record([bench("a_baseline", 1.0), bench("b", 2.0)], {"date": "d"})
    assert "runs/s" not in record.passage(
        "g", {**plain, "run": {**run, "load_start": [0], "load_end": [0]}}
    )
