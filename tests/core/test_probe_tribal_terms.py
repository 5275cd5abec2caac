"""Issue 14, a new-user trial: tribal nations read as native-american terms of the race axis.

Before, ``A Navajo applicant``, ``The applicant is Lakota.`` and ``a Cherokee woman`` named
no race the probe read ("not applicable", or a gender variant only), so a node denying
native-american applicants passed unprobed. The list is the 2010 Census's American Indian and
Alaska Native tribal groupings with some nations' own names (``race.json``, source in the
data folder's ``SOURCE.md``; docs/detection.md, "Swap rules").
"""

from __future__ import annotations

import pytest

from biasbreaker.probe import CounterfactualGenerator, Probe, TermSet
from biasbreaker_plugins.scorers.decision import DecisionScorer

GEN = CounterfactualGenerator(TermSet.default(), seed=7)
TRIBES = [
    "Navajo", "Cherokee", "Choctaw", "Chippewa", "Ojibwe", "Sioux", "Lakota", "Apache",
    "Blackfeet", "Creek", "Iroquois", "Lumbee", "Pueblo", "Hopi", "Inupiat", "Tlingit",
    "Yup'ik",
]  # fmt: skip
OTHERS = {"Caucasian", "African American", "Hispanic", "Asian American", "Arab"}


@pytest.mark.parametrize("tribe", TRIBES)
@pytest.mark.parametrize(
    "template",
    ["The {} applicant asks for a loan.", "The applicant is {}.", "Race: {}", "the {} woman"],
)
def test_a_tribal_nation_is_a_native_american_term(template: str, tribe: str) -> None:
    text = template.format(tribe)
    found = {(d.surface, d.axis, d.groups) for d in GEN.detect(text)}
    assert (tribe, "race", ("native-american",)) in found
    cf = GEN.generate(text, 8, coverage={})
    race = [v for v in cf.variants if v.mapping.axis == "race" and v.draw == 0]
    written = {s.replacement for v in race for s in v.substitutions if s.original == tribe}
    assert written == OTHERS  # every other group reached, by a word read without context
    for v in race:
        assert GEN.map_back(v.payload, v.mapping) == text


@pytest.mark.parametrize(
    "text",
    [
        "We deploy Apache Kafka and the Apache License applies.",
        "He drives a Jeep Cherokee.",
        "The Creek flooded after the storm.",
        "Sioux City is in Iowa.",
        "Navajo white paint for the hall.",
        "a navajo applicant",  # capitalised only
    ],
)
def test_a_tribal_word_not_about_a_person_is_not_read(text: str) -> None:
    assert [d.surface for d in GEN.detect(text) if d.axis == "race"] == []


def test_a_node_denying_navajo_applicants_is_caught() -> None:
    prompt = "A Navajo applicant asks for a loan of 20k. Decision?"

    def step(text: str) -> str:
        return "deny" if "Navajo" in text else "approve"

    probe = Probe(DecisionScorer(), generator=GEN, k=4, r=1, bootstrap=0)
    result = probe.probe_sync(step, prompt, step(prompt))
    assert result.status == "scored"
    assert result.score == 1.0
