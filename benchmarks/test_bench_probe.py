"""Probe throughput with a zero-latency step, and its cost in step calls per probed step.

Baseline: one unprobed call of the same step. Every other case is printed as a multiple of
it; ``extra_info["per"]`` says what one round is and how many step calls it made. Throughput
in probed steps per second is ``1 / mean``. Each round probes a new input, so no round is
served from the per-run cache.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from biasbreaker.probe import CounterfactualGenerator, Probe
from biasbreaker_plugins.scorers.decision import DecisionScorer
from biasbreaker_plugins.scorers.lexical import LexicalScorer

GEN = CounterfactualGenerator(seed=0)
TEMPLATE = "Jamal Washington applied for the analyst job; he has {n} years of experience. Hire him?"


def step(prompt: str) -> str:
    """Zero-latency, gender-biased decision step."""
    return "Decision: hire" if " him" in prompt else "Decision: reject"


@pytest.mark.benchmark(group="probe")
def test_unprobed_step_call_baseline(benchmark: Any) -> None:
    counter = itertools.count()
    benchmark(lambda: step(TEMPLATE.format(n=next(counter))))


@pytest.mark.benchmark(group="probe")
def test_counterfactual_generation_only(benchmark: Any) -> None:
    counter = itertools.count()
    benchmark.extra_info["per"] = "generate(k=4) on a new input, no step call"
    result = benchmark(lambda: GEN.generate(TEMPLATE.format(n=next(counter)), 4))
    assert len(result.variants) == 4


@pytest.mark.parametrize(
    ("label", "scorer", "k", "r", "bootstrap"),
    [
        ("decision-k4-r2", DecisionScorer(), 4, 2, 0),
        ("decision-k4-r2-bootstrap1000", DecisionScorer(), 4, 2, 1000),
        ("lexical-k4-r2", LexicalScorer(), 4, 2, 0),
        ("decision-k32-r32", DecisionScorer(), 32, 32, 0),
    ],
)
@pytest.mark.benchmark(group="probe")
def test_probe_one_step(
    benchmark: Any, label: str, scorer: Any, k: int, r: int, bootstrap: int
) -> None:
    probe = Probe(scorer, generator=GEN, k=k, r=r, bootstrap=bootstrap, seed=0)
    counter = itertools.count()

    def run() -> Any:
        prompt = TEMPLATE.format(n=next(counter))
        return probe.probe_sync(step, prompt, step(prompt))

    result = benchmark(run)
    calls = result.calls + result.cache_hits
    rate = 1.0 / benchmark.stats.stats.mean
    benchmark.extra_info["per"] = (
        f"one probed step via probe_sync, {label}: {calls} step calls per probed step, "
        f"{rate:.0f} probed steps/s"
    )
    assert calls == k + r + 1  # the joint variant: the full name tells race and gender


@pytest.mark.benchmark(group="probe")
def test_probe_50_steps_in_one_event_loop(benchmark: Any) -> None:
    """The way a framework adapter uses it: ``await probe(...)`` inside a running loop."""
    probe = Probe(DecisionScorer(), generator=GEN, k=4, r=2, bootstrap=0, seed=0)
    counter = itertools.count()

    async def many() -> int:
        calls = 0
        for _ in range(50):
            prompt = TEMPLATE.format(n=next(counter))
            result = await probe.probe(step, prompt, step(prompt))
            calls += result.calls + result.cache_hits
        return calls

    calls = benchmark(lambda: asyncio.run(many()))
    rate = 50.0 / benchmark.stats.stats.mean
    benchmark.extra_info["per"] = (
        f"50 probed steps in one event loop, decision-k4-r2: {calls // 50} step calls per "
        f"probed step, {rate:.0f} probed steps/s"
    )


@pytest.mark.benchmark(group="probe")
def test_language_check_only(benchmark: Any) -> None:
    """The probe's language guard on a new input: the one identifier call a probed step makes.

    Compare with ``test_counterfactual_generation_only`` (same input): the guard should cost a
    small fraction of drawing the variants. The model is loaded before the rounds start.
    """
    from biasbreaker.probe.language import LanguageGuard

    guard = LanguageGuard()
    guard.check(TEMPLATE.format(n=0))  # loads py3langid's model once
    counter = itertools.count()
    benchmark.extra_info["per"] = "LanguageGuard.check on a new 90-character input"
    reading = benchmark(lambda: guard.check(TEMPLATE.format(n=next(counter))))
    assert reading is not None
    assert reading.supported
