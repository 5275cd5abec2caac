"""Streaming without leaks, for every stream mode of the installed LangGraph.

A chat node streams its model's tokens (``stream_mode="messages"``) and writes a custom event
naming the applicant (``"custom"``). Guarded, with the model biased, the caller must never
receive the held reply nor anything a probe re-run produced (the counterfactual applicants);
with the model fair, the caller receives what the unguarded graph streams, in order.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any, get_args

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import StreamMode
from langgraph_apps import APPLICANT, SETTINGS, Watch, flat, model, question, scrub

from biasbreaker.errors import ConfigError
from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker_plugins.langgraph import guard
from biasbreaker_plugins.langgraph.streaming import EVENT_KEY

MODES: tuple[str, ...] = tuple(get_args(StreamMode))
"""Every stream mode the installed LangGraph knows (values, updates, messages, custom, …)."""
CHOICES: list[Any] = [*MODES, ["messages", "custom", "updates"], list(MODES)]


def chat_graph(biased: bool, watch: Watch, inner: bool = False) -> StateGraph:
    llm = model(biased, watch)

    def chat(state: MessagesState) -> dict[str, Any]:
        text = str(state["messages"][-1].content)
        get_stream_writer()({"thinking": text[:60]})
        reply = llm.invoke(state["messages"])
        return {
            "messages": [
                AIMessage(content=str(reply.content), id=f"reply-{len(state['messages'])}")
            ]
        }

    def sign(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content="-- the loans desk", id="sign")]}

    builder = StateGraph(MessagesState)
    builder.add_node("chat", chat)
    builder.add_node("sign", sign)
    builder.add_edge(START, "chat")
    builder.add_edge("chat", "sign")
    builder.add_edge("sign", END)
    return builder


def app(biased: bool, watch: Watch, tmp_path: Path, guarded: bool = True) -> Any:
    builder = chat_graph(biased, watch)
    if not guarded:
        return builder.compile(checkpointer=InMemorySaver())
    kernel = Kernel.load(cwd=tmp_path, overrides=SETTINGS)
    return guard(builder, kernel, nodes=["chat"], hook=noop_hook).compile(
        checkpointer=InMemorySaver()
    )


def collect(graph: Any, mode: Any, asynchronous: bool, subgraphs: bool, name: str) -> list[Any]:
    config = {"configurable": {"thread_id": name}}
    kwargs = {"stream_mode": mode, "subgraphs": subgraphs, "durability": "sync"}
    if asynchronous:

        async def gather() -> list[Any]:
            return [c async for c in graph.astream(question(), config, **kwargs)]

        return asyncio.run(gather())
    return list(graph.stream(question(), config, **kwargs))


PARAMS = list(itertools.product(range(len(CHOICES)), [False, True], [False, True]))


@pytest.mark.parametrize(("choice", "asynchronous", "subgraphs"), PARAMS)
def test_a_held_reply_and_the_probes_variants_never_reach_the_stream(
    tmp_path: Path, choice: int, asynchronous: bool, subgraphs: bool
) -> None:
    mode = CHOICES[choice]
    watch = Watch()
    graph = app(True, watch, tmp_path)
    chunks = collect(graph, mode, asynchronous, subgraphs, "held")
    held = graph.get_state({"configurable": {"thread_id": "held"}}).interrupts[0].value["held"]
    reply = held["messages"][0]["content"]
    assert reply == "Decision: no"  # the biased model denied Ms. Carter
    text = flat(scrub(chunks))
    assert reply not in text
    variants = watch.variants(APPLICANT)
    assert variants and not any(v in text for v in variants), variants
    assert "-- the loans desk" not in text  # the signature never ran
    if mode == "custom" or (isinstance(mode, list) and "custom" in mode):
        custom = [payload for kind, payload in kinds(chunks, mode) if kind == "custom"]
        guard_events = [c[EVENT_KEY] for c in custom if isinstance(c, dict) and EVENT_KEY in c]
        assert [e["event"] for e in guard_events][:1] == ["held"]  # the documented event
        assert guard_events[0]["node"] == "chat" and guard_events[0]["key"] == "chat@1"
        if guard_events[0]["status"] == "tripped":  # says why, before the breaker node runs
            assert guard_events[0]["reason"].startswith("tripped: this step opens the breaker")
        assert guard_events[0]["reason"]
        assert not any("thinking" in c for c in custom if isinstance(c, dict))  # held too


@pytest.mark.parametrize(("choice", "asynchronous", "subgraphs"), PARAMS)
def test_a_clean_reply_streams_as_the_unguarded_graph_streams_it(
    tmp_path: Path, choice: int, asynchronous: bool, subgraphs: bool
) -> None:
    mode = CHOICES[choice]
    watch = Watch()
    guarded = collect(app(False, watch, tmp_path), mode, asynchronous, subgraphs, "clean")
    plain = collect(
        app(False, Watch(), tmp_path, guarded=False), mode, asynchronous, subgraphs, "clean"
    )
    text = flat(guarded)
    variants = watch.variants(APPLICANT)
    assert variants and not any(v in text for v in variants), variants
    assert comparable(guarded, mode) == comparable(plain, mode)


def kinds(chunks: list[Any], mode: Any) -> list[tuple[str, Any]]:
    """(mode, payload) of each chunk, whatever shape ``stream_mode``/``subgraphs`` gave it."""
    return [(kind, payload) for _ns, kind, payload in _parts(chunks, mode)]


def _parts(chunks: list[Any], mode: Any) -> list[tuple[tuple[str, ...], str, Any]]:
    out: list[tuple[tuple[str, ...], str, Any]] = []
    for chunk in chunks:
        ns: tuple[str, ...] = ()
        if isinstance(mode, list):
            if len(chunk) == 3:
                ns, kind, payload = chunk
            else:
                kind, payload = chunk
        else:
            kind = mode
            nested = isinstance(chunk, tuple) and len(chunk) == 2 and isinstance(chunk[0], tuple)
            ns, payload = chunk if nested else ((), chunk)
        out.append((ns, kind, payload))
    return out


def comparable(chunks: list[Any], mode: Any) -> list[Any]:
    """What must match between the guarded and the unguarded streams, per chunk.

    Message chunks by content and node, custom events and values as they are, updates by node
    and value; task, debug and checkpoint events by their kind and task name (their ids and
    timestamps differ between any two runs).
    """
    out: list[Any] = []
    for chunk in chunks:
        ns: tuple[str, ...] = ()
        if isinstance(mode, list):
            if len(chunk) == 3:
                ns, kind, payload = chunk
            else:
                kind, payload = chunk
        else:
            kind = mode
            payload = (
                chunk[1]
                if isinstance(chunk, tuple) and len(chunk) == 2 and isinstance(chunk[0], tuple)
                else chunk
            )
        out.append((ns, kind, _key(kind, payload)))
    return out


def _key(kind: str, payload: Any) -> Any:
    if kind == "messages":
        message, meta = payload
        return (str(message.content), meta["langgraph_node"])
    if kind in ("values", "updates"):
        return repr(payload)
    if kind == "custom":
        return repr(payload)
    if kind in ("tasks",):
        return (payload.get("name"), "result" in payload)
    if kind == "debug":
        return (payload["type"], payload["payload"].get("name"))
    if kind == "checkpoints":
        return tuple(payload.get("next") or ())
    return kind


def test_an_approved_reply_is_released_in_order_when_it_is_promoted(tmp_path: Path) -> None:
    from langgraph.types import Command

    graph = app(True, Watch(), tmp_path)
    config = {"configurable": {"thread_id": "approve"}}
    first = list(
        graph.stream(question(), config, stream_mode=["messages", "custom"], durability="sync")
    )
    assert not any(
        kind == "messages" and payload[1]["langgraph_node"] == "chat" for kind, payload in first
    )
    approve = {"action": "approve", "sha256": graph.get_state(config).interrupts[0].value["sha256"]}
    resumed = list(
        graph.stream(Command(resume=approve), config, stream_mode=["messages", "custom"])
    )
    events = [
        ("guard", payload[EVENT_KEY]["event"])
        if kind == "custom" and EVENT_KEY in payload
        else ("custom", payload)
        if kind == "custom"
        else (payload[1]["langgraph_node"], str(payload[0].content))
        for kind, payload in resumed
    ]
    tokens = [text for node, text in events if node == "chat"]
    assert "".join(tokens) == "Decision: no" and len(tokens) > 1  # the held tokens, in order
    assert events.index(("guard", "released")) < events.index(("chat", tokens[0]))
    assert ("custom", {"thinking": APPLICANT[:60]}) in events  # its custom event, released
    assert events[-1] == ("sign", "-- the loans desk")  # then the next node, as unguarded


def test_an_approved_reply_held_by_a_run_that_did_not_stream_messages_is_streamed_whole(
    tmp_path: Path,
) -> None:
    """A new-user trial held a reply under stream_mode="updates" and resumed with "messages":
    the approved reply never appeared in the messages stream (nothing had been captured)."""
    from langgraph.types import Command

    graph = app(True, Watch(), tmp_path)
    config = {"configurable": {"thread_id": "approve-updates"}}
    list(graph.stream(question(), config, stream_mode="updates", durability="sync"))
    request = graph.get_state(config).interrupts[0].value
    approve = {"action": "approve", "sha256": request["sha256"]}
    resumed = list(
        graph.stream(Command(resume=approve), config, stream_mode=["messages", "custom"])
    )
    said = [(p[1]["langgraph_node"], str(p[0].content)) for k, p in resumed if k == "messages"]
    assert said[0] == ("chat", "Decision: no")  # once, whole, attributed to the node
    assert [text for node, text in said if node == "chat"] == ["Decision: no"]
    assert said[-1] == ("sign", "-- the loans desk")
    guard_events = [p[EVENT_KEY]["event"] for k, p in resumed if k == "custom" and EVENT_KEY in p]
    assert guard_events[0] == "released"


@pytest.mark.parametrize("form", ["type", "role", "message"])
def test_an_edited_reply_is_streamed_whole_attributed_to_the_node(
    tmp_path: Path, form: str
) -> None:
    """A reviewer's edit gives the message in its JSON form, or as a LangChain message (which
    was refused as "not JSON"): it is streamed as one message of the guarded node (it was not
    streamed at all), and none of the held tokens are."""
    from langgraph.types import Command

    graph = app(True, Watch(), tmp_path)
    config = {"configurable": {"thread_id": f"edit-{form}"}}
    list(graph.stream(question(), config, stream_mode=["messages", "custom"], durability="sync"))
    request = graph.get_state(config).interrupts[0].value
    reply: Any = {form: "ai" if form == "type" else "assistant", "content": "Referred."}
    if form == "message":
        reply = AIMessage("Referred.")
    edit = {"action": "edit", "sha256": request["sha256"], "update": {"messages": [reply]}}
    resumed = list(graph.stream(Command(resume=edit), config, stream_mode=["messages", "custom"]))
    said = [(p[1]["langgraph_node"], str(p[0].content)) for k, p in resumed if k == "messages"]
    assert said[0] == ("chat", "Referred.")
    assert not any(node == "chat" and "Decision" in text for node, text in said)
    guard_events = [p[EVENT_KEY]["event"] for k, p in resumed if k == "custom" and EVENT_KEY in p]
    assert guard_events[0] == "edited"
    assert graph.get_state(config).values["messages"][-2].content == "Referred."


def test_stream_first_streams_the_nodes_tokens_before_the_check(tmp_path: Path) -> None:
    kernel = Kernel.load(
        cwd=tmp_path, overrides={**SETTINGS, "plugin": {"langgraph": {"stream_first": True}}}
    )
    watch = Watch()
    graph = guard(chat_graph(True, watch), kernel, nodes=["chat"], hook=noop_hook).compile(
        checkpointer=InMemorySaver()
    )
    chunks = collect(graph, "messages", False, False, "first")
    text = flat(chunks)
    streamed = "".join(str(m.content) for m, meta in chunks if meta["langgraph_node"] == "chat")
    assert streamed == "Decision: no"  # documented as leaking: the held reply was shown
    assert not any(v in text for v in watch.variants(APPLICANT))  # re-runs still silenced
    assert graph.get_state({"configurable": {"thread_id": "first"}}).interrupts  # still held


def test_astream_events_and_astream_log_are_refused_with_what_to_use(tmp_path: Path) -> None:
    graph = app(True, Watch(), tmp_path)
    with pytest.raises(ConfigError, match=r"astream_events\(\) on a guarded graph.*stream_mode"):
        graph.astream_events(question(), {"configurable": {"thread_id": "e"}}, version="v2")
    with pytest.raises(ConfigError, match=r"astream_log\(\) on a guarded graph"):
        graph.astream_log(question(), {"configurable": {"thread_id": "e"}})


def test_a_parents_astream_events_never_shows_a_guarded_subgraphs_held_tokens(
    tmp_path: Path,
) -> None:
    watch = Watch()
    child = app(True, watch, tmp_path)
    parent = StateGraph(MessagesState)
    parent.add_node("desk", child)
    parent.add_edge(START, "desk")
    outer = parent.compile(checkpointer=InMemorySaver())

    async def gather() -> list[Any]:
        config = {"configurable": {"thread_id": "outer"}}
        return [e async for e in outer.astream_events(question(), config, version="v2")]

    events = asyncio.run(gather())  # finishes: the subgraph's capture left the handler out
    tokens = [e for e in events if e["event"] == "on_chat_model_stream"]
    assert tokens == []  # the held reply's tokens never streamed
