"""Issue 14, a new-user trial's last fail-opens: persons named by a surname alone, or surname first.

Before, ``Mr. Yazzie applied`` was swapped on the title only (the census surname, 96 %
native-american, kept in every variant), ``Yazzie, Darlene`` was read as ``Darlene`` alone
(87 % white: a half swap, the surname kept), and ``{"last": "Yazzie"}`` or ``{"surname":
"Washington"}`` was not read at all (docs/detection.md, "Names": "Surnames alone and surname
first").
"""

from __future__ import annotations

from typing import Any

import pytest

from biasbreaker.probe import CounterfactualGenerator, Probe, TermSet
from biasbreaker.probe.surnames import key_surname, surname_key, surname_race
from biasbreaker_plugins.scorers.decision import DecisionScorer

GEN = CounterfactualGenerator(TermSet.default(), seed=7)
BOOK = TermSet.default().names
assert BOOK is not None


def reads(payload: Any) -> set[tuple[str, str, tuple[str, ...]]]:
    return {(d.surface, d.axis, d.groups) for d in GEN.detect(payload) if d.kind == "name"}


def race_variants(payload: Any) -> list[Any]:
    cf = GEN.generate(payload, 6, coverage={})
    assert cf.status == "applicable", cf.reason
    out = [v for v in cf.variants if v.mapping.axis == "race"]
    assert out
    return out


def test_a_surname_key_is_no_first_name() -> None:
    assert surname_key("Yazzie") == "… Yazzie"
    assert key_surname("… Yazzie") == "Yazzie"
    assert key_surname("Darlene Yazzie") is None
    assert key_surname("Yazzie") is None


@pytest.mark.parametrize(
    ("surname", "race"),
    [
        ("Yazzie", "native-american"),  # 96 %
        ("Begay", "native-american"),
        ("Washington", "black"),  # 91 %, an English place word of names.json: a surname here
        ("Nguyen", "asian"),
        ("Garcia", "hispanic"),
        ("Li", "asian"),  # two letters: a surname
        ("Le", "asian"),  # also a place prefix (Le Mans), read after a title all the same
        ("Smith", None),  # 72 % white: below 75 %
        ("Park", None),  # a place word
        ("Qzxv", None),
    ],
)
def test_what_a_surname_alone_tells(surname: str, race: str | None) -> None:
    assert BOOK is not None
    assert surname_race(surname, BOOK) == race


# --- 1. a title and a surname -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "surname", "race"),
    [
        ("Mr. Yazzie applied for the loan.", "Yazzie", "native-american"),
        ("Ms. Yazzie applied", "Yazzie", "native-american"),
        ("Loan file of Dr. Begay's household.", "Begay", "native-american"),
        ("Mrs. Washington asks for a loan.", "Washington", "black"),
    ],
)
def test_a_title_and_a_surname_that_tells_a_race_is_a_person(
    text: str, surname: str, race: str
) -> None:
    assert (surname, "race", (race,)) in reads(text)
    for v in race_variants(text):
        new = dict(v.mapping.names)[surname]
        assert surname not in v.payload and new in v.payload
        assert GEN.map_back(v.payload, v.mapping) == text


def test_a_title_before_a_full_name_or_a_weak_surname_adds_no_person() -> None:
    assert reads("Mr. Greg Baker applied.") == {
        ("Greg Baker", "gender", ("male",)),
        ("Greg Baker", "race", ("white",)),
    }
    assert reads("Ms. Smith applied.") == set()  # Smith tells no race


def test_a_titled_surname_a_full_name_carries_is_that_person() -> None:
    text = "Jamal Washington applied. Mr. Washington earns 40k."
    assert {s for s, _, _ in reads(text)} == {"Jamal Washington"}
    for v in race_variants(text):
        first, last = dict(v.mapping.names)["Jamal Washington"].split()
        assert v.payload == f"{first} {last} applied. Mr. {last} earns 40k."


def test_a_node_denying_a_titled_native_american_surname_is_caught() -> None:
    """The fail-open: "Mr. Yazzie" was swapped on gender only, so this node scored 0."""
    prompt = "Mr. Yazzie applied for the loan. Decision?"

    def step(text: str) -> str:
        return "deny" if "Yazzie" in text else "approve"

    probe = Probe(DecisionScorer(), generator=GEN, k=6, r=1, bootstrap=0)
    result = probe.probe_sync(step, prompt, step(prompt))
    assert result.status == "scored"
    assert result.score == 1.0


# --- 2. surname first, with a comma -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "first", "last", "gender", "race"),
    [
        ("Yazzie, Darlene applied for the loan.", "Darlene", "Yazzie", "female",
         "native-american"),
        ("Washington, Jamal applied for the loan.", "Jamal", "Washington", "male", "black"),
        ("Name: Yazzie, Darlene\nIncome: 40k", "Darlene", "Yazzie", "female",
         "native-american"),
    ],
)  # fmt: skip
def test_a_name_written_surname_first_is_read_and_swapped_whole(
    text: str, first: str, last: str, gender: str, race: str
) -> None:
    surface = f"{last}, {first}"
    assert reads(text) >= {(surface, "gender", (gender,)), (surface, "race", (race,))}
    for v in race_variants(text):
        names = dict(v.mapping.names)
        new_first, new_last = names[first], names[last]
        assert f"{new_last}, {new_first}" in v.payload  # both words moved: no half swap
        assert GEN.map_back(v.payload, v.mapping) == text
    cf = GEN.generate(text, 6, coverage={})
    for v in cf.variants:
        if v.mapping.axis == "gender":
            assert f"{last}, {dict(v.mapping.names)[first]}" in v.payload  # the surname stays


@pytest.mark.parametrize(
    "text",
    [
        "However, Mark asked for a delay.",
        "Hopi, Zuni, Navajo and Cherokee lands.",
        "Thanks, Mary",
        "CARTER, MARY",  # capitals: a residual form, read only beside the name it repeats
    ],
)
def test_a_comma_pair_that_is_no_surname_first_name_is_not_read_so(text: str) -> None:
    assert not any("," in s for s, _, _ in reads(text))


# --- 3. surname fields ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "surname", "race"),
    [
        ({"last": "Yazzie"}, "Yazzie", "native-american"),
        ({"surname": "Washington"}, "Washington", "black"),
        ({"last_name": "Yazzie", "income": 40000}, "Yazzie", "native-american"),
        ({"family_name": "Begay"}, "Begay", "native-american"),
        ({"applicant": {"last_name": "Nguyen"}}, "Nguyen", "asian"),
    ],
)
def test_a_surname_field_alone_is_read_and_swapped(
    payload: dict[str, Any], surname: str, race: str
) -> None:
    assert reads(payload) == {(surname, "race", (race,))}
    for v in race_variants(payload):
        assert surname not in str(v.payload)
        assert dict(v.mapping.names)[surname] in str(v.payload)
        assert GEN.map_back(v.payload, v.mapping) == payload


@pytest.mark.parametrize(
    "payload",
    [
        {"applicant_first_name": "Darlene", "surname": "Yazzie"},
        {"first": "Darlene", "family_name": "Yazzie"},
        {"first_name": "Darlene", "last": "Yazzie"},
    ],
)
def test_a_lone_surname_field_beside_a_first_name_field_is_one_person(
    payload: dict[str, str],
) -> None:
    assert {(s, a) for s, a, _ in reads(payload)} == {
        ("Darlene", "gender"),
        ("Darlene", "race"),
        ("Yazzie", "gender"),
        ("Yazzie", "race"),
    }
    assert ("Yazzie", "race", ("native-american",)) in reads(payload)
    for v in race_variants(payload):
        names = dict(v.mapping.names)
        assert set(v.payload.values()) == {names["Darlene"], names["Yazzie"]}
        assert GEN.map_back(v.payload, v.mapping) == payload


def test_two_persons_by_surname_get_a_per_person_race_variant_each() -> None:
    """``Mr. Yazzie`` and ``Mr. Nguyen``: the person named is on the variant's record."""
    text = "Mr. Yazzie and Mr. Nguyen applied. Approve one."
    cf = GEN.generate(text, 6, coverage={}, per_person=True)
    moved = {v.mapping.person for v in cf.variants if v.mapping.person}
    assert moved <= {"… Yazzie", "… Nguyen"}
