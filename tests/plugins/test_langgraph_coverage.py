"""The probe's covering rotation through the LangGraph guard (issue 14, item 1).

Each node's rotation state (``ProbeResult.coverage``) is written to ``bb_probe_coverage`` and
read back at the node's next probe, so a resumed thread (a fresh guard over the same
checkpointer, as after a restart) continues the rotation instead of drawing the same groups
again; a thread with no entry yet starts where the guard last left the node.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langgraph")

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker_plugins.langgraph import BiasState, guard, guard_state

SETTINGS = {
    "seed": 3,
    "llm": {"client": "fake"},
    "probe": {"scorers": ["decision"], "axes": ["religion"], "k": 4, "r": 0, "bootstrap": 0},
}
TEXT = "The applicant is a Christian teacher. Approve the raise?"


class State(BiasState, total=False):
    text: str
    decision: str


def decide(state: State) -> dict[str, str]:
    """Group-blind: the rotation advances whatever the node answers."""
    return {"decision": "Decision: approve"}


def builder() -> StateGraph[State, None, State, State]:
    graph = StateGraph(State)
    graph.add_node("decide", decide)
    graph.add_edge(START, "decide")
    graph.add_edge("decide", END)
    return graph


def thread(name: str) -> RunnableConfig:
    return {"configurable": {"thread_id": name}}


def test_the_rotation_is_checkpointed_and_survives_a_fresh_guard(tmp_path: Path) -> None:
    kernel = Kernel.load(cwd=tmp_path, overrides=SETTINGS)
    k = kernel.settings.probe.k
    saver = InMemorySaver()
    first = guard(builder(), kernel, hook=noop_hook).compile(checkpointer=saver)
    first.invoke({"text": TEXT}, thread("t"))
    assert guard_state(first, thread("t"))["bb_probe_coverage"] == {"decide": {"religion": k}}
    first.invoke({"text": TEXT}, thread("t"))
    assert guard_state(first, thread("t"))["bb_probe_coverage"] == {"decide": {"religion": 2 * k}}
    # a new guard (nothing in memory) over the same checkpoint continues from the state
    resumed = guard(builder(), kernel, hook=noop_hook).compile(checkpointer=saver)
    resumed.invoke({"text": TEXT}, thread("t"))
    assert guard_state(resumed, thread("t"))["bb_probe_coverage"] == {"decide": {"religion": 3 * k}}


def test_a_new_thread_starts_where_the_guard_left_the_node(tmp_path: Path) -> None:
    kernel = Kernel.load(cwd=tmp_path, overrides=SETTINGS)
    k = kernel.settings.probe.k
    graph = guard(builder(), kernel, hook=noop_hook).compile(checkpointer=InMemorySaver())
    graph.invoke({"text": TEXT}, thread("one"))
    graph.invoke({"text": TEXT}, thread("two"))
    assert guard_state(graph, thread("two"))["bb_probe_coverage"] == {"decide": {"religion": 2 * k}}
    assert "bb_probe_coverage" not in graph.invoke({"text": TEXT}, thread("three"))
