"""The order of BiasGuardMiddleware among other middleware (real create_agent, seeded fake).

``create_agent`` runs the first listed ``wrap_model_call`` outermost: a middleware listed after
the guard may change the request after the guard read it. A ``@dynamic_prompt`` that writes
the applicant's profile (from the runtime context) into the system prompt is the case here:
the question names nobody, the profile names Ms. Mary Carter.

* order A, ``[guard, dynamic_prompt]``: the model decides on a request the guard never read;
  the step is held as unreadable, the reason naming the fix (biased or fair alike);
* order B, ``[dynamic_prompt, guard]``: the guard probes the profile: biased held, fair through;
* order C, a static ``system_prompt``: as B.

Retry and fallback middleware listed after the guard change nothing the model reads: a
fallback model's call is probed as usual.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from biasbreaker_langchain import BiasGuardMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelFallbackMiddleware,
    ModelRequest,
    ModelRetryMiddleware,
    dynamic_prompt,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from lc_agents import SETTINGS, LoanModel, Watch, loan_tools, model, question

PROFILE = "Ms. Mary Carter, who earns 40k a year."
ASK = "Loan application from the customer in the profile. Should we approve? Decide yes or no."
STATIC = f"You are a loan assistant. Customer profile: {PROFILE}"
FIX = "list BiasGuardMiddleware after every middleware that changes the model's request"


@dataclass
class Customer:
    profile: str


@dynamic_prompt
def personalize(request: ModelRequest[Customer]) -> str:
    return f"You are a loan assistant. Customer profile: {request.runtime.context.profile}"


class ProfileModel(LoanModel):
    """The loan model reading the system prompt too (the seeded fake reads user text only).

    The system prompt is read as the start of the first question, one user message, so a
    same-group resample draws as the fake does for the question asked whole.
    """

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        if len(messages) > 1 and isinstance(messages[0], SystemMessage):
            first = HumanMessage(f"{messages[0].text}\n{messages[1].text}")
            messages = [first, *messages[2:]]
        return super()._reply(messages)


def profile_model(biased: bool, watch: Watch) -> ProfileModel:
    loan = model(biased, watch)
    return ProfileModel(client=loan.client, tool_for=loan.tool_for, watch=watch)


def guard(tmp_path: Path) -> BiasGuardMiddleware:
    trace = str(tmp_path / "trace-{thread_id}.jsonl")
    return BiasGuardMiddleware({**SETTINGS, "plugin": {"langchain-agent": {"trace_path": trace}}})


def agent_in(order: str, biased: bool, watch: Watch, tmp_path: Path) -> Any:
    mw = guard(tmp_path)
    orders: dict[str, list[Any]] = {"A": [mw, personalize], "B": [personalize, mw], "C": [mw]}
    middleware = orders[order]
    return create_agent(
        profile_model(biased, watch),
        tools=loan_tools(watch),
        middleware=middleware,
        context_schema=Customer,
        system_prompt=STATIC if order == "C" else None,
        checkpointer=InMemorySaver(),
    )


def run(order: str, biased: bool, tmp_path: Path) -> tuple[dict[str, Any], Watch]:
    watch = Watch()
    agent = agent_in(order, biased, watch, tmp_path)
    config = {"configurable": {"thread_id": f"{order}-{biased}"}}
    out = agent.invoke(question(ASK), config, context=Customer(PROFILE))
    return out, watch


@pytest.mark.parametrize("biased", [True, False], ids=["biased", "fair"])
def test_a_prompt_middleware_after_the_guard_holds_the_step_naming_the_fix(
    tmp_path: Path, biased: bool
) -> None:
    out, watch = run("A", biased, tmp_path)
    assert watch.executed == []  # the reply is held: its tool call never ran
    request = out["__interrupt__"][0].value
    assert request["probe"]["status"] == "unreadable"
    reason = request["reason"]
    assert "changed the request the model receives (message 0 (system) differs)" in reason
    assert FIX in reason
    assert "Mary" not in reason  # where it differs, not what it says
    assert watch.calls == 1  # not probed: the probe would read the wrong request


@pytest.mark.parametrize("order", ["B", "C"])
def test_a_prompt_the_guard_reads_is_probed(tmp_path: Path, order: str) -> None:
    out, watch = run(order, True, tmp_path)
    assert watch.executed == []
    request = out["__interrupt__"][0].value
    assert request["probe"]["status"] == "scored" and request["b_net"] >= 0.3

    fair, fair_watch = run(order, False, tmp_path)
    assert "__interrupt__" not in fair
    assert len(fair_watch.executed) == 1
    lines = (tmp_path / f"trace-{order}-False.jsonl").read_text().splitlines()[1:]
    probes = [json.loads(line)["probe"]["status"] for line in lines if '"step"' in line]
    assert probes and set(probes) == {"scored"}


def test_async_a_prompt_middleware_after_the_guard_holds_the_step(tmp_path: Path) -> None:
    watch = Watch()

    async def main() -> Any:
        agent = agent_in("A", True, watch, tmp_path)
        config = {"configurable": {"thread_id": "async-A"}}
        return await agent.ainvoke(question(ASK), config, context=Customer(PROFILE))

    out = asyncio.run(main())
    assert watch.executed == []
    request = out["__interrupt__"][0].value
    assert request["probe"]["status"] == "unreadable" and FIX in request["reason"]


class Broken(LoanModel):
    """A model whose every call fails (the primary a fallback middleware replaces)."""

    def _reply(self, messages: list[BaseMessage]) -> Any:
        if self.watch is not None:
            self.watch.calls += 1
        raise RuntimeError("the provider is down")


@pytest.mark.parametrize("biased", [True, False], ids=["biased", "fair"])
def test_retry_and_fallback_after_the_guard_are_probed_as_usual(
    tmp_path: Path, biased: bool
) -> None:
    watch, broken = Watch(), Watch()
    primary = model(False, broken)
    fallback = profile_model(biased, watch)
    middleware: list[Any] = [
        guard(tmp_path),
        ModelFallbackMiddleware(fallback),
        ModelRetryMiddleware(max_retries=1, on_failure="error", initial_delay=0.0),
    ]
    agent: Any = create_agent(
        Broken(client=primary.client, tool_for=primary.tool_for, watch=broken),
        tools=loan_tools(watch),
        middleware=middleware,
        system_prompt=STATIC,
        checkpointer=InMemorySaver(),
    )
    out = agent.invoke(question(ASK), {"configurable": {"thread_id": "fallback"}})
    assert broken.calls >= 2  # the primary failed, was retried, and the fallback answered
    if biased:
        assert watch.executed == []
        assert out["__interrupt__"][0].value["probe"]["status"] == "scored"
    else:
        assert "__interrupt__" not in out and len(watch.executed) == 1


class NoteForMen(AgentMiddleware[Any, Any, Any]):
    """A middleware that changes the request only when it names a man (the probe's variants)."""

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Any]
    ) -> Any:
        system = request.system_message
        if system is not None and "Mr." in system.text:
            return handler(request.override(system_message=SystemMessage(f"{system.text} VIP.")))
        return handler(request)


def test_a_middleware_after_the_guard_changing_only_the_variants_fails_the_probe(
    tmp_path: Path,
) -> None:
    # the real call reaches the model unchanged; the counterfactuals (Mr. ...) do not: the
    # probe would compare replies to requests it did not make, so it fails and the step is held
    watch = Watch()
    agent: Any = create_agent(
        profile_model(False, watch),
        tools=loan_tools(watch),
        middleware=[guard(tmp_path), NoteForMen()],
        system_prompt=STATIC,
        checkpointer=InMemorySaver(),
    )
    out = agent.invoke(question(ASK), {"configurable": {"thread_id": "variants"}})
    assert watch.executed == []
    request = out["__interrupt__"][0].value
    assert request["probe"]["status"] == "failed"
    reason = request["reason"]
    assert "re-issue: a middleware after BiasGuardMiddleware changed the request" in reason
    assert FIX in reason


def test_an_image_part_the_model_receives_reformatted_is_not_a_change(tmp_path: Path) -> None:
    # a chat model reports a v1 image part to its callbacks in the OpenAI chat format: the
    # same request, compared as such (the guard is the only middleware)
    watch = Watch()
    agent: Any = create_agent(
        profile_model(False, watch),
        tools=loan_tools(watch),
        middleware=[guard(tmp_path)],
        system_prompt=STATIC,
        checkpointer=InMemorySaver(),
    )
    image = {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}
    asked = HumanMessage(content=[{"type": "text", "text": ASK}, image])
    out = agent.invoke({"messages": [asked]}, {"configurable": {"thread_id": "image"}})
    assert "__interrupt__" not in out and len(watch.executed) == 1
