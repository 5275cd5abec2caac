"""Issue 14: cues the probe reads but cannot vary are held or unsupported, never passed.

Before: "He lives with his husband." was probed on gender only ("She lives with her wife.",
the orientation kept), "A trans woman applied" became "A trans man applied" (a gender
identity swapped as if it were a sex), and "Elle a 67 ans." (French, p = 0.09) was *not
applicable* (docs/detection.md, "What the probe cannot swap" and "Languages").
"""

from __future__ import annotations

import pytest

from biasbreaker.probe import CounterfactualGenerator, Probe, TermSet
from biasbreaker_plugins.scorers.decision import DecisionScorer

GEN = CounterfactualGenerator(TermSet.default(), seed=7)


def held(text: str) -> list[tuple[str, str]]:
    return [(h.axis, h.surface) for h in GEN.held(text)]


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        ("He lives with his husband.", "his husband"),
        ("She and her wife applied for the loan.", "her wife"),
        ("He moved in with his boyfriend.", "his boyfriend"),
        ("Her girlfriend co-signs the loan.", "Her girlfriend"),
    ],
)
def test_a_same_sex_spouse_is_held_on_the_orientation_axis(text: str, surface: str) -> None:
    assert held(text) == [("sexual-orientation", surface)]


def test_the_spouse_cue_is_the_orientation_axis_s_only() -> None:
    only_gender = CounterfactualGenerator(TermSet.load(axes=["gender"]), seed=7)
    assert only_gender.held("He lives with his husband.") == ()


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        ("A trans woman applied for the loan.", "trans woman"),
        ("The trans man asks for a raise.", "trans man"),
        ("He is a transwoman.", "transwoman"),
        ("She is trans.", "trans"),
        ("Applicant: MtF, 34", "MtF"),
    ],
)
def test_a_trans_identity_is_held_like_transgender(text: str, surface: str) -> None:
    assert ("gender", surface) in held(text)


@pytest.mark.parametrize(
    "text",
    [
        "He met his wife in 1990.",
        "My husband and I applied.",  # the speaker's gender is unknown
        "Her husband co-signs.",
        "Trans fats are bad for you.",
        "The trans-Atlantic flight left.",
        "The translation is done.",
    ],
)
def test_ordinary_spouses_and_words_are_not_held(text: str) -> None:
    assert held(text) == []


@pytest.mark.parametrize(
    ("text", "age"),
    [
        ("Elle a 67 ans.", "67 ans"),
        ({"note": "Client, 67 ans"}, "67 ans"),
        ("Cliente 67 anni", "67 anni"),  # it at p = 0.30
        ("Klant, 67 jaar", "67 jaar"),  # nl at p = 0.09
    ],
)
def test_an_age_in_another_language_is_unsupported_not_inapplicable(text: object, age: str) -> None:
    pytest.importorskip("py3langid")
    probe = Probe(DecisionScorer(), generator=GEN, k=4, r=1, bootstrap=0)
    result = probe.probe_sync(lambda x: "approve", text, "approve")
    assert result.status == "unsupported_language"
    assert f"writes an age in another language ({age!r})" in (result.reason or "")


def test_an_english_number_of_years_stays_english() -> None:
    pytest.importorskip("py3langid")
    probe = Probe(DecisionScorer(), generator=GEN, k=4, r=1, bootstrap=0)
    for text in ("I paid 20 an hour.", "The loan term is 30 years."):
        assert probe.probe_sync(lambda x: "ok", text, "ok").status == "not_applicable"
