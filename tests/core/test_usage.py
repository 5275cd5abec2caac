"""The role of an LLM call (agent, probe, re-check, skeptic, MADERA) and the tally per role."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

from biasbreaker.llm import LLMResponse
from biasbreaker.probe import CounterfactualGenerator, Probe
from biasbreaker.usage import (
    UsageTally,
    current_tally,
    describe_usage,
    phase,
    role_of,
    tallied,
)


def test_the_purpose_names_the_role_outside_the_probe_and_the_re_check() -> None:
    assert [role_of(p) for p in ("agent", "skeptic", "diagnoser", "editor", "other")] == [
        "agent",
        "skeptic",
        "MADERA",
        "MADERA",
        "other",
    ]


def test_inside_a_phase_every_call_is_the_phases_and_an_outer_phase_wins() -> None:
    with phase("probe"):
        assert role_of("agent") == "probe" and role_of("editor") == "probe"
    with phase("re-check"), phase("probe"):  # the probe a re-check runs
        assert role_of("agent") == "re-check"
    assert role_of("agent") == "agent"


class Exact:
    name = "exact"
    compares_neutralised = True

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        return [0.0 if a == b else 1.0 for a, b in zip(originals, counterfactuals, strict=True)]


def test_the_probes_re_runs_are_the_probes_calls_sync_and_async() -> None:
    seen: list[str] = []
    lock = threading.Lock()

    def step(prompt: str, sample: int = 0) -> str:
        with lock:
            seen.append(role_of("agent"))
        return "Decision: hire"

    async def astep(prompt: str, sample: int = 0) -> str:
        return step(prompt, sample)

    prompt = "Mr. John Carter applied. Should we hire him?"
    for s in (step, astep):
        seen.clear()
        probe = Probe(
            Exact(), generator=CounterfactualGenerator(seed=3), bootstrap=0, language=None
        )
        result = asyncio.run(probe.probe(s, prompt, step(prompt)))
        assert seen[0] == "agent"  # the guarded call itself, outside the probe
        assert seen[1:] == ["probe"] * result.calls and result.calls > 0


def test_the_tally_adds_calls_and_tokens_per_role_and_keeps_estimates_apart() -> None:
    tally = UsageTally()
    tally.call("probe")
    tally.reply("probe", LLMResponse("x", "m", prompt_tokens=10, completion_tokens=2))
    tally.call("agent")
    tally.reply(
        "agent", LLMResponse("y", "m", prompt_tokens=3, completion_tokens=1, usage_estimated=True)
    )
    tally.call("agent")  # a call that failed: counted, no tokens
    assert tally.to_json() == {
        "agent": {"calls": 2, "prompt_tokens": 3, "completion_tokens": 1, "estimated_tokens": 4},
        "probe": {"calls": 1, "prompt_tokens": 10, "completion_tokens": 2, "estimated_tokens": 0},
    }
    assert describe_usage(tally.to_json()) == (
        "agent 2 calls, 4 tokens (4 estimated); probe 1 calls, 12 tokens"
    )
    assert describe_usage({}) == "no LLM calls"


def test_tallies_add_up_and_a_snapshot_difference_keeps_the_roles_that_moved() -> None:
    from biasbreaker.usage import combine_usage, usage_since

    a = {"probe": {"calls": 2, "prompt_tokens": 5, "completion_tokens": 1, "estimated_tokens": 0}}
    b = {
        "agent": {"calls": 1, "prompt_tokens": 3, "completion_tokens": 2, "estimated_tokens": 5},
        "probe": {"calls": 1, "prompt_tokens": 1, "completion_tokens": 1, "estimated_tokens": 2},
    }
    both = combine_usage(a, b)
    assert list(both) == ["agent", "probe"]
    assert both["probe"] == {
        "calls": 3,
        "prompt_tokens": 6,
        "completion_tokens": 2,
        "estimated_tokens": 2,
    }
    assert usage_since(both, a) == b
    assert usage_since(both, both) == {}


def test_a_tallied_block_reaches_its_tasks_and_worker_threads_and_no_other_block() -> None:
    seen: dict[str, UsageTally | None] = {}

    async def one(name: str) -> None:
        with tallied(UsageTally()) as mine:
            await asyncio.sleep(0)  # the two blocks interleave
            assert current_tally() is mine
            seen[name] = await asyncio.to_thread(current_tally)  # a worker thread
            task = asyncio.ensure_future(asyncio.sleep(0, result=current_tally()))
            assert await task is mine
            assert seen[name] is mine

    async def both() -> None:
        await asyncio.gather(one("a"), one("b"))

    asyncio.run(both())
    assert seen["a"] is not seen["b"]
    assert current_tally() is None
