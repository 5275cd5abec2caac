"""Issue 14 (a newcomer trial's fail-open): names in name fields and lone labelled first names.

Before, a first name with no surname beside it in the same string was found group-blind:
``{"first_name": "Siobhan", "last_name": "O'Brien"}``, ``{"Name": "Siobhan", "Surname":
"O'Brien"}``, ``{"applicant_name": "Aaliyah"}`` and ``"Applicant Mei, income 85k"`` were "not
applicable", and a node denying them passed unprobed. So were ``"Mei L. Nguyen"`` (a middle
initial) and ``"O'Brien, Siobhan"`` (surname first, in a name field).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from biasbreaker.probe import CounterfactualGenerator, Probe, TermSet
from biasbreaker.probe.name_fields import field_names, name_role
from biasbreaker_plugins.scorers.decision import DecisionScorer

GEN = CounterfactualGenerator(seed=0)
BOOK = TermSet.default().names
assert BOOK is not None


@pytest.mark.parametrize(
    ("key", "role"),
    [
        ("first_name", ((), "first")),
        ("firstName", ((), "first")),
        ("FIRST_NAME", ((), "first")),
        ("applicant_first_name", (("applicant",), "first")),
        ("given_names", ((), "first")),
        ("forename", ((), "first")),
        ("Vorname", ((), "first")),
        ("last_name", ((), "last")),
        ("Surname", ((), "last")),
        ("familyName", ((), "last")),
        ("Name", ((), "full")),
        ("full_name", ((), "full")),
        ("applicant_name", (("applicant",), "full")),
        ("spouse_full_name", (("spouse",), "full")),
        ("first", ((), "paired-first")),
        ("last", ((), "paired-last")),
        ("company_name", None),
        ("file_name", None),
        ("product_name", None),
        ("username", None),
        ("name_id", None),
        ("first_seen", None),
        ("nickname", None),
    ],
)
def test_which_keys_hold_a_name(key: str, role: Any) -> None:
    assert name_role(key) == role


@pytest.mark.parametrize(
    ("payload", "name", "surfaces", "gender", "race"),
    [
        (
            {"application": {"first_name": "Siobhan", "last_name": "O'Brien", "income": 85000}},
            "Siobhan O'Brien",
            ["Siobhan", "O'Brien"],
            "female",
            "white",
        ),
        ({"Name": "Siobhan", "Surname": "O'Brien"}, "Siobhan O'Brien", ["Siobhan", "O'Brien"],
         "female", "white"),
        ({"name": {"first": "Mei", "last": "Nguyen"}}, "Mei Nguyen", ["Mei", "Nguyen"],
         "female", "asian"),
        ({"applicant_name": "Aaliyah"}, "Aaliyah", ["Aaliyah"], "female", None),
        ({"first_name": "Mei"}, "Mei", ["Mei"], "female", "asian"),
        ({"name": "Mei L. Nguyen"}, "Mei Nguyen", ["Mei", "Nguyen"], "female", "asian"),
        ({"name": "Dr. Mei Nguyen Jr."}, "Mei Nguyen", ["Mei", "Nguyen"], "female", "asian"),
        ({"name": "O'Brien, Siobhan"}, "Siobhan O'Brien", ["Siobhan", "O'Brien"], "female",
         "white"),
        ({"name": "NGUYEN, Mei L."}, "Mei NGUYEN", ["Mei", "NGUYEN"], "female", "asian"),
        # a pair that is no person: the first name alone is read
        ({"first_name": "Mei", "last_name": "Qzxv"}, "Mei", ["Mei"], "female", "asian"),
    ],
)  # fmt: skip
def test_a_name_field_is_read_as_a_name(
    payload: Any, name: str, surfaces: list[str], gender: str | None, race: str | None
) -> None:
    assert BOOK is not None
    (reading,) = field_names(payload, BOOK)
    assert reading.name == name
    assert [s.surface for s in reading.spans] == surfaces
    assert (reading.info.gender, reading.info.race) == (gender, race)
    for span in reading.spans:  # each span is where its word is
        value: Any = payload
        for part in span.path:
            value = value[part]
        assert value[span.start : span.end] == span.surface


@pytest.mark.parametrize(
    "payload",
    [
        {"company_name": "Mei"},
        {"product_name": "Grace Hopper"},
        {"first_name": "Qzxv"},
        {"first_name": "R2D2"},
        {"name": "Siobhan, O'Brien, Mei"},
        {"name": "<b>Mei</b>"},
        {"first": "mei"},  # 'first' alone: read only capitalised (a name, not a word)
        {"last": "yazzie"},
        {"applicant": "pending"},  # a person key holds a name only when capitalised
        {"first_name": 7},
    ],
)
def test_what_is_no_name_field(payload: Any) -> None:
    assert BOOK is not None
    assert list(field_names(payload, BOOK)) == []


def test_a_name_the_text_scan_reads_is_not_read_twice() -> None:
    payload = {"name": "Jamal Washington", "note": "met Mr. Washington"}
    found = GEN.detect(payload)
    names = [(d.path, d.surface, d.axis) for d in found if d.kind == "name"]
    assert names == [(("name",), "Jamal Washington", "gender"),
                     (("name",), "Jamal Washington", "race")]  # fmt: skip


def _field_variants(payload: Any) -> list[Any]:
    cs = GEN.generate(payload, 8)
    assert cs.status == "applicable", cs.reason
    for v in cs.variants:  # every variant maps back exactly
        assert GEN.map_back(v.payload, v.mapping) == payload
    return list(cs.variants)


def test_a_race_swap_changes_both_fields_and_a_gender_swap_the_first_name_only() -> None:
    payload = {"first_name": "Siobhan", "last_name": "O'Brien", "income": 85000}
    variants = _field_variants(payload)
    race = [v.payload for v in variants if v.mapping.axis == "race"]
    gender = [v.payload for v in variants if v.mapping.axis == "gender"]
    assert race and gender
    for p in race:
        assert p["first_name"] != "Siobhan" and p["last_name"] != "O'Brien"
        assert p["income"] == 85000
    for p in gender:
        assert p["first_name"] != "Siobhan" and p["last_name"] == "O'Brien"


def test_a_surname_first_value_keeps_its_order_and_its_case() -> None:
    variants = _field_variants({"name": "NGUYEN, Mei L."})
    for v in variants:
        last, _, rest = v.payload["name"].partition(", ")
        assert last.isupper() and rest.endswith(" L.")
        if v.mapping.axis == "gender":
            assert last == "NGUYEN"


def test_a_later_mention_in_text_follows_the_field() -> None:
    payload = {"first_name": "Siobhan", "last_name": "O'Brien", "note": "Ms. O'Brien called."}
    race = [v for v in _field_variants(payload) if v.mapping.axis == "race"]
    assert race
    for v in race:
        assert v.payload["note"] == f"Ms. {v.payload['last_name']} called."


def _denies(name: str) -> Callable[..., str]:
    def step(payload: Any, sample: int = 0) -> str:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        return "Decision: deny" if name in text else "Decision: approve"

    return step


@pytest.mark.parametrize(
    ("payload", "name"),
    [
        ({"application": {"first_name": "Siobhan", "last_name": "O'Brien", "income": 85000}},
         "Siobhan"),
        ({"Name": "Siobhan", "Surname": "O'Brien"}, "Siobhan"),
        ({"applicant_name": "Aaliyah"}, "Aaliyah"),
        ("Applicant Mei, income 85k", "Mei"),
        ("A patient named Aaliyah was seen today.", "Aaliyah"),
        ("Mei L. Nguyen applies for a loan.", "Mei"),
        ({"name": "O'Brien, Siobhan", "income": 85000}, "Siobhan"),
    ],
)  # fmt: skip
def test_a_node_denying_a_name_in_a_field_or_after_a_label_is_caught(
    payload: Any, name: str
) -> None:
    step = _denies(name)
    probe = Probe(DecisionScorer(), generator=GEN, k=4, r=2, seed=0, bootstrap=0)
    result = probe.probe_sync(step, payload, step(payload))
    assert result.status == "scored", result.reason  # was not_applicable: it failed open
    assert result.score == 1.0


def test_a_lower_case_name_field_is_held_never_passed() -> None:
    """The rewrite swaps capitalised words only: no variant, so the step is held."""
    step = _denies("mei")
    probe = Probe(DecisionScorer(), generator=GEN, k=4, r=2, seed=0, bootstrap=0)
    payload = {"first_name": "mei", "income": 85000}
    result = probe.probe_sync(step, payload, step(payload))
    assert result.status == "unreadable"
    assert "'mei'" in result.reason


@pytest.mark.parametrize(
    "text",
    [
        "Customer Service called back.",
        "Applicant Tracking System v2",
        "Patient Care Unit",
        "Name: Acme Widget",
        "J. R. Smith",  # initials only
        "Washington D. C. is big",
        "the applicant mei is here",  # lower-case: no capitalised name after the label
    ],
)
def test_no_name_after_a_label_or_around_an_initial(text: str) -> None:
    assert [d for d in GEN.detect(text) if d.kind == "name"] == []


@pytest.mark.parametrize("text", ["Ask Mary. Carter applied.", "Mary/Carter applied."])
def test_a_first_name_and_a_surname_across_punctuation_are_no_person(text: str) -> None:
    """Only white space joins a first name and a surname into one person (a mutant letting
    any gap through had survived). ``Carter`` opening its sentence before a verb of a person
    is read alone (a word-name, docs/detection.md "Names that are words"), never joined."""
    found = {d.name for d in GEN.detect(text) if d.kind == "name"}
    assert "Mary" in found and "Mary Carter" not in found and found <= {"Mary", "Carter"}


@pytest.mark.parametrize("text", ["Mary IT. Carter applies.", "Mary a. Carter applies."])
def test_a_middle_initial_is_one_capital_letter(text: str) -> None:
    """Only one capital letter between a first name and a surname makes one person of them:
    an upper-case word ("IT.") or a lower-case letter ("a.") does not (both mutants had survived).
    ``Carter applies`` is then a sentence of its own, its word-name read alone."""
    found = {d.name for d in GEN.detect(text) if d.kind == "name"}
    assert "Mary" in found and "Mary Carter" not in found and found <= {"Mary", "Carter"}


def test_a_labelled_name_and_a_middle_initial_are_swapped_and_mapped_back() -> None:
    for text in ("Applicant Mei, income 85k", "Mei L. Nguyen applies."):
        cs = GEN.generate(text, 8)
        assert cs.status == "applicable", cs.reason
        for v in cs.variants:
            assert v.payload != text
            assert GEN.map_back(v.payload, v.mapping) == text
        if "L." in text:
            assert all(" L. " in v.payload for v in cs.variants)


def test_a_name_in_a_json_string_is_read_and_swapped_in_the_string() -> None:
    """A tool's result: '{"first_name": "Siobhan", "last_name": "O'Brien"}' was group-blind."""
    payload = {"tool": json.dumps({"first_name": "Siobhan", "last_name": "O'Brien"})}
    assert BOOK is not None
    (reading,) = field_names(payload, BOOK)
    assert reading.name == "Siobhan O'Brien"
    for span in reading.spans:  # placed in the string itself
        assert span.path == ("tool",)
        assert payload["tool"][span.start : span.end] == span.surface
    race = [v for v in _field_variants(payload) if v.mapping.axis == "race"]
    assert race
    for v in race:
        swapped = json.loads(v.payload["tool"])
        assert swapped["first_name"] != "Siobhan" and swapped["last_name"] != "O'Brien"


def test_a_name_escaped_in_a_json_string_is_held_never_passed() -> None:
    payload = json.dumps({"name": "José Núñez"})  # written \u00e9: the rewrite cannot swap it
    step = _denies("\\u00e9")
    probe = Probe(DecisionScorer(), generator=GEN, k=4, r=2, seed=0, bootstrap=0)
    result = probe.probe_sync(step, payload, step(payload))
    assert result.status == "unreadable"
