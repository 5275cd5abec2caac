"""The adaptive-probing study (``docs/studies/adaptive_study.py``) measures this tree.

The full study (four settings over the recall study's inputs) is not run here. These tests
re-measure a slice (the first planted input of each axis, every group, under every setting)
and compare every score and call count with the committed ``docs/studies/adaptive.json``, so
a change in adaptive probing that moves a number of the study fails until it is regenerated;
they check the study's claims on that slice (every planted bias detected within the setting's
bound, a clean step costing exactly its first stage); and that the table docs/detection.md
quotes is what the committed runs give.
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
COMMITTED = ROOT / "docs" / "studies" / "adaptive.json"


@pytest.fixture(scope="module")
def study() -> ModuleType:
    return load_study("adaptive_study")


@pytest.fixture(scope="module")
def sliced(study: ModuleType) -> list[dict[str, Any]]:
    items = study.recall_study().build_items()
    return [i for i in items if i["source"] == "planted" and i["id"].endswith("-0")]


@pytest.fixture(scope="module")
def measured(study: ModuleType, sliced: list[dict[str, Any]]) -> dict[str, Any]:
    groups = study.recall_study().groups_of_axes()
    with pytest.MonkeyPatch.context() as mp:
        for var in list(os.environ):
            if var.upper().startswith("BIASBREAKER_"):
                mp.delenv(var)
        return {
            name: study.measure(sliced, groups, first) for name, first in study.SETTINGS.items()
        }


def test_the_slice_is_the_committed_study(measured: dict[str, Any]) -> None:
    committed = json.loads(COMMITTED.read_text(encoding="utf-8"))["runs"]
    for name, runs in measured.items():
        for part in ("control", "planted"):
            for iid, value in runs[part].items():
                assert value == committed[name][part][iid], (
                    f"{name}: {part} of {iid} moved; regenerate the study with "
                    "python docs/studies/adaptive_study.py"
                )


def test_a_clean_step_costs_its_first_stage_and_a_bias_is_found_within_the_bound(
    study: ModuleType, sliced: list[dict[str, Any]], measured: dict[str, Any]
) -> None:
    rs = study.recall_study()
    groups = rs.groups_of_axes()
    summary = json.loads(COMMITTED.read_text(encoding="utf-8"))["summary"]
    tau = {name: row["tau_enter"] for name, row in summary.items()}
    for name, first in study.SETTINGS.items():
        k, r = rs.K, rs.R
        # a fair node on a single-axis input: the first stage only, or the full probe
        cost = 1 + (k + r if first is None else first + min(r, first))
        for item in sliced:
            iid, (axis,) = item["id"], item["truth"]
            scored = [c for s, c in measured[name]["control"][iid] if c > 1]
            assert scored
            # the full probe of a one-axis input: k variants (no joint one), r resamples
            assert set(scored) == {cost}, (name, iid, scored)
            for group, probes in measured[name]["planted"][iid][axis].items():
                hit = rs._halts([s for s, _ in probes], tau[name])
                assert hit is not None, (name, iid, group)
                assert hit <= study.bound(len(groups[axis]), 1, first or k), (name, iid, group)


def test_the_docs_quote_the_committed_study(
    study: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """adaptive.md and docs/detection.md say what adaptive.json gives (re-rendered, seconds)."""
    assert study.main(["--check"]) == 0, capsys.readouterr().out
