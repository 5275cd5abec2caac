"""Real application shapes, each with one biased agent planted, run guarded.

For each shape: the biased output is held; no downstream node's input and no streamed chunk
contains it or any of the probe's variants; the clean run passes, its stream as the unguarded
graph's; the run trace verifies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph_apps import (
    APPLICANT,
    SETTINGS,
    Watch,
    flat,
    loan_tools,
    model,
    question,
    scrub,
)

from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.properties import verify_trace
from biasbreaker.trace import read_trace
from biasbreaker_plugins.langgraph import guard, guard_state


def kernel(tmp_path: Path) -> Kernel:
    settings = {
        **SETTINGS,
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    return Kernel.load(cwd=tmp_path, overrides=settings)


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


# ------------------------------------------------------------------ a tool-calling agent


def react_agent(biased: bool, watch: Watch, seen_by_tools: list[list[BaseMessage]]) -> StateGraph:
    tools = loan_tools(watch)
    llm = model(biased, watch).bind_tools(tools)
    tool_node = ToolNode(tools)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    def run_tools(state: MessagesState) -> Any:
        seen_by_tools.append(list(state["messages"]))
        return tool_node.invoke(state)

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", run_tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", END)
    return builder


def test_a_biased_tool_call_is_held_and_never_executed(tmp_path: Path) -> None:
    watch, seen = Watch(), []
    graph = guard(
        react_agent(True, watch, seen), kernel(tmp_path), nodes=["agent"], hook=noop_hook
    ).compile(checkpointer=InMemorySaver())
    chunks = list(
        graph.stream(
            question(),
            thread("react"),
            stream_mode=["updates", "messages", "values", "custom"],
            durability="sync",
        )
    )
    assert watch.executed == [] and seen == []  # the tool never ran, its node never started
    request = graph.get_state(thread("react")).interrupts[0].value
    assert request["node"] == "agent"
    held = request["held"]["messages"][0]
    assert held["type"] == "ai" and [c["name"] for c in held["tool_calls"]] == ["deny_loan"]
    bb = guard_state(graph, thread("react"))
    assert bb["bb_local_scores"]["agent"] >= 0.3  # a tool call only for one group: a flip
    text = flat(scrub(chunks))
    assert "deny_loan" not in text
    variants = watch.variants(APPLICANT)
    assert variants  # the probe asked about other people
    assert not any(v in text for v in variants)
    record = read_trace(tmp_path / "react.jsonl").records[-1]
    assert record.probe == {
        "status": "scored",
        "reason": "scored: k=4 counterfactual(s), r=2 resample(s)",
    }
    assert verify_trace(tmp_path / "react.jsonl").holds


def test_a_fair_agent_runs_its_tool_once_and_streams_as_unguarded(tmp_path: Path) -> None:
    def run(guarded: bool) -> tuple[list[Any], Watch, dict[str, Any]]:
        watch, seen = Watch(), []
        builder = react_agent(False, watch, seen)
        if guarded:
            app = guard(builder, kernel(tmp_path), nodes=["agent"]).compile(
                checkpointer=InMemorySaver()
            )
        else:
            app = builder.compile(checkpointer=InMemorySaver())
        chunks = list(app.stream(question(), thread(f"fair-{guarded}"), stream_mode="messages"))
        return chunks, watch, app.get_state(thread(f"fair-{guarded}")).values

    plain, plain_watch, plain_state = run(False)
    chunks, watch, state = run(True)
    assert watch.executed == plain_watch.executed and len(watch.executed) == 1
    shown = [
        (m.content, getattr(m, "tool_calls", None), meta["langgraph_node"]) for m, meta in chunks
    ]
    expected = [
        (m.content, getattr(m, "tool_calls", None), meta["langgraph_node"]) for m, meta in plain
    ]
    assert shown == expected
    assert [type(m) for m in state["messages"]] == [type(m) for m in plain_state["messages"]]
    assert isinstance(state["messages"][1], AIMessage) and isinstance(
        state["messages"][2], ToolMessage
    )
