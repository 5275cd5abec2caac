"""The staging buffer and the edge gates, unit by unit: what is promoted, when, and where to.

Fast checks of :mod:`biasbreaker_plugins.langgraph.staging` (``Work`` and its helpers) and of
the gates in :mod:`biasbreaker_plugins.langgraph._internals`, on LangGraph's real ``Command``,
``Send`` and ``ChannelWrite`` classes; ``test_langgraph_orders.py`` runs the same rules on
real graphs. ``nox -s mutants -- staging gates`` runs these first (they fail in a second).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.callbacks import BaseCallbackHandler
from langgraph.graph import END, START, StateGraph
from langgraph.pregel._write import PASSTHROUGH, SKIP_WRITE, ChannelWrite, ChannelWriteEntry
from langgraph.types import Command, Send
from typing_extensions import TypedDict

from biasbreaker.errors import ConfigError
from biasbreaker.types import BreakerAction, BreakerDecision, BreakerState, FrozenPayload
from biasbreaker_plugins.langgraph import _internals as gates
from biasbreaker_plugins.langgraph._internals import Halt, Promote
from biasbreaker_plugins.langgraph.names import BREAKER, REVIEW
from biasbreaker_plugins.langgraph.staging import (
    Work,
    coalesce,
    entry,
    goto_from_json,
    goto_json,
    held_status,
    hold_event,
    order,
    route_for,
    staged_with,
)

CONFIG: Any = {"configurable": {"thread_id": "t"}, "metadata": {"langgraph_step": 7}}


def staged(
    node: str, step: int, status: str, *, key: str | None = None, **extra: Any
) -> dict[str, Any]:
    key = key or f"{node}@{step}"
    value: dict[str, Any] = {
        "node": node,
        "key": key,
        "order": [step, key],
        "status": status,
        "update": {node: f"{node} output"},
        "goto": [],
    }
    return {**value, **extra}


def cleared(node: str, step: int, **extra: Any) -> dict[str, Any]:
    return staged(node, step, "cleared", final={node: f"{node} final"}, how="released", **extra)


def work(*entries: dict[str, Any], **state: Any) -> Work:
    return Work({"bb_unverified_output": {e["key"]: e for e in entries}, **state}, CONFIG)


# ------------------------------------------------------------------ helpers


def test_goto_json_round_trips_names_and_sends_and_refuses_anything_else() -> None:
    goto = ["a", Send("b", {"x": 1})]
    assert goto_json("n", goto) == ["a", {"send": "b", "arg": {"x": 1}}]
    assert goto_from_json(goto_json("n", goto)) == goto
    assert goto_json("n", []) == []
    with pytest.raises(ConfigError, match=r"guarded node 'n': Command goto 3 is not supported"):
        goto_json("n", ["a", 3])


def test_order_is_the_super_step_then_the_key() -> None:
    assert order({"order": ["3", 9]}) == (3, "9")
    entries = [staged("b", 2, "held"), staged("a", 10, "held"), staged("c", 2, "held")]
    assert [e["key"] for e in sorted(entries, key=order)] == ["b@2", "c@2", "a@10"]


def decision(state: BreakerState, action: BreakerAction) -> BreakerDecision:
    frozen = FrozenPayload.of({"x": 1}) if action is BreakerAction.ESCALATE else None
    return BreakerDecision(state, action, 0.5, 0.4, "why", frozen)


@pytest.mark.parametrize(
    ("state", "action", "status", "route"),
    [
        (BreakerState.ESCALATED, BreakerAction.ESCALATE, "escalated", REVIEW),
        (BreakerState.NORMAL, BreakerAction.ESCALATE, "escalated", REVIEW),
        (BreakerState.INTERVENTION, BreakerAction.HALT, "held", BREAKER),
        (BreakerState.INTERVENTION, BreakerAction.REROUTE, "held", BREAKER),
        (BreakerState.RECOVERY, BreakerAction.HALT, "held", BREAKER),
    ],
)
def test_an_output_not_let_through_is_escalated_to_review_or_held_for_the_breaker(
    state: BreakerState, action: BreakerAction, status: str, route: str
) -> None:
    assert held_status(decision(state, action)) == status
    assert route_for(decision(state, action)) == route


def test_hold_event_names_why_an_output_could_not_be_checked() -> None:
    base = {"key": "k", "hold": "why"}
    assert hold_event({**base, "not_json": "bytes"}) == {
        "event": "not-json",
        "key": "k",
        "error": "why",
    }
    # a status read back from a checkpoint is not the interned literal: compared by value
    failed = {**base, "not_json": None, "outcome": {"status": "".join(["fail", "ed"])}}
    assert hold_event(failed)["event"] == "probe-failed"
    language = {**base, "outcome": {"status": "".join(["unsupported", "_language"])}}
    assert hold_event(language)["event"] == "unsupported-language"
    assert hold_event({**base, "outcome": {"status": "scored"}})["event"] == "unreadable"
    assert hold_event({**base, "outcome": None})["event"] == "unreadable"
    assert hold_event({"key": "k"}) == {"event": "unreadable", "key": "k", "error": None}


def test_staged_with_filters_by_status_earliest_first() -> None:
    state = {
        "bb_unverified_output": {
            "b@3": staged("b", 3, "held"),
            "a@2": staged("a", 2, "queued"),
            "c@1": staged("c", 1, "cleared"),
        }
    }
    assert [e["key"] for e in staged_with(state, "held", "queued")] == ["a@2", "b@3"]
    assert staged_with(state, "escalated") == []
    assert staged_with({}, "held") == [] and staged_with({"bb_unverified_output": None}) == []


def test_coalesce_writes_each_guard_key_once_and_keeps_the_rest_in_order() -> None:
    pairs = [
        ("answer", "x"),
        ("bb_unverified_output", {"a": 1}),
        ("answer", "y"),
        ("bb_audit_trail", [1]),
        ("bb_unverified_output", {"b": 2, "a": 3}),
        ("bb_breaker", {"m": 1, "old": True}),
        ("bb_audit_trail", [2]),
        ("bb_breaker", {"m": 2}),
        ("bb_local_scores", 1.0),
        ("bb_local_scores", {"n": 0.5}),
    ]
    assert coalesce(pairs) == [
        ("answer", "x"),
        ("answer", "y"),
        ("bb_unverified_output", {"a": 3, "b": 2}),
        ("bb_audit_trail", [1, 2]),
        ("bb_breaker", {"m": 2}),  # a snapshot replaces, never merges
        ("bb_local_scores", {"n": 0.5}),  # neither both mappings nor both lists: the last
    ]
    assert coalesce([("bb_network_ewma", {"a": 1}), ("bb_network_ewma", {"b": 2})]) == [
        ("bb_network_ewma", {"b": 2})
    ]
    assert coalesce([("bb_katz_weights", {"a": 1}), ("bb_katz_weights", {"b": 2})]) == [
        ("bb_katz_weights", {"b": 2})
    ]
    assert coalesce([("bb_frozen", [1]), ("bb_frozen", {"k": 1})]) == [("bb_frozen", {"k": 1})]
    assert coalesce([]) == []


class StandInCall:
    """The fields of a probed call that :func:`entry` reads."""

    class Node:
        name = "assess"

    node = Node()
    key = "assess@2#0"
    lg_step = 2
    sampled = True
    score = 0.25
    hold = None

    def __init__(self) -> None:
        self.update = {"decision": "yes"}
        self.view: Any = {"decision": "yes"}
        self.goto = [Send("next", {"x": 1})]
        self.probe_summary = {"k": 4}
        self.outcome = {"status": "scored", "reason": "ok"}
        self.not_json: str | None = None

    def staged_input(self, opaque: frozenset[str]) -> tuple[Any, Any]:
        return ({"opaque": sorted(opaque)}, {"template": True})


def test_an_entry_keeps_what_promotion_and_review_need() -> None:
    call: Any = StandInCall()
    value = entry(call, "queued", frozenset({"o"}), reason="r")
    assert value == {
        "node": "assess",
        "key": "assess@2#0",
        "order": [2, "assess@2#0"],
        "status": "queued",
        "update": {"decision": "yes"},
        "view": {"decision": "yes"},
        "goto": [{"send": "next", "arg": {"x": 1}}],
        "input": {"opaque": ["o"]},
        "template": {"template": True},
        "sampled": True,
        "score": 0.25,
        "probe": {"k": 4},
        "outcome": {"status": "scored", "reason": "ok"},
        "hold": None,
        "step": None,
        "reason": "r",
    }
    assert value["outcome"] is not call.outcome  # a copy: the call may change later
    call.not_json, call.view = "bytes", "<bytes>"
    unreadable = entry(call, "escalated", frozenset())
    assert unreadable["update"] == "<bytes>" and unreadable["not_json"] == "bytes"
    assert unreadable["reason"] == ""


# ------------------------------------------------------------------ Work


def test_work_reads_its_task_and_copies_the_buffer() -> None:
    buffer = {"a@1": staged("a", 1, "queued")}
    state = {"bb_unverified_output": buffer, "bb_breaker": {"m": 1}}
    w = Work(state, CONFIG)
    assert (w.thread, w.lg_step, w.breaker) == ("t", 7, {"m": 1})
    w.drop("a@1")
    assert buffer == {"a@1": staged("a", 1, "queued")}  # the state's own mapping is not touched
    assert Work({}, CONFIG).staged == {} and Work({}, CONFIG).breaker is None


def test_put_drop_and_clear_write_the_buffer_and_keep_a_working_copy() -> None:
    w = work()
    held = staged("a", 1, "held")
    w.put(held)
    assert w.staged == {"a@1": held} and w.pairs == [("bb_unverified_output", {"a@1": held})]
    w.clear(held, {"a": "repaired"}, "repaired")
    assert w.staged["a@1"] == {
        **held,
        "status": "cleared",
        "final": {"a": "repaired"},
        "how": "repaired",
    }
    w.clear(held, {"a": "own"})
    assert w.staged["a@1"]["how"] == "released"
    w.drop("a@1")
    w.drop("never-staged")  # dropping an unknown key is a no-op on the copy
    assert w.staged == {} and w.pairs[-2:] == [
        ("bb_unverified_output", {"a@1": None}),
        ("bb_unverified_output", {"never-staged": None}),
    ]


def test_entries_frozen_set_breaker_and_extend() -> None:
    w = work(staged("b", 2, "held"), staged("a", 2, "queued"), staged("c", 1, "cleared"))
    assert [e["key"] for e in w.entries("held", "queued")] == ["a@2", "b@2"]
    assert w.entries() == []
    w = work(bb_frozen={"k": {"v": 1}, "j": {"v": 0}})
    assert w.frozen("k") == {"v": 1} and w.frozen("missing") == {}
    w.extend([("bb_frozen", {"k": {"v": 2}}), ("bb_frozen", {"other": {}})])
    assert w.frozen("k") == {"v": 2} and w.frozen("j") == {"v": 0}
    # only bb_frozen writes are frozen records, not another key's value that holds "k"
    w.extend([("answer", {"k": "not a record"}), ("bb_breaker", {"k": "nor this"})])
    w.put(staged("x", 1, "held", key="k"))  # a staged entry under the same key
    assert w.frozen("k") == {"v": 2}
    # names compared by value (one built at run time is not the interned literal)
    w.extend([("".join(["bb_", "frozen"]), {"k": {"v": 3}})])
    assert w.frozen("k") == {"v": 3}
    assert work().frozen("k") == {}
    w.set_breaker({"m": 3})
    assert w.breaker == {"m": 3} and w.pairs[-1] == ("bb_breaker", {"m": 3})


def test_a_batch_is_promoted_when_every_member_cleared_in_order_with_its_destinations() -> None:
    second = cleared("b", 2, goto=["x", {"send": "y", "arg": 1}])
    w = work(second, cleared("a", 2, goto=["z"]))
    out = w.result()
    assert isinstance(out, Promote) and out.promoted == ("a", "b")
    assert out.goto == ["z", "x", Send("y", 1)]
    assert out.update == [
        ("a", "a final"),
        ("b", "b final"),
        ("bb_unverified_output", {"a@2": None, "b@2": None}),
    ]
    assert [e["key"] for e in w.promoted] == ["a@2", "b@2"] and w.staged == {}


@pytest.mark.parametrize("other", ["queued", "tripped", "held", "escalated", "fanout"])
def test_a_batch_with_a_member_not_cleared_is_not_promoted(other: str) -> None:
    w = work(cleared("a", 2), staged("b", 2, other))
    out = w.result()
    assert not isinstance(out, Promote) and isinstance(out, Command)
    assert w.promoted == [] and set(w.staged) == {"a@2", "b@2"}
    assert all(name == "bb_unverified_output" for name, _ in out.update)
    expected = {"queued": [BREAKER], "tripped": [BREAKER], "held": [BREAKER]}
    assert out.goto == expected.get(other, [REVIEW] if other == "escalated" else [])


def test_batches_are_promoted_independently_and_one_node_is_named_once() -> None:
    w = work(
        staged("a", 1, "held"),
        cleared("b", 2, key="b@2#0"),
        cleared("b", 2, key="b@2#1"),
        cleared("c", 3),
    )
    out = w.result()
    assert isinstance(out, Promote) and out.promoted == ("b", "c")
    assert [e["key"] for e in w.promoted] == ["b@2#0", "b@2#1", "c@3"]
    assert list(w.staged) == ["a@1"] and out.goto == [BREAKER]
    # a later batch still held does not hold back an earlier one that cleared
    w = work(cleared("b", 2), staged("c", 3, "held"))
    out = w.result()
    assert isinstance(out, Promote) and out.promoted == ("b",) and list(w.staged) == ["c@3"]


def test_a_late_super_step_is_promoted_too() -> None:
    """Super-steps count on across a thread's runs: past CPython's cached small ints (256),
    batches are matched by value (a mutant matching them by identity promotes nothing)."""
    # each entry's super-step is its own int object, as when read back from a checkpoint
    w = work(cleared("a", int("1000"), key="a@1000#0"), cleared("a", int("1000"), key="a@1000#1"))
    out = w.result()
    assert isinstance(out, Promote) and out.promoted == ("a",) and w.staged == {}


def test_sends_replace_the_reroute_and_precede_the_promoted_destinations() -> None:
    sends = [Send("bb_skeptic", {"i": 0})]
    w = work(staged("a", 1, "held"), cleared("b", 2, goto=["n"]))
    out = w.result(sends=sends)
    assert out.goto == [Send("bb_skeptic", {"i": 0}), "n"]
    out = work(staged("a", 1, "escalated")).result(sends=sends)
    assert out.goto == sends


def test_review_comes_after_every_output_the_breaker_still_has_to_step() -> None:
    out = work(staged("a", 1, "escalated"), staged("b", 2, "queued")).result()
    assert out.goto == [BREAKER]
    out = work(staged("a", 1, "escalated")).result()
    assert out.goto == [REVIEW] and type(out) is Command
    out = work().result()
    assert out.goto == [] and out.update == [] and type(out) is Command


# ------------------------------------------------------------------ the gates


def test_a_halted_output_writes_no_edge_and_only_a_named_promotion_fires_the_copy() -> None:
    assert gates._not_halted({"a": 1}) and gates._not_halted(Command(goto="x"))
    assert not gates._not_halted(Halt(goto="x"))
    assert gates._promotes("a", Promote(promoted=("b", "a")))
    assert not gates._promotes("a", Promote(promoted=("b",)))
    assert not gates._promotes("a", Command(goto="a")) and not gates._promotes("a", ("a",))


def test_a_gated_entry_skips_unless_its_predicate_holds_and_keeps_its_value() -> None:
    def pred(out: Any) -> bool:
        return out == "go"

    entry_ = ChannelWriteEntry("branch:to:v", None)
    assert gates._gated_value(pred, entry_, "stop") is SKIP_WRITE
    assert gates._gated_value(pred, entry_, "go") is None
    passthrough = ChannelWriteEntry("c", PASSTHROUGH)
    assert gates._gated_value(pred, passthrough, "go") == "go"
    mapped = ChannelWriteEntry("join:a+b:v", "a", mapper=lambda v: f"<{v}>")
    assert gates._gated_value(pred, mapped, "go") == "<a>"
    mapped_through = ChannelWriteEntry("c", PASSTHROUGH, mapper=str.upper)
    assert gates._gated_value(pred, mapped_through, "go") == "GO"


def test_a_gated_channel_write_keeps_channels_and_refuses_an_unknown_layout() -> None:
    writer = ChannelWrite([ChannelWriteEntry("branch:to:v", None, skip_none=True)])
    gated = gates._gate_channel_write(writer, gates._not_halted, "n")
    (only,) = gated.writes
    assert isinstance(only, ChannelWriteEntry) and only.channel == "branch:to:v"
    assert only.skip_none is True and only.value is PASSTHROUGH
    assert only.mapper is not None and only.mapper(Halt(goto="x")) is SKIP_WRITE
    assert only.mapper({"a": 1}) is None
    with pytest.raises(ConfigError, match=r"guarded node 'n': unexpected LangGraph edge writer"):
        gates._gate_channel_write(ChannelWrite([Send("x", 1)]), gates._not_halted, "n")


class S(TypedDict, total=False):
    a: str
    b: str
    c: str


def two_step_graph(conditional: bool) -> Any:
    def a(state: S) -> dict[str, Any]:
        return {"a": "A"}

    def b(state: S) -> dict[str, Any]:
        return {"b": "B"}

    def c(state: S) -> dict[str, Any]:
        return {"c": "C"}

    builder = StateGraph(S)
    for fn in (a, b, c):
        builder.add_node(fn.__name__, fn)
    builder.add_edge(START, "a")
    builder.add_edge(START, "c")  # the promoter runs (and is drawn) beside a
    if conditional:
        builder.add_conditional_edges("a", lambda s: "b", ["b"])
    else:
        builder.add_edge("a", "b")
    builder.add_edge("b", END)
    builder.add_edge("c", END)
    return builder.compile()


def drawn(compiled: Any) -> set[tuple[str, str, bool]]:
    return {(e.source, e.target, e.conditional) for e in compiled.get_graph().edges}


class Runs(BaseCallbackHandler):
    """The names of the runs a tracer sees (LangSmith sees the same callbacks)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self.names.append(str(kwargs.get("name")))


@pytest.mark.parametrize("conditional", [False, True])
def test_installed_gates_halt_the_node_and_fire_from_the_promoter(conditional: bool) -> None:
    compiled = two_step_graph(conditional)
    before = list(compiled.nodes["a"].writers)
    gates.install_gates(compiled, ["a"], ["c"])
    after = compiled.nodes["a"].writers
    assert after[0] is before[0] and len(after) == len(before) == 2
    assert after[1] is not before[1]
    assert len(compiled.nodes["c"].writers) == 2  # its own END edge and a copy of a's
    # drawing shows the user's edges exactly: the node's own gated writer declares its
    # branch, the promoter's copy declares nothing (no edge c -> b is drawn)
    assert drawn(compiled) == drawn(two_step_graph(conditional))
    assert ("a", "b", conditional) in drawn(compiled)


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("conditional", [False, True])
def test_the_gates_add_no_run_a_tracer_sees(conditional: bool, asynchronous: bool) -> None:
    def names(compiled: Any) -> list[str]:
        runs = Runs()
        config: Any = {"callbacks": [runs]}
        if asynchronous:
            asyncio.run(compiled.ainvoke({}, config))
        else:
            compiled.invoke({}, config)
        return sorted(runs.names)

    plain = names(two_step_graph(conditional))
    compiled = two_step_graph(conditional)
    gates.install_gates(compiled, ["a"], ["c"])
    assert names(compiled) == plain


@pytest.mark.parametrize("asynchronous", [False, True])
def test_gates_on_a_real_run_only_a_promotion_naming_the_node_fires_its_edges(
    asynchronous: bool,
) -> None:
    def run(compiled: Any) -> Any:
        return asyncio.run(compiled.ainvoke({})) if asynchronous else compiled.invoke({})

    for conditional in (False, True):
        compiled = two_step_graph(conditional)
        gates.install_gates(compiled, ["a"], [])
        assert run(compiled) == {"a": "A", "b": "B", "c": "C"}

    def halting(state: S) -> Any:
        return Halt(goto=[], update={"a": "held"})

    def promoting(state: S) -> Any:
        return Promote(update={"c": "C"}, goto=[], promoted=("a",))

    def naming_another(state: S) -> Any:
        return Promote(update={"c": "C"}, goto=[], promoted=("b",))

    for conditional in (False, True):
        for promoter, fires in ((promoting, True), (naming_another, False)):
            builder = StateGraph(S)
            builder.add_node("a", halting)
            builder.add_node("b", lambda s: {"b": "B"})
            builder.add_node("c", promoter)
            builder.add_edge(START, "a")
            builder.add_edge(START, "c")
            if conditional:
                builder.add_conditional_edges("a", lambda s: "b", ["b"])
            else:
                builder.add_edge("a", "b")
            compiled = builder.compile()
            gates.install_gates(compiled, ["a"], ["c"])
            out = run(compiled)
            assert out.get("b") == ("B" if fires else None), (conditional, promoter)
            assert out["a"] == "held"


def test_check_layout_refuses_a_node_already_run_or_laid_out_differently() -> None:
    compiled = two_step_graph(False)
    assert len(gates.check_layout(compiled, "a")) == 1
    compiled.invoke({})
    with pytest.raises(ConfigError, match=r"guarded node 'a' was already used"):
        gates.check_layout(compiled, "a")
    for cached in ("flat_writers", "node"):  # either cache alone is enough to refuse
        compiled = two_step_graph(False)
        getattr(compiled.nodes["a"], cached)
        assert cached in vars(compiled.nodes["a"])
        with pytest.raises(ConfigError, match=r"guarded node 'a' was already used"):
            gates.check_layout(compiled, "a")
    compiled = two_step_graph(False)
    compiled.nodes["b"].writers.insert(0, ChannelWrite([ChannelWriteEntry("x", None)]))
    with pytest.raises(ConfigError, match=r"its first writer is not LangGraph's state-update"):
        gates.check_layout(compiled, "b")
    compiled.nodes["b"].writers.clear()
    with pytest.raises(ConfigError, match=r"guarded node 'b': its first writer"):
        gates.check_layout(compiled, "b")
    compiled = two_step_graph(False)
    del compiled.nodes["b"].__dict__["writers"][1:]
    compiled.nodes["b"].__dict__.pop("node", None)
    assert gates.check_layout(compiled, "b") == []
