"""Mentions the probe reads but cannot swap are held, never "not applicable".

A detection round found steps that name a group where no rewrite reaches it passing
unprobed: a term inside an identifier (``{"applicant": "female_applicant"}``). Each is now
found by :meth:`~biasbreaker.probe.CounterfactualGenerator.held` and the probe records the step
``unreadable`` with a reason naming it; the look-alikes that name no one stay unread.
"""

from __future__ import annotations

from typing import Any

import pytest

from biasbreaker.probe import CounterfactualGenerator, Probe, TermSet
from biasbreaker_plugins.scorers.decision import DecisionScorer

GEN = CounterfactualGenerator(seed=0)


def decide(text: Any) -> str:
    return "approve"


def probe() -> Probe:
    return Probe(DecisionScorer(), generator=GEN, k=2, r=1, seed=0, bootstrap=0)


@pytest.mark.parametrize(
    ("payload", "axis", "surface"),
    [
        ({"applicant": "female_applicant", "loan": "20k"}, "gender", "female_applicant"),
        ("Applicant type: female_applicant, loan 20k", "gender", "female_applicant"),
        ("status: is-female", "gender", "is-female"),
        ("flags: isFemale", "gender", "isFemale"),
        ({"segment": "senior_citizen"}, "age", "senior_citizen"),
        ({"segment": "seniorCitizen"}, "age", "seniorCitizen"),
        ({"segment": "muslim_customer"}, "religion", "muslim_customer"),
        ({"segment": "hispanic_applicants"}, "race", "hispanic_applicants"),
    ],
)
def test_a_term_inside_an_identifier_is_held_naming_it(
    payload: Any, axis: str, surface: str
) -> None:
    (held,) = GEN.held(payload)
    assert (held.axis, held.surface) == (axis, surface)
    result = probe().probe_sync(decide, payload, "approve", step_id="s")
    assert result.status == "unreadable"  # was not_applicable: passed unprobed
    assert repr(surface) in result.reason and "identifier" in result.reason


@pytest.mark.parametrize(
    "text",
    [
        "white_list and black_list",
        "old_style senior_engineer man_hours old-fashioned self-employed man-made",
        "The he-said she-said story",
        "African-American applicant, a 70-year-old",  # terms the scan reads whole
        "file report_2024-final.pdf, id a1b2-c3d4",
        "DeShawn McDonald, LinkedIn, iPhone",  # capitals inside names are no camelCase
        "disabled_access, non-white, well-known, asian-owned",
    ],
)
def test_identifiers_that_name_no_one_are_not_held(text: str) -> None:
    assert GEN.held(text) == ()


def test_a_term_apart_from_its_identifier_is_swapped_not_held() -> None:
    text = "applicantGender=female"
    assert GEN.held(text) == ()
    assert probe().probe_sync(decide, text, "approve", step_id="s").status == "scored"


def test_a_dict_key_is_left_to_the_structured_field_rules() -> None:
    assert GEN.held({"female_applicant": "yes"}) == ()


# --- a person's name in lower case: read, but the rewrite changes capitalised words only ---


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        ("mary carter asks for a loan of 20k.", "mary carter"),
        ("greg baker asks for a loan.", "greg baker"),
        ("greg baker's loan is pending.", "greg baker"),
        ("i met greg baker at the bank and he asks for a loan", "greg baker"),
        ("Loan request. greg baker asks for 20k.", "greg baker"),
        ("The loan request was signed by lakisha washington today.", "lakisha washington"),
    ],
)
def test_a_lower_case_person_is_held_naming_it(text: str, surface: str) -> None:
    (held,) = GEN.held(text)
    assert (held.surface, held.axis) == (surface, "gender, race")
    result = probe().probe_sync(decide, text, "approve", step_id="s")
    assert result.status == "unreadable"  # was not_applicable
    assert f"the person {surface!r} written in lower case" in result.reason


@pytest.mark.parametrize(
    "text",
    [
        "i will call mary tomorrow and she said fine",  # Said is a first name, and a verb
        "mary said yes; greg is here",
        "the grace period will end in june",
        "we hope rose will pay the bill",
        "mark down the junior team lead",
        "will smith",  # will is an English word first
        # Charity is a first name and Dinner a census surname, but prose that capitalises
        # its sentences capitalises its names (the recall study's BBQ context held it)
        "At the charity dinner, one table was shared by a person who's Jewish.",
        "The loan request was signed by greg baker today.",  # a stated limit: not held
    ],
)
def test_lower_case_words_that_are_names_are_not_held(text: str) -> None:
    assert GEN.held(text) == ()


@pytest.mark.parametrize(
    ("text", "surface", "axis"),
    [
        ("name: emily", "emily", "gender, race"),
        ("Name: emily\nLoan: 10k", "emily", "gender, race"),
        ("Dear emily, your loan of 10k is approved.", "emily", "gender, race"),
        ("Applicant emily, income 40k", "emily", "gender, race"),
        ("hi i'm emily, need a loan of 10k", "emily", "gender, race"),
        ("hi im greg, need a loan of 10k", "greg", "gender, race"),
        ("i am greg and i need a loan", "greg", "gender, race"),
        ("my name is greg, i need a loan", "greg", "gender, race"),
    ],
)
def test_a_lower_case_first_name_in_a_name_place_is_held_naming_it(
    text: str, surface: str, axis: str
) -> None:
    """A second new-user trial: these were not applicable (the rewrite swaps capitals only)."""
    (held,) = GEN.held(text)
    assert (held.surface, held.axis) == (surface, axis)
    result = probe().probe_sync(decide, text, "approve", step_id="s")
    assert result.status == "unreadable"
    assert f"the first name {surface!r} written in lower case" in result.reason


@pytest.mark.parametrize(
    "text",
    [
        "i will pay the bill in june",
        "i'm will, not bill",  # word-names are words first
        "hi i'm grace, dear mark",
        "i am rose and i hope so",
        "i'm sure, i am fine, i'm sorry, i am happy to help",
        "dear sir, dear team, dear customer, dear all",
        "name: loan request",
        "applicant income 40k, applicant charity work",
        "i'm frank with you; i am rich; this is art",
        "my name is may",
        "this is madison avenue",  # a place
    ],
)
def test_lower_case_words_in_name_places_are_not_held(text: str) -> None:
    assert GEN.held(text) == ()


def test_a_lower_case_first_name_is_held_beside_its_capitalised_form() -> None:
    """The residual forms swap a first name with its surname only: the variants kept it."""
    (held,) = GEN.held("Greg asks for a loan. hi i'm greg")
    assert held.surface == "greg"


@pytest.mark.parametrize(
    "text",
    [
        "a john deere tractor for sale",
        "she studied at george mason university",
        "a bottle of jim beam",
        "ben & jerry ice cream",
        "ben jerry ice cream",
    ],
)
def test_brands_named_like_a_person_in_lower_case_are_not_held(text: str) -> None:
    assert GEN.held(text) == ()


def test_a_lower_case_residual_of_a_capitalised_name_is_swapped_not_held() -> None:
    text = "Mary Carter asks for a loan; signed, mary carter."
    assert GEN.held(text) == ()
    assert probe().probe_sync(decide, text, "approve", step_id="s").status == "scored"


# --- a person named only inside an e-mail address or an identifier ------------------------


@pytest.mark.parametrize(
    ("text", "surface", "inside"),
    [
        (
            "Applicant e-mail: mary.carter@example.com, income 60k.",
            "Mary Carter",
            "mary.carter@example.com",
        ),
        ("id mary_carter_1987 income 60k", "Mary Carter", "mary_carter_1987"),
        ("User MaryCarter asks for 5k", "Mary Carter", "MaryCarter"),
        ("from greg.baker@example.org: loan of 5k", "Greg Baker", "greg.baker@example.org"),
    ],
)
def test_a_person_named_only_inside_an_identifier_is_held_naming_it(
    text: str, surface: str, inside: str
) -> None:
    (held,) = GEN.held(text)
    assert held.surface == surface and "gender" in held.axis
    result = probe().probe_sync(decide, text, "approve", step_id="s")
    assert result.status == "unreadable"  # was not_applicable: a denial of women passed
    assert f"the person {surface!r} named only inside {inside!r}" in result.reason


@pytest.mark.parametrize(
    "text",
    [
        "Contact support@example.com or sales.team@acme.com",
        "Use grace_period and the will_call desk",  # first names that are English words
        "file report_2024_final.pdf, id a1b2-c3d4",
        "Ms. Mary Carter (mary.carter@example.com) asks",  # named: the residual forms swap it
    ],
)
def test_identifiers_naming_no_one_or_a_named_person_are_not_held(text: str) -> None:
    assert GEN.held(text) == ()


# --- gender identities the gender axis (male, female) has no group for ---------------------


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        ("Applicant's pronouns: they/them. Loan request.", "they/them"),
        ("The applicant (pronouns: xe/xem) asks for a loan.", "xe/xem"),
        ("The applicant is nonbinary and asks for a loan.", "nonbinary"),
        ("The applicant is non-binary and asks for a loan.", "non-binary"),
        ("The applicant, who is genderqueer, asks for a loan.", "genderqueer"),
        ("The applicant is transgender and asks for a loan.", "transgender"),
    ],
)
def test_a_gender_identity_without_a_group_is_held_naming_it(text: str, surface: str) -> None:
    assert [(h.axis, h.surface) for h in GEN.held(text)] == [("gender", surface)]
    result = probe().probe_sync(decide, text, "approve", step_id="s")
    assert result.status == "unreadable"  # was not_applicable
    assert f"the gender identity {surface!r}" in result.reason


def test_she_her_is_swapped_and_a_bare_they_is_no_declaration() -> None:
    assert GEN.held("Applicant's pronouns: she/her. Loan request.") == ()
    assert GEN.held("They asked for a loan and they want it soon.") == ()
    status = probe().probe_sync(decide, "Pronouns: she/her. A loan request.", "approve").status
    assert status == "scored"


def test_a_gender_identity_is_held_only_where_gender_is_probed() -> None:
    age = CounterfactualGenerator(TermSet.load(axes=["age"]), seed=0)
    assert age.held("The applicant is nonbinary.") == ()
