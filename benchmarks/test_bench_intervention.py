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
        return SkepticVerdict(kind=self.kind, decision="revise", confidence=0.7,
                              evidence=("e",), revision="fixed")


REQUEST = ReviewRequest(payload="The man is the better engineer.", seed=1)


@pytest.mark.benchmark(group="panel")
def test_slowest_skeptic_alone_baseline(benchmark: Any) -> None:
    skeptic = SleepySkeptic("slowest", LATENCY_S)
    verdict = benchmark.pedantic(lambda: asyncio.run(skeptic.review(REQUEST)), rounds=10,
                                 iterations=1)
    assert verdict.decision == "revise"


@pytest.mark.benchmark(group="panel")
def test_three_skeptic_panel(benchmark: Any) -> None:
    benchmark.extra_info["goal_ratio"] = 1.15
    benchmark.extra_info["per"] = "3 skeptics x 100 ms, concurrent"
    panel = SkepticPanel(
        [SleepySkeptic(k, LATENCY_S) for k in ("a", "b", "c")], UniformAggregator(),
        aggregator_name="uniform",
    )
    run = benchmark.pedantic(lambda: asyncio.run(panel.run(REQUEST)), rounds=10, iterations=1)
    assert run.ok
    assert len(run.verdicts) == 3
