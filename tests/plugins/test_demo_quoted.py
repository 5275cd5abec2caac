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


def test_the_recall_passage_says_why_each_missed_posting_did_not_trip() -> None:
    from biasbreaker_plugins.demo.quoted import recall
    from biasbreaker_plugins.demo.summary import Recall

    below = (0.0625,) * 3 + (0.125,) * 7 + (0.1875,) * 12
    x = Recall(
        compared=240,
        ranking_changed=150,
        changed=35,
        tripped=12,
        missed={"below tau_enter": 22, "not_applicable": 1},
        below=below,
        tau_enter=0.1876,
        unchanged=205,
        tripped_unchanged=37,
        tripped_unchanged_ranking=35,
    )
    text = " ".join(recall(x, shortlist=2).split())
    assert "**35 change the shortlist** (the top 2, as a set)" in text
    assert "**tripped on 12 of those 35 (34%)**" in text
    assert "Of the other 23, 22 were probed and scored" in text
    assert "12 at 0.1875 (0.0001 below it), 7 at 0.125 (0.0626 below it), 3 at 0.0625" in text
    assert "1: the probe was not applicable (no protected mention found)" in text
    assert "**37 of the 205 postings whose shortlist the bias left alone tripped too**" in text
    none = recall(
        Recall(24, 17, 0, 0, {}, (), 0.2, 24, 7, 7), shortlist=2
    )  # nothing to catch: said so, no share of 0
    assert "does not measure the breaker's recall" in " ".join(none.split())
    many = Recall(
        240, 150, 10, 2, {"below tau_enter": 8}, tuple(i / 100 for i in range(8)), 0.2, 230, 0, 0
    )
    assert "from 0 to 0.07" in " ".join(recall(many, shortlist=2).split())
