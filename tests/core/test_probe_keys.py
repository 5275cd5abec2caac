"""A protected mention held only in a dict key is probed like one in a value, never passed.

Before, the probe read and rewrote string values only: ``{"applicants": {"Jamal Washington":
{"score": 710}}}`` or ``{"Ms. Jones": "nurse, 20 years"}`` was "not applicable" (no protected
group named), and a node denying on the key passed unscored.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from biasbreaker.errors import ProbeError
from biasbreaker.probe import CounterfactualGenerator, CounterfactualSet, Probe
from biasbreaker.probe.mapping import (
    CounterfactualMapping,
    Detection,
    Substitution,
    Variant,
    unswapped_keys,
)
from biasbreaker.probe.payloads import Key, KeyClash, describe_path, leaves, rebuild


class ExactScorer:
    """0 when the texts are equal, 1 otherwise (compares mapped-back text)."""

    name = "exact"
    compares_neutralised = True

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        return [0.0 if a == b else 1.0 for a, b in zip(originals, counterfactuals, strict=True)]


def probe(generator: CounterfactualGenerator | None = None) -> Probe:
    gen = generator if generator is not None else CounterfactualGenerator(seed=1)
    return Probe([ExactScorer()], generator=gen, k=4, r=2, seed=1)


def keys_of(payload: Any) -> set[str]:
    return {text for path, text in leaves(payload) if isinstance(path[-1], Key)}


# ------------------------------------------------------------------ payloads


def test_a_key_is_a_string_of_its_own_path_before_its_value() -> None:
    payload = {"applicants": {"Jamal Washington": {"score": 710, "note": "ok"}}, 7: "x"}
    assert list(leaves(payload)) == [
        (
            (Key("applicants"),),
            "applicants",
        ),
        (("applicants", Key("Jamal Washington")), "Jamal Washington"),
        ((("applicants", "Jamal Washington", Key("score"))), "score"),
        ((("applicants", "Jamal Washington", Key("note"))), "note"),
        (("applicants", "Jamal Washington", "note"), "ok"),
        ((7,), "x"),  # an int key is no text
    ]
    assert list(leaves(payload, keys=False)) == [
        (("applicants", "Jamal Washington", "note"), "ok"),
        ((7,), "x"),
    ]


def test_rebuild_rewrites_keys_in_order_with_the_paths_of_the_input() -> None:
    seen: list[Any] = []

    def upper(path: Any, text: str) -> str:
        seen.append(path)
        return text.upper() if text.startswith("a") else text

    out = rebuild({"b": 1, "ab": {"ac": "ad"}, "c": [{"ae": 2}]}, upper)
    assert out == {"b": 1, "AB": {"AC": "AD"}, "c": [{"AE": 2}]}
    assert list(out) == ["b", "AB", "c"]
    assert seen == [
        (Key("b"),),
        (Key("ab"),),
        ("ab", Key("ac")),
        ("ab", "ac"),  # the value under a rewritten key: the key it had
        (Key("c"),),
        ("c", 0, Key("ae")),
    ]


def test_two_keys_made_one_are_refused_with_the_path_and_both_keys() -> None:
    with pytest.raises(KeyClash, match=r"'Mr\. Lee' and 'Mr Lee' of the dict at people\.0"):
        rebuild({"people": [{"Mr. Lee": 1, "Mr Lee": 2}]}, lambda p, s: s.replace(".", ""))
    # a key rewritten onto a key left as it was is a clash too
    with pytest.raises(KeyClash, match="'a' and 'b' of the dict at the top level"):
        rebuild({"a": 1, "b": 2}, lambda p, s: "b")


def test_a_key_path_is_described_apart_from_a_value_path() -> None:
    assert describe_path(("applicants", Key("Ms. Jones"))) == "the key 'Ms. Jones' of applicants"
    assert describe_path((Key("Ms. Jones"),)) == "the key 'Ms. Jones' at the top level"
    assert describe_path(("applicants", "Ms. Jones")) == "applicants.Ms. Jones"
    assert describe_path(()) == "the input"


# ------------------------------------------------------------------ detection, variants


def test_a_name_in_a_key_is_detected_at_the_key_path() -> None:
    found = CounterfactualGenerator(seed=1).detect({"applicants": {"Jamal Washington": {"s": 7}}})
    assert {(d.path, d.surface, d.axis, d.groups) for d in found} == {
        (("applicants", Key("Jamal Washington")), "Jamal Washington", "gender", ("male",)),
        (("applicants", Key("Jamal Washington")), "Jamal Washington", "race", ("black",)),
    }


def test_variants_rewrite_keys_deterministically_and_map_back_exactly() -> None:
    payload = {"applicants": {"Jamal Washington": {"score": 710}}, "note": "Jamal Washington"}
    first = CounterfactualGenerator(seed=5).generate(payload, 4)
    again = CounterfactualGenerator(seed=5).generate(payload, 4)
    assert first.status == "applicable"
    assert [v.payload for v in first.variants] == [v.payload for v in again.variants]
    gen = CounterfactualGenerator(seed=5)
    for v in first.variants:
        (new,) = v.payload["applicants"]
        assert new != "Jamal Washington" and v.payload["note"] == new  # one name throughout
        assert v.payload["applicants"][new] == {"score": 710}
        assert gen.map_back(v.payload, v.mapping) == payload
        assert any(s.path == ("applicants", Key("Jamal Washington")) for s in v.substitutions)


# ------------------------------------------------------------------ the probe


def deny_if_key(*names: str) -> Any:
    """A step denying when a dict key anywhere in its input is one of ``names``."""

    def step(payload: Any) -> str:
        return "Decision: DENY" if keys_of(payload) & set(names) else "Decision: APPROVE"

    return step


@pytest.mark.parametrize(
    ("payload", "denied"),
    [
        ({"applicants": {"Jamal Washington": {"score": 710}}}, "Jamal Washington"),  # Black-coded
        ({"Ms. Jones": "nurse, 20 years"}, "Ms. Jones"),  # female
        ({"Lakisha Jackson": {"score": 700}}, "Lakisha Jackson"),  # Black, female
        # nested deeper, and a list of dicts
        ({"case": {"people": {"Emily Walsh": {"role": "applicant"}}}}, "Emily Walsh"),
        ([{"Emily Walsh": {"score": 700}}, {"Lakisha Jackson": {"score": 700}}], "Lakisha Jackson"),
        ({"queue": [{"Ms. Jones": 1}, {"id_7": 2}]}, "Ms. Jones"),
    ],
)
def test_a_step_denying_on_a_key_is_scored_not_passed(payload: Any, denied: str) -> None:
    step = deny_if_key(denied)
    result = asyncio.run(probe().probe(step, payload, step(payload), step_name="decide"))
    assert result.status == "scored", result.reason
    assert result.score is not None and result.score > 0


@pytest.mark.parametrize(
    "payload",
    [
        {"score": 1, "id_7": 2},
        {"applicant": {"credit_score": 710, "income": "40k"}},
        [{"id_7": {"score": 1}}, {"Applicant 17": 2}],
    ],
)
def test_keys_that_name_no_group_stay_not_applicable(payload: Any) -> None:
    step = deny_if_key("score")
    result = asyncio.run(probe().probe(step, payload, step(payload), step_name="decide"))
    assert result.status == "not_applicable" and not result.holds


def test_an_output_keyed_by_the_same_names_is_mapped_back_and_compares_cleanly() -> None:
    """A group-blind step that answers per applicant, keyed by the applicant's name."""

    def step(payload: Any) -> dict[str, str]:
        return {name: f"Decision: APPROVE {row['score']}" for name, row in payload.items()}

    payload = {"Jamal Washington": {"score": 710}, "Emily Walsh": {"score": 690}}
    result = asyncio.run(probe().probe(step, payload, step(payload), step_name="rank"))
    assert result.status == "scored" and result.score == 0.0


def test_an_output_whose_keys_map_back_onto_one_fails_closed() -> None:
    """The variant's name and the original's both in an output: mapping back merges them."""

    def step(payload: Any) -> dict[str, str]:
        return {**{name: "a" for name in payload}, "Jamal Washington": "b"}

    payload = {"Jamal Washington": {"score": 710}}
    with pytest.raises(ProbeError, match=r"cannot map the output of step 'rank' back: keys"):
        asyncio.run(probe().probe(step, payload, step(payload), step_name="rank"))


def test_keys_a_variant_would_make_one_are_held_with_the_path_and_keys() -> None:
    calls: list[Any] = []

    def step(payload: Any) -> str:
        calls.append(payload)
        return "Decision: APPROVE"

    payload = {"groups": {"African American applicant": 1, "Black applicant": 2}}
    result = asyncio.run(probe().probe(step, payload, step(payload), step_name="decide"))
    assert result.status == "unreadable" and result.holds
    assert "'African American applicant' and 'Black applicant'" in result.reason
    assert "the dict at groups" in result.reason and "'Dict keys'" in result.reason
    assert result.calls == 0 and len(calls) == 1


class KeysLeftAlone(CounterfactualGenerator):
    """A generator whose variants leave every key as it was (as for a name no counterpart
    could be drawn for)."""

    def generate(self, payload: Any, k: int, **kwargs: Any) -> CounterfactualSet:
        made = super().generate(payload, k, **kwargs)
        kept = tuple(
            dataclasses.replace(
                v,
                payload={**v.payload, **{key: payload[key] for key in payload}},
                substitutions=tuple(s for s in v.substitutions if not isinstance(s.path[-1], Key)),
            )
            for v in made.variants
        )
        return dataclasses.replace(made, variants=kept)


def test_a_key_mention_no_variant_rewrote_is_held_with_its_path() -> None:
    payload = {"Ms. Jones": "nurse"}
    step = deny_if_key("Ms. Jones")
    result = asyncio.run(
        probe(KeysLeftAlone(seed=1)).probe(step, payload, step(payload), step_name="decide")
    )
    assert result.status == "unreadable" and result.holds
    assert "'Ms.' in the key 'Ms. Jones' at the top level (gender)" in result.reason


def test_unswapped_keys_counts_only_key_mentions_of_a_varied_axis() -> None:
    at_key = (("people", Key("Ms. Jones")), 0, 3)
    det = Detection(*at_key, "Ms.", "gender", ("female",), "term")
    in_value = dataclasses.replace(det, path=("people", "Ms. Jones"))
    shared = dataclasses.replace(det, groups=("female", "male"))
    gender = CounterfactualMapping("gender", (("female", "male"), ("male", "female")))
    race = CounterfactualMapping("race", (("white", "black"), ("black", "white")))
    swapped = Substitution(*at_key, "Ms.", "Mr.")
    untouched = Variant({}, gender, ())
    assert unswapped_keys([det], [untouched]) == (det,)
    assert unswapped_keys([det], [untouched, Variant({}, gender, (swapped,))]) == ()
    assert unswapped_keys([det], [Variant({}, race, ())]) == ()  # its axis not varied here
    assert unswapped_keys([in_value, shared], [untouched]) == ()
    joint = CounterfactualMapping.joint([gender, race])
    assert unswapped_keys([det], [Variant({}, joint, ())]) == ()  # joint variants left out
