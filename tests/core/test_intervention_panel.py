import asyncio

import pytest

from biasbreaker.errors import ConfigError, LLMError, MalformedReplyError
from biasbreaker.intervention.panel import SkepticPanel
from biasbreaker.intervention.types import ReviewRequest, SkepticVerdict
from biasbreaker_plugins.aggregators import UniformAggregator
from intervention_doubles import Barrier, StaticSkeptic


def verdict(kind, decision="revise"):
    return SkepticVerdict(
        kind=kind,
        decision=decision,
        confidence=0.7,
        evidence=("e",),
        revision="fixed" if decision != "stands" else None,
    )


def panel(*skeptics, timeout_s=5.0):
    return SkepticPanel(
        list(skeptics), UniformAggregator(), aggregator_name="uniform", timeout_s=timeout_s
    )


def test_a_panel_of_one_is_rejected():
    with pytest.raises(ConfigError, match="at least 2"):
        panel(StaticSkeptic("a", verdict("a")))


def test_two_skeptics_of_one_kind_are_rejected():
    with pytest.raises(ConfigError, match="distinct kinds"):
        panel(StaticSkeptic("a", verdict("a")), StaticSkeptic("a", verdict("a")))


def test_settings_reject_a_short_panel(make_kernel):
    with pytest.raises(ConfigError, match="at least 2 skeptics"):
        make_kernel({"intervention": {"skeptics": ["empirical-auditor"]}})
    with pytest.raises(ConfigError, match="twice"):
        make_kernel({"intervention": {"skeptics": ["devils-advocate", "devils-advocate"]}})


async def test_skeptics_run_concurrently_max_in_flight():
    """Each review waits until all three are inside at once: sequential runs would time out."""
    barrier = Barrier(3)
    p = panel(
        *(StaticSkeptic(k, verdict(k), gate=barrier) for k in ("a", "b", "c")), timeout_s=10.0
    )
    run = await p.run(ReviewRequest(payload="x"))
    assert barrier.max_inside == 3
    assert run.ok and len(run.verdicts) == 3 and run.failures == ()


async def test_a_sequential_panel_would_fail_the_barrier():
    """Control for the test above: the barrier really does need concurrency."""
    barrier = Barrier(3)
    skeptic = StaticSkeptic("a", verdict("a"), gate=barrier)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(skeptic.review(None), 0.05)
    assert barrier.max_inside == 1


async def never() -> None:
    await asyncio.Event().wait()


async def test_failures_are_recorded_and_two_valid_verdicts_suffice():
    p = panel(
        StaticSkeptic("ok-1", verdict("ok-1")),
        StaticSkeptic("ok-2", verdict("ok-2")),
        StaticSkeptic("slow", verdict("slow"), gate=never),
        timeout_s=0.05,
    )
    run = await p.run(ReviewRequest(payload="x"))
    assert run.ok
    assert [(f.kind, f.failure) for f in run.failures] == [("slow", "timeout")]


@pytest.mark.parametrize(
    ("bad", "failure"),
    [
        (dict(error=RuntimeError("boom")), "error"),
        (dict(error=LLMError("transport down")), "error"),
        (dict(error=MalformedReplyError("reply malformed twice")), "malformed"),
        (dict(gate=never), "timeout"),
        (dict(), "invalid"),
    ],
)
async def test_fewer_than_two_valid_verdicts_fail_closed(bad, failure):
    broken = StaticSkeptic("broken", "not a verdict" if not bad else verdict("broken"), **bad)
    p = panel(StaticSkeptic("ok", verdict("ok")), broken, timeout_s=0.05)
    run = await p.run(ReviewRequest(payload="x"))
    assert not run.ok and run.result is None
    assert "1 valid verdict(s) of 2" in run.closed_reason
    assert run.failures[0].failure == failure and run.failures[0].kind == "broken"


async def test_a_verdict_claiming_another_kind_is_recorded_under_its_skeptic():
    p = panel(StaticSkeptic("a", verdict("impostor")), StaticSkeptic("b", verdict("b")))
    run = await p.run(ReviewRequest(payload="x"))
    assert sorted(v.kind for v in run.verdicts) == ["a", "b"]
