"""A decision made by a model inside a tool (real create_agent agents, seeded fake, **simulated**).

``BiasGuardMiddleware`` guards the agent's own model calls, not its tool executions: a tool
that calls a model and returns that model's decision is not probed, and its result reaches the
messages, the stream and the final answer. The agent's model only relays it; its probe swaps
the names in the messages, but the tool result stays the one the tool gave for the original
applicant. docs/langchain.md, "Tools that decide", names this and the fix tested here: guard the
tool's model with its own agent and ``BiasGuardMiddleware``. Invoked inside the tool, that agent
runs as a subgraph of the outer one (no checkpointer of its own): its review pauses the outer
agent, and the answer resumes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from biasbreaker_langchain import WITHHELD, BiasGuardMiddleware
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from lc_agents import SETTINGS, WOMAN, Watch, model, question


class Relay(BaseChatModel):
    """The agent's own model: asks the credit tool, then repeats what it said (group-blind)."""

    @property
    def _llm_type(self) -> str:
        return "relay"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Relay:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(f"The credit model says: {last.text}")
        else:
            call = {"name": "credit_model", "args": {"application": last.text}, "id": "call_c"}
            reply = AIMessage("", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def settings(tmp_path: Path, name: str) -> dict[str, Any]:
    trace = str(tmp_path / f"{name}-{{thread_id}}.jsonl")
    return {**SETTINGS, "plugin": {"langchain-agent": {"trace_path": trace}}}


def agent_with(tmp_path: Path, biased: bool, *, guard_the_tool: bool) -> tuple[Any, Watch]:
    watch = Watch()
    inner: list[Any] = [BiasGuardMiddleware(settings(tmp_path, "tool"))] if guard_the_tool else []
    credit = create_agent(model(biased, watch), tools=[], middleware=inner)

    @tool
    def credit_model(application: str) -> str:
        """Run the credit model on an application; returns its decision."""
        return str(credit.invoke({"messages": [HumanMessage(application)]})["messages"][-1].text)

    agent = create_agent(
        Relay(),
        tools=[credit_model],
        middleware=[BiasGuardMiddleware(settings(tmp_path, "agent"))],
        checkpointer=InMemorySaver(),
    )
    return agent, watch


def test_a_tool_s_own_model_is_not_guarded_by_the_agent_s_middleware(tmp_path: Path) -> None:
    # the documented limit: the agent's guard probes its relay, which is fair
    agent, _ = agent_with(tmp_path, True, guard_the_tool=False)
    out = agent.invoke(question(WOMAN), {"configurable": {"thread_id": "unguarded"}})
    assert "__interrupt__" not in out
    assert out["messages"][-1].text == "The credit model says: Decision: no"


def test_a_tool_s_model_guarded_by_its_own_agent_holds_its_decision(tmp_path: Path) -> None:
    agent, _ = agent_with(tmp_path, True, guard_the_tool=True)
    config = {"configurable": {"thread_id": "guarded"}}
    shown: list[str] = []
    for mode, chunk in agent.stream(question(WOMAN), config, stream_mode=["messages", "updates"]):
        if not (mode == "updates" and "__interrupt__" in chunk):
            shown.append(str(chunk))
    assert shown and not any("Decision: no" in s for s in shown)  # no stream mode shows it
    state = agent.get_state(config)
    assert state.next == ("tools",)
    (pending,) = state.interrupts
    request = pending.value
    assert request["kind"] == "biasbreaker-review" and request["probe"]["status"] == "scored"
    assert request["reply"]["messages"] == [{"type": "ai", "content": "Decision: no"}]

    done = agent.invoke(Command(resume={"action": "reject", "sha256": request["sha256"]}), config)
    withheld = WITHHELD.format(reason=request["reason"])
    tool_results = [m.text for m in done["messages"] if isinstance(m, ToolMessage)]
    assert tool_results == [withheld]
    assert done["messages"][-1].text == f"The credit model says: {withheld}"
    assert not agent.get_state(config).interrupts


@pytest.mark.parametrize("guard_the_tool", [True, False])
def test_a_fair_tool_model_is_let_through(tmp_path: Path, guard_the_tool: bool) -> None:
    agent, _ = agent_with(tmp_path, False, guard_the_tool=guard_the_tool)
    out = agent.invoke(question(WOMAN), {"configurable": {"thread_id": "fair"}})
    assert "__interrupt__" not in out
    assert out["messages"][-1].text.startswith("The credit model says: Decision: ")
