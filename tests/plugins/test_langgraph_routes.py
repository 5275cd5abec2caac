"""A guarded node's conditional edges are probed: a route taken for one group only is held.

A new-user trial (2026-12-04) wrote the decision where LangGraph apps often write it, in the
path function of ``add_conditional_edges``: ``screen`` (guarded) returns a neutral note and
``route`` sends "Ms." applicants to ``deny``. The probe compared only the update, scored 0,
and the route was taken. Now the probe evaluates the node's conditional edges on the state
each re-run's update produces (:mod:`biasbreaker_plugins.langgraph.routes`) and compares the
destinations. Asserted, for each edge shape (a path returning node names, a ``path_map`` of
booleans, an async path, a pydantic state, a path that returns ``Send`` packets, a path
reading a key the node writes): the biased route is held before either destination runs and
the fair one is taken; the traces verify. The original call's route is computed exactly as
LangGraph computes it (:func:`~biasbreaker_plugins.langgraph.routes.after_update` applies
reducers), and an edge reading keys the node's input does not hold, naming a person, holds the
step instead of scoring it blind.
"""

from __future__ import annotations

import asyncio
import json
import logging
import operator
import re
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send
from langgraph_apps import APPLICANT, SETTINGS
from pydantic import BaseModel

from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard
from biasbreaker_plugins.langgraph.routes import after_update

WOMAN = re.compile(r"\b(?:Ms|Mrs|Miss)\.|\b(?:She|she|her|Her)\b")
SHAPES = ["names", "path-map", "async", "pydantic", "sends", "reads-update"]


class Loan(TypedDict, total=False):
    application: str
    note: str
    notices: Annotated[list[str], operator.add]


class LoanModel(BaseModel):
    application: str = ""
    note: str = ""
    notices: Annotated[list[str], operator.add] = []


def _denies(biased: bool, text: str) -> bool:
    return biased and WOMAN.search(text) is not None


def build(shape: str, biased: bool, seen: list[str]) -> StateGraph[Any, Any, Any, Any]:
    """``screen`` writes a neutral note; the conditional edge out of it decides."""

    def text(state: Any) -> str:
        return str(state.application if isinstance(state, BaseModel) else state["application"])

    def screen(state: Any) -> dict[str, Any]:
        if shape == "reads-update":
            return {"note": "deny" if _denies(biased, text(state)) else "approve"}
        return {"note": "screened"}

    def approve(state: Any) -> dict[str, Any]:
        seen.append("approve")
        return {"notices": ["approved"]}

    def deny(state: Any) -> dict[str, Any]:
        seen.append("deny")
        return {"notices": ["denied"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(LoanModel if shape == "pydantic" else Loan)
    builder.add_node("screen", screen)
    builder.add_node("approve", approve)
    builder.add_node("deny", deny)
    builder.add_edge(START, "screen")
    if shape in ("names", "pydantic"):

        def route(state: Any) -> Literal["approve", "deny"]:
            return "deny" if _denies(biased, text(state)) else "approve"

        builder.add_conditional_edges("screen", route)
    elif shape == "path-map":

        def eligible(state: Any) -> bool:
            return not _denies(biased, text(state))

        builder.add_conditional_edges("screen", eligible, {True: "approve", False: "deny"})
    elif shape == "async":

        async def aroute(state: Any) -> str:
            return "deny" if _denies(biased, text(state)) else "approve"

        builder.add_conditional_edges("screen", aroute, ["approve", "deny"])
    elif shape == "sends":

        def fan(state: Any) -> list[Send]:
            to = "deny" if _denies(biased, text(state)) else "approve"
            return [Send(to, {"application": text(state)})]

        builder.add_conditional_edges("screen", fan, ["approve", "deny"])
    else:

        def by_note(state: Any) -> str:
            return str(state["note"])

        builder.add_conditional_edges("screen", by_note, ["approve", "deny"])
    builder.add_edge("approve", END)
    builder.add_edge("deny", END)
    return builder


def kernel(tmp_path: Path) -> Kernel:
    settings = {
        **SETTINGS,
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    return Kernel.load(cwd=tmp_path, overrides=settings)


def run(graph: Any, value: Any, config: Any, shape: str) -> None:
    """Invoke ``graph``; asynchronously for an async path function (LangGraph's sync run
    cannot call one)."""
    if shape == "async":
        asyncio.run(graph.ainvoke(value, config, durability="sync"))
    else:
        graph.invoke(value, config, durability="sync")


def records(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "routes.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_conditional_edge_that_routes_one_group_only_is_held(tmp_path: Path, shape: str) -> None:
    seen: list[str] = []
    graph = guard(
        build(shape, True, seen), kernel(tmp_path), hook=noop_hook, nodes=["screen"]
    ).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "routes"}}
    run(graph, {"application": APPLICANT}, config, shape)
    assert len(graph.get_state(config).interrupts) == 1  # held for review
    assert seen == []  # neither destination ran
    run(graph, Command(resume={"action": "reject"}), config, shape)
    assert seen == []
    assert verify_trace(tmp_path / "routes.jsonl").holds


@pytest.mark.parametrize("shape", SHAPES)
def test_a_fair_conditional_edge_is_taken(tmp_path: Path, shape: str) -> None:
    seen: list[str] = []
    graph = guard(
        build(shape, False, seen), kernel(tmp_path), hook=noop_hook, nodes=["screen"]
    ).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "routes"}}
    run(graph, {"application": APPLICANT}, config, shape)
    assert graph.get_state(config).interrupts == ()
    assert seen == ["approve"]
    screened = [r for r in records(tmp_path) if r.get("node") == "screen"]
    assert screened and all(r["probe"]["status"] == "scored" for r in screened)
    assert verify_trace(tmp_path / "routes.jsonl").holds


def test_a_route_to_end_for_one_group_only_is_held(tmp_path: Path) -> None:
    """``END`` is a destination too: ending the run early for women is a decision."""
    seen: list[str] = []

    def screen(state: Loan) -> dict[str, Any]:
        return {"note": "screened"}

    def approve(state: Loan) -> dict[str, Any]:
        seen.append("approve")
        return {"notices": ["approved"]}

    builder = StateGraph(Loan)
    builder.add_node("screen", screen)
    builder.add_node("approve", approve)
    builder.add_edge(START, "screen")
    builder.add_conditional_edges(
        "screen", lambda s: END if WOMAN.search(s["application"]) else "approve"
    )
    builder.add_edge("approve", END)
    graph = guard(builder, kernel(tmp_path), hook=noop_hook, nodes=["screen"]).compile(
        checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "routes"}}
    graph.invoke({"application": APPLICANT}, config, durability="sync")
    assert len(graph.get_state(config).interrupts) == 1 and seen == []


def test_a_path_function_that_raises_holds_the_step(tmp_path: Path) -> None:
    """Fail closed: the probe cannot tell where the run goes, so the step goes to review."""
    seen: list[str] = []

    def screen(state: Loan) -> dict[str, Any]:
        return {"note": "screened"}

    def approve(state: Loan) -> dict[str, Any]:
        seen.append("approve")
        return {"notices": ["approved"]}

    def route(state: Loan) -> str:
        if "Ms." not in state["application"]:
            raise KeyError("no such desk")
        return "approve"

    builder = StateGraph(Loan)
    builder.add_node("screen", screen)
    builder.add_node("approve", approve)
    builder.add_edge(START, "screen")
    builder.add_conditional_edges("screen", route, ["approve"])
    builder.add_edge("approve", END)
    graph = guard(builder, kernel(tmp_path), hook=noop_hook, nodes=["screen"]).compile(
        checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "routes"}}
    graph.invoke({"application": APPLICANT}, config, durability="sync")
    assert len(graph.get_state(config).interrupts) == 1 and seen == []
    (held,) = [r for r in records(tmp_path) if r.get("node") == "screen"]
    assert held["probe"]["status"] == "failed"
    assert "no such desk" in held["probe"]["reason"]


class Private(TypedDict, total=False):
    score: int


def test_an_edge_reading_keys_beyond_the_node_input_that_name_a_person_holds(
    tmp_path: Path,
) -> None:
    """The probe varies the node's input; an edge reading the application it never saw is
    held with the keys named, not scored 0 on a blind comparison."""
    seen: list[str] = []

    def screen(state: Private) -> dict[str, Any]:
        return {"note": "screened"}

    def approve(state: Loan) -> dict[str, Any]:
        seen.append("approve")
        return {"notices": ["approved"]}

    def route(state: Loan) -> str:
        return "approve"

    builder = StateGraph(Loan)
    builder.add_node("screen", screen, input_schema=Private)
    builder.add_node("approve", approve)
    builder.add_edge(START, "screen")
    builder.add_conditional_edges("screen", route, ["approve"])
    builder.add_edge("approve", END)
    graph = guard(builder, kernel(tmp_path), hook=noop_hook, nodes=["screen"]).compile(
        checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "routes"}}
    graph.invoke({"application": APPLICANT, "score": 700}, config, durability="sync")
    assert len(graph.get_state(config).interrupts) == 1 and seen == []
    (held,) = [r for r in records(tmp_path) if r.get("node") == "screen"]
    assert held["probe"]["status"] == "unreadable"
    assert "keys ['application'] that" in held["probe"]["reason"]


def test_after_update_applies_each_keys_reducer_without_touching_the_state() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    class Chat(TypedDict, total=False):
        messages: Annotated[list[Any], add_messages]
        notices: Annotated[list[str], operator.add]
        note: str

    channels = StateGraph(Chat).channels
    before = {"messages": [HumanMessage("hi", id="1")], "notices": ["a"], "note": "old"}
    after = after_update(
        channels,
        before,
        {"messages": [AIMessage("yes", id="2")], "notices": ["b"], "note": "new", "extra": 1},
    )
    assert [m.content for m in after["messages"]] == ["hi", "yes"]
    assert after["notices"] == ["a", "b"] and after["note"] == "new" and after["extra"] == 1
    assert [m.content for m in before["messages"]] == ["hi"] and before["notices"] == ["a"]


@pytest.mark.parametrize("shape", ["names", "sends"])
def test_a_repair_of_the_update_does_not_let_a_biased_route_through(
    tmp_path: Path, shape: str
) -> None:
    """With the configured repairs (skeptics, MADERA rewrite; simulated), the re-check
    compares the routes of the repaired update too: rewriting a neutral note cannot make a
    route that depends on the applicant's group invariant, so the step goes to review and
    neither destination runs."""
    seen: list[str] = []
    graph = guard(build(shape, True, seen), kernel(tmp_path), nodes=["screen"]).compile(
        checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "routes"}}
    run(graph, {"application": APPLICANT}, config, shape)
    assert seen == []
    assert len(graph.get_state(config).interrupts) == 1
    assert verify_trace(tmp_path / "routes.jsonl").holds


def test_after_update_skips_an_unknown_key_and_applies_the_rest() -> None:
    """A key with no channel is taken as written, and the keys after it are still applied."""
    channels = StateGraph(Loan).channels
    after = after_update(channels, {"notices": ["a"]}, {"extra": 1, "notices": ["b"]})
    assert after == {"notices": ["a", "b"], "extra": 1}


def test_after_update_leaves_out_a_key_its_write_empties() -> None:
    from langgraph.channels import Topic

    channels = {"events": Topic(str)}
    assert after_update(channels, {"events": ["old"]}, {"events": []}) == {}


def _capturing(seen: list[Any], result: Any) -> Any:
    from langchain_core.runnables import RunnableLambda

    def path(value: Any) -> Any:
        seen.append(value)
        return result

    return RunnableLambda(path)


def test_destinations_give_each_edge_what_langgraph_gives_it() -> None:
    from biasbreaker_plugins.langgraph.routes import Route, destinations

    state = {"application": "A", "note": "n", "other": "o"}
    returned = {"note": "returned", "hint": "h"}
    seen: list[Any] = []

    def route(**kwargs: Any) -> Route:
        defaults: dict[str, Any] = {
            "name": "r",
            "path": _capturing(seen, "x"),
            "ends": None,
            "keys": ("application", "note"),
            "state_type": None,
            "own_schema": False,
        }
        return Route(**{**defaults, **kwargs})

    run = lambda r, ret=returned: asyncio.run(destinations([r], state, ret, {}))  # noqa: E731
    assert run(route()) == ["x"]
    # a dict state: the node's other returned keys are added, the state's values win
    assert seen.pop() == {"application": "A", "note": "n", "hint": "h"}
    run(route(own_schema=True))  # an edge with its own schema: its keys only
    assert seen.pop() == {"application": "A", "note": "n"}
    run(route(), None)  # a node that returned no dict
    assert seen.pop() == {"application": "A", "note": "n"}
    run(route(state_type=LoanModel))  # a model state: built as the model, nothing added
    built = seen.pop()
    assert isinstance(built, LoanModel) and built.note == "n"


def test_destinations_map_results_and_refuse_what_is_no_destination() -> None:
    from biasbreaker_plugins.langgraph.routes import Route, destinations

    def route(result: Any, ends: Any = None) -> Route:
        return Route("r", _capturing([], result), ends, ("note",), None, False)

    def run(r: Route) -> list[Any]:
        return asyncio.run(destinations([r], {"note": "n"}, None, {}))

    assert run(route(True, {True: "approve", False: "deny"})) == ["approve"]
    assert run(route(["a", Send("b", {"x": 1})])) == ["a", Send("b", {"x": 1})]
    assert run(route((Send("b", 1),), {"a": "a"})) == [Send("b", 1)]
    with pytest.raises(ValueError, match="does not map"):
        run(route("maybe", {True: "approve"}))
    with pytest.raises(ValueError, match="no destination"):
        run(route([]))
    with pytest.raises(ValueError, match="not a node name"):
        run(route(7))
    two = [route("a"), route(["b", "c"])]
    assert asyncio.run(destinations(two, {"note": "n"}, None, {})) == ["a", "b", "c"]


def _from_start(
    biased: bool, seen: list[str], shape: str, source: str = START
) -> StateGraph[Any, Any, Any, Any]:
    """A graph whose only decision is a conditional edge out of ``source`` (``START``)."""

    def triage(state: Loan) -> str:
        return "deny" if _denies(biased, state["application"]) else "approve"

    def fan(state: Loan) -> list[Send]:
        return [Send(triage(state), {"application": state["application"]})]

    def approve(state: Loan) -> dict[str, Any]:
        seen.append("approve")
        return {"notices": ["approved"]}

    def deny(state: Loan) -> dict[str, Any]:
        seen.append("deny")
        return {"notices": ["denied"]}

    builder = StateGraph(Loan)
    builder.add_node("approve", approve)
    builder.add_node("deny", deny)
    builder.add_conditional_edges(source, fan if shape == "sends" else triage, ["approve", "deny"])
    builder.add_edge("approve", END)
    builder.add_edge("deny", END)
    return builder


@pytest.mark.parametrize("shape", ["names", "sends"])
@pytest.mark.parametrize("nodes", [None, ["approve"]])  # bb_entry is guarded either way
def test_a_conditional_edge_out_of_start_is_probed(
    tmp_path: Path, shape: str, nodes: list[str] | None
) -> None:
    """Before, no node ran before a START edge decided, so the guard only warned
    (``UnprobedRouteWarning``) and a triage sending women to ``deny`` was taken. Now the
    edge leaves a guarded pass-through node, ``bb_entry``, whose probe compares where the
    edge sends every counterfactual of the input: the biased route is held before either
    destination runs, the fair one is taken, and the traces verify."""
    from biasbreaker_plugins.langgraph import ENTRY

    seen: list[str] = []
    graph = guard(
        _from_start(True, seen, shape), kernel(tmp_path), hook=noop_hook, nodes=nodes
    ).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "routes"}}
    graph.invoke({"application": APPLICANT}, config, durability="sync")
    assert len(graph.get_state(config).interrupts) == 1  # held for review
    assert seen == []  # neither destination ran
    held = [r for r in records(tmp_path) if r.get("node") == ENTRY]
    assert held and held[0]["probe"]["status"] == "scored" and held[0]["scores"][ENTRY] == 1
    assert verify_trace(tmp_path / "routes.jsonl").holds

    fair: list[str] = []
    fair_path = tmp_path / "fair"
    fair_path.mkdir()
    graph = guard(
        _from_start(False, fair, shape), kernel(fair_path), hook=noop_hook, nodes=nodes
    ).compile(checkpointer=InMemorySaver())
    out = graph.invoke({"application": APPLICANT}, config, durability="sync")
    assert graph.get_state(config).interrupts == ()
    assert "approve" in fair and "deny" not in fair  # approve is guarded too: its re-runs
    assert out["notices"] == ["approved"]
    assert verify_trace(fair_path / "routes.jsonl").holds


def test_a_graph_without_start_edges_gets_no_entry_node(tmp_path: Path) -> None:
    from biasbreaker_plugins.langgraph import ENTRY

    graph = guard(build("names", False, []), kernel(tmp_path), hook=noop_hook, nodes=["screen"])
    assert ENTRY not in graph.nodes


def test_a_start_edge_named_by_an_equal_string_is_probed_too(tmp_path: Path) -> None:
    """A graph built from a configuration names its source ``"__start__"`` with a string read
    at run time: equal to ``START``, not the same object. Its conditional edge still leaves
    ``bb_entry`` only (none is left on ``START`` itself), so the biased route is held before
    either destination runs."""
    from biasbreaker_plugins.langgraph import ENTRY

    source = json.loads('"__start__"')
    assert source == START and source is not START
    seen: list[str] = []
    builder = _from_start(True, seen, "names", source)
    guarded = guard(builder, kernel(tmp_path), hook=noop_hook)
    assert [k for k, v in guarded.branches.items() if v] == [ENTRY]
    graph = guarded.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "routes"}}
    graph.invoke({"application": APPLICANT}, config, durability="sync")
    assert len(graph.get_state(config).interrupts) == 1  # held for review
    assert seen == []  # neither destination ran


def test_bb_entry_takes_only_the_start_edges_whatever_the_other_sources_names(
    tmp_path: Path,
) -> None:
    """``bb_entry`` takes over ``START``'s conditional edges and no other: those out of the
    user's nodes stay with them, whether their names sort before ``"__start__"``
    (``"Intake"``) or after it (``"screen"``), and the run takes all three edges."""
    from biasbreaker_plugins.langgraph import ENTRY

    def step(name: str) -> Any:
        def node(state: Loan) -> dict[str, Any]:
            return {"notices": [name]}

        return node

    builder = StateGraph(Loan)
    for name in ("Intake", "screen", "approve"):
        builder.add_node(name, step(name))
    builder.add_conditional_edges(START, lambda state: "Intake", ["Intake", "screen"])
    builder.add_conditional_edges("Intake", lambda state: "screen", ["screen", "approve"])
    builder.add_conditional_edges("screen", lambda state: "approve", ["approve", END])
    builder.add_edge("approve", END)
    guarded = guard(builder, kernel(tmp_path), hook=noop_hook)
    assert sorted(k for k, v in guarded.branches.items() if v) == ["Intake", ENTRY, "screen"]
    graph = guarded.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "routes"}}
    out = graph.invoke({"application": APPLICANT}, config, durability="sync")
    assert graph.get_state(config).interrupts == ()
    assert out["notices"] == ["Intake", "screen", "approve"]


def test_bb_entry_is_added_to_a_copy_without_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A builder compiled once already (LangGraph marks it ``compiled``) is guarded without
    LangGraph's logged warning "Adding a node to a graph that has already been compiled":
    the copy that gets ``bb_entry`` is not compiled. The user's builder keeps its ``START``
    edge and gets no node."""
    from biasbreaker_plugins.langgraph import ENTRY

    builder = _from_start(False, [], "names")
    builder.compile()
    with caplog.at_level(logging.WARNING):
        guarded = guard(builder, kernel(tmp_path), hook=noop_hook)
    assert [r.getMessage() for r in caplog.records if "compiled" in r.getMessage()] == []
    assert ENTRY in guarded.nodes and ENTRY not in builder.nodes
    assert list(builder.branches[START]) == ["triage"] and builder.compiled


@pytest.mark.parametrize("biased", [True, False])
def test_a_key_the_node_returns_only_for_its_edge_is_compared(tmp_path: Path, biased: bool) -> None:
    """LangGraph hands a dict-state edge the node's returned keys that are no state keys
    (``{"hint": "deny"}``): the probe's routes read them too, for the call that ran and for
    each re-run, so a hint given for one group only is held and a fair one taken."""
    seen: list[str] = []

    def screen(state: Loan) -> dict[str, Any]:
        hint = "deny" if _denies(biased, state["application"]) else "approve"
        return {"note": "screened", "hint": hint}

    def approve(state: Loan) -> dict[str, Any]:
        seen.append("approve")
        return {"notices": ["approved"]}

    def deny(state: Loan) -> dict[str, Any]:
        seen.append("deny")
        return {"notices": ["denied"]}

    builder = StateGraph(Loan)
    builder.add_node("screen", screen)
    builder.add_node("approve", approve)
    builder.add_node("deny", deny)
    builder.add_edge(START, "screen")
    builder.add_conditional_edges("screen", lambda s: s["hint"], ["approve", "deny"])
    builder.add_edge("approve", END)
    builder.add_edge("deny", END)
    graph = guard(builder, kernel(tmp_path), hook=noop_hook, nodes=["screen"]).compile(
        checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": f"hint-{biased}"}}
    graph.invoke({"application": APPLICANT}, config, durability="sync")
    assert len(graph.get_state(config).interrupts) == (1 if biased else 0)
    assert seen == ([] if biased else ["approve"])


class Wide(TypedDict, total=False):
    application: Any
    note: str
    tier: str


class Narrow(TypedDict, total=False):
    application: Any
    note: str


def test_a_repairs_recheck_evaluates_the_edges_on_the_repaired_update(tmp_path: Path) -> None:
    """``Prober.compared``: the repaired view rebuilt onto the node's update, applied to the
    variant's input rebuilt onto its template, with the state keys the edge reads beyond the
    node's input read from the run (``tier``), as the edge will see it once promoted."""
    from langchain_core.messages import HumanMessage
    from langchain_core.runnables import RunnableConfig

    from biasbreaker.probe import Routed
    from biasbreaker_plugins.langgraph.probing import Rerun, rerun_context, reset_rerun

    def screen(state: Narrow) -> dict[str, Any]:
        return {"note": "screened"}

    def route(state: Wide) -> str:
        application = getattr(state["application"], "content", state["application"])
        return f"{application}|{state['note']}|{state['tier']}"

    builder = StateGraph(Wide)
    builder.add_node("screen", screen, input_schema=Narrow)
    builder.add_edge(START, "screen")
    builder.add_conditional_edges("screen", route)
    guarded = guard(builder, kernel(tmp_path), hook=noop_hook, nodes=["screen"])
    compared = guarded.guard.prober.compared["screen"]
    message = HumanMessage("Ms. A", id="m1")
    results: list[Any] = []

    async def harness(state: Wide, config: RunnableConfig) -> dict[str, Any]:
        cases: list[tuple[Any, Any, Any]] = [
            (None, {"application": "Mr. B", "note": "n0"}, {"note": "fixed"}),
            (
                {"application": message, "note": "n0"},
                {"application": {"type": "human", "content": "Mr. B"}, "note": "n0"},
                {"note": "fixed"},
            ),
        ]
        cases.append(
            (
                {"application": message, "note": "n0"},
                {"application": {"type": "human", "content": "Mr. B"}, "note": "n0"},
                {},
            )
        )
        for template, input_view, view in cases:
            token = rerun_context(Rerun(template, config, update={"note": "screened"}))
            try:
                results.append(await compared(view, input_view))
            finally:
                reset_rerun(token)
        for rerun, view in (
            (None, {"note": "x"}),
            (Rerun(None, config), {"note": "x"}),
            (Rerun(None, None, update={"note": "s"}), {"note": "x"}),
            (Rerun(None, config, update={"note": "s"}), {"note": "x", "tier": "y"}),
            (Rerun(None, config, update={"note": "s"}), ["x"]),
        ):
            token = rerun_context(rerun) if rerun is not None else None
            try:
                await compared(view, {"application": "Mr. B", "note": "n0"})
            except ValueError as exc:
                results.append(str(exc))
            finally:
                if token is not None:
                    reset_rerun(token)
        return {}

    probe_harness = StateGraph(Wide)
    probe_harness.add_node("harness", harness)
    probe_harness.add_edge(START, "harness")
    asyncio.run(probe_harness.compile().ainvoke({"application": "x", "note": "n", "tier": "gold"}))
    assert results[:3] == [
        Routed({"note": "fixed"}, ["Mr. B|fixed|gold"]),
        Routed({"note": "fixed"}, ["Mr. B|fixed|gold"]),
        Routed({}, ["Mr. B|n0|gold"]),  # a repair that writes fewer keys: the rest as input
    ]
    assert [r.split(":")[0] for r in results[3:6]] == [
        "cannot re-check the routes of node 'screen'"
    ] * 3
    assert all("is not an update of its keys" in r for r in results[6:])
    assert len(results) == 8
