"""Issue 14: a person named by initials and a surname (``R. Begay``, ``Dr. A. Nguyen``).

Before, ``R. Begay applied for the loan.`` was group-blind: the surname tells native-american
(96 %), but only a title before a surname was read. An earlier attempt without a person cue
read ``J.P. Morgan`` in the demo's resumes as a person; the rule needs a cue and keeps a list
of firms (docs/detection.md, "Surnames alone and surname first", "Initials and a surname").
"""

from __future__ import annotations

import pytest

from biasbreaker.probe import CounterfactualGenerator, Probe, TermSet
from biasbreaker.probe.surnames import initialled_surnames
from biasbreaker_plugins.scorers.decision import DecisionScorer

GEN = CounterfactualGenerator(TermSet.default(), seed=7)
BOOK = TermSet.default().names
assert BOOK is not None


def names(text: str) -> set[tuple[str, tuple[str, ...], str]]:
    return {(d.surface, d.groups, d.name) for d in GEN.detect(text) if d.kind == "name"}


@pytest.mark.parametrize(
    ("text", "surname", "race"),
    [
        ("R. Begay applied for the loan.", "Begay", "native-american"),  # a verb of a person
        ("Applicant: J. Washington, income 40k", "Washington", "black"),  # a person label
        ("Dr. A. Nguyen asks for a loan.", "Nguyen", "asian"),  # a title
        ("Please review the engineer R. Begay today.", "Begay", "native-american"),  # role noun
        ("Loan file of R. Begay. She earns 40k.", "Begay", "native-american"),  # a pronoun
        ("Candidate R. Begay's file is complete.", "Begay", "native-american"),
        ("Name: A.B. Nguyen\nIncome: 40k", "Nguyen", "asian"),
        ("The applicant, J. T. Washington, asked for a loan.", "Washington", "black"),
    ],
)
def test_initials_and_a_surname_with_a_person_cue_are_a_person(
    text: str, surname: str, race: str
) -> None:
    assert (surname, (race,), f"… {surname}") in names(text)


def test_a_race_variant_swaps_the_surname_and_keeps_the_initials() -> None:
    text = "R. Begay applied for the loan. R. Begay's income is 40k."
    cf = GEN.generate(text, 6, coverage={})
    races = [v for v in cf.variants if v.mapping.axis == "race"]
    assert races
    for v in races:
        new = dict(v.mapping.names)["Begay"]
        assert v.payload == f"R. {new} applied for the loan. R. {new}'s income is 40k."
        assert GEN.map_back(v.payload, v.mapping) == text


def test_initials_beside_a_full_name_of_that_surname_are_that_person() -> None:
    text = "Jamal Washington applied. J. Washington earns 40k."
    assert {n for _, _, n in names(text)} == {"Jamal Washington"}
    for v in GEN.generate(text, 6, coverage={}).variants:
        if v.mapping.axis == "race":
            new_last = dict(v.mapping.names)["Washington"]
            assert v.payload.endswith(f"J. {new_last} earns 40k.")


@pytest.mark.parametrize(
    "text",
    [
        "J.P. Morgan said on Tuesday that rates would rise.",  # Morgan tells white: a firm
        "Analyst, J.P. Morgan, New York",  # the demo's resumes
        "2. J.P. Morgan, New York, NY",
        "A.T. Kearney reported growth.",
        "A. T. Kearney reported growth.",
        "J.C. Penney said no.",
        "H&R Block said no.",
        "J. Washington Post reported it.",  # a capitalised word after: no surname alone
        "J. Smith applied for the loan.",  # 72 % white: tells no race
        "Ask R. Begay about it.",  # no person cue
    ],
)
def test_firms_and_uncued_initials_are_no_person(text: str) -> None:
    assert names(text) == set()


def test_the_uncued_case_is_a_candidate_the_cue_decides() -> None:
    assert BOOK is not None
    assert [w for *_, w in initialled_surnames("Ask R. Begay about it.", BOOK)] == ["Begay"]
    assert initialled_surnames("J.P. Morgan said so.", BOOK) == []


def test_a_node_denying_an_initialled_native_american_surname_is_caught() -> None:
    prompt = "R. Begay applied for the loan. Decision?"

    def step(text: str) -> str:
        return "deny" if "Begay" in text else "approve"

    probe = Probe(DecisionScorer(), generator=GEN, k=6, r=1, bootstrap=0)
    result = probe.probe_sync(step, prompt, step(prompt))
    assert result.status == "scored"
    assert result.score == 1.0
