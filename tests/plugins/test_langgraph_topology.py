"""The graph as the guard reads it: influence edges, Katz weights, fan-out and queued nodes."""

from __future__ import annotations

from typing import Any, Literal

import pytest

pytest.importorskip("langgraph")

import networkx as nx
from hypothesis import given
from hypothesis import strategies as st
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send

from biasbreaker.errors import ConfigError
from biasbreaker.kernel import Kernel
from biasbreaker_plugins.langgraph import BiasState, guard
from biasbreaker_plugins.langgraph.state import merge_staged, single_breaker_step
from biasbreaker_plugins.langgraph.topology import read_topology, single_destination


class S(BiasState, total=False):
    x: str


def node(name: str) -> Any:
    def fn(state: S) -> dict[str, Any]:
        return {}

    fn.__name__ = name
    return fn


@pytest.fixture
def kernel(tmp_path: Any) -> Kernel:
    settings = {"probe": {"probe_rate": 0.0}, "intervention": {"router": "human-review"}}
    return Kernel.load(cwd=tmp_path, overrides=settings)


def router_graph() -> StateGraph[Any, Any, Any, Any]:
    def route(state: S) -> Literal["writer", "critic"]:
        return "writer"

    def handoff(state: S) -> Command[Literal["writer"]]:
        return Command(goto="writer")

    builder = StateGraph(S)
    for name in ("planner", "writer", "critic"):
        builder.add_node(node(name))
    builder.add_node("handoff", handoff)
    builder.add_edge(START, "planner")
    builder.add_conditional_edges("planner", route)  # destinations from the Literal hint
    builder.add_edge("critic", "handoff")
    builder.add_edge("writer", END)
    return builder


def test_influence_edges_come_from_edges_conditional_paths_and_commands(kernel: Kernel) -> None:
    guarded = guard(router_graph(), kernel)
    edges = {("planner", "writer"), ("planner", "critic"), ("critic", "handoff")}
    edges.add(("handoff", "writer"))
    # Katz on the spread direction, normalised: compare with networkx on the same edges
    graph = nx.DiGraph(sorted(edges))
    rho = max(abs(v) for v in nx.adjacency_spectrum(graph)) or 1.0
    alpha = 0.85 / rho if rho > 1e-12 else 0.85
    reference = nx.katz_centrality(graph.reverse(), alpha=alpha, beta=1.0, normalized=False)
    total = sum(reference.values())
    weights = guarded.guard.weights
    assert set(weights) == {"planner", "writer", "critic", "handoff"}
    for name, value in reference.items():
        assert weights[name] == pytest.approx(value / total, rel=1e-6)
    assert weights["planner"] == max(weights.values())  # it feeds everyone
    assert all(spec.mode == "inline" for spec in guarded.guard.nodes.values())


def test_fan_outs_make_the_nodes_after_them_queued(kernel: Kernel) -> None:
    def fan(state: S) -> list[Send]:
        return [Send("worker", {"x": "a"}), Send("worker", {"x": "b"})]

    builder = StateGraph(S)
    for name in ("intake", "worker", "summary"):
        builder.add_node(node(name))
    builder.add_edge(START, "intake")
    builder.add_conditional_edges("intake", fan, ["worker"])
    builder.add_edge("worker", "summary")
    modes = {n: s.mode for n, s in guard(builder, kernel).guard.nodes.items()}
    assert modes == {"intake": "inline", "worker": "queued", "summary": "queued"}


def test_routing_functions_are_read_by_their_return_type() -> None:
    def one(state: S) -> Literal["a", "b"]:
        return "a"

    def text(state: S) -> str:
        return "a"

    def many(state: S) -> list[str]:
        return ["a"]

    def unknown(state):  # type: ignore[no-untyped-def]
        return "a"

    assert single_destination(one) and single_destination(text)
    assert not single_destination(many) and not single_destination(unknown)
    assert not single_destination(None)


def test_a_static_edge_with_a_branch_is_a_fan_out() -> None:
    topo = read_topology(
        ["a", "b", "c"],
        [("__start__", "a"), ("a", "b")],
        [],
        {"a": {"route": (("c",), True)}},
        {},
    )
    assert topo.fan_out_sources() == ["a"]
    assert topo.concurrent() == {"b", "c"}
    assert set(topo.edges) == {("a", "b"), ("a", "c")}


def test_queued_is_declared_with_concurrent_and_must_name_guarded_nodes(kernel: Kernel) -> None:
    builder = router_graph()
    guarded = guard(builder, kernel, concurrent=["critic"])
    assert guarded.guard.nodes["critic"].mode == "queued"
    with pytest.raises(ConfigError, match="not guarded nodes"):
        guard(builder, kernel, nodes=["writer"], concurrent=["critic"])


@given(st.lists(st.integers(0, 50), min_size=1, max_size=20))
def test_the_breaker_reducer_accepts_only_newer_snapshots(steps: list[int]) -> None:
    current: dict[str, Any] = {}
    for n, step in enumerate(steps):
        update = {"machine": {"step": step}, "by": f"task{n}"}
        newer = not current or step > current["machine"]["step"]
        if newer:
            current = single_breaker_step(current, update)
            assert current is update
        else:
            with pytest.raises(ConfigError, match="concurrently"):
                single_breaker_step(current, update)


@given(
    st.dictionaries(st.sampled_from("abcde"), st.integers()),
    st.dictionaries(st.sampled_from("abcde"), st.one_of(st.none(), st.integers())),
)
def test_the_staging_reducer_sets_and_deletes(
    current: dict[str, Any], update: dict[str, Any]
) -> None:
    merged = merge_staged(current, update)
    for key in "abcde":
        if key in update:
            assert merged.get(key) == update[key] if update[key] is not None else key not in merged
        else:
            assert merged.get(key) == current.get(key)
