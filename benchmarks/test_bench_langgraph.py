"""Overhead of the LangGraph guard, against the same graph unguarded, measured in one run.

The graph: ten nodes in a chain, each sleeping 1 ms (a stand-in for an agent's work) and
copying a short text that names a group, so every node is probe-applicable.

- ``langgraph-guard``: the unguarded graph (baseline) against the guarded graph with probing
  disabled (``[probe] probe_rate = 0``: every guarded step still stages, propagates, steps the
  control machine and is gated; goal <= 1.05 x baseline), and with probing ``k = 4`` variants
  and ``r = 2`` same-group resamples per node (the six re-runs of each node run concurrently,
  in threads; the ratio is reported, no goal: the probe re-runs the node by design).

- ``langgraph-io-sync`` and ``langgraph-io-async``: three nodes in a chain, each waiting
  50 ms (I/O-bound: ``time.sleep`` in sync nodes, ``asyncio.sleep`` in async ones, a stand-in
  for a model call), unguarded (baseline) against guarded with ``k = 4``, ``r = 2`` and no trip:
  with speculative probing (``[probe] speculative``, the default) each node's six re-runs run
  beside its own call, so the goal is <= 1.15 x the bare chain; probing after the call
  (``speculative = false``, reported beside it, no goal) takes about 2 x. The 1 ms chain's
  ``k = 4`` case above reports its paired ratio beside them.

Goals are reported by the ratio table of ``benchmarks/conftest.py``, never asserted. The
cases with a goal also report a *paired* ratio (:func:`_paired_ratio`: bare and guarded
invokes alternated, the median of their ratios), the one to read on a shared machine.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langgraph.graph import END, START, StateGraph
from paired import paired_ratio

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
    bare = chain().compile()
    benchmark.extra_info["paired_ratio"] = round(
        paired_ratio(lambda: bare.invoke({"text": TEXT}), lambda: app.invoke({"text": TEXT}), 50),
        3,
    )


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


# -- I/O-bound nodes: three of 50 ms, probed with k = 4, r = 2 (speculative probing's goal)

IO_NODES = 3
IO_WAIT_S = 0.05
IO_PAIRS = 30
"""Pairs in the paired ratio of the 50 ms chains (each pair takes about 0.3 s)."""


def io_chain(asynchronous: bool) -> StateGraph[Any, Any, Any, Any]:
    """``IO_NODES`` nodes in a chain, each waiting ``IO_WAIT_S`` and copying the text on."""

    def node(index: int) -> Any:
        def work(state: Chain) -> dict[str, Any]:
            time.sleep(IO_WAIT_S)
            return {"text": state["text"], "hops": state.get("hops", 0) + 1}

        async def awork(state: Chain) -> dict[str, Any]:
            await asyncio.sleep(IO_WAIT_S)
            return {"text": state["text"], "hops": state.get("hops", 0) + 1}

        chosen = awork if asynchronous else work
        chosen.__name__ = f"io{index}"
        return chosen

    builder = StateGraph(Chain)
    previous = START
    for index in range(IO_NODES):
        builder.add_node(node(index))
        builder.add_edge(previous, f"io{index}")
        previous = f"io{index}"
    builder.add_edge(previous, END)
    return builder


def _io_scores(kernel: Kernel, asynchronous: bool) -> dict[str, Any]:
    """The local scores after one run of the guarded 50 ms chain (unbenchmarked)."""
    from langgraph.checkpoint.memory import InMemorySaver

    app = guard(io_chain(asynchronous), kernel).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "check"}}
    if asynchronous:
        asyncio.run(app.ainvoke({"text": TEXT}, config))
    else:
        app.invoke({"text": TEXT}, config)
    scores: dict[str, Any] = guard_state(app, config)["bb_local_scores"]
    return scores


def _invoker(app: Any, asynchronous: bool) -> Any:
    if asynchronous:
        return lambda: asyncio.run(app.ainvoke({"text": TEXT}))
    return lambda: app.invoke({"text": TEXT})


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_unguarded_io_chain_baseline(benchmark: Any, asynchronous: bool) -> None:
    benchmark.group = f"langgraph-io-{'async' if asynchronous else 'sync'}"
    run = _invoker(io_chain(asynchronous).compile(), asynchronous)
    benchmark.extra_info["per"] = f"invoke, {IO_NODES} nodes of 50 ms, unguarded"
    assert benchmark(run)["hops"] == IO_NODES


@pytest.mark.parametrize("speculative", [True, False], ids=["speculative", "after-the-call"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_guarded_io_chain_probing_k4(
    benchmark: Any, tmp_path: Path, asynchronous: bool, speculative: bool
) -> None:
    benchmark.group = f"langgraph-io-{'async' if asynchronous else 'sync'}"
    kernel = _kernel(tmp_path, k=4, r=2, speculative=speculative)
    app = guard(io_chain(asynchronous), kernel).compile()
    benchmark.extra_info["per"] = f"invoke, {IO_NODES} guarded nodes of 50 ms, k=4 r=2, " + (
        "re-runs beside the call" if speculative else "re-runs after the call"
    )
    if speculative:
        benchmark.extra_info["goal_ratio"] = 1.15
    run = _invoker(app, asynchronous)
    assert benchmark(run)["hops"] == IO_NODES
    scores = _io_scores(kernel, asynchronous)  # probed, and no trip
    assert len([s for s in scores.values() if s is not None]) == IO_NODES
    assert max(scores.values()) == 0.0
    bare = _invoker(io_chain(asynchronous).compile(), asynchronous)
    benchmark.extra_info["paired_ratio"] = round(paired_ratio(bare, run, IO_PAIRS), 3)
