"""The joint variant: a step biased against either of two groups is caught on a person in both.

One-axis variants of "Ms. Mary Smith, aged 63" move her gender or her age, never both: a step
that denies women *or* people over 60 denies every one of them, so every one-axis variant
agrees with the original and the local score is 0. The joint variant (every mentioned axis
swapped at once) is the first input the step approves.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from biasbreaker.config import Settings
from biasbreaker.probe import CounterfactualGenerator, CounterfactualMapping, Probe

GEN = CounterfactualGenerator(seed=11)
WOMAN_63 = "Applicant: Ms. Mary Smith, aged 63, applies for the analyst role."


class Exact:
    name = "exact"
    compares_neutralised = False

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        return [0.0 if a == b else 1.0 for a, b in zip(originals, counterfactuals, strict=True)]


def women_or_over_60(prompt: str) -> str:
    """Denies a woman (by title) or anyone aged over 60; approves everyone else."""
    age = re.search(r"aged (\d+)", prompt)
    if re.search(r"\b(Ms|Mrs|Miss)\b", prompt) or (age is not None and int(age.group(1)) > 60):
        return "deny"
    return "approve"


def test_a_step_biased_on_either_of_two_axes_scores_zero_without_the_joint_variant() -> None:
    probe = Probe(Exact(), generator=GEN, k=4, r=0, bootstrap=0, joint=False)
    result = probe.probe_sync(women_or_over_60, WOMAN_63, women_or_over_60(WOMAN_63))
    assert result.status == "scored"
    assert {"gender", "age"} <= set(result.axes)
    assert result.score == 0.0  # the limit the joint variant closes


def test_the_joint_variant_catches_it() -> None:
    probe = Probe(Exact(), generator=GEN, k=4, r=0, bootstrap=0)
    result = probe.probe_sync(women_or_over_60, WOMAN_63, women_or_over_60(WOMAN_63))
    assert result.score == 1.0
    joint = [v for v in result.variants if "+" in v.axis]
    assert len(joint) == 1 and len(result.variants) == 5
    assert set(joint[0].axis.split("+")) >= {"gender", "age"}
    assert joint[0].divergences["exact"] == (1.0, 0.0)
    assert "+" not in "".join(result.axes)  # the result's axes stay real axes
    assert result.calls == 5


def test_the_joint_variant_moves_every_axis_and_maps_back() -> None:
    cf = GEN.generate(WOMAN_63, 4, coverage={}, joint=True)
    joint = cf.variants[-1]
    assert joint.mapping.axes == tuple(
        a for a in ("gender", "race", "age") if a in joint.mapping.axes
    )
    assert {"gender", "age"} <= set(joint.mapping.axes)
    assert "Ms." not in joint.payload and "aged 63" not in joint.payload
    assert "Mr." in joint.payload and "aged 37" in joint.payload
    assert GEN.map_back(joint.payload, joint.mapping) == WOMAN_63
    assert GEN.map_back(women_or_over_60(joint.payload), joint.mapping) == "approve"
    # the inverse undoes the steps last first, and inverting twice gives the mapping back
    inverse = joint.mapping.inverse()
    assert inverse.axes == tuple(reversed(joint.mapping.axes))
    assert [s.groups for s in inverse.inverse().steps] == [s.groups for s in joint.mapping.steps]


@pytest.mark.parametrize(
    "text",
    [
        "Jamal Washington, a Muslim, asked about his loan.",
        "The 70-year-old widow Mrs. Chen asked for a transfer.",
        {"name": "Ebony Jackson", "note": "she is 64 years of age"},
    ],
)
def test_joint_variants_of_varied_payloads_map_back_exactly(text: object) -> None:
    cf = GEN.generate(text, 3, coverage={}, joint=True)
    joint = [v for v in cf.variants if v.mapping.steps]
    assert len(joint) == 1
    assert joint[0].payload != text
    assert GEN.map_back(joint[0].payload, joint[0].mapping) == text


def test_no_joint_variant_with_one_axis_and_the_rotation_is_unchanged() -> None:
    one_axis = "He applied for the analyst job. Should we hire him?"
    cf = GEN.generate(one_axis, 4, coverage={}, joint=True)
    assert not any(v.mapping.steps for v in cf.variants)
    with_joint = GEN.generate(WOMAN_63, 4, coverage={"age": 1}, joint=True)
    without = GEN.generate(WOMAN_63, 4, coverage={"age": 1}, joint=False)
    assert with_joint.coverage == without.coverage
    assert with_joint.variants[:-1] == without.variants


def test_a_joint_mapping_needs_two_one_axis_steps() -> None:
    single = CounterfactualMapping(axis="gender", groups=(("male", "female"),))
    with pytest.raises(ValueError, match="two or more one-axis steps, got 1"):
        CounterfactualMapping.joint([single])
    pair = CounterfactualMapping.joint([single, single])
    with pytest.raises(ValueError, match="one-axis steps"):
        CounterfactualMapping.joint([pair, single])


def test_the_setting_is_on_by_default_and_reaches_the_probe() -> None:
    from biasbreaker.kernel import Kernel
    from biasbreaker.probe.probe import build_probe

    assert Settings().probe.joint is True
    kernel = Kernel.load(overrides={"probe": {"joint": False}})
    assert build_probe(kernel).joint is False
