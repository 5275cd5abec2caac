"""``read_channels`` reads the task's channels as ``ChannelRead.do_read`` does; the guard's
channels are lean copies of the declared ones (``lean_channels``)."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.runnables import RunnableConfig
from langgraph._internal._typing import MISSING
from langgraph.channels import LastValue
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.graph import END, START, StateGraph
from langgraph.pregel._read import ChannelRead

from biasbreaker.kernel import Kernel
from biasbreaker_plugins.langgraph import BiasState, guard
from biasbreaker_plugins.langgraph._internals import (
    LeanAggregate,
    lean_channels,
    read_channels,
    task_of,
    trace_key,
    writes_nothing,
)
from biasbreaker_plugins.langgraph.state import BB_KEYS


class S(BiasState, total=False):
    text: str


def test_read_channels_matches_do_read() -> None:
    seen: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def first(state: S) -> dict[str, Any]:
        return {"bb_frozen": {"k": {"x": 1}}, "text": "a"}

    def second(state: S, config: RunnableConfig) -> dict[str, Any]:
        keys = [*sorted(BB_KEYS), "text"]
        seen.append((read_channels(config, keys), dict(ChannelRead.do_read(config, select=keys))))
        return {}

    builder = StateGraph(S)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    builder.compile().invoke({"text": "q"})
    ours, theirs = seen[0]
    assert ours == theirs
    assert ours["bb_frozen"] == {"k": {"x": 1}} and ours["text"] == "a"


class Plain(TypedDict, total=False):
    text: str


@pytest.mark.parametrize("schema", [S, Plain], ids=["BiasState", "plain"])
def test_the_guard_channels_are_lean_copies_that_reduce_the_same(
    schema: Any, tmp_path: Path
) -> None:
    builder = StateGraph(schema)
    builder.add_node("node", lambda state: {"text": "b"})
    builder.add_edge(START, "node")
    declared = StateGraph(S).channels  # the channels LangGraph builds from the annotations
    guarded = guard(builder, Kernel.load(cwd=tmp_path, overrides={"llm": {"client": "fake"}}))
    writes: dict[str, list[Any]] = {
        "bb_breaker": [{"machine": {"step": 1}, "by": "a"}, {"machine": {"step": 2}, "by": "b"}],
        "bb_unverified_output": [{"k": {"status": "held"}, "j": {"status": "queued"}}, {"k": None}],
        "bb_audit_trail": [[{"event": "freeze"}], [{"event": "review"}]],
        "bb_frozen": [{"k": {"x": 1}}, {"j": {"x": 2}}],
    }
    for key in sorted(BB_KEYS):
        lean, original = guarded.channels[key], declared[key]
        assert type(lean) is LeanAggregate and lean.typ in (dict, list)
        assert lean == original and lean.key == original.key == key
        ours, theirs = lean.from_checkpoint(MISSING), original.from_checkpoint(MISSING)
        # empty until written (LangGraph skips it), where the declared channel holds {} or []
        assert not ours.is_available() and ours.checkpoint() is MISSING
        assert not ours.update([]) and not ours.is_available()
        assert theirs.get() == lean.typ() and type(theirs.get()) is lean.typ
        for write in writes.get(key, [lean.typ()]):
            assert ours.update([write]) == theirs.update([write])
            assert ours.copy().get() == ours.get() and ours.copy() is not ours
        assert ours.get() == theirs.get() and ours.checkpoint() == theirs.checkpoint()
        again = lean.from_checkpoint(ours.checkpoint())
        assert again.get() == ours.get() and again.key == key and again == original
    assert guarded.compile().invoke({"text": "a"}) == {"text": "b"}


def test_guard_state_reports_a_key_never_written_as_its_empty_value(tmp_path: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from biasbreaker_plugins.langgraph import guard_state

    builder = StateGraph(Plain)
    builder.add_node("node", lambda state: {"text": "b"})
    builder.add_edge(START, "node")
    kernel = Kernel.load(cwd=tmp_path, overrides={"llm": {"client": "fake"}})
    app = guard(builder, kernel).compile(checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    app.invoke({"text": "a"}, config)
    found = guard_state(app, config)
    assert set(found) == BB_KEYS
    assert found["bb_frozen"] == {} and found["bb_audit_trail"] == [] and found["bb_breaker"]


def test_only_bare_dict_and_list_reducer_channels_are_rebuilt() -> None:
    channels = {
        **StateGraph(S).channels,
        "last": LastValue(str),
        "counter": BinaryOperatorAggregate(int, operator.add),
    }
    lean = lean_channels(channels, [*channels, "absent"])
    assert set(lean) == BB_KEYS
    assert [lean[k].typ for k in ("bb_frozen", "bb_reviews")] == [dict, list]


def test_writes_nothing_knows_a_no_op_writer_again_by_its_code_only() -> None:
    def make_no_op() -> Any:
        def writer(chunk: Any) -> None:
            pass

        return writer

    sent: list[Any] = []

    def real(chunk: Any) -> None:
        sent.append(chunk)

    first, second = make_no_op(), make_no_op()
    assert writes_nothing(first) and writes_nothing(second)  # the second by identity of code
    assert not writes_nothing(real)
    assert not writes_nothing(lambda chunk: sent.append(chunk))
    assert not writes_nothing(object())
    assert writes_nothing(first)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        (None, "default"),
        ({}, "default"),
        ({"configurable": {"thread_id": "t1"}}, "t1"),
        ({"configurable": {"thread_id": 7, "checkpoint_ns": ""}}, "7"),
        ({"configurable": {"thread_id": "t", "checkpoint_ns": "node:1"}}, "t"),
        ({"configurable": {"thread_id": "t", "checkpoint_ns": "outer:1|inner:2"}}, "t.outer-1"),
        ({"configurable": {"checkpoint_ns": "a:1|b:2|c:3"}}, "default.a-1.b-2"),
    ],
)
def test_trace_key_is_the_thread_plus_the_subgraph_namespace(
    config: dict[str, Any] | None, key: str
) -> None:
    assert trace_key(config) == key


@pytest.mark.parametrize(
    ("metadata", "task"),
    [
        ({}, (0, "")),
        ({"langgraph_step": 3, "langgraph_path": ("__pregel_pull", "a")}, (3, "")),
        ({"langgraph_step": "4", "langgraph_path": ("__pregel_push", 0, 2)}, (4, "#0.2")),
    ],
)
def test_task_of_is_the_super_step_and_push_suffix(
    metadata: dict[str, Any], task: tuple[int, str]
) -> None:
    assert task_of({"metadata": metadata}) == task
