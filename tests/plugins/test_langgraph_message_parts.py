"""What a message carries beside its text is read and varied, or holds the step.

A message ``name`` written with underscores (OpenAI refuses spaces in ``name``),
``"Mary_Carter"``, was not read as a person, so that the step was recorded
``not_applicable`` ("group-blind") and a decision against women reached the next node.

Asserted here: such a node is held before its successor runs, its step ``scored``; a fair
node passes; the name's view rebuilds exactly (ids and other fields kept).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph, add_messages
from langgraph_apps import SETTINGS

from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.probe.names import packaged_names
from biasbreaker_plugins.langgraph import guard
from biasbreaker_plugins.langgraph.values import read, rebuild

FEMALE_WORDS = {"ms", "mrs", "miss", "she", "her", "woman", "female"}
FEMALE_NAMES = {n.lower() for n, i in packaged_names().first.items() if i.gender == "female"}


class Loan(TypedDict, total=False):
    messages: Annotated[list[BaseMessage], add_messages]
    decision: str


def everything(messages: list[BaseMessage]) -> str:
    """All a node could read of its messages: content parts, names, additional_kwargs."""
    return json.dumps([m.model_dump() for m in messages], default=repr)


def names_a_woman(text: str) -> bool:
    words = {w.lower() for w in re.findall(r"[A-Za-z]+", text)}
    return bool(words & (FEMALE_WORDS | FEMALE_NAMES))


def build(biased: bool, seen: list[str]) -> Any:
    def decide(state: Loan) -> dict[str, Any]:
        deny = biased and names_a_woman(everything(state["messages"]))
        decision = "Decision: no" if deny else "Decision: yes"
        return {"decision": decision, "messages": [AIMessage(decision)]}

    def notify(state: Loan) -> dict[str, Any]:
        seen.append(str(state.get("decision")))
        return {}

    builder = StateGraph(Loan)
    builder.add_node("decide", decide)
    builder.add_node("notify", notify)
    builder.add_edge(START, "decide")
    builder.add_edge("decide", "notify")
    builder.add_edge("notify", END)
    return builder


def run(tmp_path: Path, message: BaseMessage, *, biased: bool) -> tuple[Any, list[str], Any]:
    """(the run's interrupts, what notify saw, the decide step's probe record)."""
    settings = {**SETTINGS, "plugin": {"langgraph": {"trace_path": str(tmp_path / "t.jsonl")}}}
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    seen: list[str] = []
    graph = guard(build(biased, seen), kernel, hook=noop_hook, nodes=["decide"])
    app = graph.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    app.invoke({"messages": [message]}, config, durability="sync")
    lines = (tmp_path / "t.jsonl").read_text(encoding="utf-8").splitlines()
    probes = [r["probe"] for r in map(json.loads, lines) if r.get("node") == "decide"]
    return app.get_state(config).interrupts, seen, probes[0]


CASES: dict[str, BaseMessage] = {
    "human_name_underscore": HumanMessage(
        "Loan application, income 40k.", name="Mary_Carter", id="h1"
    ),
    "ai_name_underscore": AIMessage("Loan application, income 40k.", name="Mary_Carter"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_node_biased_on_what_a_message_carries_beside_its_text_is_held(
    tmp_path: Path, case: str
) -> None:
    interrupts, seen, probe = run(tmp_path, CASES[case], biased=True)
    assert probe["status"] == "scored", probe
    assert len(interrupts) == 1 and seen == []  # the denial never reached notify


@pytest.mark.parametrize("case", ["human_name_underscore"])
def test_a_fair_node_reading_the_same_messages_passes(tmp_path: Path, case: str) -> None:
    interrupts, seen, probe = run(tmp_path, CASES[case], biased=False)
    assert probe["status"] == "scored", probe
    assert interrupts == () and seen == ["Decision: yes"]


def test_an_underscored_message_name_is_read_with_spaces_and_rebuilt_with_underscores() -> None:
    for message in (
        HumanMessage("hi", name="Mary_Carter", id="h1"),
        AIMessage("hi", name="Mary_Carter", id="a1"),
    ):
        view = read(message)
        assert view["name"] == "Mary Carter"
        assert rebuild(message, view) == message  # exact round trip
        rebuilt = rebuild(message, {**view, "name": "Diana Vu"})
        assert rebuilt.name == "Diana_Vu" and rebuilt.id == message.id
        assert rebuild(message, {**view, "name": "Mary Ann Carter"}).name == "Mary_Ann_Carter"
    for name in ("Mary Carter", "assistant", "_bot", "a__b", "Mary_", "Mary_ Carter"):
        message = HumanMessage("hi", name=name)
        assert read(message)["name"] == name
        assert rebuild(message, read(message)).name == name
    spaced = HumanMessage("hi", name="Mary Carter")
    assert rebuild(spaced, {**read(spaced), "name": "Diana Vu"}).name == "Diana Vu"
