"""biasbreaker_plugins.quoted: passages between markers, checked and rewritten word for word."""

from __future__ import annotations

import pytest

from biasbreaker.errors import InputError
from biasbreaker_plugins.quoted import block, blocks, check, update

REPORT = "\n\n".join([block("a", "A is 1."), block("b", "B is 2.")]) + "\n"


def test_an_empty_passage_is_read_empty_and_filled_in_place() -> None:
    document = (
        "Intro.\n\n<!-- quoted: a -->\n<!-- /quoted -->\n\nProse between, kept.\n\n"
        + block("b", "B was 1.")
        + "\n\nThe end.\n"
    )
    assert blocks(document) == {"a": "", "b": "B was 1."}
    new = update(REPORT, document)
    assert "Prose between, kept." in new and "The end." in new
    assert blocks(new) == {"a": "A is 1.", "b": "B is 2."}
    assert check(REPORT, new) == []


def test_an_unclosed_passage_is_refused_and_update_rewrites_nothing() -> None:
    document = "<!-- quoted: a -->\nA was 0.\n\nProse.\n\n" + block("b", "B was 1.") + "\n"
    with pytest.raises(InputError, match="opened but 1 closed"):
        blocks(document)
    with pytest.raises(InputError, match="opened but 1 closed"):
        update(REPORT, document)


def test_a_differing_passage_is_named_and_others_of_other_runs_are_left() -> None:
    document = block("a", "A is 0.") + "\n\n" + block("c", "C of another run.") + "\n"
    (line,) = check(REPORT, document)
    assert line.startswith("'a': the document says 'A is 0.'")
    assert blocks(update(REPORT, document)) == {"a": "A is 1.", "c": "C of another run."}
