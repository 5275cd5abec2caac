"""Residual forms of a swapped person: swapped where exact, held where not, never a silent 0.

A new-user trial: "Ms. Mary Carter" in the text, which the probe swaps, and again as
"— mary carter", "mary.carter@example.com" or a message named "Mary_Carter", which it did not.
Every variant kept the original person there, the node (keyed on the name) answered the same
in every variant, and the step was recorded ``scored``, score 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from typing import Any

import pytest

from biasbreaker.probe import CounterfactualGenerator, CounterfactualMapping, Probe
from biasbreaker.probe.residuals import (
    PairHit,
    Residual,
    _identifier_side,
    moved_persons,
    pair_hits,
    residual_mentions,
    residual_reason,
)
from biasbreaker_plugins.scorers.decision import DecisionScorer

GEN = CounterfactualGenerator(seed=0)


def variants(text: Any) -> list[Any]:
    cf = GEN.generate(text, 4, coverage={})
    assert cf.status == "applicable"
    return list(cf.variants)


def cap(word: str) -> str:
    """A capitalised word of the text becomes a capitalised word (``al-Fasi`` → ``Al-Fasi``)."""
    return word[:1].upper() + word[1:]


def person(v: Any, first: str) -> tuple[str, str]:
    """The new first name and surname a variant gives the person whose first name is ``first``."""
    ((new_first, new_last),) = [(nf, nl) for f, _, nf, nl in moved_persons(v.mapping) if f == first]
    return new_first, new_last


@pytest.mark.parametrize(
    ("form", "render"),
    [
        ("— mary carter", lambda f, s: f"— {f.lower()} {s.lower()}"),
        ("mary.carter@example.com", lambda f, s: f"{f.lower()}.{s.lower()}@example.com"),
        ("Mary_Carter", lambda f, s: f"{cap(f)}_{cap(s)}"),
        ("MARY_CARTER", lambda f, s: f"{f.upper()}_{s.upper()}"),
        ("mary-carter.pdf", lambda f, s: f"{f.lower()}-{s.lower()}.pdf"),
        ("MaryCarter.pdf", lambda f, s: f"{cap(f)}{cap(s)}.pdf"),
        ("carter, mary", lambda f, s: f"{s.lower()}, {f.lower()}"),
        ("Carter_Mary", lambda f, s: f"{cap(s)}_{cap(f)}"),
        ("CARTER, MARY", lambda f, s: f"{s.upper()}, {f.upper()}"),
        ("carter.mary@example.com", lambda f, s: f"{s.lower()}.{f.lower()}@example.com"),
        ("carter-mary", lambda f, s: f"{s.lower()}-{f.lower()}"),
    ],
)  # fmt: skip
def test_a_pair_in_a_form_the_scan_does_not_read_is_swapped_with_the_name(
    form: str, render: Any
) -> None:
    text = f"Loan application from Ms. Mary Carter, income 40k.\n{form}"
    for v in variants(text):
        new_first, new_last = person(v, "Mary")
        assert v.payload.endswith("\n" + render(new_first, new_last)), (v.mapping.axis, v.payload)
        assert not re.search(r"(?<![^\W\d_])mary(?![^\W\d_])", v.payload, re.IGNORECASE)
        assert GEN.map_back(v.payload, v.mapping) == text
    assert residual_mentions(variants(text), GEN.terms) == ()


def test_a_two_letter_name_in_capitals_stays_in_capitals() -> None:
    text = "Ms. Linh Vu applied. LINH_VU, linh vu"
    for v in variants(text):
        first, last = person(v, "Linh")
        assert v.payload.endswith(
            f" {first.upper()}_{last.upper()}, {first.lower()} {last.lower()}"
        )


def test_the_pair_is_swapped_in_dict_keys_and_values_alike() -> None:
    payload = {"from": "Ms. Mary Carter", "Mary_Carter": {"email": "mary.carter@example.com"}}
    for v in variants(payload):
        first, last = person(v, "Mary")
        assert v.payload == {
            "from": f"{'Ms.' if v.mapping.axis != 'gender' else 'Mr.'} {cap(first)} {cap(last)}",
            f"{cap(first)}_{cap(last)}": {"email": f"{first.lower()}.{last.lower()}@example.com"},
        }


def test_a_pair_is_rewritten_in_its_own_case_and_separator() -> None:
    gender = next(v for v in variants("Ms. Mary Carter applied.") if v.mapping.axis == "gender")
    new_first, _ = person(gender, "Mary")
    hits = pair_hits("x mary  carter, Carter-Mary, mArY_cArTeR y", gender.mapping)
    assert hits == [
        PairHit(2, 14, f"{new_first.lower()}  carter"),
        PairHit(29, 40, f"{new_first}_Carter"),  # mixed case: as the name is written
        PairHit(16, 27, f"Carter-{new_first}"),  # surname first: after the forward pairs
    ]
    # letters on either side, or glued in lower case, are no pair
    assert pair_hits("rosemarycarter xmary carter marycarter MARYCarter", gender.mapping) == []
    assert [h.replacement for h in pair_hits("maryCarter", gender.mapping)] == [
        f"{new_first.lower()}Carter"
    ]


@pytest.mark.parametrize(
    ("form", "surface", "kind"),
    [
        ("Contact: schmidt@example.com", "schmidt", "surname"),
        ("File: Schmidt_file.pdf", "Schmidt", "surname"),
        ("File: Schmidt-report.pdf", "Schmidt", "surname"),  # capitalised, the rewrite's miss
        ("id schmidt_7", "schmidt", "surname"),
        ("Contact: eschmidt@example.com", "eschmidt", "initial"),
        ("login schmidte_2", "schmidte", "initial"),
        ("Contact: e.schmidt@example.com", "schmidt", "surname"),
        ("signed emily / schmidt", "emily / schmidt", "pair"),
        # the surname inside a reported pair is not reported again, even in an address
        ("emily,schmidt@example.com", "emily,schmidt", "pair"),
        ("Contact: emilyschmidt@example.com", "emilyschmidt", "pair"),
    ],
)  # fmt: skip
def test_a_form_that_cannot_be_rewritten_exactly_is_a_residual(
    form: str, surface: str, kind: str
) -> None:
    found = residual_mentions(variants(f"Ms. Emily Schmidt applied.\n{form}"), GEN.terms)
    assert {(r.surface, r.form, r.person) for r in found} == {(surface, kind, "Emily Schmidt")}
    # the surname and the initial stand only in variants that change the surname (race)
    assert {r.axis for r in found} == ({"gender"} if kind == "pair" else {"race"})


@pytest.mark.parametrize(
    "text",
    [
        # a lone first name in lower case is a word, not the person
        "Ms. Grace Kim applied. The grace period is 10 days.",
        "Ms. Grace Kim applied. Reply to grace@example.com",
        "Ms. Emily Schmidt applied. Reply to emily@example.com",
        # a surname that is a common word, alone, even in an address
        "Ms. Mary Baker applied. The baker said so; baker@bakery.com; Baker_file",
        "Ms. Mary Carter applied. carter@example.com",
        # a surname alone in lower-case prose
        "Ms. Emily Schmidt applied. schmidt is late.",
        "Ms. Emily Schmidt applied. The file was sent by schmidt.",
        # another person sharing the first name (or the surname's initial)
        "Ms. Emily Schmidt applied. emily jones signed it; ejones@example.com",
        # the surname glued to a letter that is no initial of hers, or inside a longer word
        "Ms. Emily Schmidt applied. aschmidt@example.com; schmidtx@example.com",
        # an initial and surname glued in prose, not in an identifier
        "Ms. Mary Hall applied. We shall see.",
        # an initial glued to a surname of two letters is too likely another word
        "Ms. Linh Vu applied. lvu@example.com",
        # a surname that is a person word
        "Ms. Emily Farmer applied. Reply to farmer@example.com",
    ],
)
def test_no_residual(text: str) -> None:
    assert residual_mentions(variants(text), GEN.terms) == ()


def test_a_string_that_begins_or_ends_with_a_form_is_not_an_identifier_for_that() -> None:
    payload = {"a": "Ms. Emily Schmidt applied.", "b": "eschmidt signed", "c": "by eschmidt"}
    assert residual_mentions(variants(payload), GEN.terms) == ()
    payload["b"] = " eschmidt\n"  # the whole string: a user name
    assert [(r.path, r.surface) for r in residual_mentions(variants(payload), GEN.terms)] == [
        (("b",), "eschmidt")
    ]


def test_a_lone_first_name_has_no_pair_rule() -> None:
    """A person named by a first name alone: its lower-case form stays (a stated limit)."""
    for v in variants("Applicant Mei, income 85k. Reply to mei. mei_2, mei-"):
        assert v.payload.endswith(" Reply to mei. mei_2, mei-")
    assert residual_mentions(variants("Applicant Mei, income 85k. mei_2"), GEN.terms) == ()


def test_every_variant_and_match_is_searched() -> None:
    # each race variant on its own (a surname drawn after or before the original's in order)
    text = "Ms. Emily Schmidt applied. schmidt@example.com"
    race = [v for v in variants(text) if v.mapping.axis == "race"]
    assert len(race) == 3
    for v in race:
        assert [r.surface for r in residual_mentions([v], GEN.terms)] == ["schmidt"]
    # a joint variant first does not end the search
    cf = GEN.generate(
        "Ms. Emily Schmidt, aged 63. eschmidt@example.com", 4, coverage={}, joint=True
    )
    joint = [v for v in cf.variants if v.mapping.steps]
    assert joint and residual_mentions([*joint, *cf.variants], GEN.terms)
    # a glued pair in prose, a surname inside a pair, then the residuals after them
    found = residual_mentions(
        variants(
            "Ms. Emily Schmidt applied. emilyschmidt is here; emily,schmidt@example.com; "
            "Schmidt_file; eschmidt_2"
        ),
        GEN.terms,
    )
    assert {(r.surface, r.form) for r in found} == {
        ("emily,schmidt", "pair"),
        ("Schmidt", "surname"),
        ("eschmidt", "initial"),
    }


def test_each_person_is_searched() -> None:
    # the first person's surname kept by a gender variant, too short for the initial form,
    # does not end the search for the second one
    vs = variants("Ms. Linh Vu met Ms. Emily Schmidt. emily / schmidt; eschmidt_2")
    gender = [v for v in vs if v.mapping.axis == "gender"]
    race = [v for v in vs if v.mapping.axis == "race"]
    assert [r.surface for r in residual_mentions(gender, GEN.terms)] == ["emily / schmidt"]
    # ("Schmidt. emily" spans two sentences: no pair)
    assert ("eschmidt", "Emily Schmidt") in {
        (r.surface, r.person) for r in residual_mentions(race, GEN.terms)
    }
    # a surname of three letters has the initial form
    found = residual_mentions(variants("Ms. Mei Lin applied. mlin@example.com"), GEN.terms)
    assert [(r.surface, r.form) for r in found] == [("mlin", "initial")]


def test_another_person_sharing_the_first_name_is_left_as_written() -> None:
    for v in variants("Ms. Emily Schmidt applied. emily jones signed it; Emily_Jones.pdf"):
        assert v.payload.endswith(" applied. emily jones signed it; Emily_Jones.pdf")


def test_a_gender_variant_keeps_the_surname_without_a_residual() -> None:
    vs = [
        v for v in variants("Ms. Emily Schmidt applied. schmidt@example.com") if not v.mapping.steps
    ]
    assert {v.mapping.axis for v in vs} == {"gender", "race"}
    found = residual_mentions(vs, GEN.terms)
    assert found and {r.axis for r in found} == {"race"}
    gender = [v for v in vs if v.mapping.axis == "gender"]
    assert residual_mentions(gender, GEN.terms) == ()


def test_joint_variants_are_left_to_the_one_axis_ones() -> None:
    vs = GEN.generate(
        "Ms. Emily Schmidt, aged 63, applied. eschmidt@example.com", 4, coverage={}, joint=True
    ).variants
    joint = [v for v in vs if v.mapping.steps]
    assert joint and residual_mentions(joint, GEN.terms) == ()
    assert residual_mentions(vs, GEN.terms)


def test_the_residual_is_reported_at_its_path_in_the_variant() -> None:
    payload = {"messages": [{"content": "Ms. Emily Schmidt applied."}, {"name": "eschmidt"}]}
    found = residual_mentions(variants(payload), GEN.terms)
    assert {(r.path, r.surface) for r in found} == {(("messages", 1, "name"), "eschmidt")}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- carter.x", True), ("- j.carter y", True), ("- carter@x", True), ("- carter_1", True),
        ("@carter y", True), ("- carter/", True), ("- 7carter y", True), ("  carter \n", True),
        ("- carter. Next", False), ("- carter.", False), (". carter y", False),
        ("- carter-x", False), ("-.carter y", False), ("- carter y", False),
    ],
)  # fmt: skip
def test_identifier_side(text: str, expected: bool) -> None:
    start = text.index("carter")
    assert _identifier_side(text, start, start + len("carter")) is expected


def test_moved_persons_are_the_full_name_pairs() -> None:
    mapping = CounterfactualMapping(
        axis="race",
        groups=(("white", "asian"),),
        names=(
            ("Mary Carter", "Diana Vu"),  # a person
            ("Mary", "Diana"),  # her first name alone
            ("Carter", "Vu"),  # her surname alone
            ("Ann Lee", "Mei"),  # (a hand-made mapping) a full name to one word
            ("Mary Ann Smith", "Jo Ng"),  # a surname of two words
        ),
    )
    assert list(moved_persons(mapping)) == [("Mary", "Carter", "Diana", "Vu")]
    joint = CounterfactualMapping.joint(
        [mapping, CounterfactualMapping("age", (("old", "young"),))]
    )
    assert list(moved_persons(joint)) == [("Mary", "Carter", "Diana", "Vu")]


def test_results_are_frozen() -> None:
    residual = Residual((), "eschmidt", "Emily Schmidt", "initial", "race")
    with pytest.raises(dataclasses.FrozenInstanceError):
        residual.surface = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        PairHit(0, 1, "x").start = 2  # type: ignore[misc]
    assert not hasattr(residual, "__dict__") and not hasattr(PairHit(0, 1, "x"), "__dict__")


def test_the_reason_names_the_person_the_form_and_where() -> None:
    reason = residual_reason(
        [Residual(("messages", 0, "content"), "eschmidt", "Emily Schmidt", "initial", "race")]
    )
    assert reason.startswith(
        "partial counterfactual: the input still names 'Emily Schmidt' as 'eschmidt' in "
        "messages.0.content (initial and surname, left as written by the race variant), "
        "which the probe does not rewrite."
    )
    assert "held for review" in reason and "'Residual forms'" in reason


def keyed_on_her_name(text: str) -> str:
    """A step that denies Emily Schmidt in whatever form it finds her."""
    low = text.lower()
    return "Decision: DENY" if "emily" in low or "schmidt" in low else "Decision: APPROVE"


def run(text: str) -> Any:
    probe = Probe([DecisionScorer()], generator=CounterfactualGenerator(seed=1), k=4, r=2, seed=1)
    return asyncio.run(probe.probe(keyed_on_her_name, text, keyed_on_her_name(text), step_name="s"))


def test_a_step_keyed_on_a_residual_form_is_held_not_scored_zero() -> None:
    text = "Loan application from Ms. Emily Schmidt.\nReply to eschmidt@example.com"
    result = run(text)
    assert result.status == "unreadable" and result.holds and result.score is None
    assert "'Emily Schmidt' as 'eschmidt'" in result.reason and result.calls == 0


def test_a_step_keyed_on_a_rewritten_pair_is_scored_on_a_real_swap() -> None:
    text = "Loan application from Ms. Emily Schmidt.\n-- emily schmidt, emily.schmidt@example.com"
    result = run(text)
    assert result.status == "scored" and result.score == 1.0
    # the same input and seed: the same result
    assert run(text).to_dict() == result.to_dict()
