"""A surname alone before a verb of a person, a surname in capitals first, and ``Mx.``.

A new-user trial (app4) found ``Begay applied for the loan.`` not applicable (a step denying
it passed), ``Applicant: WASHINGTON Lakisha`` read first name first (a gender variant gave
``ALEXANDRA Tyshawn``) and ``Mx. Taylor`` become ``Mx. Heather`` (docs/detection.md, "Names").
"""

from __future__ import annotations

import asyncio

import pytest

from biasbreaker.probe import CounterfactualGenerator, Probe, TermSet
from biasbreaker_plugins.scorers.decision import DecisionScorer

GEN = CounterfactualGenerator(TermSet.default(), seed=7)


def people(text: str) -> set[tuple[str, str, tuple[str, ...]]]:
    return {(d.surface, d.axis, d.groups) for d in GEN.detect(text) if d.kind == "name"}


def held(text: str) -> list[tuple[str, str]]:
    return [(h.axis, h.surface) for h in GEN.held(text)]


@pytest.mark.parametrize(
    ("text", "surface", "group"),
    [
        ("Begay applied for the loan.", "Begay", "native-american"),
        ("Okafor was denied the loan.", "Okafor", "black"),
        ("Hernandez asked for 5k.", "Hernandez", "hispanic"),
        ("Loan file.\nNguyen earns 40k.", "Nguyen", "asian"),
    ],
)
def test_a_surname_alone_before_a_verb_of_a_person_is_a_person(
    text: str, surface: str, group: str
) -> None:
    assert people(text) == {(surface, "race", (group,))}
    cf = GEN.generate(text, 5, coverage={})
    assert cf.variants and all(surface not in v.payload for v in cf.variants)
    assert all(GEN.map_back(v.payload, v.mapping) == text for v in cf.variants)


@pytest.mark.parametrize(
    "text",
    [
        "Washington was founded in 1790.",
        "Jordan announced a plan.",
        "Lincoln was built in 1850.",
        "Honda applied for a patent.",
        "Garcia said the rate is 5%.",  # "said": a firm or a state says things too
        "The file says Begay applied.",  # inside a sentence: no cue of a name
        "Smith applied for the loan.",  # 72 % white: under the 90 % share
    ],
)
def test_places_firms_and_weak_surnames_are_not_read(text: str) -> None:
    assert [d for d in GEN.detect(text) if d.axis == "race"] == []
    assert [h for h in held(text) if h[0] == "race"] == []


@pytest.mark.parametrize(
    ("text", "surface"),
    [("Washington was denied the loan.", "Washington"), ("Senegal applied.", "Senegal")],
)
def test_a_surname_that_is_also_a_place_is_held(text: str, surface: str) -> None:
    assert held(text) == [("race", surface)]
    assert GEN.detect(text) == ()


def test_a_step_denying_the_surname_scores_where_it_passed_before() -> None:
    def step(text: object) -> str:
        return "DENY" if "Begay" in str(text) else "OK"

    probe = Probe(DecisionScorer(), generator=GEN, k=4, r=1, bootstrap=0)
    text = "Begay applied for the loan."
    result = asyncio.run(probe.probe(step, text, step(text)))
    assert result.status == "scored" and result.score is not None and result.score > 0.5


def test_a_surname_in_capitals_first_is_swapped_in_place_and_case() -> None:
    text = "Applicant: WASHINGTON Lakisha, income 60k."
    assert people(text) == {
        ("WASHINGTON Lakisha", "gender", ("female",)),
        ("WASHINGTON Lakisha", "race", ("black",)),
    }
    cf = GEN.generate(text, 6, coverage={})
    for v in cf.variants:
        last, first = v.payload.removeprefix("Applicant: ").split(",")[0].split()
        assert last.isupper() and not first.isupper()
        if v.mapping.axis == "gender":
            assert last == "WASHINGTON" and first != "Lakisha"
        assert GEN.map_back(v.payload, v.mapping) == text


def test_a_first_name_in_capitals_before_a_surname_is_read_as_written() -> None:
    assert ("GREG Baker", "gender", ("male",)) in people("Mr. GREG Baker applied.")


def test_the_title_mx_is_held_as_a_gender_identity() -> None:
    assert ("gender", "Mx.") in held("Applicant Mx. Taylor asks for a 5k loan.")
    assert held("The mx of the recording was fine.") == []


@pytest.mark.parametrize(
    "text",
    ["Applicant Nguyen Thi Lan asks for a 5k loan.", "Applicant Nguyễn Thị Lan asks for a loan."],
)
def test_a_person_label_without_a_colon_cues_a_name_written_surname_first(text: str) -> None:
    # the label pattern was shadowed by a field-label one needing ":" ("Applicant: …"), so
    # "Nguyen Thi" was read first name first and "Lan" kept in every variant
    surface = text.split()[1:4]
    assert {(" ".join(surface), "race", ("asian",))} == people(text)
    for v in GEN.generate(text, 4, coverage={}).variants:
        assert "Lan" not in v.payload.split()
