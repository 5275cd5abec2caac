"""Issue 14: native-american names, drawn for race swaps and read in input.

No shipped name list covers the group, so before this a race swap of a named person never
reached it (docs/detection.md, "Names"). The names are built from the census surnames that tell
native-american and given names that tell no race (:meth:`NameShares.native_given`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from biasbreaker.probe import CounterfactualGenerator, Probe, TermSet
from biasbreaker.probe.names import NATIVE, ProductNames, name_shares, person_name
from biasbreaker.probe.variants import native_pool

TERMS = TermSet.default()
GEN = CounterfactualGenerator(TERMS, seed=7)
K = 4


class ExactScorer:
    """0 when the mapped-back texts are equal, 1 otherwise."""

    name = "exact"
    compares_neutralised = True

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        return [0.0 if a == b else 1.0 for a, b in zip(originals, counterfactuals, strict=True)]


def races(text: str) -> set[str]:
    return {d.groups[0] for d in GEN.detect(text) if d.axis == "race" and len(d.groups) == 1}


def native_variants(text: str, draws: int = 6) -> list[str]:
    out: list[str] = []
    state: dict[str, int] = {}
    for _ in range(draws):
        cf = GEN.generate(text, K, coverage=state)
        state = dict(cf.coverage)
        out += [
            v.payload
            for v in cf.variants
            if v.mapping.axis == "race" and (("black", NATIVE) in v.mapping.groups)
        ]
    return out


def test_a_named_person_is_swapped_into_native_american_first_name_and_surname() -> None:
    text = "Jamal Washington applied for the loan. Mr. Washington has no debts."
    found = native_variants(text)
    assert found, "no race variant moved Jamal Washington into native-american"
    variant = found[0]
    new_first, new_last = variant.split(" applied")[0].split()
    assert new_first != "Jamal" and new_last != "Washington"
    assert f"Mr. {new_last} has no debts." in variant  # the later mention follows
    assert new_last in name_shares().native_surnames
    assert races(variant) == {NATIVE}  # the variant reads as the group it was swapped into
    assert {d.groups for d in GEN.detect(variant) if d.axis == "gender"} == {("male",)}


def test_the_native_american_variant_maps_back_exactly() -> None:
    text = "Jamal Washington applied for the loan. Mr. Washington has no debts."
    state: dict[str, int] = {}
    for _ in range(6):
        cf = GEN.generate(text, K, coverage=state)
        state = dict(cf.coverage)
        for v in cf.variants:
            if ("black", NATIVE) in v.mapping.groups:
                assert GEN.map_back(v.payload, v.mapping) == text
                return
    pytest.fail("no native-american variant drawn")


def test_the_draw_is_deterministic() -> None:
    text = "Ms. Latasha Harris applied."
    assert native_variants(text) == native_variants(text)
    other = CounterfactualGenerator(TERMS, seed=7)
    state: dict[str, int] = {}
    again: list[str] = []
    for _ in range(6):
        cf = other.generate(text, K, coverage=state)
        state = dict(cf.coverage)
        again += [v.payload for v in cf.variants if ("black", NATIVE) in v.mapping.groups]
    assert again == native_variants(text)


@pytest.mark.parametrize(
    ("text", "gender"),
    [
        ("Ms. Darlene Yazzie applied for the loan.", "female"),  # darlene 87 % white
        ("Mr. Leonard Begay applied for the loan.", "male"),
        ("Heather Locklear asks for a loan.", "female"),  # locklear 76 %
    ],
)
def test_a_native_american_name_is_read_in_input(text: str, gender: str) -> None:
    assert races(text) == {NATIVE}
    assert {d.groups for d in GEN.detect(text) if d.axis == "gender"} == {(gender,)}


def test_a_surname_under_the_share_is_not_read_as_native_american() -> None:
    """Only surnames with 75 % or more: a first name telling white decides a weak surname."""
    book = TERMS.names
    assert book is not None
    read = person_name("Darlene", "Yazzie", book)
    assert read is not None and read.info.race == NATIVE
    weak = person_name("Darlene", "Smith", book)
    assert weak is not None and weak.info.race == "white"


def test_the_pools_exclude_words_and_given_names_that_tell_a_race() -> None:
    shares = name_shares()
    assert "Chief" not in shares.native_surnames and "Cowboy" not in shares.native_surnames
    assert "Alexie" not in shares.native_surnames  # also a first name
    assert "Yazzie" in shares.native_surnames
    for name in shares.native_given("female") + shares.native_given("male"):
        share = shares.first_race[name.lower()]
        assert share.group == "white" and share.percent < 75, name


def test_product_names_index_like_the_list() -> None:
    names = ProductNames(["Ann", "Bo"], ["Begay", "Nez", "Tso"])
    listed = [f"{f} {s}" for f in ("Ann", "Bo") for s in ("Begay", "Nez", "Tso")]
    assert list(names) == listed and len(names) == 6
    assert names[-1] == "Bo Tso" and names[1:3] == listed[1:3]
    with pytest.raises(IndexError):
        names[6]


def test_a_node_denying_only_native_american_applicants_is_detected_within_the_bound() -> None:
    """A name carries gender and race (A = 2): race's 5 other groups in ceil(5 * 2 / 4) = 3."""
    limit = math.ceil((len(TERMS.axis("race").groups) - 1) * 2 / K)

    def node(text: str) -> str:
        return "deny" if NATIVE in races(text) else "approve"

    for text in (
        "Jamal Washington applied for the loan.",
        "Mr. Greg Baker applied for the loan.",
        "Ms. Maria Garcia applied for the loan.",
    ):
        state: dict[str, int] = {}
        detected = None
        for n in range(1, limit + 1):
            probe = Probe(ExactScorer(), generator=GEN, k=K, r=2, seed=7, bootstrap=0)
            result = probe.probe_sync(node, text, node(text), step_name="node", coverage=state)
            assert result.status == "scored", result.reason
            state = dict(result.coverage)
            if result.score is not None and result.score > 0:
                detected = n
                break
        assert detected is not None, text


@pytest.mark.parametrize("gender", ["female", "male", None])
def test_every_name_the_pool_draws_reads_back_as_native_american(gender: str | None) -> None:
    """Each given name with a surname, and each surname with a given name, is read in text as a
    person of that gender and the group (else a variant would name a person the probe and a
    step reading names cannot see: ``Santa Americanhorse`` was drawn once)."""
    pool = native_pool(GEN._finder, gender)
    firsts = sorted({n.split()[0] for n in pool})
    lasts = sorted({n.split()[1] for n in pool})
    assert len(pool) == len(firsts) * len(lasts) > 10_000
    want = {("race", (NATIVE,))} | ({("gender", (gender,))} if gender else set())
    pairs = [(f, lasts[i % len(lasts)]) for i, f in enumerate(firsts)]
    pairs += [(firsts[i % len(firsts)], last) for i, last in enumerate(lasts)]
    for first, last in pairs:
        found = {(d.axis, d.groups) for d in GEN.detect(f"{first} {last} applied for a loan.")}
        assert found == want, (first, last, found)
