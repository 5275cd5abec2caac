"""Overhead of the LangGraph guard, against the same graph unguarded, measured in one run.

The graph: ten nodes in a chain, each sleeping 1 ms (a stand-in for an agent's work) and
copying a short text that names a group, so every node is probe-applicable.

- ``langgraph-guard``: the unguarded graph (baseline) against the guarded graph with probing
  disabled (``[probe] probe_rate = 0``: every guarded step still stages, propagates, steps the
  control machine and is gated; goal <= 1.05 x baseline), and with probing ``k = 4`` variants
  and ``r = 2`` same-group resamples per node (the six re-runs of each node run concurrently,
  in threads; the ratio is reported, no goal: the probe re-runs the node by design).

Goals are reported by the ratio table of ``benchmarks/conftest.py``, never asserted. The two
cases with a goal also report a *paired* ratio (:func:`_paired_ratio`: bare and guarded
invokes alternated, the median of their ratios), the one to read on a shared machine.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langgraph.graph import END, START, StateGraph

from biasbreaker.kernel import Kernel
from biasbreaker_plugins.langgraph import BiasState, guard, guard_state

NODES = 10
TEXT = "A note about a Muslim applicant and a Christian applicant."


class Chain(BiasState, total=False):
    text: str
    hops: int


def _node(index: int) -> Any:
    def work(state: Chain) -> dict[str, Any]:
        time.sleep(0.001)
        return {"text": state["text"], "hops": state.get("hops", 0) + 1}

    work.__name__ = f"agent{index}"
    return work


def chain() -> StateGraph[Any, Any, Any, Any]:
    builder = StateGraph(Chain)
    previous = START
    for index in range(NODES):
        builder.add_node(_node(index))
        builder.add_edge(previous, f"agent{index}")
        previous = f"agent{index}"
    builder.add_edge(previous, END)
    return builder


def _guard_state(builder: Any, kernel: Kernel) -> dict[str, Any]:
    """The guard's keys after one run of ``builder`` guarded (with a checkpointer, unbenchmarked)."""
    from langgraph.checkpoint.memory import InMemorySaver

    app = guard(builder, kernel).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "check"}}
    app.invoke({"text": TEXT}, config)
    return guard_state(app, config)


def _kernel(tmp_path: Path, **probe: Any) -> Kernel:
    return Kernel.load(
        cwd=tmp_path,
        overrides={
            "llm": {"client": "fake"},  # the repairs, built by guard(); these chains never trip
            "probe": {"scorers": ["decision"], "bootstrap": 0, **probe},
        },
    )


PAIRS = 200
"""Invokes of each graph in :func:`_paired_ratio` (alternated, after 20 of each to warm up)."""


def _paired_ratio(bare: Any, guarded: Any, make_input: Any) -> float:
    """The median, over ``PAIRS`` back-to-back pairs, of guarded time / bare time.

    The benchmark's own ratio divides two means measured one after the other, seconds apart,
    so a shift in the machine's load between them (or a 1 ms sleep's jitter) moves it by more
    than the 5 % the goal is about: on a 2-core machine at load 0.7 it swung from 0.92 to 1.15
    over five runs of the same code. Alternating the two graphs invoke by invoke puts both
    under the same conditions; the median of the pairs' ratios is the guard's cost as a
    factor, stable to about 1 % between runs.
    """
    for _ in range(20):
        bare.invoke(make_input())
        guarded.invoke(make_input())
    ratios = []
    for _ in range(PAIRS):
        first, second = make_input(), make_input()
        start = time.perf_counter()
        bare.invoke(first)
        middle = time.perf_counter()
        guarded.invoke(second)
        ratios.append((time.perf_counter() - middle) / (middle - start))
    return statistics.median(ratios)


@pytest.mark.benchmark(group="langgraph-guard")
def test_unguarded_chain_baseline(benchmark: Any) -> None:
    app = chain().compile()
    benchmark.extra_info["per"] = f"invoke, {NODES} nodes of 1 ms, unguarded"
    out = benchmark(app.invoke, {"text": TEXT})
    assert out["hops"] == NODES


@pytest.mark.benchmark(group="langgraph-guard")
def test_guarded_chain_probing_disabled(benchmark: Any, tmp_path: Path) -> None:
    app = guard(chain(), _kernel(tmp_path, probe_rate=0.0)).compile()
    benchmark.extra_info.update(
        per=f"invoke, {NODES} guarded nodes, probe_rate 0 (stage, propagate, step, gate)",
        goal_ratio=1.05,
    )
    out = benchmark(app.invoke, {"text": TEXT})
    assert out["hops"] == NODES
    assert (
        _guard_state(chain(), _kernel(tmp_path, probe_rate=0.0))["bb_breaker"]["machine"]["step"]
        == NODES
    )
    benchmark.extra_info["paired_ratio"] = round(
        _paired_ratio(chain().compile(), app, lambda: {"text": TEXT}), 3
    )


@pytest.mark.benchmark(group="langgraph-guard")
def test_guarded_chain_probing_k4(benchmark: Any, tmp_path: Path) -> None:
    app = guard(chain(), _kernel(tmp_path, k=4, r=2)).compile()
    benchmark.extra_info["per"] = f"invoke, {NODES} guarded nodes, probe k=4 r=2 (6 re-runs each)"
    out = benchmark(app.invoke, {"text": TEXT})
    assert out["hops"] == NODES
    scores = _guard_state(chain(), _kernel(tmp_path, k=4, r=2))["bb_local_scores"]
    assert len([s for s in scores.values() if s is not None]) == NODES


# -- the same chain over message state: each agent reads the conversation and adds a reply


def message_chain() -> StateGraph[Any, Any, Any, Any]:
    from langchain_core.messages import AIMessage
    from langgraph.graph import MessagesState

    def agent(index: int) -> Any:
        def reply(state: MessagesState) -> dict[str, Any]:
            time.sleep(0.001)
            return {
                "messages": [AIMessage(f"{index}: {state['messages'][0].content}", id=str(index))]
            }

        reply.__name__ = f"agent{index}"
        return reply

    builder = StateGraph(MessagesState)
    previous = START
    for index in range(NODES):
        builder.add_node(agent(index))
        builder.add_edge(previous, f"agent{index}")
        previous = f"agent{index}"
    builder.add_edge(previous, END)
    return builder


def _question() -> dict[str, Any]:
    from langchain_core.messages import HumanMessage

    return {"messages": [HumanMessage(TEXT, id="q")]}


@pytest.mark.benchmark(group="langgraph-guard-messages")
def test_unguarded_message_chain_baseline(benchmark: Any) -> None:
    app = message_chain().compile()
    benchmark.extra_info["per"] = f"invoke, {NODES} message-state nodes of 1 ms, unguarded"
    out = benchmark(app.invoke, _question())
    assert len(out["messages"]) == NODES + 1


@pytest.mark.benchmark(group="langgraph-guard-messages")
def test_guarded_message_chain_probing_disabled(benchmark: Any, tmp_path: Path) -> None:
    app = guard(message_chain(), _kernel(tmp_path, probe_rate=0.0)).compile()
    benchmark.extra_info.update(
        per=f"invoke, {NODES} guarded message-state nodes, probe_rate 0", goal_ratio=1.05
    )
    out = benchmark(app.invoke, _question())
    assert len(out["messages"]) == NODES + 1
    benchmark.extra_info["paired_ratio"] = round(
        _paired_ratio(message_chain().compile(), app, _question), 3
    )
