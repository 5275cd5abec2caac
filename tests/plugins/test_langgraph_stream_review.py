"""A review shows, and an approval covers, what the held output streamed.

The node returns a neutral update (``{"status": "processed"}``) and shows its decision only in
the stream (a custom event, or the tokens of a chat model whose reply it does not return).
Held for review, the request carries the held stream events beside the update, its
``sha256`` covers both, an approval naming the update alone is refused, approving with the
shown ``sha256`` releases exactly the events shown, and an edit or a rejection releases
none of them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from langgraph_apps import APPLICANT, SETTINGS, Watch, model

from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.types import FrozenPayload
from biasbreaker_plugins.langgraph import guard
from biasbreaker_plugins.langgraph.review import approved_sha256
from biasbreaker_plugins.langgraph.streaming import EVENT_KEY

MODES = {"custom": ["custom", "updates"], "messages": ["custom", "messages", "updates"]}
"""The caller's stream modes for each way of showing the decision ("custom" shows the guard's
events too)."""
THREAD: Any = {"configurable": {"thread_id": "t"}}


class Loan(TypedDict, total=False):
    application: str
    status: str


def held_graph(how: str, tmp_path: Path) -> Any:
    """A biased ``assess`` that shows its decision only in the stream (``how``)."""
    llm = model(True, Watch())

    def assess(state: Loan) -> dict[str, Any]:
        reply = llm.invoke([HumanMessage(state["application"])])
        if how == "custom":
            get_stream_writer()({"ui": reply.text})
        return {"status": "processed"}

    builder = StateGraph(Loan)
    builder.add_node("assess", assess)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", END)
    kernel = Kernel.load(cwd=tmp_path, overrides=SETTINGS)
    return guard(builder, kernel, nodes=["assess"], hook=noop_hook).compile(
        checkpointer=InMemorySaver()
    )


def run(graph: Any, data: Any, asynchronous: bool, how: str = "custom") -> list[Any]:
    modes = MODES[how]
    if asynchronous:

        async def gather() -> list[Any]:
            return [c async for c in graph.astream(data, THREAD, stream_mode=modes)]

        return asyncio.run(gather())
    return list(graph.stream(data, THREAD, stream_mode=modes))


def request(graph: Any) -> dict[str, Any]:
    state = graph.get_state(THREAD)
    assert state.next == ("bb_review",)
    return dict(state.interrupts[0].value)


def released(chunks: list[Any]) -> list[Any]:
    """What the node streamed that reached the caller: custom events, then message texts."""
    custom = [c for mode, c in chunks if mode == "custom" and EVENT_KEY not in c]
    tokens = "".join(str(c[0].content) for mode, c in chunks if mode == "messages")
    return custom + ([tokens] if tokens else [])


def shown(stream: list[dict[str, Any]]) -> list[Any]:
    """The same, from the request's ``stream``."""
    custom = [item["event"] for item in stream if item["kind"] == "custom"]
    texts = "".join(item["message"]["content"] for item in stream if item["kind"] == "messages")
    return custom + ([texts] if texts else [])


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("how", ["custom", "messages"])
def test_the_request_shows_the_held_stream_and_approval_releases_it(
    tmp_path: Path, how: str, asynchronous: bool
) -> None:
    graph = held_graph(how, tmp_path)
    first = run(graph, {"application": APPLICANT}, asynchronous, how)
    assert released(first) == []  # held: nothing the node streamed reached the caller
    asked = request(graph)
    assert asked["held"] == {"status": "processed"}
    assert {item["kind"] for item in asked["stream"]} == {how}
    events = shown(asked["stream"])
    assert len(events) == 1 and "Decision: " in str(events[0])
    assert asked["sha256"] == approved_sha256(asked["held"], asked["stream"])
    update_only = FrozenPayload.of(asked["held"]).sha256
    assert asked["sha256"] != update_only

    refused = run(
        graph, Command(resume={"action": "approve", "sha256": update_only}), asynchronous, how
    )
    assert released(refused) == []
    again = request(graph)
    assert "is not this request's" in (again["error"] or "")
    assert again["sha256"] == asked["sha256"]

    approved = run(
        graph, Command(resume={"action": "approve", "sha256": asked["sha256"]}), asynchronous, how
    )
    assert released(approved) == events  # exactly what the reviewer saw
    assert not graph.get_state(THREAD).next
    assert graph.get_state(THREAD).values["status"] == "processed"


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("how", ["custom", "messages"])
@pytest.mark.parametrize(
    "answer",
    [{"action": "edit", "update": {"status": "review: approve"}}, {"action": "reject"}],
    ids=["edit", "reject"],
)
def test_edit_or_reject_releases_nothing_of_the_held_stream(
    tmp_path: Path, how: str, asynchronous: bool, answer: dict[str, Any]
) -> None:
    graph = held_graph(how, tmp_path)
    run(graph, {"application": APPLICANT}, asynchronous, how)
    assert shown(request(graph)["stream"])  # something was held
    after = run(graph, Command(resume=answer), asynchronous, how)
    assert released(after) == []
    assert "Decision" not in repr(after)
    events = [c[EVENT_KEY]["event"] for mode, c in after if mode == "custom"]
    assert events == ["edited" if answer["action"] == "edit" else "rejected"]
    assert not graph.get_state(THREAD).next


def test_a_held_stream_event_that_is_not_json_cannot_be_approved(tmp_path: Path) -> None:
    """An event the reviewer cannot be shown is never released by an approval."""

    class Opaque:
        pass

    def assess(state: Loan) -> dict[str, Any]:
        get_stream_writer()(Opaque())
        return {"status": "processed"}

    builder = StateGraph(Loan)
    builder.add_node("assess", assess)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", END)
    kernel = Kernel.load(cwd=tmp_path, overrides=SETTINGS)
    graph = guard(builder, kernel, nodes=["assess"], hook=noop_hook).compile(
        checkpointer=InMemorySaver()
    )
    run(graph, {"application": APPLICANT}, False)
    asked = request(graph)
    assert asked["stream"] == [{"kind": "custom", "event": "<not JSON: Opaque>"}]
    after = run(graph, Command(resume={"action": "approve", "sha256": asked["sha256"]}), False)
    assert not any(isinstance(c, Opaque) for _, c in after)
    assert "not JSON and could not be shown" in (request(graph)["error"] or "")
