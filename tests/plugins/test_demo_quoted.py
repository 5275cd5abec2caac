"""Quoted passages: parsed, compared word for word, rewritten, and checked from the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from biasbreaker.errors import InputError
from biasbreaker_plugins.demo.quoted import block, blocks, check, main, update

REPORT = "# report\n\n" + block("demo seed 0, 24 postings: summary", "tripped on 11 of 24") + "\n"
DOC = (
    "intro\n\n"
    + block("demo seed 0, 24 postings: summary", "tripped on 11 of 24")
    + "\n\nmiddle\n\n"
    + block("demo seed 0, 240 postings: summary", "tripped on 96 of 240")
    + "\n\nend\n"
)


def test_a_passage_of_the_run_is_compared_and_one_of_another_run_is_not() -> None:
    assert check(REPORT, DOC) == []
    drifted = DOC.replace("11 of 24", "12 of 24")
    (problem,) = check(REPORT, drifted)
    assert "'demo seed 0, 24 postings: summary'" in problem and "12 of 24" in problem
    assert check(REPORT, DOC.replace("96 of 240", "97 of 240")) == []


def test_update_rewrites_only_the_runs_passages() -> None:
    drifted = DOC.replace("11 of 24", "12 of 24").replace("96 of 240", "97 of 240")
    fixed = update(REPORT, drifted)
    assert fixed == DOC.replace("96 of 240", "97 of 240")
    assert update(REPORT, fixed) == fixed


def test_the_markers_named_inside_prose_are_no_passage() -> None:
    prose = "The report carries them between `<!-- quoted: ... -->` markers.\n\n" + DOC
    assert blocks(prose) == blocks(DOC)
    assert check(REPORT, prose) == []


def test_a_passage_quoted_twice_or_left_open_is_an_error() -> None:
    with pytest.raises(InputError, match="quoted twice"):
        blocks(DOC + DOC)
    with pytest.raises(InputError, match="closed"):
        blocks(DOC + "<!-- quoted: x -->\nno end\n")


def test_the_command_fails_on_a_difference_and_when_nothing_was_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.md"
    report.write_text(REPORT, encoding="utf-8")
    doc = tmp_path / "doc.md"
    doc.write_text(DOC, encoding="utf-8")
    assert main(["check", str(report), str(doc)]) == 0
    doc.write_text(DOC.replace("11 of 24", "12 of 24"), encoding="utf-8")
    assert main(["check", str(report), str(doc)]) == 1
    assert main(["update", str(report), str(doc)]) == 0
    assert doc.read_text(encoding="utf-8") == DOC
    other = tmp_path / "other.md"
    other.write_text("no passage here\n", encoding="utf-8")
    assert main(["check", str(report), str(other)]) == 1
    assert "nothing was checked" in capsys.readouterr().out
    assert main(["verify", str(report), str(doc)]) == 2
