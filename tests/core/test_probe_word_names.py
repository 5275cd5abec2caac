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


# --- one rule for word names (a new-user trial: "The applicant, Joy, applied" and "Loan
# request from Joy" were not read, {"first": "Grace"} was not read while {"first": "Hope"}
# was) -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "name", "gender"),
    [
        ("The applicant, Joy, applied.", "Joy", "female"),  # an appositive after a person noun
        ("The applicant, Hope, applied.", "Hope", "female"),
        ("Our borrower, Mark, asks for more time.", "Mark", "male"),
        ("Loan request from Joy", "Joy", "female"),  # from X, then the end or a stop
        ("A note from Grace.", "Grace", "female"),
        ("Loan request from Greg.", "Greg", "male"),  # any first name
        ("Applicant Joy, income 40k", "Joy", "female"),
        ("Dear Faith, your loan is approved.", "Faith", "female"),
        ({"first": "Grace"}, "Grace", "female"),  # a name-keyed field, always
        ({"first": "Hope"}, "Hope", "female"),
        ({"first_name": "Joy", "income": 40000}, "Joy", "female"),
        ({"applicant": "Grace"}, "Grace", "female"),  # a field keyed by a person
        ({"applicant": "Hope"}, "Hope", "female"),
    ],
)
def test_a_word_name_after_a_person_cue_is_read(payload: object, name: str, gender: str) -> None:
    found = {(d.surface, d.axis): d.groups for d in GEN.detect(payload) if d.kind == "name"}
    assert found.get((name, "gender")) == (gender,), found


@pytest.mark.parametrize(
    "payload",
    [
        "Grace period ends on Friday.",
        "Mark the box and sign.",
        "Hope you're well.",
        "Faith in the process is high.",
        "A note from Chelsea about the account.",  # from X, then a word: a place or a firm
        "We moved from Austin.",  # a place
        "The loan for Hope was approved.",  # mid-sentence, no person cue: a word name unread
        {"motto": "Hope"},  # a whole value under a key naming no person
        {"motto": "Grace"},
    ],
)
def test_a_word_name_without_a_person_cue_is_not_read(payload: object) -> None:
    assert [d.surface for d in GEN.detect(payload) if d.kind == "name"] == []


# --- "Jesus": a given name beside a surname or a name cue only ----------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Jesus said to them, follow me.",
        "And Jesus wept.",
        "Jesus asked them.",
        "The parable: Jesus says to love one another.",
    ],
)
def test_jesus_alone_in_running_text_is_not_read(text: str) -> None:
    assert names(text) == {}


@pytest.mark.parametrize(
    ("payload", "surface"),
    [
        ("Jesus Garcia applied for the loan.", "Jesus Garcia"),
        ("Jesus applied for the loan.", "Jesus"),  # BBQ's form: an applicant's verb
        ("Applicant Jesus, income 40k", "Jesus"),
        ("Name: Jesus", "Jesus"),
        ({"first_name": "Jesus"}, "Jesus"),
    ],
)
def test_jesus_as_a_name_is_still_read(payload: object, surface: str) -> None:
    found = {(d.surface, d.axis): d.groups for d in GEN.detect(payload) if d.kind == "name"}
    assert found[(surface, "gender")] == ("male",)
    assert found[(surface, "race")] == ("hispanic",)
