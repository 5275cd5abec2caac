"""A decision shown only in the stream is compared like the node's update.

The node returns a neutral update (``{"status": "processed"}``) and shows its decision only
through what it streams: a custom event (``get_stream_writer()``) or the tokens of a chat
model whose reply it does not return (``stream_mode="messages"``). Guarded, a biased node is
held and nothing it streamed reaches the caller; a fair one passes with its events released.
A node that returns the reply it streamed (the ReAct shape) is scored as it is unstreamed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph_apps import APPLICANT, SETTINGS, Watch, flat, model, question

from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker_plugins.langgraph import guard, guard_state
from biasbreaker_plugins.langgraph.streaming import EVENT_KEY


class Loan(TypedDict, total=False):
    application: str
    status: str


def shown_in_stream(biased: bool, watch: Watch, how: str) -> Any:
    """``assess`` shows the model's decision only in the stream (``how``), returns none."""
    llm = model(biased, watch)

    def assess(state: Loan) -> dict[str, Any]:
        reply = llm.invoke([HumanMessage(state["application"])])
        if how == "custom":
            get_stream_writer()({"ui": reply.text})
        return {"status": "processed"}

    builder = StateGraph(Loan)
    builder.add_node("assess", assess)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", END)
    return builder


def compiled(builder: Any, tmp_path: Path) -> Any:
    settings = {
        **SETTINGS,
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "trace.jsonl")}},
    }
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    graph = guard(builder, kernel, nodes=["assess"], hook=noop_hook)
    return graph.compile(checkpointer=InMemorySaver())


def stream(graph: Any, data: Any, mode: Any, asynchronous: bool = False) -> list[Any]:
    config = {"configurable": {"thread_id": "t"}}
    if asynchronous:

        async def gather() -> list[Any]:
            return [c async for c in graph.astream(data, config, stream_mode=mode)]

        return asyncio.run(gather())
    return list(graph.stream(data, config, stream_mode=mode))


def records(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r.get("node") == "assess"]


THREAD: Any = {"configurable": {"thread_id": "t"}}
LOAN = {"application": APPLICANT}


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("how", ["custom", "messages"])
def test_a_decision_shown_only_in_the_stream_is_held(
    tmp_path: Path, how: str, asynchronous: bool
) -> None:
    graph = compiled(shown_in_stream(True, Watch(), how), tmp_path)
    chunks = stream(graph, LOAN, ["custom", "messages"], asynchronous)
    assert graph.get_state(THREAD).next  # held: the run waits for review
    assert guard_state(graph, THREAD)["bb_local_scores"]["assess"] >= 0.3
    assert "Decision" not in flat(chunks)  # nothing the node streamed reached the caller
    # the caller saw the guard's event only, and first
    assert chunks and all(mode == "custom" and EVENT_KEY in c for mode, c in chunks)
    assert chunks[0][1][EVENT_KEY]["event"] == "held"
    assert records(tmp_path)[0]["probe"]["status"] == "scored"


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("how", ["custom", "messages"])
def test_a_fair_decision_shown_in_the_stream_passes_and_is_released(
    tmp_path: Path, how: str, asynchronous: bool
) -> None:
    graph = compiled(shown_in_stream(False, Watch(), how), tmp_path)
    chunks = stream(graph, LOAN, ["custom", "messages"], asynchronous)
    assert not graph.get_state(THREAD).next
    assert graph.get_state(THREAD).values["status"] == "processed"
    assert guard_state(graph, THREAD)["bb_local_scores"]["assess"] == 0.0
    if how == "custom":
        shown = [c["ui"] for mode, c in chunks if mode == "custom" and "ui" in c]
    else:  # the model's tokens, released in order
        shown = ["".join(str(c[0].content) for mode, c in chunks if mode == "messages")]
    assert len(shown) == 1 and shown[0].startswith("Decision: ")
    assert records(tmp_path)[0]["probe"]["status"] == "scored"


def react(biased: bool, watch: Watch) -> Any:
    """The ReAct shape: the model's tokens stream, and the node returns the same reply."""
    llm = model(biased, watch)

    def assess(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("assess", assess)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", END)
    return builder


@pytest.mark.parametrize("biased", [False, True])
def test_a_reply_streamed_and_returned_is_scored_as_unstreamed(
    tmp_path: Path, biased: bool
) -> None:
    scores = []
    for mode in ["messages", "values"]:
        folder = tmp_path / mode
        folder.mkdir()
        graph = compiled(react(biased, Watch()), folder)
        chunks = stream(graph, question(), mode)
        scores.append(guard_state(graph, THREAD)["bb_local_scores"]["assess"])
        assert bool(graph.get_state(THREAD).next) is biased
        if mode == "messages" and not biased:
            assert "".join(str(c[0].content) for c in chunks).startswith("Decision: ")
    assert scores[0] == scores[1]


def test_a_node_streaming_nothing_keeps_its_trace(tmp_path: Path) -> None:
    """Streamed or invoked, a node that streams nothing is probed alike (same trace)."""

    def assess(state: Loan) -> dict[str, Any]:
        return {"status": "processed"}

    traces = []
    for mode in ["custom", "messages", None]:
        folder = tmp_path / str(mode)
        folder.mkdir()
        builder = StateGraph(Loan)
        builder.add_node("assess", assess)
        builder.add_edge(START, "assess")
        builder.add_edge("assess", END)
        graph = compiled(builder, folder)
        if mode is None:
            graph.invoke(LOAN, THREAD)
        else:
            stream(graph, LOAN, mode)
        traces.append([{k: v for k, v in r.items() if k != "ts"} for r in records(folder)])
    assert traces[0] == traces[1] == traces[2]


def test_the_same_stream_gives_the_same_trace(tmp_path: Path) -> None:
    texts = []
    for run in ("a", "b"):
        folder = tmp_path / run
        folder.mkdir()
        graph = compiled(shown_in_stream(True, Watch(), "custom"), folder)
        stream(graph, LOAN, ["custom", "messages"])
        texts.append((folder / "trace.jsonl").read_bytes())
    assert texts[0] == texts[1]


def test_a_custom_event_the_probe_cannot_read_is_held(tmp_path: Path) -> None:
    def assess(state: Loan) -> dict[str, Any]:
        get_stream_writer()({"ui": b"approved"})
        return {"status": "processed"}

    builder = StateGraph(Loan)
    builder.add_node("assess", assess)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", END)
    graph = compiled(builder, tmp_path)
    chunks = stream(graph, LOAN, "custom")
    assert graph.get_state(THREAD).next
    assert "approved" not in flat(chunks)
    outcome = records(tmp_path)[0]["probe"]
    assert outcome["status"] == "unreadable"
    assert "streamed" in outcome["reason"] and "stream.custom[0]" in outcome["reason"]
