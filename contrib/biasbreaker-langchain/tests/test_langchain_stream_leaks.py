"""No stream shows a held reply or a probe variant, after a repair or an answered review.

**Simulated** (the seeded biased loan model). The held reply denies Ms. Mary Carter
(``deny_loan``, ``Decision: no``); the probe's variants name other people and approve
(``approve_loan``, ``Decision: yes``). Every chunk of every stream mode (all seven at once,
sync and async) and every ``astream_events`` v2 event is scanned, for the run that holds the
reply and for the run that resumes it; only the review request, addressed to the reviewer,
may carry the reply.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from biasbreaker_langchain import BiasGuardMiddleware
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from lc_agents import SETTINGS, WOMAN, LoanModel, Watch, loan_tools, model, question, scrub

from biasbreaker.breaker import freeze
from biasbreaker.intervention.runner import InterventionRunner
from biasbreaker.types import InterventionContext, InterventionResult

ALL_MODES = ["values", "updates", "messages", "custom", "debug", "tasks", "checkpoints"]
HELD = ("deny_loan", "Decision: no")
VARIANT_REPLIES = ("approve_loan", "Decision: yes")
REPAIRED = "Decision: referred to a loan officer"


class Prompts(LoanModel):
    """The biased loan model, recording the last human message of every call."""

    prompts: Any = None

    def _reply(self, messages: list[BaseMessage]) -> Any:
        human = [m for m in messages if isinstance(m, HumanMessage)]
        if human and self.prompts is not None:
            self.prompts.append(str(human[-1].content))
        return super()._reply(messages)


def agent_for(tmp_path: Path, watch: Watch, prompts: list[str]) -> Any:
    base = model(True, watch)
    llm = Prompts(client=base.client, tool_for=base.tool_for, watch=watch, prompts=prompts)
    trace = str(tmp_path / "trace-{thread_id}.jsonl")
    settings = {**SETTINGS, "plugin": {"langchain-agent": {"trace_path": trace}}}
    return create_agent(
        llm,
        tools=loan_tools(watch),
        middleware=[BiasGuardMiddleware(settings)],
        checkpointer=InMemorySaver(),
    )


def leaks(text: str, prompts: list[str], shown: tuple[str, ...] = ()) -> list[str]:
    """What ``text`` shows that it must not: the held reply, a variant, a variant's reply."""
    variants = sorted({p for p in prompts if p != WOMAN})
    assert variants, "the probe re-issued no counterfactual: nothing to look for"
    banned = [s for s in (*HELD, *VARIANT_REPLIES) if s not in shown]
    return [s for s in (*banned, *variants) if s in text]


def passing_repair(monkeypatch: pytest.MonkeyPatch) -> None:
    async def repair(self: InterventionRunner, context: InterventionContext) -> InterventionResult:
        call = {"name": "deny_loan", "args": {"reason": REPAIRED}}
        view = {"messages": [{"type": "ai", "content": "", "tool_calls": [call]}]}
        return InterventionResult(
            repaired=freeze(view), converged=True, strategy="skeptics", recheck_score=0.0
        )

    monkeypatch.setattr(InterventionRunner, "ahook", repair)


def config(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


@pytest.mark.parametrize("how", ["reject", "edit"])
def test_sync_streams_after_an_answered_review_show_no_held_reply(tmp_path: Path, how: str) -> None:
    watch, prompts = Watch(), []
    agent = agent_for(tmp_path, watch, prompts)
    run = config(f"sync-{how}")
    first = list(agent.stream(question(WOMAN), run, stream_mode=ALL_MODES))
    request = agent.get_state(run).interrupts[0].value
    answer = {"action": how, "sha256": request["sha256"], "content": "Referred to an officer."}
    if how == "reject":
        del answer["content"]
    second = list(agent.stream(Command(resume=answer), run, stream_mode=ALL_MODES))
    assert watch.executed == []
    assert leaks(scrub(first), prompts) == []
    assert leaks(scrub(second), prompts) == []


def test_sync_streams_after_a_repair_show_only_the_repair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passing_repair(monkeypatch)
    watch, prompts = Watch(), []
    agent = agent_for(tmp_path, watch, prompts)
    chunks = list(agent.stream(question(WOMAN), config("sync-repair"), stream_mode=ALL_MODES))
    text = scrub(chunks)
    assert watch.executed == [("deny_loan", REPAIRED)]
    assert REPAIRED in text
    assert leaks(text, prompts, shown=("deny_loan",)) == []  # the repair calls it, reworded
    messages = [c[1] for c in chunks if c[0] == "messages"]
    assert sum(REPAIRED in repr(m) for m, _ in messages) == 1  # streamed whole, once


def test_async_streams_and_events_after_review_and_repair_show_no_held_reply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    watch, prompts = Watch(), []

    async def main() -> tuple[list[Any], ...]:
        agent = agent_for(tmp_path, watch, prompts)
        run = config("async-review")
        first = [c async for c in agent.astream(question(WOMAN), run, stream_mode=ALL_MODES)]
        request = (await agent.aget_state(run)).interrupts[0].value
        answer = {"action": "reject", "sha256": request["sha256"]}
        second = [
            c async for c in agent.astream(Command(resume=answer), run, stream_mode=ALL_MODES)
        ]
        events_run = config("async-events")
        events = [e async for e in agent.astream_events(question(WOMAN), events_run, version="v2")]
        request = (await agent.aget_state(events_run)).interrupts[0].value
        answer = {"action": "reject", "sha256": request["sha256"]}
        resumed = [
            e async for e in agent.astream_events(Command(resume=answer), events_run, version="v2")
        ]
        return first, second, events, resumed

    outputs = asyncio.run(main())
    assert watch.executed == []
    assert all(outputs)
    for output in outputs:
        assert leaks(scrub(output), prompts) == []

    passing_repair(monkeypatch)
    repaired_watch, repaired_prompts = Watch(), []

    async def repaired_run() -> list[Any]:
        agent = agent_for(tmp_path, repaired_watch, repaired_prompts)
        run = config("async-repair")
        return [e async for e in agent.astream_events(question(WOMAN), run, version="v2")]

    events = asyncio.run(repaired_run())
    text = scrub(events)
    assert repaired_watch.executed == [("deny_loan", REPAIRED)] and REPAIRED in text
    assert leaks(text, repaired_prompts, shown=("deny_loan",)) == []
