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

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send
from langgraph_apps import APPLICANT, SETTINGS, Watch, flat, model, scrub

from biasbreaker.errors import ConfigError
from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard, guard_state
from biasbreaker_plugins.langgraph.probing import split_output

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


def routing(biased: bool, watch: Watch, seen: list[str]) -> Any:
    """``assess`` decides only by where it sends the run: ``approve`` or ``deny``, no update."""

    def assess(state: Loan) -> Command[Any]:
        decision = str(model(biased, watch).invoke(state["application"]).content)
        return Command(goto="deny" if decision.endswith("no") else "approve")

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
