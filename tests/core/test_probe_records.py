"""Sex codes as forms write them: after a person's id, or as a field of a delimited record.

A new-user trial (app4) found ``Candidate #12 (F)``, ``Applicant ID 4471 (F)`` and
``Applicant 4471 | F | 35 | 60k`` not applicable, and ``Applicant, 35, F, income 60k`` swapped
on its age only, so a step denying women passed or scored 0 (docs/detection.md, "Swap rules",
the sex-code row).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from biasbreaker.probe import CounterfactualGenerator, Probe, TermSet
from biasbreaker_plugins.scorers.decision import DecisionScorer

GEN = CounterfactualGenerator(TermSet.default(), seed=7)


def codes(text: str) -> list[str]:
    return [d.surface for d in GEN.detect(text) if d.axis == "gender" and d.kind == "term"]


def held(text: str) -> list[tuple[str, str]]:
    return [(h.axis, h.surface) for h in GEN.held(text)]


@pytest.mark.parametrize(
    ("text", "swapped"),
    [
        ("Candidate #12 (F) asks for a 5k loan.", "Candidate #12 (M) asks for a 5k loan."),
        ("Applicant ID 4471 (F), income 60k.", "Applicant ID 4471 (M), income 60k."),
        ("Patient no. 7 (M, 63) reports pain.", "Patient no. 7 (F, 63) reports pain."),
        ("Applicant 4471 | F | 35 | 60k", "Applicant 4471 | M | 35 | 60k"),
        ("Applicant, 35, F, income 60k.", "Applicant, 35, M, income 60k."),
        ("Applicant: Lee, F, 35", "Applicant: Lee, M, 35"),
        ("Borrower;M;42;renter", "Borrower;F;42;renter"),
        ("Sex: F", "Sex: M"),
        ("Gender: M", "Gender: F"),
        ("F, 35", "M, 35"),
    ],
)
def test_a_code_in_a_sex_position_is_swapped_and_maps_back(text: str, swapped: str) -> None:
    cf = GEN.generate(text, 6, coverage={})
    gender = [v for v in cf.variants if v.mapping.axis == "gender"]
    assert [v.payload for v in gender] == [swapped] * len(gender) and gender
    assert all(GEN.map_back(v.payload, v.mapping) == text for v in gender)


@pytest.mark.parametrize(
    "text",
    [
        "Grade F",
        "Student grades: A, B, F",
        "Vitamin F",
        "It was 32 F outside.",
        "Temperatures: 32 F, 40 F, 55 F",
        "Set column F, 35 rows.",
        "Ford F-150, 35 mpg",
        "Section M",
        "Size M",
        "Sizes: S, M, 36",
        "John Smith, M.D., 45",
        "Part F",
        "Figure 12 (F)",
        "Room 12 (M)",
        "(F)ahrenheit",
        "Grades: A, F, 35, B",
    ],
)
def test_letters_that_are_no_sex_code_are_neither_read_nor_held(text: str) -> None:
    assert codes(text) == []
    assert [a for a, _ in held(text) if a == "gender"] == []


def test_a_lone_code_beside_an_age_in_a_record_naming_no_person_is_held() -> None:
    assert held("4471 | F | 35 | 60k") == [("gender", "F")]
    assert codes("4471 | F | 35 | 60k") == []


def deny_women(text: Any) -> str:
    return "DENY" if "(F)" in str(text) or "| F |" in str(text) or ", F," in str(text) else "OK"


@pytest.mark.parametrize(
    "text",
    [
        "Candidate #12 (F) asks for a 5k loan.",
        "Applicant 4471 | F | 35 | 60k",
        "Applicant, 35, F, income 60k.",
    ],
)
def test_a_step_denying_the_coded_sex_scores_where_it_passed_before(text: str) -> None:
    probe = Probe(DecisionScorer(), generator=GEN, k=4, r=1, bootstrap=0)
    result = asyncio.run(probe.probe(deny_women, text, deny_women(text)))
    assert result.status == "scored"
    assert result.score is not None and result.score > 0.5


def test_a_sex_field_of_a_json_dict_is_held_not_passed() -> None:
    # a code under a "sex"/"gender" key is not text the probe rewrites: held, never skipped
    probe = Probe(DecisionScorer(), generator=GEN, k=4, r=1, bootstrap=0)
    for payload in ({"sex": "F", "income": "60k"}, {"applicant": {"gender": "M"}}):
        result = asyncio.run(probe.probe(lambda x: "OK", payload, "OK"))
        assert result.status == "unreadable", payload
