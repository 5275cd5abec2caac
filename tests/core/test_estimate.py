"""`biasbreaker.estimate`: the calls of a run predicted from its steps, without calling anything."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from biasbreaker.errors import ConfigError
from biasbreaker.estimate import Repairs, Step, describe, draw, predict, repair_cost, reruns
from biasbreaker.probe import CounterfactualGenerator, Probe
from biasbreaker.probe.budget import BudgetLimits, ProbeBudget

SKEPTICS = Repairs(frozenset({"skeptics"}), panel=3, max_rewrites=3)
BOTH = Repairs(frozenset({"skeptics", "madera"}), panel=3, max_rewrites=2)


def test_calls_without_repairs_are_each_steps_own_calls_and_its_reruns() -> None:
    runs = [
        [Step("screen", calls=8, reruns=13), Step("rank", calls=1, reruns=13)],
        [Step("screen", calls=8, reruns=0), Step("tool", calls=0, reruns=5)],
    ]
    p = predict(runs, SKEPTICS)
    assert p.calls == {"agent": 8 + 1 + 8 + 0, "probe": 13 * 8 + 13 * 1 + 0 + 5 * 0}
    assert (p.inputs, p.steps, p.guarded_steps, p.probed_steps) == (2, 4, 4, 3)
    assert p.without_repairs == p.expected == 17 + 117  # no trip rate: no expected repairs


def test_probe_rate_scales_the_reruns_and_max_calls_per_run_stops_the_rest_of_a_run() -> None:
    steps = [Step("a", reruns=7), Step("b", reruns=7), Step("c", reruns=7)]
    assert predict([steps], SKEPTICS, probe_rate=0.5).calls["probe"] == pytest.approx(10.5)
    # the second step's 7 would pass 10: it and every later step are held unprobed
    bounded = predict([steps], SKEPTICS, max_calls_per_run=10)
    assert bounded.calls["probe"] == 7 and bounded.probed_steps == 1
    # the held step runs its node and pauses the run for review: c never runs
    assert bounded.calls["agent"] == 2 and bounded.held == {"max_calls_per_run": 1}
    assert bounded.guarded_steps == 1  # no repair where the run pauses


def test_a_held_step_runs_its_node_then_pauses_the_run_with_nothing_re_run_or_repaired() -> None:
    held = [Step("a", calls=2, reruns=0, held="unsupported_language"), Step("b", reruns=0)]
    going = [Step("a", calls=2, reruns=7), Step("b", reruns=7)]
    p = predict([held, going], SKEPTICS)
    assert p.calls == {"agent": 2 + 2 + 1, "probe": 7 * 2 + 7}
    assert (p.inputs, p.steps, p.guarded_steps, p.probed_steps) == (2, 3, 2, 2)
    assert p.held == {"unsupported_language": 1} and p.held_inputs == 1
    assert p.repairs_most == predict([going], SKEPTICS).repairs_most  # none for the held input
    assert "1 input(s) held for review (unsupported_language 1)" in describe(p)[0]
    # sampled half the time: held half the time, else it goes on unprobed to b
    half = predict([held], SKEPTICS, probe_rate=0.5)
    assert half.held == {"unsupported_language": 0.5}
    assert half.calls == {"agent": 2 + 0.5}


def test_one_interventions_calls_follow_the_panel_and_the_recheck() -> None:
    step = Step("rank", calls=1, reruns=13)
    # the demo's measured trip: 3 skeptic verdicts, then 13 re-runs of (node + panel)
    assert repair_cost(step, SKEPTICS).typical == {"skeptic": 3, "re-check": 13 * 4}
    assert repair_cost(step, SKEPTICS).most == {"skeptic": 6, "re-check": 13 * 7}
    madera = Repairs(frozenset({"madera"}), max_rewrites=2)
    assert repair_cost(step, madera).typical == {"MADERA": 2, "re-check": 13 * 2}
    assert repair_cost(step, madera).most == {"MADERA": 4, "re-check": 2 * 13 * 2}
    # both possible: typical is the panel's, at most the costlier route's
    assert repair_cost(step, BOTH).most == {"skeptic": 6, "re-check": 91}
    assert repair_cost(step, Repairs(frozenset())).most == {}


def test_repairs_are_a_range_and_an_expectation_only_at_a_given_trip_rate() -> None:
    runs = [[Step("rank", calls=1, reruns=13)] * 2] * 10
    ranged = predict(runs, SKEPTICS)
    assert ranged.repairs_expected is None
    assert ranged.at_most == ranged.without_repairs + 20 * (6 + 91)
    assert ranged.repair_per_trip == 55
    expected = predict(runs, SKEPTICS, trip_rate=0.1)
    assert expected.expected == pytest.approx(expected.without_repairs + 2 * 55)
    # a phase whose breaker only records, or human review only: nothing to range over
    recording = predict(runs, Repairs(frozenset()))
    assert recording.at_most == recording.without_repairs
    assert any("no LLM-backed route" in line for line in describe(recording))


@pytest.mark.parametrize(("name", "value"), [("probe_rate", 1.5), ("trip_rate", -0.1)])
def test_a_share_outside_0_to_1_is_named_with_its_value(name: str, value: float) -> None:
    with pytest.raises(ConfigError, match=rf"{name} = {value} is not a share"):
        predict([], SKEPTICS, **{name: value})  # type: ignore[arg-type]


class _Exact:
    name = "exact"
    compares_neutralised = True

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        return [0.0 if a == b else 1.0 for a, b in zip(originals, counterfactuals, strict=True)]


def _probe(*, per_person: bool = True, budget: ProbeBudget | None = None) -> Probe:
    return Probe(
        _Exact(),
        generator=CounterfactualGenerator(seed=0),
        k=4,
        r=2,
        per_person=per_person,
        bootstrap=0,
        language=None,
        budget=budget,
    )


def test_reruns_are_what_the_probe_draws_for_the_input() -> None:
    probe = _probe()
    # two axes named: 4 variants + the joint one + 2 resamples
    assert reruns(probe, "n", "A Muslim man and a Christian man met.") == 7
    assert reruns(probe, "n", "Is the sky blue?") == 0  # not applicable
    # two persons of different groups: one more re-run per person (per_person)
    people = "Mary Carter and John Baker applied; rank them."
    assert reruns(probe, "n", people) == reruns(_probe(per_person=False), "n", people) + 2
    # the probe's own sampling and budget are left as they were
    assert probe.probe_rate == 1.0 and probe.budget is None


def test_a_step_the_probe_would_hold_is_drawn_held_with_the_runs_reason() -> None:
    probe = _probe(budget=ProbeBudget(BudgetLimits(max_calls_per_step=8)))
    people = "Mary Carter and John Baker applied; rank them."  # 9 re-runs, above 8
    over = draw(probe, "n", people)
    assert (over.reruns, over.held) == (0, "max_calls_per_step")
    assert over.reason.startswith("probe failed: BudgetExceeded: step 'n' (estimate:n)")
    assert "needs 9 re-runs" in over.reason
    assert draw(probe, "n", "A Muslim man and a Christian man met.") == draw(
        _probe(), "n", "A Muslim man and a Christian man met."
    )
    # "he" belongs to no one of two persons of different genders: no per-person variant
    unread = draw(_probe(), "n", "Mary Carter and John Baker applied; he is older.")
    assert (unread.reruns, unread.held) == (0, "unreadable") and unread.reason
    assert draw(_probe(), "n", "Is the sky blue?").held == ""  # not applicable: not held
