"""The LangGraph adapter on real graphs: halt, clean pass-through, repair, review, structure.

Every graph is a real ``StateGraph`` run by LangGraph; the LLM is the seeded fake (simulated),
biased on one node only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command

from biasbreaker.errors import ConfigError
from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.trace import read_trace
from biasbreaker.types import BreakerState, FrozenPayload, InterventionContext, InterventionResult
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import (
    BB_KEYS,
    BiasState,
    ReviewDecision,
    guard,
    guard_node,
    guard_state,
)
from biasbreaker_plugins.langgraph.state import user_part

sys.path.insert(0, str(Path(__file__).parent))
from langgraph_pipelines import (
    NEUTRAL,
    QUESTION,
    SETTINGS,
    Received,
    StandInRepair,
    screening_graph,
)

BIASED = "Answer: B. The Christian man"


@pytest.fixture
def kernel(tmp_path: Path) -> Kernel:
    """A kernel over the installed plugins, the screening settings, no stray config files."""
    return Kernel.load(cwd=tmp_path, overrides=SETTINGS)


def thread(name: str) -> RunnableConfig:
    return {"configurable": {"thread_id": name}}


def machine_state(values: dict[str, Any]) -> str:
    return str(values["bb_breaker"]["machine"]["state"])


# ------------------------------------------------------------------ halting


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_biased_node_halts_and_its_output_never_reaches_the_next_node(
    kernel: Kernel, asynchronous: bool
) -> None:
    received = Received("answer")
    graph = guard(
        screening_graph(1.0, received, asynchronous=asynchronous), kernel, hook=noop_hook
    ).compile(checkpointer=InMemorySaver())
    config = thread("halt")
    if asynchronous:
        out = asyncio.run(graph.ainvoke({"case": "airport"}, config))
    else:
        out = graph.invoke({"case": "airport"}, config)

    assert received.calls == []  # the writer never ran, not even once
    assert "answer" not in out and "report" not in out
    assert (
        guard_state(graph, config)["bb_local_scores"]["screener"]
        >= SETTINGS["breaker"]["tau_enter"]
    )
    assert (
        guard_state(graph, config)["bb_local_scores"]["compose"] is None
    )  # its input names no group
    state = graph.get_state(config)
    assert state.next == ("bb_review",)  # paused for human review (the no-op hook escalates)
    assert machine_state(guard_state(graph, config)) == BreakerState.ESCALATED.value
    # the frozen payload is recoverable from the state and unaltered
    record = guard_state(graph, config)["bb_frozen"]["screener@2"]
    frozen = FrozenPayload.from_json(record["payload"])
    assert frozen.thaw() == {"answer": BIASED}
    assert record["status"] == "frozen" and record["node"] == "screener"
    staged = guard_state(graph, config)["bb_unverified_output"]["screener@2"]
    assert staged["update"] == {"answer": BIASED} and staged["status"] == "escalated"
    interrupt = out["__interrupt__"][0].value
    assert interrupt["held"] == {"answer": BIASED} and interrupt["breaker_state"] == "escalated"
    assert interrupt["frozen"]["sha256"] == frozen.sha256


def test_without_a_checkpointer_the_run_stops_at_the_halted_node(kernel: Kernel) -> None:
    received = Received("answer")
    graph = guard(screening_graph(1.0, received), kernel, hook=noop_hook).compile()
    out = graph.invoke({"case": "airport"})
    assert received.calls == []
    assert "answer" not in out and "__interrupt__" in out
    frozen = FrozenPayload.from_json(out["__interrupt__"][0].value["frozen"])
    assert frozen.thaw() == {"answer": BIASED}


# ------------------------------------------------------------------ clean runs


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_clean_run_passes_through_with_the_unguarded_result(
    kernel: Kernel, asynchronous: bool
) -> None:
    plain_received, guarded_received = Received("answer"), Received("answer")
    plain = screening_graph(0.0, plain_received, asynchronous=asynchronous).compile()
    guarded = guard(screening_graph(0.0, guarded_received, asynchronous=asynchronous), kernel)
    app = guarded.compile(checkpointer=InMemorySaver())
    if asynchronous:
        expected = asyncio.run(plain.ainvoke({"case": "airport"}))
        out = asyncio.run(app.ainvoke({"case": "airport"}, thread("clean")))
    else:
        expected = plain.invoke({"case": "airport"})
        out = app.invoke({"case": "airport"}, thread("clean"))
    assert user_part(out) == user_part(expected)
    assert guarded_received.guarded_call == plain_received.values == [expected["answer"]]
    assert guard_state(app, thread("clean"))["bb_local_scores"] == {
        "compose": None,
        "screener": 0.0,
        "writer": 0.0,
    }
    assert machine_state(guard_state(app, thread("clean"))) == BreakerState.NORMAL.value
    assert (
        guard_state(app, thread("clean"))["bb_unverified_output"] == {}
        and guard_state(app, thread("clean"))["bb_frozen"] == {}
    )
    assert app.get_state(thread("clean")).next == ()


def test_the_builder_is_not_modified_by_guard(kernel: Kernel) -> None:
    builder = screening_graph(1.0, Received("answer"))
    guard(builder, kernel).compile()
    out = builder.compile().invoke({"case": "airport"})
    assert out["answer"] == BIASED  # the original builder is still the unguarded graph


def test_a_deep_copy_of_a_guarded_builder_still_holds_with_the_same_guard(kernel: Kernel) -> None:
    # (a compiled graph's deep copy does not run in LangGraph 1.2 itself: its START task
    # returns a copied sentinel, "Expected dict, got <object object ...>")
    import copy

    received = Received("answer")
    builder = guard(screening_graph(1.0, received), kernel, hook=noop_hook)
    copied = copy.deepcopy(builder)  # raised "cannot pickle '_thread.lock' object"
    graph = copied.compile(checkpointer=InMemorySaver())
    out = graph.invoke({"case": "airport"}, thread("copy"))
    assert received.calls == [] and "answer" not in out
    assert graph.get_state(thread("copy")).next == ("bb_review",)
    assert copied.guard is builder.guard  # its nodes are bound to this guard
    changed = copy.deepcopy(builder)
    changed.nodes.pop("writer")  # a change the add_* methods cannot refuse
    with pytest.raises(ConfigError, match="was changed after guard"):
        copy.deepcopy(changed).compile()


# ------------------------------------------------------------------ repair


def test_a_repaired_output_is_promoted_and_the_run_continues(kernel: Kernel) -> None:
    received = Received("answer")
    repair = StandInRepair(fail_first=1)  # the first attempt fails; the retry repairs
    graph = guard(screening_graph(1.0, received), kernel, hook=repair).compile(
        checkpointer=InMemorySaver()
    )
    out = graph.invoke({"case": "airport"}, thread("repair"))
    assert [c.attempt for c in repair.contexts] == [1, 2]
    assert repair.contexts[0].frozen_payload == FrozenPayload.of({"answer": BIASED})
    assert repair.contexts[0].step_input is not None
    assert repair.contexts[0].step_input.thaw()["question"] == QUESTION
    assert out["answer"] == NEUTRAL and out["report"] == f"Filed: {NEUTRAL}"
    assert received.guarded_call == [NEUTRAL]
    assert BIASED not in received.values  # not even the probe's re-runs of the writer saw it
    record = guard_state(graph, thread("repair"))["bb_frozen"]["screener@2"]
    assert record["status"] == "repaired" and record["repaired"] == {"answer": NEUTRAL}
    assert FrozenPayload.from_json(record["payload"]).thaw() == {"answer": BIASED}
    assert (
        guard_state(graph, thread("repair"))["bb_local_scores"]["screener"] == 0.0
    )  # the repair's re-check score
    # half-open probation: the writer's clean output proceeded while the machine recovers
    assert machine_state(guard_state(graph, thread("repair"))) == BreakerState.RECOVERY.value
    assert guard_state(graph, thread("repair"))["bb_unverified_output"] == {}
    events = [e["event"] for e in guard_state(graph, thread("repair"))["bb_audit_trail"]]
    assert events == ["freeze", "intervention", "intervention"]


# ------------------------------------------------------------------ human review


def escalated(kernel: Kernel, received: Received, saver: Any, name: str) -> Any:
    graph = guard(screening_graph(1.0, received), kernel, hook=noop_hook).compile(
        checkpointer=saver
    )
    out = graph.invoke({"case": "airport"}, thread(name), durability="sync")
    assert out["__interrupt__"][0].value["key"] == "screener@2"
    return graph


def test_review_approve_promotes_the_held_output(kernel: Kernel) -> None:
    received = Received("answer")
    graph = escalated(kernel, received, InMemorySaver(), "approve")
    sha256 = graph.get_state(thread("approve")).interrupts[0].value["sha256"]
    decision = ReviewDecision(
        action="approve", reviewer="qa", note="checked the facts", sha256=sha256
    )
    out = graph.invoke(Command(resume=decision.model_dump()), thread("approve"))
    assert out["answer"] == BIASED and received.guarded_call == [BIASED]
    # ESCALATED is terminal: the writer's own output now goes to review as well
    nxt = out["__interrupt__"][0].value
    assert nxt["node"] == "writer" and nxt["held"] == {"report": f"Filed: {BIASED}"}
    assert guard_state(graph, thread("approve"))["bb_reviews"] == [
        {
            "key": "screener@2",
            "node": "screener",
            "action": "approve",
            "reviewer": "qa",
            "note": "checked the facts",
        }
    ]
    approve = {"action": "approve", "sha256": nxt["sha256"]}
    out = graph.invoke(Command(resume=approve), thread("approve"))
    assert out["report"] == f"Filed: {BIASED}" and "__interrupt__" not in out
    assert guard_state(graph, thread("approve"))["bb_frozen"]["screener@2"]["status"] == "approved"


def trailing_hook(context: InterventionContext) -> InterventionResult:
    """A repair that never converges but leaves a trail naming the output it worked on."""
    payload = None if context.frozen_payload is None else context.frozen_payload.sha256
    return InterventionResult(strategy="madera", trail=[{"event": "rewrite", "of": payload}])


def failing_hook(context: InterventionContext) -> InterventionResult:
    """A repair whose LLM raised, as :class:`InterventionRunner` reports it."""
    error = "ConnectionError: the repair endpoint refused the connection"
    return InterventionResult(
        strategy="madera", trail=[{"event": "failed", "error": error}], error=error
    )


def test_the_review_request_names_the_error_of_the_repair_that_failed(tmp_path: Path) -> None:
    graph = guard(
        screening_graph(1.0, Received("answer")),
        Kernel.load(cwd=tmp_path, overrides=SETTINGS),
        hook=failing_hook,
    ).compile(checkpointer=InMemorySaver())
    out = graph.invoke({"case": "airport"}, thread("failed"), durability="sync")
    screener = out["__interrupt__"][0].value
    assert screener["node"] == "screener" and screener["breaker_state"] == "escalated"
    error = "ConnectionError: the repair endpoint refused the connection"
    assert screener["repair_error"] == error
    assert screener["error"] is None  # that field is about a resume value, none given yet
    approve = {"action": "approve", "sha256": screener["sha256"]}
    writer = graph.invoke(Command(resume=approve), thread("failed"))["__interrupt__"][0].value
    assert writer["node"] == "writer" and writer["repair_error"] is None  # no repair ran on it


def test_a_later_output_held_while_escalated_is_reviewed_with_its_own_data(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "{thread_id}.jsonl"
    settings = {**SETTINGS, "plugin": {"langgraph": {"trace_path": str(trace)}}}
    received = Received("answer")
    graph = guard(
        screening_graph(1.0, received),
        Kernel.load(cwd=tmp_path, overrides=settings),
        hook=trailing_hook,
    ).compile(checkpointer=InMemorySaver())
    out = graph.invoke({"case": "airport"}, thread("later"), durability="sync")
    screener = out["__interrupt__"][0].value
    biased = FrozenPayload.of({"answer": BIASED})
    assert screener["node"] == "screener" and screener["frozen"]["sha256"] == biased.sha256
    assert screener["trail"] == [{"event": "rewrite", "of": biased.sha256}]

    assert screener["sha256"] == biased.sha256  # the held output's, as frozen
    approve = {"action": "approve", "sha256": screener["sha256"]}
    out = graph.invoke(Command(resume=approve), thread("later"), durability="sync")
    writer = out["__interrupt__"][0].value
    letter = FrozenPayload.of({"report": f"Filed: {BIASED}"})
    # the writer's own output, digest and payload; not the screener's frozen output or trail
    assert writer["node"] == "writer" and writer["breaker_state"] == "escalated"
    assert writer["held"] == {"report": f"Filed: {BIASED}"}
    assert writer["frozen"] == letter.to_json()
    assert writer["trail"] == []
    record = read_trace(tmp_path / "later.jsonl").records[-1]
    assert (record.node, record.payload_sha256) == ("writer", letter.sha256)
    # the escalated screener output stays frozen (and reviewed), the writer's is frozen too
    frozen = guard_state(graph, thread("later"))["bb_frozen"]
    assert frozen["screener@2"]["payload"]["sha256"] == biased.sha256
    assert frozen["screener@2"]["status"] == "approved"
    assert FrozenPayload.from_json(frozen[writer["key"]]["payload"]) == letter
    assert (
        guard_state(graph, thread("later"))["bb_breaker"]["machine"]["frozen_payload"]["sha256"]
        == biased.sha256
    )

    approve = {"action": "approve", "sha256": writer["sha256"]}
    out = graph.invoke(Command(resume=approve), thread("later"), durability="sync")
    assert out["report"] == f"Filed: {BIASED}" and "__interrupt__" not in out
    assert guard_state(graph, thread("later"))["bb_frozen"][writer["key"]]["status"] == "approved"
    assert verify_trace(tmp_path / "later.jsonl").holds


def test_review_edit_promotes_the_edited_update(kernel: Kernel) -> None:
    received = Received("answer")
    graph = escalated(kernel, received, InMemorySaver(), "edit")
    edit = {"action": "edit", "update": {"answer": NEUTRAL}}
    out = graph.invoke(Command(resume=edit), thread("edit"))
    assert out["answer"] == NEUTRAL and received.guarded_call == [NEUTRAL]
    assert BIASED not in received.values
    assert guard_state(graph, thread("edit"))["bb_frozen"]["screener@2"]["status"] == "edited"


def test_review_reject_ends_the_run_without_the_output(kernel: Kernel) -> None:
    received = Received("answer")
    graph = escalated(kernel, received, InMemorySaver(), "reject")
    out = graph.invoke(Command(resume={"action": "reject", "note": "biased"}), thread("reject"))
    assert received.calls == [] and "answer" not in out and "__interrupt__" not in out
    assert guard_state(graph, thread("reject"))["bb_unverified_output"] == {}
    assert guard_state(graph, thread("reject"))["bb_frozen"]["screener@2"]["status"] == "rejected"
    assert graph.get_state(thread("reject")).next == ()


def test_review_with_the_sqlite_checkpointer(kernel: Kernel, tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    received = Received("answer")
    with SqliteSaver.from_conn_string(str(tmp_path / "runs.sqlite")) as saver:
        graph = escalated(kernel, received, saver, "sqlite")
        graph.invoke(Command(resume={"action": "reject"}), thread("sqlite"))
        frozen = guard_state(graph, thread("sqlite"))["bb_frozen"]
    assert received.calls == [] and frozen["screener@2"]["status"] == "rejected"


def test_a_bad_resume_value_asks_again(kernel: Kernel) -> None:
    received = Received("answer")
    graph = escalated(kernel, received, InMemorySaver(), "bad")
    out = graph.invoke(Command(resume={"action": "publish"}), thread("bad"))
    again = out["__interrupt__"][0].value
    assert again["key"] == "screener@2" and "action: Input should be" in again["error"]
    out = graph.invoke(Command(resume={"action": "edit"}), thread("bad"))
    assert "'edit' needs 'update'" in out["__interrupt__"][0].value["error"]
    out = graph.invoke(Command(resume={"action": "reject"}), thread("bad"))
    assert "__interrupt__" not in out and received.calls == []
    assert guard_state(graph, thread("bad"))["bb_frozen"]["screener@2"]["status"] == "rejected"


def test_code_before_interrupt_is_safe_to_rerun(kernel: Kernel) -> None:
    graph = escalated(kernel, Received("answer"), InMemorySaver(), "rerun")
    before = graph.get_state(thread("rerun")).values
    # re-invoking without resuming re-runs the review node up to its interrupt: no change
    graph.invoke(None, thread("rerun"))
    after = graph.get_state(thread("rerun")).values
    assert after == before


# ------------------------------------------------------------------ structure


def structure(app: Any) -> set[tuple[str, str, bool]]:
    user = {n for n in app.get_graph().nodes if not n.startswith("bb_")}
    return {
        (e.source, e.target, e.conditional)
        for e in app.get_graph().edges
        if e.source in user and e.target in user
    }


class RouteState(BiasState, total=False):
    text: str
    left: str
    right: str
    done: str


def branching_builder() -> StateGraph[Any, Any, Any, Any]:
    def start(state: RouteState) -> dict[str, Any]:
        return {"text": "a note about a Muslim applicant"}

    def left(state: RouteState) -> dict[str, Any]:
        return {"left": "L"}

    def right(state: RouteState) -> dict[str, Any]:
        return {"right": "R"}

    def join(state: RouteState) -> dict[str, Any]:
        return {"done": f"{state.get('left')}{state.get('right')}"}

    def route(state: RouteState) -> str:
        return "left"

    builder = StateGraph(RouteState)
    for fn in (start, left, right, join):
        builder.add_node(fn)
    builder.add_edge(START, "start")
    builder.add_conditional_edges("start", route, {"left": "left", "right": "right"})
    builder.add_edge("left", "join")
    builder.add_edge("right", "join")
    builder.add_edge("join", END)
    return builder


def test_the_compiled_structure_shows_the_users_edges_unchanged(kernel: Kernel) -> None:
    for make in (lambda: screening_graph(0.0, Received("answer")), branching_builder):
        plain = make().compile()
        guarded = guard(make(), kernel).compile()
        assert structure(guarded) == structure(plain)
        added = set(guarded.get_graph().nodes) - set(plain.get_graph().nodes)
        assert added == {"bb_breaker", "bb_review"}
    out = guard(branching_builder(), kernel).compile().invoke({})
    assert out["done"] == "LNone"  # the conditional edge routed as written


# ------------------------------------------------------------------ the decorator


class Injected(BiasState, total=False):
    text: str
    seen: str


def test_guard_node_keeps_name_signature_hints_and_injection(kernel: Kernel) -> None:
    @guard_node
    def tagger(state: Injected, config: RunnableConfig, runtime: Runtime[None]) -> dict[str, Any]:
        """Tag the text."""
        return {"seen": f"{config['configurable']['thread_id']}|{type(runtime).__name__}"}

    @guard_node(probe=False)
    async def notifier(state: Injected) -> dict[str, Any]:
        return {}

    assert tagger.__name__ == "tagger" and tagger.__doc__ == "Tag the text."
    assert tagger.__annotations__["state"] == "Injected"  # future annotations survive
    assert asyncio.iscoroutinefunction(notifier)
    import inspect

    assert list(inspect.signature(tagger).parameters) == ["state", "config", "runtime"]

    builder = StateGraph(Injected)
    builder.add_node(tagger)  # registered under its own name
    builder.add_node(notifier)
    builder.add_edge(START, "tagger")
    builder.add_edge("tagger", "notifier")
    with pytest.raises(ConfigError, match="not guarded"):
        builder.compile().invoke({"text": "x"})
    graph = guard(builder, kernel, nodes=[]).compile(checkpointer=InMemorySaver())
    out = asyncio.run(graph.ainvoke({"text": "a note about a Muslim man"}, thread("inj")))
    assert out["seen"] == "inj|Runtime"
    assert guard_state(graph, thread("inj"))["bb_local_scores"] == {
        "tagger": 0.0
    }  # notifier is guarded but not probed
    assert machine_state(guard_state(graph, thread("inj"))) == "normal"


# ------------------------------------------------------------------ bad input


def test_a_state_without_the_biasstate_keys_is_guarded_and_its_nodes_never_see_them(
    kernel: Kernel,
) -> None:
    from typing import TypedDict

    class Plain(TypedDict):
        text: str

    seen: list[set[str]] = []

    def note(state: Plain) -> dict[str, Any]:
        seen.append(set(state))
        return {"text": state["text"] + "."}

    builder = StateGraph(Plain)
    builder.add_node("a", note)
    builder.add_node("b", note)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    graph = guard(builder, kernel).compile(checkpointer=InMemorySaver())
    out = graph.invoke({"text": "A note about a Muslim man"}, thread("plain"))
    assert out == {"text": "A note about a Muslim man.."}  # invoke returns the user's keys
    assert seen and all(keys == {"text"} for keys in seen)  # no node, no re-run, saw a bb_ key
    assert set(guard_state(graph, thread("plain"))["bb_local_scores"]) == {"a", "b"}


def test_a_user_key_with_the_reserved_prefix_is_refused(kernel: Kernel) -> None:
    from typing import TypedDict

    class Clash(TypedDict):
        bb_notes: str

    builder = StateGraph(Clash)
    builder.add_node("n", lambda state: {"bb_notes": "x"})
    builder.add_edge(START, "n")
    with pytest.raises(ConfigError, match=r"\['bb_notes'\] start with 'bb_'"):
        guard(builder, kernel)


def test_hold_probation_is_refused(tmp_path: Path) -> None:
    kernel = Kernel.load(cwd=tmp_path, overrides={**SETTINGS, "breaker": {"probation": "hold"}})
    with pytest.raises(ConfigError, match="needs 'half-open'"):
        guard(screening_graph(0.0, Received("answer")), kernel)


@pytest.mark.parametrize("config", [42, True, 0.4, ["breaker"], b"biasbreaker.toml"])
def test_a_config_of_another_kind_is_refused_naming_the_kinds(config: object) -> None:
    with pytest.raises(ConfigError, match=r"guard\(\): config=.* a dict of settings"):
        guard(screening_graph(0.0, Received("answer")), config)  # type: ignore[arg-type]


def _screen_and_letter() -> tuple[StateGraph[Any, Any, Any, Any], list[Any]]:
    """An unguarded ``letter`` node, for a biased ``screen`` to be added after guard()."""
    seen: list[Any] = []

    def letter(state: RouteState) -> dict[str, Any]:
        seen.append(state.get("done"))
        return {}

    builder = StateGraph(RouteState)
    builder.add_node("letter", letter)
    builder.add_edge(START, "letter")
    builder.add_edge("letter", END)
    return builder, seen


def _deny(state: RouteState) -> dict[str, Any]:
    return {"done": "deny"}


@pytest.mark.parametrize(
    "change",
    [
        lambda g: g.add_node("screen", _deny),
        lambda g: g.add_edge("letter", "letter"),
        lambda g: g.add_conditional_edges("letter", lambda state: END),
        lambda g: g.add_sequence([("screen", _deny)]),
        lambda g: g.set_entry_point("letter"),
    ],
    ids=["add_node", "add_edge", "add_conditional_edges", "add_sequence", "set_entry_point"],
)
def test_a_node_or_edge_added_after_guard_is_refused(kernel: Kernel, change: Any) -> None:
    """A new-user trial added a biased node, and a conditional edge, to the builder guard()
    returned: neither was guarded, and the denial reached the next node (the edge's step was
    scored 0). The guarded builder now refuses any change, naming the fix."""
    builder, _ = _screen_and_letter()
    guarded = guard(builder, kernel)
    with pytest.raises(ConfigError, match=r"on the builder guard\(\) returned: .* then call guard"):
        change(guarded)


def test_a_change_to_the_guarded_builders_fields_is_refused_at_compile(kernel: Kernel) -> None:
    builder, _ = _screen_and_letter()
    guarded = guard(builder, kernel)
    guarded.compile()  # unchanged: compiles, as often as asked
    guarded.compile()
    guarded.nodes["letter"] = dataclasses.replace(
        guarded.nodes["letter"], runnable=guarded.nodes["letter"].runnable.with_config(tags=["x"])
    )
    with pytest.raises(ConfigError, match=r"was changed after guard\(\)"):
        guarded.compile()


def test_guard_of_a_builder_with_no_node_says_to_add_them_first(kernel: Kernel) -> None:
    with pytest.raises(ConfigError, match=r"has no node yet; add every node and edge .* first"):
        guard(StateGraph(RouteState), kernel)


def test_guard_of_a_guarded_builder_says_it_is_guarded(kernel: Kernel) -> None:
    builder, _ = _screen_and_letter()
    with pytest.raises(ConfigError, match=r"already guarded .* guard the original StateGraph"):
        guard(guard(builder, kernel), kernel)


@pytest.mark.parametrize("rate", [0.0, 0.5])
def test_a_guard_that_probes_no_step_warns(tmp_path: Path, rate: float) -> None:
    """``probe_rate = 0`` in a Python mapping: the guard records every step and probes none;
    a newcomer's trial passed it and saw no word of it (``biasbreaker config`` warned)."""
    import warnings

    from biasbreaker.config.sections import ProbeOffWarning

    settings = {**SETTINGS, "probe": {**SETTINGS.get("probe", {}), "probe_rate": rate}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        guard(screening_graph(0.0, Received("answer")), settings)
    off = [w for w in caught if issubclass(w.category, ProbeOffWarning)]
    assert len(off) == (rate == 0.0)
    if off:
        assert "probe_rate = 0: no guarded step is probed" in str(off[0].message)
        assert off[0].filename == __file__  # points at the caller's guard(...) line


@pytest.mark.parametrize("template", ["{thread}.jsonl", "runs/{id}/t.jsonl", "a}b", "x{thread_id"])
def test_a_trace_path_with_another_placeholder_is_refused(tmp_path: Path, template: str) -> None:
    settings = {**SETTINGS, "plugin": {"langgraph": {"trace_path": str(tmp_path / template)}}}
    with pytest.raises(ConfigError, match=r"trace_path = .* the only one is '\{thread_id\}'"):
        guard(
            screening_graph(0.0, Received("answer")), Kernel.load(cwd=tmp_path, overrides=settings)
        )


def test_a_trace_path_without_thread_id_names_the_thread_whose_run_the_file_holds(
    tmp_path: Path,
) -> None:
    """One file for every thread: the second thread's run is refused, naming the first."""
    from biasbreaker.errors import TraceError

    trace = tmp_path / "fixed.jsonl"
    settings = {**SETTINGS, "plugin": {"langgraph": {"trace_path": str(trace)}}}
    graph = guard(
        screening_graph(0.0, Received("answer")), Kernel.load(cwd=tmp_path, overrides=settings)
    ).compile(checkpointer=InMemorySaver())
    graph.invoke({"case": "airport"}, thread("t1"))
    assert read_trace(trace).header.meta["thread"] == "t1"
    with pytest.raises(TraceError) as info:
        graph.invoke({"case": "airport"}, thread("t2"))
    message = str(info.value)
    assert "record(s) of a run on thread 't1'" in message  # the records' thread, not 't2'
    assert "the new run on thread 't2'" in message
    assert "has no {thread_id}" in message and "put {thread_id} in trace_path" in message


def test_a_config_path_that_is_no_file_is_named_for_the_python_api(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"guard\(\): config='nope.toml' is no file") as info:
        guard(screening_graph(0.0, Received("answer")), "nope.toml")
    assert "--config" not in str(info.value)


def test_unknown_or_unguardable_nodes_are_refused(kernel: Kernel) -> None:
    builder = screening_graph(0.0, Received("answer"))
    with pytest.raises(ConfigError, match=r"unknown nodes \['nope'\]"):
        guard(builder, kernel, nodes=["nope"])
    # a new user's nodes=[] guarded nothing in silence; nodes="screen" read as its letters
    with pytest.raises(ConfigError, match=r"guard\(nodes=\[\]\) guards no node"):
        guard(builder, kernel, nodes=[])
    with pytest.raises(ConfigError, match=r"is one string.*e\.g\. nodes=\['screen'\]"):
        guard(builder, kernel, nodes="screen")
    outer = StateGraph(RouteState)
    outer.add_node("inner", __import__("langchain_core.runnables").runnables.RunnableLambda(str))
    outer.add_edge(START, "inner")
    with pytest.raises(ConfigError, match="neither a function nor a compiled graph"):
        guard(outer, kernel)


def test_a_probe_failure_fails_closed_to_human_review(kernel: Kernel) -> None:
    class Flaky(BiasState, total=False):
        text: str
        out: str

    def fragile(state: Flaky) -> dict[str, Any]:
        if "Muslim" not in state["text"]:
            raise RuntimeError("cannot handle this input")
        return {"out": "ok"}

    builder = StateGraph(Flaky)
    builder.add_node(fragile)
    builder.add_edge(START, "fragile")
    graph = guard(builder, kernel).compile(checkpointer=InMemorySaver())
    out = graph.invoke({"text": "a Muslim applicant"}, thread("flaky"))
    held = out["__interrupt__"][0].value
    assert held["reason"].startswith("held for review: probe failed: ProbeError")
    assert (
        "out" not in out
        and guard_state(graph, thread("flaky"))["bb_audit_trail"][0]["event"] == "probe-failed"
    )


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_probe_rerun_past_its_time_out_fails_closed_on_time(tmp_path: Path, kind: str) -> None:
    """``[probe] call_timeout_s``: a sync node's re-runs run in worker threads, so the time-out
    fires while the re-run still blocks; an async one is cancelled. The step is held."""
    import threading

    kernel = Kernel.load(
        cwd=tmp_path, overrides={**SETTINGS, "probe": {**SETTINGS["probe"], "call_timeout_s": 0.2}}
    )
    release = threading.Event()

    class Slow(BiasState, total=False):
        text: str
        out: str

    def slow_sync(state: Slow) -> dict[str, Any]:
        if "Muslim" not in state["text"]:
            release.wait(30)  # a counterfactual re-run hangs (released when the test ends)
        return {"out": "ok"}

    async def slow_async(state: Slow) -> dict[str, Any]:
        if "Muslim" not in state["text"]:
            await asyncio.Event().wait()
        return {"out": "ok"}

    builder = StateGraph(Slow)
    builder.add_node("slow", slow_sync if kind == "sync" else slow_async)
    builder.add_edge(START, "slow")
    graph = guard(builder, kernel).compile(checkpointer=InMemorySaver())
    try:
        if kind == "sync":
            out = graph.invoke({"text": "a Muslim applicant"}, thread("slow"))
        else:
            out = asyncio.run(graph.ainvoke({"text": "a Muslim applicant"}, thread("slow")))
    finally:
        release.set()
    held = out["__interrupt__"][0].value
    assert held["reason"].startswith("held for review: probe failed: ProbeError")
    assert "timed out" in held["reason"] and "0.2 s" in held["reason"]
    assert "out" not in out


async def test_guard_works_inside_a_running_event_loop(tmp_path: Path) -> None:
    """A notebook or an async app calls guard() with a loop running: validation closes what it
    built on a loop of its own, and the guarded graph runs on the caller's loop."""
    kernel = Kernel.load(cwd=tmp_path, overrides=SETTINGS)
    graph = guard(screening_graph(0.0, Received("answer")), kernel).compile(
        checkpointer=InMemorySaver()
    )
    out = await graph.ainvoke({}, thread("loop"))
    assert "__interrupt__" not in out and out["report"].startswith("Filed: ")
    assert guard_state(graph, thread("loop"))["bb_breaker"]["machine"]["step"] > 0


# ------------------------------------------------------------------ plain JSON state


def test_every_biasbreaker_key_is_plain_json(kernel: Kernel) -> None:
    graph = guard(screening_graph(1.0, Received("answer")), kernel, hook=StandInRepair())
    out = graph.compile(checkpointer=InMemorySaver()).invoke({"case": "x"}, thread("json"))
    values = {k: out[k] for k in BB_KEYS if k in out}
    assert json.loads(json.dumps(values)) == values


def test_the_state_round_trips_through_sqlite_in_strict_msgpack_mode(tmp_path: Path) -> None:
    script = f"""
import sys, json
sys.path.insert(0, {str(Path(__file__).parent)!r})
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker_plugins.langgraph import guard, guard_state
from langgraph_pipelines import Received, SETTINGS, screening_graph
kernel = Kernel.load(cwd={str(tmp_path)!r}, overrides=SETTINGS)
config = {{"configurable": {{"thread_id": "strict"}}}}
with SqliteSaver.from_conn_string({str(tmp_path / "strict.sqlite")!r}) as saver:
    graph = guard(screening_graph(1.0, Received("answer")), kernel, hook=noop_hook)
    app = graph.compile(checkpointer=saver)
    app.invoke({{"case": "x"}}, config, durability="sync")
    out = app.invoke(Command(resume={{"action": "edit", "update": {{"answer": "C"}}}}), config)
    frozen = sorted(guard_state(app, config)["bb_frozen"])
print(json.dumps({{"answer": out.get("answer"), "frozen": frozen}}))
"""
    env = {**__import__("os").environ, "LANGGRAPH_STRICT_MSGPACK": "true"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "Deserializing unregistered type" not in done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {
        "answer": "C",
        "frozen": ["screener@2", "writer@9"],  # the writer's output, held while ESCALATED
    }


def test_the_entry_point_module_does_not_import_langgraph() -> None:
    script = (
        "import sys\n"
        "from biasbreaker.plugins import PluginHost\n"
        "host = PluginHost()\n"
        "registry = host.build_registry()\n"
        "assert 'langgraph' in registry.names('framework_adapter'), registry.names('framework_adapter')\n"
        "import biasbreaker_plugins.langgraph_plugin\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'langgraph'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
