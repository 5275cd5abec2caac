"""docs/detection.md §7 quotes the real-model study as its committed rows give it.

The study itself needs a running llama.cpp server (``docs/studies/real_model_snr.py``'s
docstring); here its report is re-rendered from the committed rows (``--from-raw --check``,
seconds), so a figure edited by hand in the report or in the docs, or rows committed without
their report, fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from studies import load_study

pytest.importorskip("biasbreaker_openai_compatible")


def test_the_docs_quote_the_committed_rows(capsys: pytest.CaptureFixture[str]) -> None:
    study = load_study("real_model_snr")
    assert study.main(["--from-raw", "--check"]) == 0, capsys.readouterr().out


def test_an_edited_figure_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    study = load_study("real_model_snr")
    doc = tmp_path / "detection.md"
    text = study.DOC.read_text(encoding="utf-8")
    assert "143 model calls" in text
    doc.write_text(text.replace("143 model calls", "142 model calls"), encoding="utf-8")
    monkeypatch.setattr(study, "DOC", doc)
    assert study.main(["--from-raw", "--check"]) == 1
    assert "'real model snr: run'" in capsys.readouterr().out
