"""Benchmark: B_net on agent graphs of 10 and 100 nodes, against networkx in the same run.

Each group times three things on one seeded random graph (edge probability 0.3, weights in
[0.5, 2]): ``ours``, the whole pure-Python path (spectral radius, exact Katz, weights, B_net);
``networkx``, the same quantity with ``networkx.katz_centrality`` on the reversed graph (power
iteration at its default tolerance 1e-6) and a weighted average; and ``ours-per-step``, B_net
alone with the weights computed once, which is what a guarded step costs in a run.
pytest-benchmark prints each row's times with its ratio to the fastest row of the group.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import networkx as nx
import pytest

from biasbreaker.propagation import AgentGraph, katz_influence, network_score


def random_graph(n: int, seed: int) -> AgentGraph:
    """A seeded random weighted digraph on n agents, edge probability 0.3."""
    rng = random.Random(seed)
    names = [f"a{i}" for i in range(n)]
    edges = [
        (u, v, rng.uniform(0.5, 2.0)) for u in names for v in names if u != v and rng.random() < 0.3
    ]
    return AgentGraph(tuple(names), tuple(edges))


def scores_for(graph: AgentGraph, seed: int) -> dict[str, float | None]:
    """Seeded local scores in [0, 1] for every agent."""
    rng = random.Random(seed)
    return {n: rng.random() for n in graph.nodes}


def ours(graph: AgentGraph, scores: dict[str, float | None]) -> float | None:
    """B_net from scratch with biasbreaker.propagation."""
    return network_score(katz_influence(graph), scores).b_net


def with_networkx(graph: AgentGraph, scores: dict[str, float | None], alpha: float) -> float:
    """B_net with networkx's Katz (reversed graph, unnormalised) and a weighted average."""
    g = nx.DiGraph()
    g.add_nodes_from(graph.nodes)
    g.add_weighted_edges_from(graph.edges)
    x = nx.katz_centrality(g.reverse(), alpha=alpha, beta=1.0, normalized=False, weight="weight")
    total = math.fsum(x.values())
    return math.fsum(x[n] / total * b for n, b in scores.items() if b is not None)


@pytest.mark.parametrize("n", [10, 100])
@pytest.mark.parametrize("impl", ["ours", "networkx", "ours-per-step"])
def test_bench_b_net(benchmark: Any, n: int, impl: str) -> None:
    """Time one implementation of B_net and check it agrees with ours."""
    graph = random_graph(n, seed=n)
    scores = scores_for(graph, seed=n)
    influence = katz_influence(graph)
    benchmark.group = f"B_net, {n} nodes"
    fn: Callable[[], float | None]
    if impl == "ours":
        fn = lambda: ours(graph, scores)  # noqa: E731
    elif impl == "networkx":
        fn = lambda: with_networkx(graph, scores, influence.alpha)  # noqa: E731
    else:
        fn = lambda: network_score(influence, scores).b_net  # noqa: E731
    result = benchmark(fn)
    expected = network_score(influence, scores).b_net
    assert result is not None
    assert expected is not None
    # networkx stops its power iteration at tolerance 1e-6, so agreement is to about that.
    assert math.isclose(result, expected, rel_tol=1e-5)
