"""Issue 14, item 1: every group of every axis is compared within the stated bound of probes.

A *single-group* node decides "deny" when its input names group ``X`` of an axis and
"approve" otherwise. For every axis, every group ``X`` and every other group ``p`` the input
names, the node is probed on that input step after step, the rotation state carried from
one probe to the next (:attr:`ProbeResult.coverage`), until a variant swaps ``p`` for ``X``
(the step scores above 0). The bound is docs/detection.md's: ``ceil((N − 1) · A / k)``
probes for an axis of ``N`` groups among ``A`` axes named.

Run as a script (``python tests/core/test_probe_coverage.py``) it prints, per axis and group,
the worst and mean steps until detection over the original groups, and the share of those
detecting probes whose score reaches the default ``tau_enter``: the table in
docs/detection.md, "Every group covered".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from biasbreaker.config.sections import BreakerSettings, ProbeSettings
from biasbreaker.probe import CounterfactualGenerator, Probe, TermSet

SEED = 7
K = ProbeSettings().k
R = ProbeSettings().r
TAU_ENTER = BreakerSettings().tau_enter
TERMS = TermSet.default()
GEN = CounterfactualGenerator(TERMS, seed=SEED)
AXES = ("gender", "race", "religion", "nationality", "sexual-orientation", "age", "disability")


class ExactScorer:
    """0 when the mapped-back texts are equal, 1 otherwise."""

    name = "exact"
    compares_neutralised = True

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        return [0.0 if a == b else 1.0 for a, b in zip(originals, counterfactuals, strict=True)]


def prompt(axis: str, group: str) -> str:
    """An input naming ``group`` of ``axis`` once, in the form the term list gives it."""
    if axis == "gender":
        return "He asked for a raise." if group == "male" else "She asked for a raise."
    ax = TERMS.axis(axis)
    for row in ax.rows:
        form = row.form(group)
        if form is not None and all(row.form(g) is not None for g in ax.groups):
            text = f"The applicant is a {form} teacher. Approve the raise?"
            found = {d.groups for d in GEN.detect(text) if d.axis == axis}
            if found == {(group,)}:
                return text
    raise AssertionError(f"no term row of axis {axis!r} names {group!r} alone")


def single_group_node(axis: str, target: str):  # type: ignore[no-untyped-def]
    def node(text: str) -> str:
        named = {d.groups[0] for d in GEN.detect(text) if d.axis == axis and len(d.groups) == 1}
        return "deny" if target in named else "approve"

    return node


def steps_until_detection(axis: str, original: str, target: str, limit: int) -> tuple[int, float]:
    """Probes of one node until its score is above 0, and that score (``limit + 1`` if never)."""
    node = single_group_node(axis, target)
    text = prompt(axis, original)
    state: dict[str, int] = {}
    for n in range(1, limit + 1):
        fresh = Probe(ExactScorer(), generator=GEN, k=K, r=R, seed=SEED, bootstrap=0)
        result = fresh.probe_sync(node, text, node(text), step_name="node", coverage=state)
        assert result.status == "scored", result.reason
        state = dict(result.coverage)
        if result.score is not None and result.score > 0:
            return n, result.score
    return limit + 1, 0.0


def bound(axis: str, n_axes: int = 1) -> int:
    return math.ceil((len(TERMS.axis(axis).groups) - 1) * n_axes / K)


@pytest.mark.parametrize("axis", AXES)
def test_every_group_detected_within_the_bound(axis: str) -> None:
    groups = TERMS.axis(axis).groups
    limit = bound(axis)
    for target in groups:
        for original in groups:
            if original == target:
                continue
            steps, score = steps_until_detection(axis, original, target, limit)
            assert steps <= limit, (axis, original, target, steps, limit)
            assert score > 0


def test_a_christian_teacher_input_reaches_muslim_within_three_probes() -> None:
    """The issue's case: 10 religion groups, k = 4: Muslim is drawn within ceil(9/4) = 3."""
    steps, _ = steps_until_detection("religion", "christian", "muslim", 3)
    assert steps <= 3


def test_two_axes_share_the_slots_within_the_bound() -> None:
    """Gender (one other group) and religion named: religion still covered in ceil(9*2/4)."""
    text = "He is a Muslim teacher. Approve his raise?"
    for target in TERMS.axis("religion").groups:
        if target == "muslim":
            continue
        node = single_group_node("religion", target)
        state: dict[str, int] = {}
        hit = None
        for n in range(1, bound("religion", 2) + 1):
            probe = Probe(ExactScorer(), generator=GEN, k=K, r=R, seed=SEED, bootstrap=0)
            result = probe.probe_sync(node, text, node(text), step_name="node", coverage=state)
            assert set(result.axes) <= {"gender", "religion"}
            state = dict(result.coverage)
            if result.score is not None and result.score > 0:
                hit = n
                break
        assert hit is not None, target


def test_one_probe_object_rotates_by_itself_per_node() -> None:
    """Without ``coverage=``, a probe keeps each node's state: the draws move on."""
    probe = Probe(ExactScorer(), generator=GEN, k=K, r=0, seed=SEED, bootstrap=0)
    text = prompt("religion", "christian")
    seen: set[str] = set()
    for _ in range(bound("religion")):
        result = probe.probe_sync(lambda t: "ok", text, "ok", step_name="writer")
        seen |= {to for v in result.variants for frm, to in v.groups if frm == "christian"}
    assert seen == set(TERMS.axis("religion").groups) - {"christian"}


def test_the_state_survives_a_round_trip_and_is_deterministic() -> None:
    """A result's coverage, through to_dict/from_dict, continues the rotation identically."""
    text = prompt("religion", "hindu")
    first = Probe(ExactScorer(), generator=GEN, k=K, r=0, seed=SEED).probe_sync(
        lambda t: "ok", text, "ok", step_name="n", coverage={}
    )
    again = Probe(ExactScorer(), generator=GEN, k=K, r=0, seed=SEED).probe_sync(
        lambda t: "ok", text, "ok", step_name="n", coverage={}
    )
    assert first.to_dict() == again.to_dict()
    restored = type(first).from_dict(first.to_dict()).coverage
    assert restored == first.coverage == {"religion": K, "religion/hindu": K}
    a = GEN.generate(text, K, coverage=restored)
    b = GEN.generate(text, K, coverage=dict(first.coverage))
    assert [v.payload for v in a.variants] == [v.payload for v in b.variants]
    firsts = {v.mapping.groups for v in GEN.generate(text, K, coverage={}).variants}
    assert firsts.isdisjoint({v.mapping.groups for v in a.variants})


def test_the_origin_moves_where_the_rotation_starts_and_only_that() -> None:
    """Each origin reads the rotation from its own seeded offset; ``None`` from offset 0."""
    text = prompt("nationality", "german")
    plain = GEN.generate(text, K, coverage={})
    assert [v.payload for v in GEN.generate(text, K, coverage={}, origin=None).variants] == [
        v.payload for v in plain.variants
    ]
    firsts = {
        origin: tuple(
            v.mapping.groups for v in GEN.generate(text, K, coverage={}, origin=origin).variants
        )
        for origin in (f"thread-{i}/decide" for i in range(6))
    }
    assert len(set(firsts.values())) > 1  # threads start at different places
    again = GEN.generate(text, K, coverage={}, origin="thread-0/decide")
    assert tuple(v.mapping.groups for v in again.variants) == firsts["thread-0/decide"]
    # the state is the same count of positions, whatever the origin
    assert {
        GEN.generate(text, K, coverage={}, origin=o).coverage["nationality/german"] for o in firsts
    } == {K}
    # a generator of another seed reads another offset for the same origin
    other = CounterfactualGenerator(TERMS, seed=SEED + 1)
    offsets = {
        tuple(v.mapping.groups for v in g.generate(text, K, coverage={}, origin=f"t{i}/n").variants)
        for g in (GEN, other)
        for i in range(3)
    }
    assert len(offsets) > 3


def test_each_set_of_groups_keeps_its_rotation_and_a_new_one_starts_at_the_axis_count() -> None:
    """An input naming other groups moves the axis's count, not another group's rotation."""
    christian, hindu = prompt("religion", "christian"), prompt("religion", "hindu")
    state: dict[str, int] = {}
    for text in (christian, hindu, christian):
        state = dict(GEN.generate(text, K, coverage=state).coverage)
    assert state == {"religion": 3 * K, "religion/christian": 2 * K, "religion/hindu": 2 * K}
    # the christian input's second draw continues its own rotation, the hindu one's between
    # moved the axis only: the same variants as two christian draws in a row
    alone = GEN.generate(christian, K, coverage={}).coverage
    again = GEN.generate(christian, K, coverage=alone)
    mixed = GEN.generate(christian, K, coverage={**state, "religion/christian": K})
    assert [v.payload for v in mixed.variants] == [v.payload for v in again.variants]


def test_a_bad_coverage_position_is_refused() -> None:
    with pytest.raises(ValueError, match=r"coverage\['religion'\]=-1"):
        GEN.generate(prompt("religion", "hindu"), K, coverage={"religion": -1})
    with pytest.raises(ValueError, match=r"coverage\['religion'\]=True"):
        GEN.generate(prompt("religion", "hindu"), K, coverage={"religion": True})


NAMED = (
    "Mr. Greg Baker applied for the loan.",
    "Jamal Washington applied for the loan.",
    "Wei Chen, a Muslim, applied.",
    "Ms. Maria Garcia, aged 65, applied.",
)


def first_reached(
    text: str, probes: int, origin: str | None = None
) -> dict[tuple[str, str], dict[str, int]]:
    """(axis, mentioned group) → target group → the first probe whose variants moved it there.

    The generator alone, the state carried from draw to draw (what a probe passes it), the
    rotation read from ``origin`` (what the graph adapter passes for a thread).
    """
    present = {(d.axis, d.groups[0]) for d in GEN.detect(text) if len(d.groups) == 1}
    reached: dict[tuple[str, str], dict[str, int]] = {key: {} for key in present}
    state: dict[str, int] = {}
    for n in range(1, probes + 1):
        drawn = GEN.generate(text, K, coverage=state, origin=origin)
        state = dict(drawn.coverage)
        for v in drawn.variants:
            for frm, to in v.mapping.groups:
                if (v.mapping.axis, frm) in reached:
                    reached[(v.mapping.axis, frm)].setdefault(to, n)
    return reached


@pytest.mark.parametrize("origin", [None, "thread-1/decide", "7f3a/screen"])
@pytest.mark.parametrize("text", NAMED)
def test_inputs_with_names_reach_their_groups_within_the_bound(
    text: str, origin: str | None
) -> None:
    """Several axes named (A > 1): every reached group is reached within ceil((N-1)A/k).

    From any origin: a thread's rotation starts elsewhere, and covers as fast.
    """
    reached = first_reached(text, 12, origin)
    n_axes = len({axis for axis, _ in reached})
    for (axis, _), targets in reached.items():
        assert targets, (text, axis)
        assert max(targets.values()) <= bound(axis, n_axes), (text, axis, targets)


def main() -> None:
    print(f"k = {K}, r = {R}, seed = {SEED}, tau_enter = {TAU_ENTER} (default)")
    print("axis | group X | N | bound | worst steps | mean steps | share >= tau_enter")
    for axis in AXES:
        groups = TERMS.axis(axis).groups
        limit = bound(axis)
        for target in groups:
            runs = [steps_until_detection(axis, p, target, limit) for p in groups if p != target]
            steps = [s for s, _ in runs]
            over = sum(1 for s, score in runs if s <= limit and score >= TAU_ENTER)
            print(
                f"{axis} | {target} | {len(groups)} | {limit} | {max(steps)} | "
                f"{sum(steps) / len(steps):.2f} | {over}/{len(runs)}"
            )
    print()
    print("input | axis: group | A | bound | probe that first reached each target | never")
    for text in NAMED:
        reached = first_reached(text, 12)
        n_axes = len({axis for axis, _ in reached})
        for (axis, group), targets in sorted(reached.items()):
            missing = [g for g in TERMS.axis(axis).groups if g != group and g not in targets]
            firsts = ", ".join(f"{g} {n}" for g, n in sorted(targets.items(), key=lambda t: t[1]))
            print(
                f"{text} | {axis}: {group} | {n_axes} | {bound(axis, n_axes)} | {firsts} | "
                f"{', '.join(missing) or '-'}"
            )


if __name__ == "__main__":
    main()
