"""Intervention costs: panel concurrency against its slowest skeptic, and runner overhead.

``panel`` group: three skeptics that each take 100 ms (an awaited sleep standing in for LLM
latency) run as a panel; the baseline is the slowest skeptic alone. Goal: the panel takes at
most 1.15x the slowest one (the skeptics run concurrently, so the panel costs one latency, not
three).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from biasbreaker.intervention.panel import SkepticPanel
from biasbreaker.intervention.types import ReviewRequest, SkepticVerdict
from biasbreaker_plugins.aggregators import UniformAggregator

LATENCY_S = 0.1


class SleepySkeptic:
    def __init__(self, kind: str, latency_s: float) -> None:
        self._kind = kind
        self.latency_s = latency_s

    @property
    def kind(self) -> str:
        return self._kind

    async def review(self, request: ReviewRequest) -> SkepticVerdict:
        await asyncio.sleep(self.latency_s)
        return SkepticVerdict(
            kind=self.kind, decision="revise", confidence=0.7, evidence=("e",), revision="fixed"
        )


REQUEST = ReviewRequest(payload="The man is the better engineer.", seed=1)


@pytest.mark.benchmark(group="panel")
def test_slowest_skeptic_alone_baseline(benchmark: Any) -> None:
    skeptic = SleepySkeptic("slowest", LATENCY_S)
    verdict = benchmark.pedantic(
        lambda: asyncio.run(skeptic.review(REQUEST)), rounds=10, iterations=1
    )
    assert verdict.decision == "revise"


@pytest.mark.benchmark(group="panel")
def test_three_skeptic_panel(benchmark: Any) -> None:
    benchmark.extra_info["goal_ratio"] = 1.15
    benchmark.extra_info["per"] = "3 skeptics x 100 ms, concurrent"
    panel = SkepticPanel(
        [SleepySkeptic(k, LATENCY_S) for k in ("a", "b", "c")],
        UniformAggregator(),
        aggregator_name="uniform",
    )
    run = benchmark.pedantic(lambda: asyncio.run(panel.run(REQUEST)), rounds=10, iterations=1)
    assert run.ok
    assert len(run.verdicts) == 3


# --------------------------------------------------------------------------------------------
# runner overhead: the whole hook (route, request, panel, blend, freeze, trail, result) against
# the bare strategy call (the panel alone), both with zero-latency skeptics; the re-check here
# returns a fixed measurement so only the runner's own orchestration is timed.

from biasbreaker.breaker import freeze  # noqa: E402
from biasbreaker.intervention.runner import InterventionRunner, Recheck  # noqa: E402
from biasbreaker.types import BreakerState, InterventionContext, Thresholds  # noqa: E402


class _Route:
    def route(self, context: Any) -> str:
        return "skeptics"


class _FixedRecheck:
    async def recheck(self, context: Any, repair: Any, repaired: Any) -> Recheck:
        return Recheck(score=0.0, calls=0)


def _instant_panel() -> SkepticPanel:
    return SkepticPanel(
        [SleepySkeptic(k, 0.0) for k in ("a", "b", "c")],
        UniformAggregator(),
        aggregator_name="uniform",
    )


CONTEXT = InterventionContext(
    step=3,
    node="writer",
    state=BreakerState.NORMAL,
    fast=0.5,
    slow=0.2,
    mixing_ratio=0.98,
    thresholds=Thresholds(0.3, 0.2, 0.15, 0.05),
    local_scores={"writer": 0.5},
    weights={"writer": 1.0},
    frozen_payload=freeze(REQUEST.payload),
    seed=1,
    step_input=freeze("Rank the two candidates."),
)


@pytest.mark.benchmark(group="runner")
def test_bare_panel_call_baseline(benchmark: Any) -> None:
    panel = _instant_panel()
    run = benchmark(lambda: asyncio.run(panel.run(REQUEST)))
    assert run.ok


@pytest.mark.benchmark(group="runner")
def test_runner_hook_overhead(benchmark: Any) -> None:
    benchmark.extra_info["per"] = "one intervention, zero-latency skeptics, fixed re-check"
    runner = InterventionRunner(_Route(), _FixedRecheck(), panel=_instant_panel())
    result = benchmark(runner.hook, CONTEXT)
    assert result.converged
