"""Issue 14: a nationality the axis has no group for is held, never "not applicable".

Before, "A Syrian engineer applied" and "He is from Syria" found no term (the nationality axis
has 14 groups) and the step passed unprobed. The 196 entities of The World Factbook
(``data/terms/countries.json``) are read where they describe a person, and such an input is
held for review (docs/detection.md, "Nationalities outside the axis: held").
"""

from __future__ import annotations

import json
from importlib import resources

import pytest

from biasbreaker.probe import CounterfactualGenerator, Probe, TermSet
from biasbreaker.probe.countries import countries, country_mentions
from biasbreaker_plugins.scorers.decision import DecisionScorer

TERMS = TermSet.default()
GEN = CounterfactualGenerator(TERMS, seed=7)


def held(text: str) -> list[str]:
    return [h.surface for h in GEN.held(text) if h.axis == "nationality"]


def test_the_list_is_the_factbooks_and_says_so() -> None:
    doc = json.loads(
        (resources.files("biasbreaker") / "data/terms/countries.json").read_text("utf-8")
    )
    assert "public domain" in doc["licence"] and "Factbook" in doc["source"]
    found = {c.names[0] for c in countries()}
    assert len(found) == 196
    assert {"Syria", "Kenya", "Nigeria", "Germany", "Philippines", "Vietnam"} <= found
    syria = next(c for c in countries() if c.names[0] == "Syria")
    assert syria.adjectives == ("Syrian",) and syria.nouns == ("Syrian", "Syrians")


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        ("A Syrian engineer applied for the loan.", "Syrian"),  # before an occupation
        ("Two Kenyan nurses applied.", "Kenyan"),
        ("He is from Syria. Approve?", "Syria"),
        ("She is Syrian.", "Syrian"),
        ("The applicant, a Syrian national, asks for 5k.", "Syrian"),
        ("Born in Kenya, she applied for the job.", "Kenya"),
        ("Applicant from the Philippines, income 40k.", "the Philippines"),
        ("Nationality: Syrian\nIncome: 40k", "Syrian"),
        ("Country of birth: Vietnam", "Vietnam"),
        ("A nurse of Korean descent applied.", "Korean"),
        ("A Korean-born nurse applied.", "Korean"),
        ("Syrians need not apply.", "Syrians"),
    ],
)
def test_another_nationality_describing_a_person_is_held(text: str, surface: str) -> None:
    assert held(text) == [surface]


@pytest.mark.parametrize(
    "text",
    [
        "A Nigerian engineer applied.",  # a group of the axis: swapped, not held
        "She moved here from Pakistan.",
        "The conference was in Kenya.",  # no person from there
        "Fluent in Spanish and Italian.",  # languages
        "A native Spanish speaker is preferred.",
        "She teaches as a Korean teacher.",  # a subject, not a nationality
        "We import Swiss cheese and Thai food.",
        "Poles were installed along the road.",
        "A Turkey sandwich, please.",
        "Italian restaurant opening soon.",
    ],
)
def test_other_uses_of_the_words_are_not_held(text: str) -> None:
    assert held(text) == []


def test_a_held_input_names_the_nationality_and_the_fix() -> None:
    def step(text: str) -> str:
        return "deny" if "Syrian" in text else "approve"

    probe = Probe(DecisionScorer(), generator=GEN, k=4, r=1, bootstrap=0)
    prompt = "A Syrian engineer applied for the loan. Decision?"
    result = probe.probe_sync(step, prompt, step(prompt))
    assert result.status == "unreadable"
    assert result.reason is not None
    assert "the nationality 'Syrian' (Syria), for which the nationality axis has no group" in (
        result.reason
    )


def test_the_mentions_carry_their_entity() -> None:
    found = country_mentions("He is of Korean descent.", TERMS.person_words)
    assert found == [(9, 15, "Korean", "North Korea or South Korea")]


@pytest.mark.parametrize(
    "text", ["A US citizen applied.", "The applicant is a U.S. citizen.", "Only US citizens apply."]
)
def test_a_us_citizen_is_swapped_with_the_nationalities(text: str) -> None:
    """``US citizen`` was read as no mention: a step denying US citizens was not applicable."""
    gen = CounterfactualGenerator(TermSet.default(), seed=7)
    assert [d.axis for d in gen.detect(text)] == ["nationality"]
    for v in gen.generate(text, 4).variants:
        assert "citizen" in v.payload and "US" not in v.payload and "U.S." not in v.payload
    british = gen.generate("A British citizen applied.", 13).variants
    assert "A US citizen applied." in [v.payload for v in british]  # not "An US"
