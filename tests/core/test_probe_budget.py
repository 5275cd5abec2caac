"""The probe's call and token budget: a step the run cannot pay for is held, never waved through."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Sequence
from pathlib import Path

import pytest

from biasbreaker.config import load_settings
from biasbreaker.errors import ConfigError, ProbeError
from biasbreaker.probe import CounterfactualGenerator, Probe
from biasbreaker.probe.budget import (
    BudgetExceeded,
    BudgetLimits,
    ProbeBudget,
    UnmeteredWarning,
    charge_tokens,
    metering,
)


class ExactScorer:
    name = "exact"
    compares_neutralised = True

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        return [0.0 if a == b else 1.0 for a, b in zip(originals, counterfactuals, strict=True)]


class CountedStep:
    """A group-blind step that counts its calls and, like a metered LLM client, charges tokens."""

    def __init__(self, tokens_per_call: int = 0) -> None:
        self.calls = 0
        self.tokens_per_call = tokens_per_call

    def __call__(self, prompt: str, sample: int = 0) -> str:
        self.calls += 1
        charge_tokens(self.tokens_per_call)
        return "Decision: hire"


PROMPTS = [  # each probe re-runs the step 6 times: 4 distinct variants, 2 resamples
    "Mr. John Carter applied for the analyst job. Should we hire him?",
    "Mr. John Carter applied for the clerk job. Should we hire him?",
    "Mr. John Carter applied for the driver job. Should we hire him?",
]


def make_probe(limits: BudgetLimits, **kwargs: object) -> Probe:
    return Probe(
        ExactScorer(),
        generator=CounterfactualGenerator(seed=3),
        k=4,
        r=2,
        joint=False,
        bootstrap=0,
        language=None,
        budget=ProbeBudget(limits),
        **kwargs,  # type: ignore[arg-type]
    )


def run(probe: Probe, step: CountedStep, prompt: str, sid: str) -> object:
    return asyncio.run(probe.probe(step, prompt, step(prompt), step_id=sid, step_name="screen"))


def test_a_step_needing_more_re_runs_than_the_step_budget_is_held_before_any_re_run() -> None:
    probe = make_probe(BudgetLimits(max_calls_per_step=5))
    step = CountedStep()
    with pytest.raises(BudgetExceeded) as info:
        run(probe, step, PROMPTS[0], "s0")
    assert isinstance(info.value, ProbeError)  # the adapters' fail-closed path holds it
    assert step.calls == 1  # only the guarded call itself: no re-run started
    message = str(info.value)
    assert "step 'screen' (s0) is held for review unprobed" in message
    assert (
        "needs 6 re-runs (4 counterfactual variants + 2 resamples), above [probe] "
        "max_calls_per_step = 5" in message
    )
    assert "raise max_calls_per_step to at least 6" in message  # what this step needs
    assert probe.budget is not None and probe.budget.calls == 0


def test_the_run_budget_holds_the_step_that_would_pass_it_and_every_later_one() -> None:
    probe = make_probe(BudgetLimits(max_calls_per_run=12))
    step = CountedStep()
    for i in (0, 1):
        result = run(probe, step, PROMPTS[i], f"s{i}")
        assert (result.status, result.calls) == ("scored", 6)  # type: ignore[attr-defined]
    assert step.calls == 2 * (1 + 6)
    with pytest.raises(BudgetExceeded, match=r"spent 12 of its \[probe\] max_calls_per_run = 12"):
        run(probe, step, PROMPTS[2], "s2")
    assert step.calls == 2 * (1 + 6) + 1
    assert probe.budget is not None and probe.budget.calls == 12


def test_a_step_with_nothing_to_probe_costs_nothing_and_is_not_held() -> None:
    probe = make_probe(BudgetLimits(max_calls_per_run=6))
    step = CountedStep()
    result = run(probe, step, "Summarise the quarterly report.", "s0")
    assert result.status == "not_applicable"  # type: ignore[attr-defined]
    assert probe.budget is not None and probe.budget.calls == 0
    assert run(probe, step, PROMPTS[0], "s1").status == "scored"  # type: ignore[attr-defined]


def test_cached_re_runs_are_free() -> None:
    probe = make_probe(BudgetLimits(max_calls_per_run=6))
    step = CountedStep()

    def again(sid: str) -> object:  # the same input and rotation state: the same variants
        return asyncio.run(
            probe.probe(step, PROMPTS[0], "Decision: hire", step_id=sid, coverage={})
        )

    assert again("s0").calls == 6  # type: ignore[attr-defined]
    # the same input again: every re-run is answered from the probe's cache
    assert again("s1").calls == 0  # type: ignore[attr-defined]
    assert probe.budget is not None and probe.budget.calls == 6


def test_the_token_budget_counts_only_the_probes_re_runs_and_holds_once_reached() -> None:
    probe = make_probe(BudgetLimits(max_tokens_per_run=1000))
    step = CountedStep(tokens_per_call=100)
    run(probe, step, PROMPTS[0], "s0")
    assert probe.budget is not None
    assert probe.budget.tokens == 600  # 6 re-runs; the guarded call itself is not the probe's
    run(probe, step, PROMPTS[1], "s1")  # starts at 600 < 1000, ends at 1200
    with pytest.raises(BudgetExceeded, match=r"used 1200 tokens, reaching \[probe\] max_tokens"):
        run(probe, step, PROMPTS[2], "s2")


def test_an_unmetered_node_is_warned_once_even_when_the_filter_says_always() -> None:
    """The docs' "the first probed step of each node": not every step, whatever the filter."""
    probe = make_probe(BudgetLimits(max_tokens_per_run=1000))
    step = CountedStep(tokens_per_call=0)  # a model that reports no usage

    def unmetered(probe: Probe, prompt: str, sid: str, name: str = "screen") -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            asyncio.run(probe.probe(step, prompt, step(prompt), step_id=sid, step_name=name))
        return [str(w.message) for w in caught if w.category is UnmeteredWarning]

    first = unmetered(probe, PROMPTS[0], "s0")
    assert len(first) == 1 and "cannot see the re-runs of step 'screen'" in first[0]
    assert unmetered(probe, PROMPTS[1], "s1") == []  # the same node: warned already
    assert len(unmetered(probe, PROMPTS[2], "s2", name="rank")) == 1  # another node
    assert probe.budget is not None
    next_run = make_probe(BudgetLimits(max_tokens_per_run=1000))
    next_run.budget = probe.budget.fresh()  # the guard's next run: the same guard
    assert unmetered(next_run, PROMPTS[0], "t0") == []
    other_guard = make_probe(BudgetLimits(max_tokens_per_run=1000))
    assert len(unmetered(other_guard, PROMPTS[0], "u0")) == 1


def test_tokens_are_charged_only_inside_metering() -> None:
    budget = ProbeBudget(BudgetLimits(max_tokens_per_run=10))
    charge_tokens(50)
    assert budget.tokens == 0
    with metering(budget):
        charge_tokens(7)
        charge_tokens(-3)  # a nonsense count charges nothing
    charge_tokens(50)
    assert budget.tokens == 7


def test_a_fresh_budget_keeps_the_bounds_and_spends_nothing() -> None:
    budget = ProbeBudget(BudgetLimits(max_calls_per_run=8), calls=5, tokens=9)
    fresh = budget.fresh()
    assert (fresh.limits, fresh.calls, fresh.tokens) == (budget.limits, 0, 0)


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_limits_must_be_counts(bad: object) -> None:
    with pytest.raises(ValueError, match="max_calls_per_run="):
        BudgetLimits(max_calls_per_run=bad)  # type: ignore[arg-type]


def test_a_budget_below_one_probe_is_a_config_error_naming_field_value_and_fix(
    isolated_config: Path,
) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(overrides={"probe": {"k": 4, "r": 2, "max_calls_per_run": 5}})
    message = str(info.value)
    assert "max_calls_per_run=5 is below k + r = 4 + 2 = 6" in message
    assert "Set max_calls_per_run to at least 6" in message and "0 for no bound" in message
    (isolated_config / "biasbreaker.toml").write_text(
        "[probe]\nmax_tokens_per_run = -1\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r"probe.max_tokens_per_run = -1"):
        load_settings()
    (isolated_config / "biasbreaker.toml").write_text("", encoding="utf-8")
    settings = load_settings(overrides={"probe": {"max_calls_per_step": 7}}).settings
    assert settings.probe.max_calls_per_step == 7


TWO_PERSONS = "Mary Carter and John Baker applied for the analyst job. Whom should we hire?"


def test_the_config_advice_and_the_held_step_count_per_person_variants_alike(
    isolated_config: Path,
) -> None:
    """k = 4, r = 2, joint and per_person on: two persons of different genders need 9."""
    probe_cfg = {"k": 4, "r": 2, "joint": True, "per_person": True}
    with pytest.raises(ConfigError) as info:
        load_settings(overrides={"probe": {**probe_cfg, "max_calls_per_step": 5}})
    advice = " ".join(str(info.value).split())
    expected = "4 counterfactual variants + 2 resamples + 1 joint + 2 per-person"
    assert "9 for one naming two persons of different genders by name" in advice
    assert f"'Mary Carter and John Baker applied' ({expected})" in advice
    assert "7 for an input naming two axes" in advice
    # at run time, a bound between the two: the configured probe draws what the advice counted
    from biasbreaker.kernel import Kernel
    from biasbreaker.probe.probe import build_probe

    probe = build_probe(
        Kernel.load(
            overrides={"probe": {**probe_cfg, "max_calls_per_step": 8, "scorers": ["decision"]}}
        )
    )
    step = CountedStep()
    with pytest.raises(BudgetExceeded) as held:
        run(probe, step, TWO_PERSONS, "s0")
    assert f"needs 9 re-runs ({expected}), above [probe] max_calls_per_step = 8" in str(held.value)


def test_the_settings_reach_the_probe_and_no_bound_means_no_budget() -> None:
    from biasbreaker.kernel import Kernel
    from biasbreaker.probe.probe import build_probe

    assert build_probe(Kernel.load()).budget is None
    kernel = Kernel.load(overrides={"probe": {"max_calls_per_step": 7, "max_tokens_per_run": 9}})
    budget = build_probe(kernel).budget
    assert budget is not None
    assert budget.limits == BudgetLimits(max_calls_per_step=7, max_tokens_per_run=9)


def test_the_fake_clients_tokens_inside_the_probe_are_charged() -> None:
    from biasbreaker.llm import LLMRequest
    from biasbreaker.probe import with_current_sample
    from biasbreaker_plugins.llm_fake import FakeLLM, FakeLLMOptions

    client = FakeLLM(FakeLLMOptions(), seed=0)

    async def step(prompt: str) -> str:
        reply = await client.complete(with_current_sample(LLMRequest.chat(prompt)))
        return reply.text

    probe = make_probe(BudgetLimits(max_tokens_per_run=10**6))
    output = asyncio.run(step(PROMPTS[0]))
    result = asyncio.run(probe.probe(step, PROMPTS[0], output, step_id="s0"))
    assert probe.budget is not None and result.calls == 6
    assert probe.budget.tokens > 0
    one = asyncio.run(client.complete(LLMRequest.chat(PROMPTS[0])))
    assert probe.budget.tokens >= 6 * one.prompt_tokens  # at least every re-run's prompt
