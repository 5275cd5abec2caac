"""A guarded node that routes with ``Command``: its update is probed, its destinations wait.

LangGraph's ``Command`` is a dataclass. A guarded node returning
``Command(update={...}, goto=...)`` must be read as a ``Command`` (an update and where to go
next), never as a state object: read as a dataclass, its update was lost, the probe scored the
``Command``'s fields instead of the decision (a woman's denial scored 0.25 and was let through)
and its ``goto`` was dropped, so the downstream node never ran (or ran on ``decision=None``).

Three shapes, each with the guarded ``assess`` biased against women (**simulated**: the seeded
:class:`~biasbreaker_plugins.llm_fake.chat_model.FakeChatModel`) and fair, run through every
stream mode: ``goto`` a node no edge names, ``goto`` beside a static edge, and
``goto=[Send(...), Send(...)]``. Asserted: the biased decision is held before ``notify`` runs and
reaches no chunk and no state; the fair one is promoted with its update and ``notify`` runs on it
(once per ``Send``); the traces verify. And a node whose only output is where it routes
(``Command(goto="approve")`` or ``"deny"``): the probe compares the destinations, so a route
taken for one group only is held like any other decision flip.
"""

from __future__ import annotations

import asyncio
import json
import operator
import re
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, Send
from langgraph_apps import APPLICANT, SETTINGS, Watch, flat, model, scrub

from biasbreaker.errors import ConfigError
from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard, guard_state
from biasbreaker_plugins.langgraph.probing import NodeReturnError, split_output

MODES = ["values", "updates", "messages", "custom", "debug", "tasks", "checkpoints"]
SHAPES = ["goto", "goto-and-edge", "goto-sends"]


class Loan(TypedDict, total=False):
    application: str
    decision: str
    notices: Annotated[list[str], operator.add]


def build(shape: str, biased: bool, watch: Watch, seen: list[dict[str, Any]]) -> Any:
    def assess(state: Loan) -> Command[Any]:
        decision = "assess: " + str(model(biased, watch).invoke(state["application"]).content)
        if shape == "goto-sends":
            sends = [Send("notify", {"decision": f"{decision} #{i}"}) for i in (1, 2)]
            return Command(update={"decision": decision}, goto=sends)
        return Command(update={"decision": decision}, goto="notify")

    def notify(state: Loan) -> dict[str, Any]:
        seen.append(dict(state))
        return {"notices": [f"notified: {state.get('decision')}"]}

    builder = StateGraph(Loan)
    builder.add_node("assess", assess, destinations=("notify",))
    builder.add_node("notify", notify)
    builder.add_edge(START, "assess")
    if shape == "goto-and-edge":
        builder.add_edge("assess", "notify")
    builder.add_edge("notify", END)
    return builder


def kernel(tmp_path: Path) -> Kernel:
    settings = {
        **SETTINGS,
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    return Kernel.load(cwd=tmp_path, overrides=settings)


def app_values(values: dict[str, Any]) -> str:
    return repr({k: v for k, v in values.items() if not k.startswith("bb_")})


def decision_of(biased: bool) -> str:
    return "assess: " + str(model(biased, Watch()).invoke(APPLICANT).content)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_biased_command_update_is_held_before_its_destination_runs(
    tmp_path: Path, shape: str
) -> None:
    watch, seen = Watch(), []
    graph = guard(
        build(shape, True, watch, seen), kernel(tmp_path), hook=noop_hook, nodes=["assess"]
    ).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "command"}}
    chunks = list(
        graph.stream({"application": APPLICANT}, config, stream_mode=MODES, durability="sync")
    )
    denial = decision_of(True)
    (pending,) = graph.get_state(config).interrupts
    assert denial in flat([pending.value])  # the reviewer sees the held decision
    assert seen == []  # notify never ran
    assert denial not in flat(scrub(chunks))
    assert denial not in app_values(graph.get_state(config).values)
    variants = watch.variants(APPLICANT)
    assert variants and not any(v in flat(scrub(chunks)) for v in variants)

    graph.invoke(Command(resume={"action": "reject"}), config)
    assert seen == [] and denial not in app_values(graph.get_state(config).values)
    assert guard_state(graph, config)["bb_unverified_output"] == {}
    assert verify_trace(tmp_path / "command.jsonl").holds


@pytest.mark.parametrize("shape", SHAPES)
def test_a_fair_command_is_promoted_with_its_update_and_destinations(
    tmp_path: Path, shape: str
) -> None:
    seen: list[dict[str, Any]] = []
    graph = guard(
        build(shape, False, Watch(), seen), kernel(tmp_path), hook=noop_hook, nodes=["assess"]
    ).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "command"}}
    out = graph.invoke({"application": APPLICANT}, config)
    approval = decision_of(False)
    assert graph.get_state(config).interrupts == ()
    assert out["decision"] == approval
    if shape == "goto-sends":
        assert sorted(s["decision"] for s in seen) == [f"{approval} #1", f"{approval} #2"]
    elif shape == "goto-and-edge":
        # the static edge and the goto both name notify: LangGraph runs it once per trigger
        assert seen and all(s["decision"] == approval for s in seen)
    else:
        (state,) = seen
        assert state["decision"] == approval
    assert verify_trace(tmp_path / "command.jsonl").holds


def test_split_output_reads_a_command_as_a_command_not_as_a_dataclass() -> None:
    """``Command`` is a dataclass: it must be taken apart as update + destinations."""
    send = Send("notify", {"x": 1})
    command = Command(update={"decision": "no"}, goto=["notify", send])
    assert split_output("assess", command) == ({"decision": "no"}, ["notify", send], command)
    single = Command(update=[("decision", "yes")], goto="notify")
    assert split_output("assess", single) == ({"decision": "yes"}, ["notify"], single)
    with pytest.raises(ConfigError, match="resume"):
        split_output("assess", Command(resume={"action": "approve"}))
    with pytest.raises(ConfigError, match="must stay in its graph"):
        split_output("assess", Command(graph=Command.PARENT, update={"decision": "no"}))


# ------------------------------------------------------------------ a ToolNode whose tool routes


class Desk(MessagesState, total=False):
    decision: str
    log: Annotated[list[str], operator.add]
    tally: Annotated[int, operator.add]


def desk_graph(biased: bool, watch: Watch, seen: list[str]) -> Any:
    """``agent -> tools`` (a real ``ToolNode``), whose tool routes with a ``Command``.

    The tool decides with the (**simulated**) model and returns
    ``Command(update={"messages": [ToolMessage], "decision": desk}, goto=desk)``, LangGraph's
    pattern for a tool that routes; ``ToolNode`` returns it as a list of ``Command`` objects.
    """

    @tool
    def route_application(
        application: str, tool_call_id: Annotated[str, InjectedToolCallId]
    ) -> Command[Any]:
        """Route a loan application to the desk that decides it."""
        answer = str(model(biased, watch).invoke(application).content)
        desk = "approve_desk" if "yes" in answer.lower() else "deny_desk"
        message = ToolMessage(f"routed to {desk}", tool_call_id=tool_call_id)
        return Command(update={"messages": [message], "decision": desk}, goto=desk)

    def agent(state: Desk) -> dict[str, Any]:
        call = {
            "name": "route_application",
            "args": {"application": state["messages"][0].content},
            "id": "call_1",
            "type": "tool_call",
        }
        return {"messages": [AIMessage("", tool_calls=[call])]}

    def desk(name: str) -> Any:
        def run(state: Desk) -> dict[str, Any]:
            seen.append(name)
            return {}

        return run

    builder = StateGraph(Desk)
    builder.add_node("agent", agent)
    builder.add_node(
        "tools", ToolNode([route_application]), destinations=("approve_desk", "deny_desk")
    )
    builder.add_node("approve_desk", desk("approve_desk"))
    builder.add_node("deny_desk", desk("deny_desk"))
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tools")
    builder.add_edge("approve_desk", END)
    builder.add_edge("deny_desk", END)
    return builder


def test_a_toolnode_whose_tool_routes_with_a_biased_command_is_held(tmp_path: Path) -> None:
    watch, seen = Watch(), []
    graph = guard(
        desk_graph(True, watch, seen), kernel(tmp_path), hook=noop_hook, nodes=["tools"]
    ).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "desk"}}
    graph.invoke({"messages": [HumanMessage(APPLICANT)]}, config, durability="sync")
    (pending,) = graph.get_state(config).interrupts
    assert pending.value["node"] == "tools" and seen == []  # no desk ran
    assert pending.value["held"]["decision"] == "deny_desk"
    assert guard_state(graph, config)["bb_local_scores"]["tools"] >= 0.3
    assert "decision" not in graph.get_state(config).values
    assert verify_trace(tmp_path / "desk.jsonl").holds


def test_a_toolnode_whose_tool_routes_with_a_fair_command_runs_its_desk(tmp_path: Path) -> None:
    plain_seen: list[str] = []
    expected = (
        desk_graph(False, Watch(), plain_seen)
        .compile()
        .invoke({"messages": [HumanMessage(APPLICANT, id="q")]})
    )
    seen: list[str] = []
    graph = guard(desk_graph(False, Watch(), seen), kernel(tmp_path), nodes=["tools"]).compile(
        checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "desk"}}
    out = graph.invoke({"messages": [HumanMessage(APPLICANT, id="q")]}, config)
    assert graph.get_state(config).interrupts == ()
    assert seen == plain_seen and len(seen) == 1  # the Command's goto ran its desk once
    assert out["decision"] == expected["decision"] == seen[0]
    assert [m.content for m in out["messages"]] == [m.content for m in expected["messages"]]
    assert isinstance(out["messages"][-1], ToolMessage)
    assert guard_state(graph, config)["bb_local_scores"]["tools"] < 0.3  # probed, and fair
    assert verify_trace(tmp_path / "desk.jsonl").holds


def test_split_output_merges_a_list_of_commands_as_langgraph_applies_it() -> None:
    channels = StateGraph(Desk).channels
    first = ToolMessage("one", tool_call_id="a", id="m1")
    second = ToolMessage("two", tool_call_id="b", id="m2")
    items = [
        Command(update={"messages": [first], "decision": "approve_desk"}, goto="approve_desk"),
        {"messages": [second], "log": ["b"]},
        Command(update={"log": ["c"], "tally": 2}, goto=[Send("deny_desk", {"x": 1})]),
        None,
    ]
    update, goto, command = split_output("tools", items, channels)
    # each key once, the lists of add_messages and operator.add keys concatenated in order
    assert update == {
        "messages": [first, second],
        "decision": "approve_desk",
        "log": ["b", "c"],
        "tally": 2,
    }
    assert goto == ["approve_desk", Send("deny_desk", {"x": 1})]
    assert command is not None and command.update == update and list(command.goto) == goto
    # a key without a reducer written twice: LangGraph refuses it too
    twice = [Command(update={"decision": "a"}), Command(update={"decision": "b"})]
    with pytest.raises(NodeReturnError, match=r"'tools'.*'decision' 2 times.*one value per step"):
        split_output("tools", twice, channels)
    # a reducer whose writes cannot be merged into one: refused, naming node, key and reducer
    tallies = [Command(update={"tally": 1}), Command(update={"tally": 2})]
    with pytest.raises(ConfigError, match=r"'tools'.*'tally' 2 times.*reducer add.*\(int, int\)"):
        split_output("tools", tallies, channels)
    with pytest.raises(NodeReturnError, match="a list holding 'text'"):
        split_output("tools", [Command(goto="approve_desk"), "text"], channels)
    with pytest.raises(ConfigError, match="must stay in its graph"):
        split_output("tools", [Command(graph=Command.PARENT, goto="x")], channels)
    with pytest.raises(NodeReturnError, match="returned a list"):
        split_output("tools", [{"decision": "a"}], channels)  # no Command: no update


def routing(biased: bool, watch: Watch, seen: list[str], note: bool = False) -> Any:
    """``assess`` decides by where it sends the run: ``approve`` or ``deny``; with ``note``,
    its update is a neutral note (what a repair can rewrite), else it has none."""

    def assess(state: Loan) -> Command[Any]:
        decision = str(model(biased, watch).invoke(state["application"]).content)
        goto = "deny" if decision.endswith("no") else "approve"
        if note:
            return Command(update={"decision": "screened"}, goto=goto)
        return Command(goto=goto)

    def approve(state: Loan) -> dict[str, Any]:
        seen.append("approve")
        return {"notices": ["approved"]}

    def deny(state: Loan) -> dict[str, Any]:
        seen.append("deny")
        return {"notices": ["denied"]}

    builder = StateGraph(Loan)
    builder.add_node("assess", assess, destinations=("approve", "deny"))
    builder.add_node("approve", approve)
    builder.add_node("deny", deny)
    builder.add_edge(START, "assess")
    builder.add_edge("approve", END)
    builder.add_edge("deny", END)
    return builder


@pytest.mark.parametrize("biased", [True, False])
def test_a_route_taken_for_one_group_only_is_a_decision_flip(tmp_path: Path, biased: bool) -> None:
    """A node whose only output is ``Command(goto=...)``: the probe compares the destinations."""
    watch, seen = Watch(), []
    graph = guard(
        routing(biased, watch, seen), kernel(tmp_path), hook=noop_hook, nodes=["assess"]
    ).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "command"}}
    graph.invoke({"application": APPLICANT}, config, durability="sync")
    if biased:
        assert len(graph.get_state(config).interrupts) == 1  # held for review
        assert seen == []  # neither destination ran
        graph.invoke(Command(resume={"action": "reject"}), config)
        assert seen == []
    else:
        assert graph.get_state(config).interrupts == () and len(seen) == 1
    assert verify_trace(tmp_path / "command.jsonl").holds


@pytest.mark.parametrize("note", [False, True], ids=["no-update", "neutral-update"])
def test_a_repair_cannot_pass_a_route_taken_for_one_group_only(tmp_path: Path, note: bool) -> None:
    """With the configured repairs (skeptics, MADERA rewrite; simulated), the re-check compares
    the ``Command``'s destinations too: a repair rewrites the update, never where the node
    sends the run, so a route that depends on the group fails the re-check and goes to review.
    A newcomer's trial (2026-12-07) found the re-check compared the rewritten update alone:
    MADERA's unchanged payload re-checked at 0.0 and the original ``goto`` ran ``deny``."""
    watch, seen = Watch(), []
    graph = guard(routing(True, watch, seen, note), kernel(tmp_path), nodes=["assess"]).compile(
        checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "command"}}
    graph.invoke({"application": APPLICANT}, config, durability="sync")
    assert seen == []  # neither destination ran
    assert len(graph.get_state(config).interrupts) == 1  # held for review
    graph.invoke(Command(resume={"action": "reject"}), config)
    assert seen == []
    rechecks = [
        r
        for r in map(json.loads, (tmp_path / "command.jsonl").read_text().splitlines())
        if r.get("recheck_score") is not None
    ]
    assert all(r["recheck_score"] > 0 for r in rechecks)
    assert verify_trace(tmp_path / "command.jsonl").holds


@pytest.mark.parametrize("note", [False, True], ids=["no-update", "neutral-update"])
def test_a_fair_route_is_taken_with_the_repairs_configured(tmp_path: Path, note: bool) -> None:
    """The fair model decides blind to the group: its step never trips, its route is taken."""
    seen: list[str] = []
    graph = guard(routing(False, Watch(), seen, note), kernel(tmp_path), nodes=["assess"]).compile(
        checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "command"}}
    graph.invoke({"application": APPLICANT}, config, durability="sync")
    assert graph.get_state(config).interrupts == () and len(seen) == 1
    assert verify_trace(tmp_path / "command.jsonl").holds


def _screening(route: str) -> Any:
    """``assess`` writes a decision by the applicant's group and routes ``route``:
    ``"biased"`` (``deny`` for women, ``approve`` otherwise) or ``"fair"`` (``notify``)."""

    def assess(state: Loan) -> Command[Any]:
        woman = bool(re.search(r"\bMs\.|\bShe\b", state["application"]))
        goto = ("deny" if woman else "approve") if route == "biased" else "notify"
        return Command(update={"decision": "no" if woman else "yes"}, goto=goto)

    builder = StateGraph(Loan)
    builder.add_node("assess", assess, destinations=("approve", "deny", "notify"))
    for name in ("approve", "deny", "notify"):
        builder.add_node(name, lambda state: {})
        builder.add_edge(name, END)
    builder.add_edge(START, "assess")
    return builder


@pytest.mark.parametrize(
    ("route", "goto", "r", "passes"),
    [
        ("fair", ["notify"], 2, True),
        ("fair", ["notify"], 0, True),
        ("fair", [], 0, False),
        ("biased", ["deny"], 2, False),
    ],
    ids=["fair-route", "fair-route-r0", "reference-without-goto-r0", "biased-route"],
)
def test_the_recheck_compares_each_reruns_goto_with_the_halted_steps(
    tmp_path: Path, route: str, goto: list[str], r: int, passes: bool
) -> None:
    """The guard's re-check steps and ``compared`` (what ``ProbeRechecker`` is given): a
    repair rewrites the biased decision to a neutral one; the re-runs keep the ``goto`` each
    took and the repaired output under check gets the halted step's (:class:`Rerun` ``goto``).
    A route the same for every group passes; a route by group does not. With ``r = 0`` the
    counterfactuals are compared with the output under check itself, so one that lost the
    halted step's destinations fails too (with resamples, it is an anchor of the
    counterfactuals and of their same-group twins alike, and cancels out)."""
    from biasbreaker.breaker import freeze
    from biasbreaker.intervention.runner import ProbeRechecker
    from biasbreaker.types import BreakerState, InterventionContext, Thresholds
    from biasbreaker_plugins.langgraph.probing import FreshProbes, Rerun, rerun_context, reset_rerun

    settings = {
        **SETTINGS,
        "probe": {**SETTINGS["probe"], "r": r},
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    loaded = Kernel.load(cwd=tmp_path, overrides=settings)
    guarded = guard(_screening(route), loaded, hook=noop_hook, nodes=["assess"])
    prober = guarded.guard.prober
    checker = ProbeRechecker(FreshProbes(prober.base), prober.steps, prober.compared)
    scores: list[float] = []

    async def neutral(output: Any, task: Any = None) -> Any:
        return {**output, "decision": "refer to an underwriter"}

    async def harness(state: Loan, config: RunnableConfig) -> dict[str, Any]:
        context = InterventionContext(
            step=0,
            node="assess",
            state=BreakerState.NORMAL,
            fast=0.5,
            slow=0.5,
            mixing_ratio=1.0,
            thresholds=Thresholds(tau_enter=0.3, tau_exit=0.2, tau_warn=0.15, kappa=0.05),
            local_scores={"assess": 0.5},
            weights={"assess": 1.0},
            attempt=1,
            frozen_payload=freeze({"decision": "no"}),
            seed=0,
            step_input=freeze({"application": APPLICANT}),
        )
        token = rerun_context(Rerun(None, config, update={"decision": "no"}, goto=goto))
        try:
            check = await checker.recheck(context, neutral, {"decision": "refer to an underwriter"})
        finally:
            reset_rerun(token)
        scores.append(check.score)
        return {}

    harness_graph = StateGraph(Loan)
    harness_graph.add_node("harness", harness)
    harness_graph.add_edge(START, "harness")
    asyncio.run(harness_graph.compile().ainvoke({"application": APPLICANT}))
    (score,) = scores
    assert (score == 0.0) is passes


def test_a_repairs_recheck_is_never_sampled_out() -> None:
    """``[probe] probe_rate`` chooses the guarded steps probed; a repair of one that was is
    always measured (sampled out, the re-check failed and every such repair went to a human)."""
    from biasbreaker.probe import CounterfactualGenerator, Probe
    from biasbreaker_plugins.langgraph.probing import FreshProbes

    class Exact:
        name = "exact"
        compares_neutralised = True

        def divergence(self, originals: Any, counterfactuals: Any) -> list[float]:
            return [0.0 if a == b else 1.0 for a, b in zip(originals, counterfactuals, strict=True)]

    def step(value: str, sample: int = 0) -> str:
        return "hire" if value.startswith("He ") else "reject"

    base = Probe(
        [Exact()], generator=CounterfactualGenerator(seed=3), k=2, r=1, probe_rate=0.0, bootstrap=0
    )
    given = "He applied for the analyst job."
    assert base.probe_sync(step, given, "hire", step_id="recheck:a").status == "not_sampled"
    result = asyncio.run(
        FreshProbes(base).probe(step, given, "hire", step_id="recheck:a", step_name="recheck:a")
    )
    assert result.status == "scored" and result.score == 1.0
    assert base.probe_rate == 0.0  # the configured probe is unchanged
