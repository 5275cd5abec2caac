"""``[probe] call_timeout_s``: a late re-run fails the probe closed and its result is discarded."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from typing import Any

import pytest

from biasbreaker.config import Settings
from biasbreaker.errors import ConfigError, InputError, ProbeError
from biasbreaker.probe import CounterfactualGenerator, Probe

GEN = CounterfactualGenerator(seed=3)
PROMPT = "He applied for the analyst job. Should we hire him?"


class ExactScorer:
    """0 when the texts are equal, 1 otherwise (compares mapped-back text)."""

    name = "exact"
    compares_neutralised = True

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        return [0.0 if a == b else 1.0 for a, b in zip(originals, counterfactuals, strict=True)]


def test_an_async_rerun_past_the_time_out_is_cancelled_and_fails_closed() -> None:
    cancelled: list[int] = []

    async def step(prompt: str, sample: int = 0) -> str:
        if "She" in prompt:  # the counterfactual never answers
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(sample)
                raise
        return "Decision: hire"

    probe = Probe(ExactScorer(), generator=GEN, k=2, r=1, bootstrap=0, call_timeout_s=0.05)
    with pytest.raises(ProbeError, match=r"timed out on its counterfactual variant \d.*0.05 s"):
        probe.probe_sync(step, PROMPT, "Decision: hire")
    assert cancelled, "the late re-run was left running"


def test_the_steps_own_timeout_error_is_reported_as_raised_not_as_late() -> None:
    async def step(prompt: str) -> str:
        if "She" in prompt:
            raise TimeoutError("upstream timed out")
        return "fine"

    probe = Probe(ExactScorer(), generator=GEN, k=2, r=1, bootstrap=0, call_timeout_s=5.0)
    with pytest.raises(ProbeError, match="raised TimeoutError"):
        probe.probe_sync(step, PROMPT, "fine")


@pytest.mark.parametrize("kind", ["sync", "async-blocking"])
def test_a_rerun_that_holds_the_loop_past_the_time_out_is_discarded_and_named(kind: str) -> None:
    """The time-out cannot fire while the loop is held; the clock catches it on return."""
    now = itertools.count(0.0, 1.0)  # each reading 1 s later: every call "took" 1 s
    late: list[str] = []

    def sync_step(prompt: str) -> str:
        late.append(prompt)
        return "Decision: reject"  # would score as a flip if it were counted

    async def blocking_step(prompt: str) -> str:
        return sync_step(prompt)

    step: Any = sync_step if kind == "sync" else blocking_step
    probe = Probe(
        ExactScorer(),
        generator=GEN,
        k=2,
        r=1,
        bootstrap=0,
        call_timeout_s=0.5,
        clock=lambda: next(now),
    )
    with pytest.raises(ProbeError, match="holding the event loop.*late result is discarded"):
        probe.probe_sync(step, PROMPT, "Decision: hire")
    assert late  # it ran, and its reply was not scored: the probe raised instead


def test_within_the_time_out_nothing_changes() -> None:
    now = itertools.count(0.0, 0.1)

    def step(prompt: str) -> str:
        return "Decision: hire"

    timed = Probe(ExactScorer(), generator=GEN, k=2, r=1, bootstrap=0, call_timeout_s=0.5)
    untimed = Probe(ExactScorer(), generator=GEN, k=2, r=1, bootstrap=0)
    clocked = Probe(
        ExactScorer(),
        generator=GEN,
        k=2,
        r=1,
        bootstrap=0,
        call_timeout_s=0.5,
        clock=lambda: next(now),
    )
    results = [
        p.probe_sync(step, PROMPT, "Decision: hire").to_dict() for p in (timed, untimed, clocked)
    ]
    assert results[0] == results[1] == results[2]


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "5"])
def test_a_bad_time_out_is_refused_naming_it(bad: Any) -> None:
    with pytest.raises(InputError, match="call_timeout_s"):
        Probe(ExactScorer(), generator=GEN, call_timeout_s=bad)


def test_the_setting_is_range_checked() -> None:
    with pytest.raises((ConfigError, ValueError), match="call_timeout_s"):
        Settings.model_validate({"probe": {"call_timeout_s": 0}})
    assert Settings().probe.call_timeout_s == 120.0
