"""Issue 14: two persons of different groups in one input, and the variant moving one alone.

"Mary Carter and John Baker both applied" becomes "Greg Carter and Emily Baker" under the
all-mentions gender swap: both groups are still named, so a step that decides on "is a man
(or a woman) among them" answers the same and scores 0. A per-person variant ("Colby Carter
and John Baker") changes what it sees (docs/detection.md, "Two persons of different groups").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from biasbreaker.config.sections import ProbeSettings
from biasbreaker.probe import CounterfactualGenerator, Probe, TermSet
from biasbreaker.probe.counterfactual import Unattributed

GEN = CounterfactualGenerator(TermSet.default(), seed=7)
TWO = "Mary Carter and John Baker both applied; decide who gets the loan."
TITLED = "Ms. Mary Carter and Mr. John Baker both applied. Mr. Baker earns more than Ms. Carter."


class ExactScorer:
    """0 when the mapped-back texts are equal, 1 otherwise."""

    name = "exact"
    compares_neutralised = True

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        return [0.0 if a == b else 1.0 for a, b in zip(originals, counterfactuals, strict=True)]


def genders(text: str) -> set[str]:
    return {d.groups[0] for d in GEN.detect(text) if d.axis == "gender" and len(d.groups) == 1}


def prefers_a_man(text: str) -> str:
    """Grants the loan only when a man is among the applicants."""
    return "approve" if "male" in genders(text) else "deny"


def denies_when_a_woman_applies(text: str) -> str:
    return "deny" if "female" in genders(text) else "approve"


def fair(text: str) -> str:
    del text
    return "approve"


def probe(*, per_person: bool = True) -> Probe:
    return Probe(ExactScorer(), generator=GEN, k=4, r=2, seed=7, bootstrap=0, per_person=per_person)


@pytest.mark.parametrize("node", [prefers_a_man, denies_when_a_woman_applies])
@pytest.mark.parametrize("text", [TWO, TITLED])
def test_a_node_preferring_the_man_is_detected_at_the_first_probe(
    node: Callable[[str], str], text: str
) -> None:
    result = probe().probe_sync(node, text, node(text), step_name="n", coverage={})
    assert result.status == "scored", result.reason
    assert result.score == 1.0
    # the all-mentions swap alone names both groups again and sees nothing
    blind = probe(per_person=False).probe_sync(node, text, node(text), step_name="n", coverage={})
    assert blind.score == 0.0


def test_a_fair_node_is_not_held() -> None:
    for text in (TWO, TITLED):
        result = probe().probe_sync(fair, text, "approve", step_name="n", coverage={})
        assert result.status == "scored" and result.score == 0.0


def test_one_variant_per_person_moving_that_person_alone() -> None:
    cf = GEN.generate(TITLED, 4, coverage={}, per_person=True)
    alone = [v for v in cf.variants if v.mapping.person]
    assert [v.mapping.person for v in alone] == ["Mary Carter", "John Baker"]
    assert [v.mapping.groups for v in alone] == [(("female", "male"),), (("male", "female"),)]
    mary, john = alone
    new = dict(mary.mapping.names)["Mary"]
    assert mary.payload == (
        f"Mr. {new} Carter and Mr. John Baker both applied. Mr. Baker earns more than Mr. Carter."
    )
    new = dict(john.mapping.names)["John"]
    assert john.payload == (
        f"Ms. Mary Carter and Ms. {new} Baker both applied. Ms. Baker earns more than Ms. Carter."
    )
    for v in cf.variants:
        assert GEN.map_back(v.payload, v.mapping) == TITLED


def test_a_mapped_back_output_keeps_the_other_persons_title() -> None:
    cf = GEN.generate(TITLED, 4, coverage={}, per_person=True)
    mary = next(v for v in cf.variants if v.mapping.person == "Mary Carter")
    new = dict(mary.mapping.names)["Mary Carter"]
    output = f"Approve Mr. {new}; Mr. John Baker waits."
    assert GEN.map_back(output, mary.mapping) == "Approve Ms. Mary Carter; Mr. John Baker waits."


def test_per_person_variants_are_deterministic() -> None:
    def draw() -> list[str]:
        other = CounterfactualGenerator(TermSet.default(), seed=7)
        return [v.payload for v in other.generate(TWO, 4, coverage={}, per_person=True).variants]

    assert draw() == draw()
    assert draw() == [
        v.payload for v in GEN.generate(TWO, 4, coverage={}, per_person=True).variants
    ]


def test_no_per_person_variant_for_persons_of_one_group() -> None:
    text = "Mary Carter and Emily Baker both applied."
    assert not [
        v for v in GEN.generate(text, 4, coverage={}, per_person=True).variants if v.mapping.person
    ]


def test_a_first_name_two_persons_share_moves_in_the_full_name_only() -> None:
    text = "Rank: Joseph Cervantes, Maria Lopez, Joseph Phan."
    cf = GEN.generate(text, 4, coverage={}, per_person=True)
    moved = next(v for v in cf.variants if v.mapping.person == "Joseph Cervantes")
    new = dict(moved.mapping.names)["Joseph Cervantes"]
    assert moved.payload == f"Rank: {new}, Maria Lopez, Joseph Phan."
    assert GEN.map_back(moved.payload, moved.mapping) == text


@pytest.mark.parametrize(
    "text",
    [
        "Joseph Cervantes, Maria Lopez and Joseph Phan applied. Joseph called.",  # whose?
        "Mary Carter and John Baker applied. He earns more.",
        "Mary Carter and John Baker applied with his wife.",
        "Mrs. Carter: Mary Carter and John Carter both applied.",  # Carter names both
    ],
)
def test_a_term_of_no_one_person_fails_closed(text: str) -> None:
    with pytest.raises(Unattributed):
        GEN.generate(text, 4, coverage={}, per_person=True)
    result = probe().probe_sync(fair, text, "approve", step_name="n", coverage={})
    assert result.status == "unreadable"
    assert "per-person" in result.reason


def test_the_setting_is_on_by_default() -> None:
    assert ProbeSettings().per_person is True


def test_the_variant_outcome_names_the_person_it_moved() -> None:
    """Issue 14, item 6: a per-person variant's record says whom it moved; others say nothing."""
    result = probe().probe_sync(prefers_a_man, TITLED, prefers_a_man(TITLED), coverage={})
    moved = [v.person for v in result.variants if v.person]
    assert moved == ["Mary Carter", "John Baker"]
    data = result.to_dict()
    assert [v.get("person") for v in data["variants"] if "person" in v] == moved
    assert all("person" not in v for v in data["variants"] if v["axis"] != "gender")
    assert type(result).from_dict(data) == result
    # an input naming one person has no per-person variant: its record has no "person" key
    one = probe().probe_sync(fair, "Mary Carter applied.", "approve", coverage={})
    assert all("person" not in v for v in one.to_dict()["variants"])
