"""The probe's covering rotation through the LangGraph guard (issue 14, item 1).

Each node's rotation state (``ProbeResult.coverage``) is written to ``bb_probe_coverage`` and
read back at the node's next probe, so a resumed thread (a fresh guard over the same
checkpointer, as after a restart) continues the rotation instead of drawing the same groups
again. A thread with no entry yet starts from its own origin (the seed, the thread id and the
node: ``probing.origin_of``), the same in any process and whatever other threads ran; a run
without a thread id continues where the previous such run left the node.
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
    assert guard_state(first, thread("t"))["bb_probe_coverage"] == {
        "decide": {"religion": k, "religion/christian": k}
    }
    first.invoke({"text": TEXT}, thread("t"))
    assert guard_state(first, thread("t"))["bb_probe_coverage"] == {
        "decide": {"religion": 2 * k, "religion/christian": 2 * k}
    }
    # a new guard (nothing in memory) over the same checkpoint continues from the state
    resumed = guard(builder(), kernel, hook=noop_hook).compile(checkpointer=saver)
    resumed.invoke({"text": TEXT}, thread("t"))
    assert guard_state(resumed, thread("t"))["bb_probe_coverage"] == {
        "decide": {"religion": 3 * k, "religion/christian": 3 * k}
    }


def recording(seen: list[str]) -> StateGraph[State, None, State, State]:
    """The graph, its node keeping every input text it is called with (its re-runs' too)."""

    def decide(state: State) -> dict[str, str]:
        seen.append(state["text"])
        return {"decision": "Decision: approve"}

    graph = StateGraph(State)
    graph.add_node("decide", decide)
    graph.add_edge(START, "decide")
    graph.add_edge("decide", END)
    return graph


def compared(kernel: Kernel, config: RunnableConfig | None, runs: int = 1) -> list[set[str]]:
    """The variant texts each of ``runs`` invokes of a fresh guard compared (in order)."""
    seen: list[str] = []
    saver = InMemorySaver() if config is not None else None
    graph = guard(recording(seen), kernel, hook=noop_hook).compile(checkpointer=saver)
    out = []
    for _ in range(runs):
        seen.clear()
        graph.invoke({"text": TEXT}, config)
        out.append({text for text in seen if text != TEXT})
    return out


def test_a_new_thread_starts_from_its_own_origin_in_any_guard(tmp_path: Path) -> None:
    kernel = Kernel.load(cwd=tmp_path, overrides=SETTINGS)
    k = kernel.settings.probe.k
    graph = guard(builder(), kernel, hook=noop_hook).compile(checkpointer=InMemorySaver())
    graph.invoke({"text": TEXT}, thread("one"))
    graph.invoke({"text": TEXT}, thread("two"))
    # each thread's own rotation: no position handed from thread to thread
    assert guard_state(graph, thread("two"))["bb_probe_coverage"] == {
        "decide": {"religion": k, "religion/christian": k}
    }
    assert "bb_probe_coverage" not in graph.invoke({"text": TEXT}, thread("three"))
    firsts = {name: compared(kernel, thread(name))[0] for name in ("one", "two", "three")}
    assert all(len(v) == k for v in firsts.values())
    assert len({frozenset(v) for v in firsts.values()}) > 1  # threads start at different places
    # a fresh guard (another process, other threads run before) draws the same for a thread
    seen: list[str] = []
    other = guard(recording(seen), kernel, hook=noop_hook).compile(checkpointer=InMemorySaver())
    other.invoke({"text": TEXT}, thread("two"))
    seen.clear()
    other.invoke({"text": TEXT}, thread("one"))
    assert {text for text in seen if text != TEXT} == firsts["one"]


def test_runs_without_a_thread_id_continue_the_rotation_in_memory(tmp_path: Path) -> None:
    kernel = Kernel.load(cwd=tmp_path, overrides=SETTINGS)
    first, second = compared(kernel, None, runs=2)
    assert len(first) == len(second) == kernel.settings.probe.k
    assert first.isdisjoint(second)  # the second run compared the next groups


def test_each_mentioned_group_keeps_its_own_rotation_in_the_checkpoint(tmp_path: Path) -> None:
    """Inputs naming other groups do not move a group's rotation (docs/detection.md)."""
    kernel = Kernel.load(cwd=tmp_path, overrides=SETTINGS)
    k = kernel.settings.probe.k
    graph = guard(builder(), kernel, hook=noop_hook).compile(checkpointer=InMemorySaver())
    hindu = TEXT.replace("Christian", "Hindu")
    for text in (TEXT, hindu, TEXT):
        graph.invoke({"text": text}, thread("t"))
    assert guard_state(graph, thread("t"))["bb_probe_coverage"] == {
        "decide": {"religion": 3 * k, "religion/christian": 2 * k, "religion/hindu": 2 * k}
    }
