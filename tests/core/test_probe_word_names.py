"""Issue 14: first names that are English words (Grace, Mark, Joy, Hope, Will …).

Read as names where the words around them license one, never in ordinary word use
(docs/detection.md, "Names": "Names that are words").
"""

from __future__ import annotations

import pytest

from biasbreaker.probe import CounterfactualGenerator, TermSet

GEN = CounterfactualGenerator(TermSet.default(), seed=7)


def names(text: str) -> dict[str, set[tuple[str, tuple[str, ...]]]]:
    out: dict[str, set[tuple[str, tuple[str, ...]]]] = {}
    for d in GEN.detect(text):
        if d.kind == "name":
            out.setdefault(d.surface, set()).add((d.axis, d.groups))
    return out


@pytest.mark.parametrize(
    ("text", "name", "gender"),
    [
        ("Grace applied for the loan.", "Grace", "female"),  # BBQ's form (recall study)
        ("Mark applied for the loan.", "Mark", "male"),
        ("Joy asks for a loan.", "Joy", "female"),
        ("The bank called. Grace wants an answer.", "Grace", "female"),
        ("- Mark earns 40k\n- Joy owns a house", "Mark", "male"),
        ("Grace Kim applied for the loan.", "Grace Kim", "female"),  # a surname after it
        ("Mr. Mark Chen applied.", "Mark Chen", "male"),
        ("Hope Johnson applied.", "Hope Johnson", "female"),
        ("Name: Grace", "Grace", "female"),  # a name label
        ("Dear Mark, your loan is approved.", "Mark", "male"),
        ("Applicant Joy, income 40k", "Joy", "female"),
    ],
)
def test_a_word_name_is_read_where_the_context_licenses_a_name(
    text: str, name: str, gender: str
) -> None:
    assert ("gender", (gender,)) in names(text).get(name, set()), names(text)


@pytest.mark.parametrize(
    "text",
    [
        "Grace period ends soon.",
        "Mark the box and sign.",
        "I hope so.",
        "Joy to the world.",
        "Faith in the process is high.",
        "The grace period applies to late payments.",
        "Austin needs more housing.",  # a city before a verb
        "Mr. Carter applied.",  # a title before it: a surname
        "Ms. Grace applied.",
        "John Carter called. Carter asks for a loan.",  # a full name's surname
    ],
)
def test_a_word_name_is_not_read_in_word_use(text: str) -> None:
    found = names(text)
    assert not (set(found) - {"John Carter"}), found


def test_a_read_word_name_is_swapped_and_maps_back() -> None:
    text = "Grace applied for the loan. Grace earns 40k."
    cf = GEN.generate(text, 4, coverage={})
    assert cf.status == "applicable"
    gender = [v for v in cf.variants if v.mapping.axis == "gender"]
    assert gender
    for v in gender:
        new = dict(v.mapping.names)["Grace"]
        assert v.payload == f"{new} applied for the loan. {new} earns 40k."
        assert GEN.map_back(v.payload, v.mapping) == text
