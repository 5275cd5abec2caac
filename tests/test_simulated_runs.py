"""docs/control.md §8's simulated runs: regenerated here, so its table cannot drift."""

from __future__ import annotations

import os
import re

import pytest

from biasbreaker_plugins.quoted import differences
from studies import load_study


def test_the_committed_file_and_docs_control_are_what_the_script_measures(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every figure of the two passages (seed 1, seeds 0-9: 126 simulated runs, each trace
    verified) is measured again; a changed machine, harness or verifier fails here."""
    for name in [k for k in os.environ if k.upper().startswith("BIASBREAKER_")]:
        monkeypatch.delenv(name)
    study = load_study("simulated_runs")
    assert study.main(["--check"]) == 0, capsys.readouterr().out


def test_check_names_a_quoted_figure_edited_by_hand() -> None:
    study = load_study("simulated_runs")
    report = study.REPORT.read_text(encoding="utf-8")
    doc = study.DOC.read_text(encoding="utf-8")
    edited = doc.replace("| `recovery` | step 56 |", "| `recovery` | step 55 |", 1)
    assert edited != doc
    assert "'simulate: seed 1'" in differences(report, edited)[0]
    dropped = re.sub(
        r"<!-- quoted: simulate: seeds 0-9 -->\n.*?<!-- /quoted -->\n", "", doc, flags=re.S
    )
    assert differences(report, dropped) == ["the passage 'simulate: seeds 0-9' is missing"]


def test_the_figures_are_for_the_defaults_only(monkeypatch: pytest.MonkeyPatch) -> None:
    study = load_study("simulated_runs")  # a fresh module: nothing cached
    monkeypatch.setenv("BIASBREAKER_BREAKER__TAU_ENTER", "0.5")
    with pytest.raises(SystemExit, match="BIASBREAKER_BREAKER__TAU_ENTER"):
        study.machine_config("spike", node_trip=False)
