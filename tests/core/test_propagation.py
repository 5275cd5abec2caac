from __future__ import annotations

import json
import math
from typing import Any

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from biasbreaker.errors import ConfigError, InputError, ScoreError
from biasbreaker.propagation import (
    DEFAULT_ATTENUATION,
    AgentGraph,
    Ewma,
    NetworkEwma,
    half_life_from_smoothing,
    katz_influence,
    katz_scores,
    network_score,
    resolve_alpha,
    smoothing_from_half_life,
    spectral_radius,
    spectral_radius_bounds,
    strongly_connected_components,
)

# At least 100 random graphs per comparison, more under the thorough profile.
AT_LEAST_100 = settings(max_examples=max(100, settings.default.max_examples), deadline=None)


@st.composite
def graphs(draw: st.DrawFn, max_nodes: int = 10, min_nodes: int = 1) -> AgentGraph:
    n = draw(st.integers(min_nodes, max_nodes))
    nodes = [f"n{i}" for i in range(n)]
    pairs = [(u, v) for u in nodes for v in nodes]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=min(len(pairs), 40)))
    weighted = draw(st.booleans())
    edges = []
    for u, v in chosen:
        w = draw(st.floats(0.05, 5.0)) if weighted else 1.0
        edges.append((u, v, w))
    return AgentGraph(tuple(nodes), tuple(edges))


def to_nx(graph: AgentGraph) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(graph.nodes)
    for u, v, w in graph.edges:
        g.add_edge(u, v, weight=w)
    return g


# ---------------------------------------------------------------- Katz vs networkx


@AT_LEAST_100
@given(graphs())
def test_katz_matches_networkx_on_the_reversed_graph(graph: AgentGraph) -> None:
    infl = katz_influence(graph)
    g = to_nx(graph)
    ref = nx.katz_centrality(
        g.reverse(),
        alpha=infl.alpha,
        beta=1.0,
        normalized=False,
        weight="weight",
        max_iter=100_000,
        tol=1e-14,
    )
    for node in graph.nodes:
        assert math.isclose(infl.katz[node], ref[node], rel_tol=1e-9), node
    total = math.fsum(ref.values())
    for node in graph.nodes:
        assert abs(infl.weights[node] - ref[node] / total) <= 1e-9
    assert math.isclose(math.fsum(infl.weights.values()), 1.0, rel_tol=1e-12)


@AT_LEAST_100
@given(graphs(min_nodes=2))  # networkx's numpy solver cannot squeeze a one-node result
def test_katz_matches_networkx_direct_solver(graph: AgentGraph) -> None:
    pytest.importorskip("numpy")
    infl = katz_influence(graph)
    ref = nx.katz_centrality_numpy(
        to_nx(graph).reverse(), alpha=infl.alpha, beta=1.0, normalized=False, weight="weight"
    )
    for node in graph.nodes:
        assert math.isclose(infl.katz[node], float(ref[node]), rel_tol=1e-9), node


@AT_LEAST_100
@given(graphs(max_nodes=8))
def test_spectral_radius_matches_numpy_eigenvalues(graph: AgentGraph) -> None:
    np = pytest.importorskip("numpy")
    idx = {n: i for i, n in enumerate(graph.nodes)}
    a = np.zeros((len(graph.nodes), len(graph.nodes)))
    for u, v, w in graph.edges:
        a[idx[u], idx[v]] = w
    ref = float(max(abs(np.linalg.eigvals(a))))
    lo, hi = spectral_radius_bounds(graph)
    assert lo <= hi
    # numpy's eigenvalues of a nilpotent block carry errors ~ eps^(1/k); allow for that.
    assert math.isclose(hi, ref, rel_tol=1e-9, abs_tol=1e-5)


@given(graphs())
def test_components_come_sinks_first(graph: AgentGraph) -> None:
    comps = strongly_connected_components(graph)
    assert sorted(n for c in comps for n in c) == sorted(graph.nodes)
    ref = {frozenset(c) for c in nx.strongly_connected_components(to_nx(graph))}
    assert {frozenset(c) for c in comps} == ref
    where = {n: i for i, c in enumerate(comps) for n in c}
    for u, v, _ in graph.edges:
        assert where[v] <= where[u]


# ---------------------------------------------------------------- spectral radius, alpha


def test_spectral_radius_known_values() -> None:
    dag = AgentGraph.from_edges([("a", "b"), ("b", "c"), ("a", "c")])
    assert spectral_radius(dag) == 0.0
    k5 = AgentGraph.from_edges([(f"{i}", f"{j}") for i in range(5) for j in range(5) if i != j])
    assert math.isclose(spectral_radius(k5), 4.0, rel_tol=1e-12)
    # weighted 3-cycle: rho = geometric mean of the weights
    cyc = AgentGraph.from_edges([("a", "b", 2.0), ("b", "c", 4.0), ("c", "a", 1.0)])
    assert math.isclose(spectral_radius(cyc), 8.0 ** (1 / 3), rel_tol=1e-10)
    # two blocks joined by a one-way edge: the larger block wins
    two = AgentGraph.from_edges(
        [("a", "b"), ("b", "a"), ("b", "c"), ("c", "d", 3.0), ("d", "c", 3.0)]
    )
    assert math.isclose(spectral_radius(two), 3.0, rel_tol=1e-12)
    loop = AgentGraph.from_edges([("a", "a", 0.5), ("a", "b")])
    assert spectral_radius(loop) == 0.5


def test_spectral_radius_long_weighted_ring() -> None:
    # A long ring with unequal weights has all eigenvalues on the circle |z| = rho, the slowest
    # case for power iteration; the bounds must still close.
    n = 60
    ws = [1.0 + (i % 7) / 10 for i in range(n)]
    ring = AgentGraph.from_edges([(f"r{i}", f"r{(i + 1) % n}", ws[i]) for i in range(n)])
    expected = math.exp(math.fsum(math.log(w) for w in ws) / n)
    lo, hi = spectral_radius_bounds(ring)
    assert lo <= expected * (1 + 1e-12)
    assert hi >= expected * (1 - 1e-12)
    assert math.isclose(hi, expected, rel_tol=1e-9)


def test_default_alpha_is_attenuation_over_rho() -> None:
    k4 = AgentGraph.from_edges([(f"{i}", f"{j}") for i in range(4) for j in range(4) if i != j])
    assert math.isclose(resolve_alpha(k4), DEFAULT_ATTENUATION / 3.0, rel_tol=1e-12)
    assert math.isclose(resolve_alpha(k4, attenuation=0.5), 0.5 / 3.0, rel_tol=1e-12)


def test_alpha_at_or_beyond_the_bound_is_an_error_that_gives_the_bound() -> None:
    k4 = AgentGraph.from_edges([(f"{i}", f"{j}") for i in range(4) for j in range(4) if i != j])
    for bad in (1 / 3, 0.5, 2.0):
        with pytest.raises(ConfigError, match=r"1/rho\(A\) = 0\.333") as info:
            resolve_alpha(k4, alpha=bad)
        assert "Katz alpha=" in str(info.value)
    assert resolve_alpha(k4, alpha=0.3) == 0.3
    with pytest.raises(ConfigError, match="finite number > 0"):
        resolve_alpha(k4, alpha=-0.1)
    with pytest.raises(ConfigError, match="finite number > 0"):
        resolve_alpha(k4, alpha=math.nan)
    for bad_c in (0.0, 1.0, 1.5):
        with pytest.raises(ConfigError, match="attenuation"):
            resolve_alpha(k4, attenuation=bad_c)


def test_networkx_diverges_where_we_refuse() -> None:
    # The bound is the real one: networkx's power iteration fails beyond it.
    cyc = AgentGraph.from_edges([("a", "b"), ("b", "a")])
    with pytest.raises(ConfigError):
        katz_influence(cyc, alpha=1.05)
    with pytest.raises(nx.PowerIterationFailedConvergence):
        nx.katz_centrality(to_nx(cyc).reverse(), alpha=1.05, normalized=False, max_iter=500)


def test_alpha_without_cycles() -> None:
    unweighted = AgentGraph.from_edges([("a", "b"), ("b", "c")])
    assert resolve_alpha(unweighted) == DEFAULT_ATTENUATION
    weighted = AgentGraph.from_edges([("a", "b", 2.0), ("b", "c", 4.0)])
    assert resolve_alpha(weighted) == DEFAULT_ATTENUATION / 4.0
    # any explicit alpha converges on a DAG
    assert resolve_alpha(weighted, alpha=10.0) == 10.0
    lonely = AgentGraph(("a", "b"))
    infl = katz_influence(lonely)
    assert infl.alpha == DEFAULT_ATTENUATION
    assert infl.weights == {"a": 0.5, "b": 0.5}


def test_scaling_edge_weights_leaves_the_weights_unchanged() -> None:
    base = [("a", "b", 1.0), ("b", "c", 2.0), ("c", "a", 0.5), ("a", "d", 1.5)]
    g1 = AgentGraph.from_edges(base)
    g2 = AgentGraph.from_edges([(u, v, 7.0 * w) for u, v, w in base])
    w1, w2 = katz_influence(g1).weights, katz_influence(g2).weights
    for n in g1.nodes:
        assert math.isclose(w1[n], w2[n], rel_tol=1e-9)


def test_spread_direction_on_a_chain() -> None:
    # a -> b -> c: a's output reaches b and c, so a has the most influence.
    chain = AgentGraph.from_edges([("a", "b"), ("b", "c")])
    alpha = 0.5
    x = katz_scores(chain, alpha)
    assert x == {"a": 1 + alpha * (1 + alpha), "b": 1 + alpha, "c": 1.0}
    w = katz_influence(chain).weights
    assert w["a"] > w["b"] > w["c"]


# ---------------------------------------------------------------- B_net


scores_in_unit = st.floats(0.0, 1.0, allow_nan=False)


@st.composite
def graph_and_scores(draw: st.DrawFn) -> tuple[AgentGraph, dict[str, float | None]]:
    graph = draw(graphs(max_nodes=8))
    scores: dict[str, float | None] = {}
    for n in graph.nodes:
        kind = draw(st.sampled_from(["score", "score", "score", "none", "absent"]))
        if kind == "score":
            scores[n] = draw(scores_in_unit)
        elif kind == "none":
            scores[n] = None
    return graph, scores


@given(graph_and_scores(), st.floats(0.0, 1.0))
def test_scaling_every_score_by_c_scales_b_net_by_c(
    gs: tuple[AgentGraph, dict[str, float | None]], c: float
) -> None:
    graph, scores = gs
    infl = katz_influence(graph)
    base = network_score(infl, scores)
    scaled = network_score(infl, {n: None if b is None else c * b for n, b in scores.items()})
    if base.b_net is None:
        assert scaled.b_net is None
        return
    assert scaled.b_net is not None
    assert math.isclose(scaled.b_net, c * base.b_net, rel_tol=1e-12, abs_tol=1e-15)


@given(graph_and_scores())
def test_b_net_lies_between_the_smallest_and_largest_score(
    gs: tuple[AgentGraph, dict[str, float | None]],
) -> None:
    graph, scores = gs
    result = network_score(katz_influence(graph), scores)
    present = [b for b in scores.values() if b is not None]
    if not present:
        assert result.b_net is None
        assert result.weights == {}
        assert result.coverage == 0.0
        return
    assert result.b_net is not None
    assert min(present) <= result.b_net <= max(present)
    assert math.isclose(math.fsum(result.weights.values()), 1.0, rel_tol=1e-12)
    assert 0.0 < result.coverage <= 1.0


def test_b_net_is_the_renormalised_weighted_average() -> None:
    graph = AgentGraph.from_edges([("a", "b"), ("b", "c"), ("c", "a"), ("a", "d")])
    infl = katz_influence(graph)
    w = infl.weights
    result = network_score(infl, {"a": 0.6, "b": 0.2, "c": None})
    expected = (w["a"] * 0.6 + w["b"] * 0.2) / (w["a"] + w["b"])
    assert result.b_net is not None
    assert math.isclose(result.b_net, expected, rel_tol=1e-12)
    assert result.not_applicable == ("c",)
    assert result.not_probed == ("d",)
    assert set(result.weights) == {"a", "b"}
    assert math.isclose(result.coverage, w["a"] + w["b"], rel_tol=1e-12)
    # equal scores: B_net is that score exactly
    same = network_score(infl, dict.fromkeys(graph.nodes, 0.3))
    assert same.b_net == 0.3


def test_influential_node_moves_b_net_more() -> None:
    chain = katz_influence(AgentGraph.from_edges([("a", "b"), ("b", "c")]))
    upstream = network_score(chain, {"a": 0.9, "b": 0.0, "c": 0.0}).b_net
    downstream = network_score(chain, {"a": 0.0, "b": 0.0, "c": 0.9}).b_net
    assert upstream is not None
    assert downstream is not None
    assert upstream > downstream


def test_no_score_means_no_b_net() -> None:
    infl = katz_influence(AgentGraph.from_edges([("a", "b")]))
    nothing = network_score(infl, {})
    assert nothing.b_net is None
    assert nothing.not_probed == ("a", "b")
    all_na = network_score(infl, {"a": None, "b": None})
    assert all_na.b_net is None
    assert all_na.not_applicable == ("a", "b")
    assert json.loads(json.dumps(all_na.to_dict()))["b_net"] is None


@pytest.mark.parametrize("bad", [-0.01, 1.01, math.nan, math.inf, True, "0.5"])
def test_out_of_range_scores_are_rejected(bad: object) -> None:
    infl = katz_influence(AgentGraph.from_edges([("a", "b")]))
    with pytest.raises(ScoreError, match="node 'a'"):
        network_score(infl, {"a": bad})  # type: ignore[dict-item]


def test_unknown_node_and_bad_weights_are_rejected() -> None:
    infl = katz_influence(AgentGraph.from_edges([("a", "b")]))
    with pytest.raises(ScoreError, match="unknown node 'z'"):
        network_score(infl, {"z": 0.1})
    with pytest.raises(ScoreError, match="weights must be > 0"):
        network_score({"a": 0.0, "b": 1.0}, {"a": 0.1})


# ---------------------------------------------------------------- AgentGraph


def test_graph_validation_names_the_problem() -> None:
    with pytest.raises(InputError, match="listed twice"):
        AgentGraph(("a", "a"))
    with pytest.raises(InputError, match="unknown node 'c'"):
        AgentGraph(("a", "b"), (("a", "c", 1.0),))
    with pytest.raises(InputError, match="given twice"):
        AgentGraph.from_edges([("a", "b"), ("a", "b", 2.0)])
    for w in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(InputError, match="weight"):
            AgentGraph.from_edges([("a", "b", w)])
    with pytest.raises(InputError, match=r"\(u, v\)"):
        AgentGraph.from_edges([("a",)])  # type: ignore[list-item]
    with pytest.raises(InputError, match="no node"):
        katz_influence(AgentGraph(()))


def test_graph_round_trips_through_json() -> None:
    g = AgentGraph.from_edges([("a", "b", 2.5), ("b", "a")], nodes=["z"])
    assert g.nodes == ("z", "a", "b")
    again = AgentGraph.from_dict(json.loads(json.dumps(g.to_dict())))
    assert again == g
    with pytest.raises(InputError, match="'nodes' and 'edges'"):
        AgentGraph.from_dict({"nodes": []})


# ---------------------------------------------------------------- EWMA


def test_half_life_and_smoothing_are_inverse() -> None:
    for h in (0.5, 1.0, 2.0, 20.0, 100.0):
        a = smoothing_from_half_life(h)
        assert 0.0 < a < 1.0
        assert math.isclose(half_life_from_smoothing(a), h, rel_tol=1e-12)
    assert smoothing_from_half_life(1.0) == 0.5
    assert half_life_from_smoothing(1.0) == 0.0
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ConfigError, match="half_life"):
            smoothing_from_half_life(bad)
    for bad in (0.0, 1.5, -0.2):
        with pytest.raises(ConfigError, match="smoothing"):
            Ewma(bad)


@given(st.floats(0.0, 1.0), st.floats(0.01, 1.0), st.floats(0.0, 1.0))
def test_constant_input_converges_to_it(start: float, a: float, level: float) -> None:
    e = Ewma(a).update(start)
    for _ in range(3000):
        e = e.update(level)
    assert e.value is not None
    assert math.isclose(e.value, level, abs_tol=1e-9)


@pytest.mark.parametrize("h", [1, 2, 5, 20, 37])
def test_step_input_is_half_way_at_the_half_life(h: int) -> None:
    e = Ewma.from_half_life(h).update(0.0)
    for _ in range(h):
        e = e.update(1.0)
    assert e.value is not None
    assert math.isclose(e.value, 0.5, rel_tol=1e-12)
    e = e.update(1.0)
    assert e.value is not None
    assert e.value > 0.5


def test_first_value_initialises() -> None:
    e = Ewma(0.1)
    assert e.value is None
    assert e.count == 0
    e = e.update(0.8)
    assert e.value == 0.8
    assert e.count == 1


def test_order_matters_and_is_deterministic() -> None:
    xs = [0.1, 0.9, 0.2, 0.4]

    def run(seq: list[float]) -> float | None:
        e = Ewma(0.3)
        for x in seq:
            e = e.update(x)
        return e.value

    assert run(xs) == run(list(xs))
    assert run(xs) != run(list(reversed(xs)))


def test_ewma_rejects_bad_input_and_state() -> None:
    with pytest.raises(ScoreError, match="finite"):
        Ewma(0.5).update(math.nan)
    with pytest.raises(ScoreError, match="None exactly"):
        Ewma(0.5, value=0.2, count=0)
    with pytest.raises(ConfigError, match="missing key 'count'"):
        Ewma.from_dict({"smoothing": 0.5, "value": None})


def test_network_ewma_two_scales_and_serialisation() -> None:
    state = NetworkEwma.create()
    assert state.fast.smoothing > state.slow.smoothing
    assert math.isclose(state.fast.half_life, 2.0)
    assert math.isclose(state.slow.half_life, 20.0)
    assert state.update(None) is state
    for b in [0.0] * 10 + [0.6] * 3:
        state = state.update(b)
    assert state.fast.value is not None
    assert state.slow.value is not None
    assert state.fast.value > 0.3 > state.slow.value  # a spike shows on fast, not on slow
    blob = json.dumps(state.to_dict())
    assert NetworkEwma.from_dict(json.loads(blob)) == state
    assert state.update(None) == state
    with pytest.raises(ScoreError, match="B_net"):
        state.update(1.5)


def test_network_ewma_configuration_errors() -> None:
    s = NetworkEwma.create(fast_smoothing=0.5, slow_half_life=10)
    assert s.fast.smoothing == 0.5
    with pytest.raises(ConfigError, match="not both"):
        NetworkEwma.create(fast_half_life=2, fast_smoothing=0.3)
    with pytest.raises(ConfigError, match="must exceed slow"):
        NetworkEwma.create(fast_half_life=30, slow_half_life=10)
    with pytest.raises(ConfigError, match="missing key 'slow'"):
        NetworkEwma.from_dict({"fast": Ewma(0.5).to_dict()})


# ---------------------------------------------------------------- [propagation] settings


def test_propagation_settings_defaults_match_the_module() -> None:
    from biasbreaker.config import load_settings
    from biasbreaker.propagation import DEFAULT_FAST_HALF_LIFE, DEFAULT_SLOW_HALF_LIFE

    prop = load_settings(cwd="/nonexistent-dir").settings.propagation
    assert prop.attenuation == DEFAULT_ATTENUATION
    assert (prop.fast_half_life, prop.slow_half_life) == (
        DEFAULT_FAST_HALF_LIFE,
        DEFAULT_SLOW_HALF_LIFE,
    )
    assert (prop.fast_smoothing, prop.slow_smoothing) == (0.0, 0.0)
    assert prop.network_ewma() == NetworkEwma.create()


def test_propagation_settings_by_smoothing_factor_or_half_life(tmp_path: Any) -> None:
    from biasbreaker.config import load_settings

    by_factor = load_settings(
        cwd=tmp_path, overrides={"propagation": {"fast_smoothing": 0.5, "slow_smoothing": 0.1}}
    ).settings.propagation
    assert by_factor.fast_half_life == 1.0  # derived from the factor
    assert by_factor.network_ewma() == NetworkEwma(Ewma(0.5), Ewma(0.1))
    # a dump of it reloads to the same settings (TOML has no null: 0 means "not set")
    again = load_settings(
        cwd=tmp_path, overrides={"propagation": by_factor.model_dump()}
    ).settings.propagation
    assert again == by_factor
    by_half_life = load_settings(
        cwd=tmp_path, overrides={"propagation": {"fast_half_life": 1, "slow_half_life": 10}}
    ).settings.propagation
    assert by_half_life.smoothing("fast") == 0.5
    for bad, match in (
        ({"fast_half_life": 3, "fast_smoothing": 0.4}, "disagree"),
        ({"fast_half_life": 30}, "must react faster"),
        ({"attenuation": 1.0}, "attenuation"),
        ({"slow_smoothing": 1.0}, "slow_smoothing"),
    ):
        with pytest.raises(ConfigError, match=match):
            load_settings(cwd=tmp_path, overrides={"propagation": bad})
