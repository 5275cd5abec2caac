"""Issue 14: names written surname first without a comma (``Zhang Wei applied``).

Before, ``Zhang Wei applied`` was group-blind (``Zhang`` is in no first-name table, so the
pair rule read nothing) and ``Applicant: Nguyen Van An`` was read as the person ``Nguyen
Van`` (a half swap: ``An`` kept). docs/detection.md, "Names", "Surname first without a comma".
"""

from __future__ import annotations

from typing import Any

import pytest

from biasbreaker.probe import CounterfactualGenerator, Probe, TermSet
from biasbreaker.probe.surnames import surname_first_bare
from biasbreaker_plugins.scorers.decision import DecisionScorer

GEN = CounterfactualGenerator(TermSet.default(), seed=7)
BOOK = TermSet.default().names
assert BOOK is not None


def names(payload: Any) -> set[tuple[str, str, tuple[str, ...], str]]:
    return {(d.surface, d.axis, d.groups, d.name) for d in GEN.detect(payload) if d.kind == "name"}


def variants(payload: Any, axis: str) -> list[Any]:
    cf = GEN.generate(payload, 6, coverage={})
    assert cf.status == "applicable", cf.reason
    out = [v for v in cf.variants if v.mapping.axis == axis]
    assert out
    return out


@pytest.mark.parametrize(
    ("text", "surface", "key"),
    [
        ("Zhang Wei applied for the loan.", "Zhang Wei", "Wei Zhang"),
        ("Applicant: Nguyen Van An", "Nguyen Van An", "An Nguyen"),
        ("Applicant: Tran Thi Lan, 34, renter", "Tran Thi Lan", "Lan Tran"),
        ("Mr. Zhang Wei asks for a loan.", "Zhang Wei", "Wei Zhang"),
        ("The applicant, Chen Wei Ming, asked for a loan.", "Chen Wei Ming", "Ming Chen"),
        ("Zhang Wei's file is complete.", "Zhang Wei", "Wei Zhang"),
        ("Name: Zhang Xiaoming\nIncome: 40k", "Zhang Xiaoming", "Xiaoming Zhang"),
        ("Loan file.\nLiu Yifei, 45, requests 5k.", "Liu Yifei", "Yifei Liu"),
    ],
)
def test_a_name_written_surname_first_is_one_asian_person(
    text: str, surface: str, key: str
) -> None:
    assert (surface, "race", ("asian",), key) in names(text)


def test_a_whole_value_written_surname_first_is_a_person() -> None:
    assert ("Zhang Wei", "race", ("asian",), "Wei Zhang") in names({"applicant": "Zhang Wei"})


def test_a_race_variant_swaps_the_name_whole_and_every_later_mention() -> None:
    text = "Zhang Wei applied. Mr. Zhang earns 40k; Zhang's file is complete."
    for v in variants(text, "race"):
        new = dict(v.mapping.names)["Zhang Wei"]
        first, last = new.split()
        assert v.payload == (
            f"{first} {last} applied. Mr. {last} earns 40k; {last}'s file is complete."
        )
        assert GEN.map_back(v.payload, v.mapping) == text


def test_a_vietnamese_middle_name_goes_with_the_race_swap() -> None:
    text = "Applicant: Nguyen Van An"
    for v in variants(text, "race"):
        assert v.payload == f"Applicant: {dict(v.mapping.names)['Nguyen Van An']}"
        assert "Van" not in v.payload.split()
        assert GEN.map_back(v.payload, v.mapping) == text


def test_a_gender_variant_swaps_the_given_name_and_keeps_the_order() -> None:
    text = "Wang Zhiwei applied for the loan."  # Zhiwei: male by nomquamgender
    assert ("Wang Zhiwei", "gender", ("male",), "Zhiwei Wang") in names(text)
    for v in variants(text, "gender"):
        words = v.payload.split()
        assert words[0] == "Wang"
        assert words[1] != "Zhiwei"
        assert GEN.map_back(v.payload, v.mapping) == text


def test_a_given_name_first_pair_is_still_read_as_written() -> None:
    assert ("Wei Chen", "race", ("asian",), "Wei Chen") in names("Wei Chen applied.")


@pytest.mark.parametrize(
    "text",
    [
        "Long Beach approved the permit.",  # Long 81 % white
        "Young Adult fiction sells well.",
        "Park Avenue says hello.",  # Park 74 % Asian, and a place word
        "White House said no.",
        "Rice University applied for a grant.",
        "Hong Kong says no.",  # Hong 90 % Asian, Kong a given name: a place pair
        "Le Monde reported the story.",
        "Sun Microsystems said no.",
        "Wu Tang said yes.",
        "Ho Chi Minh City reported growth.",
        "Chan Street applied.",
        "Wang Computer Labs applied.",
        "We visited Hong Kong last year.",
        "The Zhang Group said yes.",
    ],
)
def test_ordinary_capitalised_pairs_are_no_surname_first_names(text: str) -> None:
    assert names(text) == set()


def test_a_pair_needs_a_person_cue() -> None:
    """``Zhang Wei`` is a candidate everywhere, a person only where a name stands."""
    assert BOOK is not None
    text = "Ask Zhang Wei about it."
    assert [text[s:e] for s, e, _, _ in surname_first_bare(text, BOOK)] == ["Zhang Wei"]
    assert names(text) == set()
    assert names("Ask Mr. Zhang Wei about it.") == {("Zhang Wei", "race", ("asian",), "Wei Zhang")}


def test_a_node_denying_a_surname_first_name_is_caught() -> None:
    """The fail-open: "Zhang Wei applied" was not applicable, so this node passed unprobed."""
    prompt = "Zhang Wei applied for the loan. Decision?"

    def step(text: str) -> str:
        return "deny" if "Zhang" in text else "approve"

    probe = Probe(DecisionScorer(), generator=GEN, k=6, r=1, bootstrap=0)
    result = probe.probe_sync(step, prompt, step(prompt))
    assert result.status == "scored"
    assert result.score == 1.0
