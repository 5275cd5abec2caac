"""Overhead of ``BiasGuardMiddleware`` on a LangChain agent, against the bare agent, one run.

The conversation: a ``create_agent`` agent over a scripted chat model (a real
``BaseChatModel``) that calls the tool ``lookup`` once per turn for five turns, then answers;
every model call sleeps 1 ms (a stand-in for the model's latency), so one ``invoke`` is six
model calls and five tool calls.

- ``langchain-agent``: the bare agent (baseline) against the same agent with the middleware and
  probing disabled (``[probe] probe_rate = 0``: every model call still has its stream held,
  its reply checked readable, the control machine stepped and snapshotted into the agent
  state; goal <= 1.05 x baseline).

Goals are reported by the ratio table of ``benchmarks/conftest.py``, never asserted; the case
with a goal also reports the paired ratio (``benchmarks/paired.py``), the one to read on a
shared machine.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("langchain.agents")
pytest.importorskip("biasbreaker_langchain")

from biasbreaker_langchain import BiasGuardMiddleware
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from paired import paired_ratio

TURNS = 5
QUESTION = "Look up the file of Ms. Mary Carter five times, then summarise."


class Scripted(BaseChatModel):
    """Calls ``lookup`` until it has ``TURNS`` tool results, then answers; 1 ms per call."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Scripted:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        time.sleep(0.001)
        done = sum(isinstance(m, ToolMessage) for m in messages)
        if done < TURNS:
            call = {"name": "lookup", "args": {"n": done}, "id": f"call_{done}"}
            reply = AIMessage(content="", tool_calls=[call])
        else:
            reply = AIMessage(content=f"Looked up {done} times.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def lookup(n: int) -> str:
    """Look up record ``n``."""
    return f"record {n}"


def _run(agent: Any) -> None:
    out = agent.invoke({"messages": [HumanMessage(QUESTION)]})
    assert sum(isinstance(m, ToolMessage) for m in out["messages"]) == TURNS


@pytest.mark.benchmark(group="langchain-agent")
def test_bare_agent_baseline(benchmark: Any) -> None:
    agent = create_agent(Scripted(), tools=[lookup])
    benchmark.extra_info["per"] = f"invoke, {TURNS} tool-calling turns, 1 ms per model call"
    benchmark(_run, agent)


@pytest.mark.benchmark(group="langchain-agent")
def test_middleware_probing_off(benchmark: Any) -> None:
    # no LLM repair (nothing trips with probing off): the middleware needs no client
    settings = {"probe": {"probe_rate": 0.0}, "intervention": {"router": "human-review"}}
    middleware = BiasGuardMiddleware(settings)
    agent = create_agent(Scripted(), tools=[lookup], middleware=[middleware])
    benchmark.extra_info["per"] = f"invoke, {TURNS} turns, guarded, probe_rate 0"
    benchmark.extra_info["goal_ratio"] = 1.05
    benchmark(_run, agent)
    bare = create_agent(Scripted(), tools=[lookup])
    benchmark.extra_info["paired_ratio"] = round(
        paired_ratio(lambda: _run(bare), lambda: _run(agent), pairs=100), 3
    )
