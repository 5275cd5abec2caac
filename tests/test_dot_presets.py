"""docs/propagation.md's preset table: regenerated here, so its figures cannot drift."""

from __future__ import annotations

import pytest

from biasbreaker_plugins.quoted import differences
from studies import load_study


def test_the_committed_file_and_docs_propagation_are_what_the_script_measures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every preset on 30 seeds is simulated again: a changed harness, EWMA or preset fails."""
    study = load_study("dot_presets")
    assert study.main(["--check"]) == 0, capsys.readouterr().out


def test_check_names_a_quoted_figure_edited_by_hand() -> None:
    study = load_study("dot_presets")
    report = study.REPORT.read_text(encoding="utf-8")
    doc = study.DOC.read_text(encoding="utf-8")
    edited = doc.replace("| `spike` | 0.402-0.431 |", "| `spike` | 0.402-0.432 |", 1)
    assert edited != doc
    assert f"{study.LABEL!r}" in differences(report, edited)[0]
    assert differences(report, doc.replace(study.LABEL, "gone")) == [
        f"the passage {study.LABEL!r} is missing"
    ]


def test_span_says_how_many_seeds_reach_a_level() -> None:
    study = load_study("dot_presets")
    assert study.span([3, None, 5]) == "3-5 on 2 of 3"
    assert study.span([None, None]) == "never"
    assert study.span([0.4021, 0.4021], 3) == "0.402"
