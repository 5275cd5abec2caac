"""The intervention study's script runs (quick mode) and its measured invariants hold."""

import re
from types import ModuleType

from studies import load_study


def load() -> ModuleType:
    return load_study("intervention_study")


def test_quick_study_runs_and_reports_every_scenario(tmp_path):
    study = load()
    out = tmp_path / "report.md"
    assert study.main(["--quick", "--out", str(out)]) == 0
    text = out.read_text()
    for scenario in study.SCENARIOS:
        assert f"## Scenario: {scenario}" in text
    assert "simulated" in text
    # no calibrated, evidence-backed dissenter was pruned by any aggregator
    for line in re.findall(r"Times that dissenter was pruned: ([^.]*)\.", text):
        assert all(part.rsplit(" ", 1)[1] == "0" for part in line.split(", "))
    # end to end with the fake: halted steps were found, and the measured re-check is lower
    rows = re.findall(r"^\| (madera|skeptics) \| (\d+) \| ([0-9.]+) \| ([0-9.]+) \|", text, re.M)
    assert {r[0] for r in rows} == {"madera", "skeptics"}
    for _, halted, before, after in rows:
        assert int(halted) > 0
        assert float(after) < 0.2 <= float(before)


def test_study_is_deterministic(tmp_path):
    study = load()
    assert study.report(quick=True) == study.report(quick=True)


def test_the_dissenter_is_never_pruned_in_the_simulation():
    study = load()
    for personas in study.SCENARIOS.values():
        out = study.run_scenario(personas, seed=3, calibration=50, test=100)
        assert out.dissent_cases > 0
        assert set(out.dissent_pruned.values()) == {0}


def test_check_passes_on_its_own_report_and_fails_on_an_edited_one(tmp_path):
    study = load()
    out = tmp_path / "report.md"
    assert study.main(["--quick", "--out", str(out)]) == 0
    assert study.main(["--quick", "--check", "--out", str(out)]) == 0
    out.write_text(out.read_text().replace("simulated", "real", 1))
    assert study.main(["--quick", "--check", "--out", str(out)]) == 1


def test_the_docs_quote_the_committed_report():
    """docs/intervention.md's accuracies and p-values are the committed report's passage
    (``--check``, in ``nox -s study``, compares the report with a full run)."""
    study = load()
    report = study.REPORT.read_text(encoding="utf-8")
    assert study.quoted_differences(report, study.DOC.read_text(encoding="utf-8")) == []


def test_a_quoted_accuracy_edited_by_hand_is_caught():
    study = load()
    report = study.REPORT.read_text(encoding="utf-8")
    document = study.DOC.read_text(encoding="utf-8")
    assert "uniform 0.707" in document
    edited = document.replace("uniform 0.707", "uniform 0.708")
    assert "'intervention study: findings'" in study.quoted_differences(report, edited)[0]
    passage = re.search(
        r"<!-- quoted: intervention study: findings -->\n.*?\n<!-- /quoted -->\n", document, re.S
    )
    assert passage is not None
    assert study.quoted_differences(report, document.replace(passage.group(0), "")) == [
        "the passage 'intervention study: findings' is missing"
    ]
