"""The recall study (``docs/studies/recall_study.py``) measures this tree, and its claims hold.

The full study runs both versions (about two minutes each) and is not run here. These tests
re-measure a slice of it with this tree and compare every score with the committed
``docs/studies/recall.json``, so a change in detection, rewriting or scoring that moves any
number of the study fails until the study is regenerated; and they check the study's claims on
that slice directly (every group of every axis planted, every planted bias detected within the
bound, no fair control run halted).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from studies import load_study

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "docs" / "studies" / "recall.json"
REGENERATE = "python docs/studies/recall_study.py"


def load() -> ModuleType:
    return load_study("recall_study")


@pytest.fixture(scope="module")
def study() -> ModuleType:
    return load()


@pytest.fixture(scope="module")
def items(study: ModuleType) -> list[dict[str, Any]]:
    return list(study.build_items())


@pytest.fixture(scope="module")
def groups(study: ModuleType) -> dict[str, list[str]]:
    return dict(study.groups_of_axes())


def slice_of(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One input of each source and race x gender code, and the first planted input per group."""
    picked: dict[str, dict[str, Any]] = {}
    for item in items:
        if item["source"] == "planted":
            key = item["id"].rsplit("-", 1)[0]
            if not item["id"].endswith("-0"):
                continue
        elif item["source"] == "bbq":
            key = item["id"].rsplit("-", 1)[0]
        else:
            key = item["source"] + json.dumps(item["truth"], sort_keys=True)
        picked.setdefault(key, item)
    return list(picked.values())


@pytest.fixture(scope="module")
def measured(study: ModuleType, items: list[dict[str, Any]], groups: dict[str, list[str]]) -> Any:
    with pytest.MonkeyPatch.context() as mp:
        for var in list(os.environ):
            if var.upper().startswith("BIASBREAKER_"):
                mp.delenv(var)
        return study.measure(slice_of(items), groups)


def test_the_planted_suite_names_every_group_of_every_axis(
    study: ModuleType, items: list[dict[str, Any]], groups: dict[str, list[str]]
) -> None:
    planted = {
        (a, g)
        for i in items
        if i["source"] == "planted"
        for a, gs in i["truth"].items()
        for g in gs
    }
    assert planted == {(a, g) for a in study.AXES for g in groups[a]}
    for item in items:
        if item["source"] == "planted":
            ((_axis, (group,)),) = item["truth"].items()
            assert item["text"] not in {"", None}
            assert group in item["id"]


def test_the_slice_is_the_committed_study(items: list[dict[str, Any]], measured: Any) -> None:
    committed = json.loads(COMMITTED.read_text(encoding="utf-8"))["runs"]["after"]
    for part in ("detected", "control", "planted", "whole"):
        for iid, value in measured[part].items():
            assert value == committed[part][iid], (
                f"{part} of {iid} moved: the study no longer describes this tree; regenerate it "
                f"with {REGENERATE} and read the tables before committing them"
            )


def test_every_planted_bias_is_detected_within_the_bound(
    study: ModuleType, items: list[dict[str, Any]], groups: dict[str, list[str]], measured: Any
) -> None:
    tau = json.loads(COMMITTED.read_text(encoding="utf-8"))["summary"]["after"]["tau_enter"]
    for item in slice_of(items):
        if item["source"] != "planted":
            continue
        iid = item["id"]
        axes = len(measured["detected"][iid])
        for axis, per_group in measured["planted"][iid].items():
            for group, scores in per_group.items():
                first = study._halts(scores, tau)
                assert first is not None, f"{iid}: a node denying {axis}={group} was not detected"
                assert first <= study.bound(len(groups[axis]), axes), (iid, group, scores)
                assert scores[first - 1] != study.HELD, (iid, group)  # detected, not held


def test_no_fair_control_run_halts(
    study: ModuleType, items: list[dict[str, Any]], measured: Any
) -> None:
    """Every fair run passes: "a Nigerian nurse", read as Nigerian Pidgin, was held as an
    unsupported language until Pidgin was read with the English lists (docs/detection.md,
    "Languages")."""
    tau = json.loads(COMMITTED.read_text(encoding="utf-8"))["summary"]["after"]["tau_enter"]
    for item in slice_of(items):
        scores = measured["control"][item["id"]]
        assert study._halts(scores, tau) is None, (item["id"], scores)


def test_the_threshold_and_the_bound_follow_their_definitions(study: ModuleType) -> None:
    assert study.bound(14, 1) == 4 and study.bound(10, 2) == 5 and study.bound(2, 1) == 1
    assert study._halts([0.0, 0.2, 0.5], 0.3) == 3
    assert study._halts([0.0, study.HELD], 0.9) == 2
    assert study._halts([0.29], 0.3) is None
    control = {f"i{n}": [0.0] * 6 for n in range(200)}
    tau, runs = study.threshold(control)
    assert runs == sum(study.calibration_half(i) for i in control) and 0 < tau <= 0.05


def test_the_docs_quote_the_committed_study(
    study: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """recall.md and docs/detection.md §6 say what recall.json gives (re-rendered, seconds):
    a figure edited by hand, or a study rerun without its quoted passages, fails here."""
    assert study.main(["--summarise-only", "--check"]) == 0, capsys.readouterr().out


def test_check_names_a_quoted_figure_that_differs(
    study: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = tmp_path / "detection.md"
    text = (ROOT / "docs" / "detection.md").read_text(encoding="utf-8")
    assert "| nationality | 42 | 0.21–0.45 | 1.00 | 4 | 4 |" in text
    doc.write_text(
        text.replace(
            "| nationality | 42 | 0.21–0.45 | 1.00 |", "| nationality | 42 | 0.21–0.45 | 0.99 |"
        ),
        encoding="utf-8",
    )
    monkeypatch.setattr(study, "DOCS", (doc,))
    assert study.main(["--summarise-only", "--check"]) == 1
    assert "'recall: measured'" in capsys.readouterr().out
    doc.write_text(
        text.replace("<!-- quoted: recall: inputs -->", "<!-- quoted: gone -->"), encoding="utf-8"
    )
    assert study.main(["--summarise-only", "--check"]) == 1
    assert "the passage 'recall: inputs' is missing" in capsys.readouterr().out
