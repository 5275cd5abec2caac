"""A step that routes: its route is compared as a decision of its own (``Routed``).

Found by the LangGraph adapter's conditional-edge probing: when the destinations were a field
of the compared object, a field-averaging scorer (the ``decision`` scorer on a structured
update) halved a tool call made for one group only, because ``tools_condition`` routed every
group alike; the biased call then scored under ``tau_enter`` and ran. Now the route is part
``route`` of the score, combined by max: it adds a flip where it differs and dilutes nothing
where it does not.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from biasbreaker.errors import InputError
from biasbreaker.probe import ROUTE_PART, CounterfactualGenerator, Probe, Routed
from biasbreaker.probe.probe import combined

GEN = CounterfactualGenerator(seed=3)
PROMPT = "He applied for the analyst job. Should we hire him?"


def is_man(prompt: str) -> bool:
    return " him" in prompt or prompt.startswith("He ")


class FieldMeanScorer:
    """Mean over the union of two JSON objects' fields of 'this field changed' (0/1)."""

    name = "fields"
    compares_neutralised = True

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        out = []
        for a, b in zip(originals, counterfactuals, strict=True):
            x, y = json.loads(a), json.loads(b)
            keys = set(x) | set(y)
            out.append(sum(x.get(key) != y.get(key) for key in keys) / len(keys))
        return out


class NamedRoute(FieldMeanScorer):
    name = "route"


def probe(**kwargs: Any) -> Probe:
    return Probe(FieldMeanScorer(), generator=GEN, k=3, r=2, bootstrap=0, **kwargs)


def test_a_route_taken_for_one_group_only_scores_one_with_an_unchanged_output() -> None:
    def step(prompt: str) -> Routed:
        return Routed({"note": "screened"}, ["approve" if is_man(prompt) else "deny"])

    result = probe().probe_sync(step, PROMPT, step(PROMPT))
    assert result.parts["fields"].score == 0.0
    assert result.parts[ROUTE_PART].score == 1.0
    assert result.score == 1.0


def test_a_route_the_same_for_every_group_dilutes_nothing() -> None:
    """One of two fields flips: 0.5 with or without a constant route (as a field: 1/3)."""

    def update(prompt: str) -> dict[str, str]:
        return {"tool": "approve" if is_man(prompt) else "deny", "text": "ok"}

    def bare(prompt: str) -> dict[str, str]:
        return update(prompt)

    def routed(prompt: str) -> Routed:
        return Routed(update(prompt), ["tools"])

    def as_field(prompt: str) -> dict[str, Any]:
        return {**update(prompt), "goto": ["tools"]}

    plain = probe().probe_sync(bare, PROMPT, bare(PROMPT))
    with_route = probe().probe_sync(routed, PROMPT, routed(PROMPT))
    diluted = probe().probe_sync(as_field, PROMPT, as_field(PROMPT))
    assert plain.score == 0.5
    assert with_route.score == plain.score
    assert with_route.parts[ROUTE_PART].score == 0.0
    assert diluted.score == pytest.approx(1 / 3)  # what the field design gave


@pytest.mark.parametrize("r", [1, 2])
def test_a_route_that_varies_within_a_group_is_the_noise_floor(r: int) -> None:
    """A route picked by the sample index, whatever the group, moves as much under
    resampling as under the swap: no excess, score 0."""

    def step(prompt: str, sample: int = 0) -> Routed:
        return Routed({"note": "screened"}, ["a" if sample == 1 else "b"])

    result = Probe(FieldMeanScorer(), generator=GEN, k=4, r=r, bootstrap=0).probe_sync(
        step, PROMPT, step(PROMPT)
    )
    parts = result.parts[ROUTE_PART]
    assert parts.counterfactual == parts.same_group > 0.0
    assert result.score == 0.0


def test_without_resamples_a_constant_route_scores_zero_and_a_flipped_one_one() -> None:
    """``r = 0``: the route is compared with the guarded run's only (no noise floor)."""

    def same(prompt: str) -> Routed:
        return Routed({"note": "screened"}, ["tools"])

    def flipped(prompt: str) -> Routed:
        return Routed({"note": "screened"}, ["approve" if is_man(prompt) else "deny"])

    bare = Probe(FieldMeanScorer(), generator=GEN, k=3, r=0, bootstrap=0)
    constant = bare.probe_sync(same, PROMPT, same(PROMPT))
    assert constant.parts[ROUTE_PART].same_group == 0.0 and constant.score == 0.0
    assert bare.probe_sync(flipped, PROMPT, flipped(PROMPT)).score == 1.0


def test_a_route_naming_the_person_is_mapped_back_before_it_is_compared() -> None:
    """A ``Send`` carrying the applicant's text: the same route once mapped back."""

    def step(prompt: str) -> Routed:
        return Routed({"note": "screened"}, [{"send": "review", "arg": prompt}])

    result = probe().probe_sync(step, PROMPT, step(PROMPT))
    assert result.parts[ROUTE_PART].score == 0.0 and result.score == 0.0


def test_routes_on_some_runs_only_count_as_changes() -> None:
    """A run with a route against one without is a different route (``None``)."""

    def step(prompt: str) -> Any:
        update = {"note": "screened"}
        return Routed(update, ["deny"]) if not is_man(prompt) else update

    result = probe().probe_sync(step, PROMPT, step(PROMPT))
    assert result.parts[ROUTE_PART].score == 1.0


def test_bootstrap_interval_of_a_routed_step_brackets_its_score() -> None:
    def step(prompt: str) -> Routed:
        return Routed({"note": "screened"}, ["approve" if is_man(prompt) else "deny"])

    result = Probe(FieldMeanScorer(), generator=GEN, k=3, r=2, bootstrap=200).probe_sync(
        step, PROMPT, step(PROMPT)
    )
    assert result.ci is not None
    low, high = result.ci
    assert low <= result.score <= high and high == 1.0


def test_combined_takes_the_larger_of_the_scorers_and_the_route() -> None:
    assert combined({"a": 0.2, "b": 0.4}, "mean") == pytest.approx(0.3)
    assert combined({"a": 0.2, "b": 0.4, ROUTE_PART: 0.35}, "mean") == 0.35
    assert combined({"a": 0.2, "b": 0.4, ROUTE_PART: 0.1}, "max") == 0.4
    with pytest.raises(ValueError, match="no scorer"):
        combined({ROUTE_PART: 1.0}, "max")
    # every scorer counts whatever its name; the route part by value, not by identity
    assert combined({"zeta": 0.9, ROUTE_PART: 0.1}, "max") == 0.9
    assert combined({"a": 0.2, "".join(["rou", "te"]): 0.1}, "mean") == 0.2


def test_a_scorer_named_route_is_refused() -> None:
    with pytest.raises(InputError, match="route"):
        Probe(NamedRoute(), generator=GEN)


def test_a_decision_shown_only_in_the_stream_scores_as_a_change_of_the_output() -> None:
    """``Routed.streamed`` is compared by every scorer beside the output: per pair, the max."""

    def step(prompt: str) -> Routed:
        return Routed({"status": "processed"}, None, {"ui": "yes" if is_man(prompt) else "no"})

    result = probe().probe_sync(step, PROMPT, step(PROMPT))
    assert result.score == 1.0
    assert ROUTE_PART not in result.parts  # route=None: no route part


def test_a_stream_the_same_for_every_group_dilutes_nothing() -> None:
    def update(prompt: str) -> dict[str, str]:
        return {"tool": "approve" if is_man(prompt) else "deny", "text": "ok"}

    def streamed(prompt: str) -> Routed:
        return Routed(update(prompt), None, {"ui": "thinking"})

    plain = probe().probe_sync(update, PROMPT, update(PROMPT))
    with_stream = probe().probe_sync(streamed, PROMPT, streamed(PROMPT))
    assert plain.score == with_stream.score == 0.5
    assert set(with_stream.parts) == set(plain.parts) == {"fields"}
