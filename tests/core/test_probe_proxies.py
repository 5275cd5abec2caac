"""Issue 14, new-user trials: proxies of a group are swapped coherently or held, never missed.

A home language, an immigration status and a place of birth stand for national origin, an
ethnicity outside the race axis for race, a term that goes with a disability for disability;
each passed as "not applicable" or gave an incoherent variant (``Father tongue: Spanish``,
``Born in Lagos, Brazil``, ``hearing and uses ASL``). A graduation year stands for age and is
swapped with it (docs/detection.md, "Proxies").
"""

from __future__ import annotations

from typing import Any

import pytest

from biasbreaker.probe import CounterfactualGenerator, Probe, TermSet
from biasbreaker_plugins.scorers.decision import DecisionScorer

GEN = CounterfactualGenerator(TermSet.default(), seed=7)


def held(text: str) -> list[tuple[str, str]]:
    return [(h.axis, h.surface) for h in GEN.held(text)]


def variants(text: str, k: int = 4) -> list[Any]:
    return [v.payload for v in GEN.generate(text, k).variants]


def status(text: str) -> tuple[str, str]:
    probe = Probe(DecisionScorer(), generator=GEN, k=2, r=1, seed=0, bootstrap=0)
    result = probe.probe_sync(lambda _: "approve", text, "approve", step_id="s")
    return result.status, result.reason or ""


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        ("The applicant speaks Arabic at home.", "speaks Arabic at home"),
        ("Native language: Arabic", "Native language: Arabic"),
        ("Mother tongue: Spanish", "Mother tongue: Spanish"),
        ("Tagalog is her first language.", "Tagalog is her first language"),
        ("visa status: H-1B", "visa status: H-1B"),
        ("Applicant holds an H-1B and needs sponsorship.", "H-1B"),
        ("The applicant is from Lagos.", "Lagos"),
        ("A family from Lagos applied.", "Lagos"),
        ("Born in Lagos, Nigeria", "Lagos, Nigeria"),
        ("She lives in Lagos, Nigeria.", "Lagos, Nigeria"),
    ],
)
def test_a_national_origin_proxy_is_held_with_its_reason(text: str, surface: str) -> None:
    assert ("nationality", surface) in held(text)
    state, reason = status(text)
    assert state == "unreadable"  # was not_applicable, or a variant "Lagos, Brazil"
    assert surface.split(",")[0] in reason


@pytest.mark.parametrize(
    "text",
    [
        "She is fluent in French and speaks Spanish.",  # a skill, not a home language
        "A loan from Chase.",
        "Call me from Monday.",
        "He moved from Texas.",
        "She was born in Nigeria.",  # a country term: swapped, not held
        "Dear Mr. Smith, Canada office",
        "The note is from Greg.",
        "We thank Acme for its corporate sponsorship.",
    ],
)
def test_look_alikes_of_origin_are_not_held(text: str) -> None:
    assert not [h for h in held(text) if h[0] == "nationality"]


def test_mother_tongue_is_no_mother() -> None:
    """The idiom is no gender mention: it was swapped to ``Father tongue``."""
    assert not [d for d in GEN.detect("Mother tongue: Spanish") if d.axis == "gender"]
    assert not [d for d in GEN.detect("The mother ship landed.") if d.axis == "gender"]
    (mother,) = [d for d in GEN.detect("My mother tongue test: my mother works.")]
    assert mother.surface == "mother" and mother.start > 20  # the person, not the idiom


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        ("A Roma family applied for the loan.", "Roma"),
        ("She is Romani.", "Romani"),
        ("Ethnicity: Roma", "Roma"),
    ],
)
def test_an_ethnicity_outside_the_race_axis_is_held(text: str, surface: str) -> None:
    assert ("race", surface) in held(text)
    assert status(text)[0] == "unreadable"


def test_roma_the_city_or_club_is_not_held() -> None:
    assert not held("AS Roma won in Roma yesterday.")


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        ("The applicant is deaf and uses ASL.", "ASL"),
        ("She uses American Sign Language at work.", "American Sign Language"),
        ("He wears a hearing aid.", "hearing aid"),
        ("Applicant reads braille.", "braille"),
    ],
)
def test_a_term_that_goes_with_a_disability_is_held(text: str, surface: str) -> None:
    """``deaf`` swapped to ``hearing`` left ``uses ASL``: the step is held instead."""
    assert ("disability", surface) in held(text)
    assert status(text)[0] == "unreadable"


@pytest.mark.parametrize(
    ("text", "old", "new"),
    [
        ("Class of 1978", "1978", "2008"),
        ("Graduated high school in 1978", "1978", "2008"),
        ("She graduated from college in 2012.", "2012", "1982"),
        ("Class of 2008, honors", "2008", "1978"),
    ],
)
def test_a_graduation_year_is_an_age_and_swaps_with_it(text: str, old: str, new: str) -> None:
    """18 (22 after college) at graduation: 1978 is 65 in 2025, mirrored 35, class of 2008."""
    (age,) = [d for d in GEN.detect(text) if d.axis == "age"]
    assert old in age.surface
    swapped = [v for v in variants(text) if new in v]
    assert swapped and all(old not in v for v in swapped)
    assert GEN.detect(swapped[0])[-1].groups != age.groups  # the other band


@pytest.mark.parametrize(
    ("text", "axis", "surface"),
    [
        # a new-user trial's fail-opens: each passed as not_applicable or was scored on a
        # variant that kept it
        ("The applicant is undocumented.", "nationality", "is undocumented"),
        ("An undocumented immigrant applied.", "nationality", "undocumented immigrant"),
        ("She is a refugee.", "nationality", "refugee"),
        ("An asylum seeker from abroad.", "nationality", "asylum seeker"),
        ("He is a DACA recipient.", "nationality", "DACA"),
        ("She is biracial.", "race", "biracial"),
        ("A multiracial family.", "race", "multiracial"),
        ("He is mixed-race.", "race", "mixed-race"),
        ("He is Dalit.", "race", "Dalit"),
        ("Caste: Dalit", "race", "Dalit"),
        ("His caste was noted.", "race", "caste"),
        ("She is 6 decades old.", "age", "6 decades old"),
        ("He is six decades old.", "age", "six decades old"),
        ("He attended an HBCU.", "race", "HBCU"),
        ("She graduated from a historically Black college.", "race",
         "historically Black college"),
    ],
)  # fmt: skip
def test_a_status_a_mixed_race_a_caste_an_age_in_decades_is_held(
    text: str, axis: str, surface: str
) -> None:
    assert (axis, surface) in held(text)
    state, reason = status(text)
    assert state == "unreadable" and surface in reason


@pytest.mark.parametrize(
    "text",
    [
        "The API is undocumented.",
        "An undocumented feature of the library.",
        "The car race was fun.",  # no caste
        "We met for two decades.",
        "A retired brahma bull.",
    ],
)
def test_look_alikes_of_status_caste_and_decades_are_not_held(text: str) -> None:
    assert held(text) == []


def test_a_caste_is_no_surname() -> None:
    """``{"caste": "Dalit"}`` became ``{"caste": "Keller"}``: Dalit read as a surname."""
    assert not [d for d in GEN.detect("Dalit") if d.surface == "Dalit"]
    assert not [d for d in GEN.detect("Mr. Dalit applied.") if d.surface == "Dalit"]
    probe = Probe(DecisionScorer(), generator=GEN, k=2, r=1, seed=0, bootstrap=0)
    result = probe.probe_sync(lambda _: "deny", {"caste": "Dalit"}, "deny", step_id="s")
    assert result.status == "unreadable" and "caste" in (result.reason or "")
