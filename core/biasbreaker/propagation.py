"""Propagation (M2): Katz influence on the agent graph, the network score B_net and its EWMAs.

An agent graph has an edge ``u -> v`` when agent ``v`` reads agent ``u``'s output (``u`` feeds
``v``). Bias placed at ``u`` spreads along out-edges, so a node's *influence* is how far its output
reaches downstream: its Katz centrality on the spread direction,

    x = beta * 1 + alpha * A x,      (A x)_u = sum over edges u -> v of weight(u, v) * x_v,

with ``beta = 1`` and ``alpha = c / rho(A)`` (``c = 0.85`` by default). In networkx terms this is
``katz_centrality(G.reverse(), alpha, beta=1, normalized=False)`` (networkx sums over *in*-edges).
The influence weights are ``w = x / sum(x)``, and

    B_net = sum_i w_i b_i / sum_i w_i       (over the nodes that have a local score b_i)

is a Katz-weighted average of the local scores: it lies between the smallest and the largest of
them and scales with them. (networkx's ``normalized=True`` rescales x by its L2 norm, which is
harmless for the weights but must never be applied to the scores: a B_net that is blind to how
much bias there is cannot raise an alarm.)

Two exponentially weighted moving averages of B_net feed the breaker: *fast* (spikes) and *slow*
(drift). All of it is pure Python over plain data, deterministic, with no numpy or networkx.

Source:
    Katz (1953), "A new status index derived from sociometric analysis", Psychometrika 18(1).
    The spread-direction choice, the unnormalised weighted average and alpha = c / rho(A) follow
    the project's research notes (intervention-anchors §2.6); see ``docs/propagation.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from biasbreaker.errors import ConfigError, InputError, ScoreError

__all__ = [
    "DEFAULT_ATTENUATION",
    "DEFAULT_FAST_HALF_LIFE",
    "DEFAULT_SLOW_HALF_LIFE",
    "AgentGraph",
    "Ewma",
    "KatzInfluence",
    "NetworkEwma",
    "NetworkScore",
    "half_life_from_smoothing",
    "katz_influence",
    "katz_scores",
    "network_score",
    "resolve_alpha",
    "smoothing_from_half_life",
    "spectral_radius",
    "spectral_radius_bounds",
    "strongly_connected_components",
]

DEFAULT_ATTENUATION = 0.85
"""Default ratio c in alpha = c / rho(A): each extra hop counts c times less at the limit."""

DEFAULT_FAST_HALF_LIFE = 2.0
"""Default half-life of the fast EWMA, in guarded steps (smoothing factor ~0.293)."""

DEFAULT_SLOW_HALF_LIFE = 20.0
"""Default half-life of the slow EWMA, in guarded steps (smoothing factor ~0.034)."""

_RHO_REL_TOL = 1e-12
_RHO_POWER_ITER = 2_000
_RHO_NODA_ITER = 100

Edge = tuple[str, str, float]
"""A weighted edge ``(u, v, weight)``: ``v`` reads ``u``'s output; weight finite and > 0."""


def _check_weight(u: str, v: str, weight: object) -> float:
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise InputError(
            f"edge {u!r} -> {v!r}: weight={weight!r} is not a number; give a finite float > 0 "
            "(or omit it for weight 1)"
        )
    w = float(weight)
    if not math.isfinite(w) or w <= 0.0:
        raise InputError(
            f"edge {u!r} -> {v!r}: weight={weight!r} must be finite and > 0; drop the edge "
            "instead of giving it weight 0"
        )
    return w


@dataclass(frozen=True, slots=True)
class AgentGraph:
    """A directed agent graph: an edge ``u -> v`` means ``v`` reads ``u``'s output.

    Self-loops (an agent re-reading its own output) are allowed; parallel edges are not.

    Args:
        nodes: Node names, unique non-empty strings, in a fixed order (the order of every
            per-node output).
        edges: ``(u, v, weight)`` triples over ``nodes``; weight finite and > 0.

    Raises:
        InputError: On a duplicate or empty node name, an edge to an unknown node, a duplicate
            edge or a weight that is not finite and > 0.
    """

    nodes: tuple[str, ...]
    edges: tuple[Edge, ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for n in self.nodes:
            if not isinstance(n, str) or not n:
                raise InputError(f"AgentGraph node {n!r} must be a non-empty string")
            if n in seen:
                raise InputError(f"AgentGraph node {n!r} is listed twice; node names are unique")
            seen.add(n)
        pairs: set[tuple[str, str]] = set()
        for edge in self.edges:
            u, v, w = edge
            for end in (u, v):
                if end not in seen:
                    raise InputError(
                        f"edge {u!r} -> {v!r} names unknown node {end!r}; known nodes: "
                        f"{', '.join(self.nodes) or '(none)'}"
                    )
            _check_weight(u, v, w)
            if (u, v) in pairs:
                raise InputError(
                    f"edge {u!r} -> {v!r} is given twice; merge the two into one edge whose "
                    "weight is their sum"
                )
            pairs.add((u, v))

    @classmethod
    def from_edges(
        cls,
        edges: Iterable[tuple[str, str] | tuple[str, str, float]],
        *,
        nodes: Iterable[str] = (),
    ) -> AgentGraph:
        """Build a graph from ``(u, v)`` or ``(u, v, weight)`` pairs.

        Args:
            edges: Edges; a missing weight means 1.0.
            nodes: Nodes listed first, in this order (isolated nodes must be listed here);
                edge endpoints not listed are appended in order of first appearance.

        Returns:
            The graph.

        Raises:
            InputError: As for :class:`AgentGraph`, or on an edge that is not a pair or triple.
        """
        order: list[str] = list(nodes)
        known = set(order)
        triples: list[Edge] = []
        for edge in edges:
            if len(edge) == 2:
                u, v = edge[0], edge[1]
                w: object = 1.0
            elif len(edge) == 3:
                u, v, w = edge[0], edge[1], edge[2]
            else:
                raise InputError(f"edge {edge!r} must be (u, v) or (u, v, weight)")
            for end in (u, v):
                if end not in known:
                    known.add(end)
                    order.append(end)
            triples.append((u, v, _check_weight(u, v, w)))
        return cls(tuple(order), tuple(triples))

    def successors(self) -> dict[str, list[tuple[str, float]]]:
        """Out-adjacency: node -> ``[(v, weight), ...]`` in edge order, every node present."""
        succ: dict[str, list[tuple[str, float]]] = {n: [] for n in self.nodes}
        for u, v, w in self.edges:
            succ[u].append((v, float(w)))
        return succ

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form: ``{"nodes": [...], "edges": [[u, v, weight], ...]}``."""
        return {"nodes": list(self.nodes), "edges": [[u, v, w] for u, v, w in self.edges]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentGraph:
        """Inverse of :meth:`to_dict`.

        Raises:
            InputError: On a missing key or a malformed edge.
        """
        if "nodes" not in data or "edges" not in data:
            raise InputError(f"agent graph dict needs keys 'nodes' and 'edges', got {sorted(data)}")
        return cls.from_edges(
            [tuple(e) for e in data["edges"]],
            nodes=data["nodes"],
        )


def strongly_connected_components(graph: AgentGraph) -> list[tuple[str, ...]]:
    """Strongly connected components, sinks first (reverse topological order of the condensation).

    Iterative Tarjan, so deep graphs do not hit the recursion limit. If an edge leads from
    component X to component Y, Y comes before X in the result.

    Args:
        graph: The agent graph.

    Returns:
        The components; each lists its nodes in graph order.

    Source:
        Tarjan (1972), "Depth-first search and linear graph algorithms", SIAM J. Comput. 1(2).
    """
    succ = {n: [v for v, _ in vs] for n, vs in graph.successors().items()}
    position = {n: i for i, n in enumerate(graph.nodes)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[tuple[str, ...]] = []
    counter = 0
    for root in graph.nodes:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, i = work[-1]
            nbrs = succ[node]
            if i < len(nbrs):
                work[-1] = (node, i + 1)
                nxt = nbrs[i]
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp: list[str] = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                out.append(tuple(sorted(comp, key=position.__getitem__)))
    return out


def _cw_bounds(
    rows: Sequence[Sequence[tuple[int, float]]], x: Sequence[float]
) -> tuple[float, float]:
    """Collatz-Wielandt bounds min_i (Ax)_i/x_i <= rho <= max_i (Ax)_i/x_i for x > 0."""
    ratios = [sum(w * x[j] for j, w in row) / x[i] for i, row in enumerate(rows)]
    return min(ratios), max(ratios)


def _block_rho_bounds(
    comp: Sequence[str], succ: Mapping[str, Sequence[tuple[str, float]]]
) -> tuple[float, float]:
    """Certified bounds on rho of one irreducible block (several nodes, or one with a self-loop)."""
    members = set(comp)
    local = {n: i for i, n in enumerate(comp)}
    rows = [[(local[v], w) for v, w in succ[n] if v in members] for n in comp]
    m = len(comp)
    if m == 1:
        w = sum(wt for _, wt in rows[0])
        return w, w

    def close(lo: float, hi: float) -> bool:
        return hi - lo <= _RHO_REL_TOL * hi

    # 1. Power iteration on A + I: A is irreducible, so A + I is primitive and a positive start
    #    stays positive; every iterate gives valid Collatz-Wielandt bounds.
    x = [1.0] * m
    lo, hi = _cw_bounds(rows, x)
    for _ in range(_RHO_POWER_ITER):
        if close(lo, hi):
            return lo, hi
        y = [x[i] + sum(w * x[j] for j, w in row) for i, row in enumerate(rows)]
        top = max(y)
        x = [v / top for v in y]
        b_lo, b_hi = _cw_bounds(rows, x)
        lo, hi = max(lo, b_lo), min(hi, b_hi)
    # 2. Slow case (eigenvalues of modulus close to rho, e.g. a long ring): Noda's shifted
    #    inverse iteration, y = (sigma I - A)^-1 x with sigma the current upper bound; for an
    #    irreducible non-negative A and sigma > rho the inverse is positive, and the upper bound
    #    converges superlinearly to rho.
    for _ in range(_RHO_NODA_ITER):
        if close(lo, hi):
            break
        matrix = [[0.0] * m for _ in range(m)]
        for i, row in enumerate(rows):
            matrix[i][i] = hi
            for j, w in row:
                matrix[i][j] -= w
        try:
            y = _solve(matrix, x)
        except ArithmeticError:
            break  # sigma hit rho to working precision
        if min(y) <= 0.0:
            break  # rounding broke positivity: the bounds so far stand
        top = max(y)
        x = [v / top for v in y]
        b_lo, b_hi = _cw_bounds(rows, x)
        if b_hi >= hi and b_lo <= lo:
            break  # no progress left at working precision
        lo, hi = max(lo, b_lo), min(hi, b_hi)
    return lo, hi


def spectral_radius_bounds(graph: AgentGraph) -> tuple[float, float]:
    """Certified lower and upper bounds on the spectral radius rho(A) of the weighted adjacency.

    For a non-negative matrix, rho(A) is the largest rho over the strongly connected components
    (a DAG has rho = 0). Inside an irreducible block, power iteration on ``A + I`` converges to
    ``rho + 1`` and every iterate gives Collatz-Wielandt bounds; iteration stops when they agree to
    a relative 1e-12. When that is slow (eigenvalues of modulus close to rho, as on a long ring),
    Noda's shifted inverse iteration takes over. Bounds that have not closed are still valid.

    Args:
        graph: The agent graph.

    Returns:
        ``(lower, upper)`` with ``lower <= rho(A) <= upper`` (up to floating-point rounding).

    Source:
        Perron-Frobenius theory; Collatz (1942) and Wielandt (1950) min-max bounds; Noda (1971),
        "Note on the computation of the maximal eigenvalue of a non-negative irreducible
        matrix", Numerische Mathematik 17.
    """
    succ = graph.successors()
    lo = hi = 0.0
    for comp in strongly_connected_components(graph):
        if len(comp) == 1 and not any(v == comp[0] for v, _ in succ[comp[0]]):
            continue
        b_lo, b_hi = _block_rho_bounds(comp, succ)
        lo, hi = max(lo, b_lo), max(hi, b_hi)
    return lo, hi


def spectral_radius(graph: AgentGraph) -> float:
    """The spectral radius rho(A) of the weighted adjacency (its certified upper bound).

    Args:
        graph: The agent graph.

    Returns:
        rho(A) >= 0 (0 for a graph without cycles), relative accuracy about 1e-12.

    Source:
        See :func:`spectral_radius_bounds`.
    """
    return spectral_radius_bounds(graph)[1]


def resolve_alpha(
    graph: AgentGraph,
    *,
    attenuation: float = DEFAULT_ATTENUATION,
    alpha: float | None = None,
) -> float:
    """The Katz attenuation factor alpha for ``graph``.

    * ``alpha`` given: it is checked against the bound ``alpha < 1/rho(A)``.
    * ``rho(A) > 0``: ``alpha = attenuation / rho(A)``.
    * ``rho(A) = 0`` (no cycles) every alpha converges; ``alpha = attenuation / w_max`` with
      ``w_max`` the largest edge weight (``attenuation`` itself for an unweighted DAG), so that,
      as in the cyclic case, rescaling every weight leaves ``alpha * A`` unchanged. A graph
      without edges gets ``alpha = attenuation`` (no value of alpha changes its weights).

    Args:
        graph: The agent graph.
        attenuation: The ratio c in ``alpha = c / rho(A)``, in (0, 1).
        alpha: An explicit alpha > 0, or ``None`` to derive it.

    Returns:
        alpha > 0.

    Raises:
        ConfigError: If ``attenuation`` is not in (0, 1), or ``alpha`` is not finite and > 0, or
            ``alpha >= 1/rho(A)`` (the message gives the bound), or alpha is so close to the bound
            that convergence cannot be certified.

    Source:
        Katz (1953): the walk series sum_k alpha^k A^k converges iff alpha < 1/rho(A).
    """
    if alpha is None:
        if not (isinstance(attenuation, (int, float)) and 0.0 < attenuation < 1.0):
            raise ConfigError(
                f"propagation.attenuation={attenuation!r} must be in (0, 1): alpha = "
                "attenuation / rho(A) must stay below 1/rho(A); the usual choice is 0.85"
            )
    elif (
        isinstance(alpha, bool)
        or not isinstance(alpha, (int, float))
        or not (math.isfinite(alpha) and alpha > 0.0)
    ):
        raise ConfigError(
            f"Katz alpha={alpha!r} must be a finite number > 0, or unset to use "
            "attenuation / rho(A)"
        )
    lo, hi = spectral_radius_bounds(graph)
    if alpha is None:
        if hi > 0.0:
            return attenuation / hi
        if not graph.edges:
            return float(attenuation)
        return attenuation / max(w for _, _, w in graph.edges)
    alpha = float(alpha)
    if hi > 0.0 and alpha * hi >= 1.0:
        bound = 1.0 / hi
        if alpha * lo >= 1.0:
            why = (
                f"alpha={alpha!r} is not below 1/rho(A) = {bound!r} (rho(A) = {hi!r}): the walk "
                "sum diverges"
            )
        else:
            why = (
                f"alpha={alpha!r} is within rounding of 1/rho(A) = {bound!r} (rho(A) in "
                f"[{lo!r}, {hi!r}]): convergence cannot be certified"
            )
        raise ConfigError(
            f"Katz {why}. Use alpha < {bound!r}, or leave alpha unset to use attenuation / "
            f"rho(A) = {DEFAULT_ATTENUATION / hi!r} (attenuation {DEFAULT_ATTENUATION})"
        )
    return alpha


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float]:
    """Solve a small dense system by Gaussian elimination with partial pivoting."""
    n = len(rhs)
    a = [[*row, rhs[i]] for i, row in enumerate(matrix)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(a[r][col]))
        if a[piv][col] == 0.0:
            raise ArithmeticError("singular Katz system; alpha must be below 1/rho(A)")
        a[col], a[piv] = a[piv], a[col]
        pivot_row = a[col]
        p = pivot_row[col]
        for r in range(col + 1, n):
            row = a[r]
            f = row[col] / p
            if f != 0.0:
                for c in range(col, n + 1):
                    row[c] -= f * pivot_row[c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        s = a[r][n] - sum(a[r][c] * x[c] for c in range(r + 1, n))
        x[r] = s / a[r][r]
    return x


def katz_scores(graph: AgentGraph, alpha: float) -> dict[str, float]:
    """Unnormalised Katz centrality on the spread direction, beta = 1.

    Solves ``x_u = 1 + alpha * sum_{u -> v} w(u, v) x_v`` exactly, one strongly connected
    component at a time, sinks first: a component's out-edges only reach components already
    solved, and a component with several nodes is a small dense linear system. Equals networkx
    ``katz_centrality(G.reverse(), alpha, beta=1, normalized=False, weight="weight")`` at
    convergence. ``alpha`` is not checked here; use :func:`resolve_alpha`.

    Args:
        graph: The agent graph.
        alpha: Attenuation factor, 0 < alpha < 1/rho(A).

    Returns:
        node -> x_u >= 1, in graph order. ``x_u - 1`` is the alpha-discounted weighted count of
        walks from ``u`` to any node.

    Raises:
        ArithmeticError: If the system is singular (alpha = 1/rho(A) exactly).

    Source:
        Katz (1953), "A new status index derived from sociometric analysis".
    """
    succ = graph.successors()
    x: dict[str, float] = {}
    for comp in strongly_connected_components(graph):
        members = set(comp)
        rhs = [1.0 + alpha * sum(w * x[v] for v, w in succ[n] if v not in members) for n in comp]
        if len(comp) == 1:
            loop = sum(w for v, w in succ[comp[0]] if v == comp[0])
            x[comp[0]] = rhs[0] / (1.0 - alpha * loop)
            continue
        local = {n: i for i, n in enumerate(comp)}
        matrix = [[0.0] * len(comp) for _ in comp]
        for i, n in enumerate(comp):
            matrix[i][i] = 1.0
            for v, w in succ[n]:
                if v in members:
                    matrix[i][local[v]] -= alpha * w
        for n, val in zip(comp, _solve(matrix, rhs), strict=True):
            x[n] = val
    return {n: x[n] for n in graph.nodes}


@dataclass(frozen=True, slots=True)
class KatzInfluence:
    """Katz influence of every node and the weights derived from it.

    Args:
        alpha: The attenuation factor used.
        spectral_radius: rho(A) of the weighted adjacency (0 for a graph without cycles).
        katz: node -> unnormalised Katz score x_u >= 1 (spread direction, beta = 1).
        weights: node -> x_u / sum(x), each in (0, 1], summing to 1.
    """

    alpha: float
    spectral_radius: float
    katz: Mapping[str, float]
    weights: Mapping[str, float]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "alpha": self.alpha,
            "spectral_radius": self.spectral_radius,
            "katz": dict(self.katz),
            "weights": dict(self.weights),
        }


def katz_influence(
    graph: AgentGraph,
    *,
    attenuation: float = DEFAULT_ATTENUATION,
    alpha: float | None = None,
) -> KatzInfluence:
    """Influence weights of the nodes of ``graph``: Katz on the spread direction, summing to 1.

    Args:
        graph: The agent graph; at least one node.
        attenuation: The ratio c in alpha = c / rho(A), in (0, 1); default 0.85.
        alpha: An explicit alpha (checked against 1/rho(A)), or ``None``.

    Returns:
        The influence.

    Raises:
        InputError: If the graph has no node.
        ConfigError: As :func:`resolve_alpha`.

    Source:
        Katz (1953); weights and alpha rule per intervention-anchors §2.6.
    """
    if not graph.nodes:
        raise InputError("the agent graph has no node; add the agents before propagating")
    a = resolve_alpha(graph, attenuation=attenuation, alpha=alpha)
    x = katz_scores(graph, a)
    total = math.fsum(x.values())
    return KatzInfluence(
        alpha=a,
        spectral_radius=spectral_radius(graph),
        katz=x,
        weights={n: v / total for n, v in x.items()},
    )


@dataclass(frozen=True, slots=True)
class NetworkScore:
    """B_net for one step, and which nodes it covers.

    Args:
        b_net: The Katz-weighted average of the local scores in [0, 1], or ``None`` when no node
            has a score (nothing probed yet, or every probed node "not applicable"): there is no
            evidence either way, and the EWMAs are not updated.
        weights: node -> weight renormalised over the scored nodes (sums to 1; empty when
            ``b_net`` is ``None``).
        coverage: The share of the total influence carried by the scored nodes, in [0, 1].
        not_probed: Nodes with no score yet, in graph order.
        not_applicable: Nodes whose latest step had no protected term to probe, in graph order.
    """

    b_net: float | None
    weights: Mapping[str, float]
    coverage: float
    not_probed: tuple[str, ...]
    not_applicable: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "b_net": self.b_net,
            "weights": dict(self.weights),
            "coverage": self.coverage,
            "not_probed": list(self.not_probed),
            "not_applicable": list(self.not_applicable),
        }


def network_score(
    weights: Mapping[str, float] | KatzInfluence,
    scores: Mapping[str, float | None],
) -> NetworkScore:
    """B_net: the influence-weighted average of the local bias scores.

    ``B_net = sum_{i in S} w_i b_i / sum_{i in S} w_i`` over the set S of nodes with a score.
    Nodes are excluded, and reported, when they are absent from ``scores`` (*not probed yet*) or
    mapped to ``None`` (*not applicable*: the step had no protected term, so the counterfactual
    probe has nothing to swap). Excluding them and renormalising keeps B_net an average of what was
    measured, instead of counting unmeasured nodes as unbiased; ``coverage`` says how much of the
    influence it rests on. With S empty, ``b_net`` is ``None``.

    B_net lies in ``[min_S b_i, max_S b_i]`` (clamped there against rounding) and is
    homogeneous: scaling every score by c scales B_net by c.

    Args:
        weights: node -> influence weight > 0 (e.g. ``katz_influence(...).weights``) or a
            :class:`KatzInfluence`.
        scores: node -> local score b_i in [0, 1] or ``None`` (not applicable); nodes absent are
            not probed.

    Returns:
        The network score.

    Raises:
        ScoreError: If a score is not a finite number in [0, 1], or names an unknown node, or a
            weight is not finite and > 0.

    Source:
        Katz (1953) for the weights; the weighted-average form per intervention-anchors §2.6.
    """
    w_map = weights.weights if isinstance(weights, KatzInfluence) else weights
    for node, w in w_map.items():
        if (
            isinstance(w, bool)
            or not isinstance(w, (int, float))
            or not (math.isfinite(w) and w > 0.0)
        ):
            raise ScoreError(f"influence weight of node {node!r} is {w!r}; weights must be > 0")
    for node in scores:
        if node not in w_map:
            raise ScoreError(
                f"local score for unknown node {node!r}; the graph's nodes are {', '.join(w_map)}"
            )
    used: dict[str, float] = {}
    values: list[float] = []
    not_probed: list[str] = []
    not_applicable: list[str] = []
    for node, w in w_map.items():
        if node not in scores:
            not_probed.append(node)
            continue
        b = scores[node]
        if b is None:
            not_applicable.append(node)
            continue
        if (
            isinstance(b, bool)
            or not isinstance(b, (int, float))
            or not (math.isfinite(b) and 0.0 <= b <= 1.0)
        ):
            raise ScoreError(
                f"local score of node {node!r} is {b!r}; a local bias score is a finite number "
                "in [0, 1] (or None for 'not applicable')"
            )
        used[node] = float(w)
        values.append(float(b))
    total_w = math.fsum(w_map.values())
    if not used:
        return NetworkScore(None, {}, 0.0, tuple(not_probed), tuple(not_applicable))
    s = math.fsum(used.values())
    renorm = {n: w / s for n, w in used.items()}
    b_net = math.fsum(w * b for w, b in zip(used.values(), values, strict=True)) / s
    b_net = min(max(b_net, min(values)), max(values))
    return NetworkScore(
        b_net=b_net,
        weights=renorm,
        coverage=min(1.0, s / total_w),
        not_probed=tuple(not_probed),
        not_applicable=tuple(not_applicable),
    )


# --------------------------------------------------------------------------------------------
# EWMAs


def smoothing_from_half_life(half_life: float) -> float:
    """The EWMA smoothing factor whose half-life is ``half_life`` steps.

    After ``h`` updates with a constant new input, the gap between the EWMA and that input has
    shrunk by ``(1 - a)^h``; solving ``(1 - a)^h = 1/2`` gives ``a = 1 - 2^(-1/h)``.

    Args:
        half_life: Half-life in steps, finite and > 0.

    Returns:
        The smoothing factor a in (0, 1).

    Raises:
        ConfigError: If ``half_life`` is not finite and > 0.

    Source:
        Standard EWMA algebra; e.g. Hunter (1986), "The exponentially weighted moving average",
        J. Quality Technology 18(4).
    """
    if (
        isinstance(half_life, bool)
        or not isinstance(half_life, (int, float))
        or not (math.isfinite(half_life) and half_life > 0.0)
    ):
        raise ConfigError(f"EWMA half_life={half_life!r} must be a finite number of steps > 0")
    return 1.0 - math.pow(2.0, -1.0 / float(half_life))


def half_life_from_smoothing(smoothing: float) -> float:
    """The half-life in steps of an EWMA with smoothing factor ``smoothing`` in (0, 1].

    Returns 0.0 for ``smoothing == 1`` (no memory).

    Raises:
        ConfigError: If ``smoothing`` is not in (0, 1].
    """
    _check_smoothing(smoothing)
    if smoothing == 1.0:
        return 0.0
    return -1.0 / math.log2(1.0 - smoothing)


def _check_smoothing(smoothing: object) -> float:
    if (
        isinstance(smoothing, bool)
        or not isinstance(smoothing, (int, float))
        or not (0.0 < smoothing <= 1.0)
    ):
        raise ConfigError(
            f"EWMA smoothing={smoothing!r} must be in (0, 1] (1 = no memory); or give a "
            "half-life in steps instead"
        )
    return float(smoothing)


@dataclass(frozen=True, slots=True)
class Ewma:
    """An exponentially weighted moving average as immutable plain data.

    ``value_t = a * x_t + (1 - a) * value_{t-1}``. Start-up: the first update sets the value to
    the first input (no zero start, no bias correction), so a high first B_net is reported in
    full rather than diluted: the conservative choice for a safety signal.

    Args:
        smoothing: The factor a in (0, 1]; see :func:`smoothing_from_half_life`.
        value: The current average, or ``None`` before the first update.
        count: Updates so far, >= 0.

    Raises:
        ConfigError: If ``smoothing`` is not in (0, 1].
        ScoreError: If ``value`` is not finite, or ``count`` is negative or inconsistent with
            ``value``.
    """

    smoothing: float
    value: float | None = None
    count: int = 0

    def __post_init__(self) -> None:
        _check_smoothing(self.smoothing)
        if self.value is not None and not (
            isinstance(self.value, (int, float)) and math.isfinite(self.value)
        ):
            raise ScoreError(f"Ewma.value={self.value!r} must be finite or None")
        if not isinstance(self.count, int) or self.count < 0:
            raise ScoreError(f"Ewma.count={self.count!r} must be an integer >= 0")
        if (self.value is None) != (self.count == 0):
            raise ScoreError(
                f"Ewma.value={self.value!r} with count={self.count}: the value is None exactly "
                "when no update has happened"
            )

    @classmethod
    def from_half_life(cls, half_life: float) -> Ewma:
        """A fresh EWMA with the given half-life in steps."""
        return cls(smoothing_from_half_life(half_life))

    @property
    def half_life(self) -> float:
        """The half-life in steps."""
        return half_life_from_smoothing(self.smoothing)

    def update(self, x: float) -> Ewma:
        """Return the state after one more input ``x``.

        Args:
            x: The new value, finite.

        Returns:
            The new state (this one is unchanged).

        Raises:
            ScoreError: If ``x`` is not a finite number.
        """
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise ScoreError(f"EWMA input {x!r} must be a finite number")
        if self.value is None:
            return Ewma(self.smoothing, float(x), 1)
        a = self.smoothing
        return Ewma(a, a * float(x) + (1.0 - a) * self.value, self.count + 1)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form: ``{"smoothing": a, "value": v | None, "count": n}``."""
        return {"smoothing": self.smoothing, "value": self.value, "count": self.count}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Ewma:
        """Inverse of :meth:`to_dict`.

        Raises:
            ConfigError: On a missing key or a bad smoothing factor.
            ScoreError: On an inconsistent value or count.
        """
        try:
            return cls(data["smoothing"], data["value"], data["count"])
        except KeyError as exc:
            raise ConfigError(
                f"EWMA state dict is missing key {exc.args[0]!r}; expected smoothing, value, count"
            ) from exc


@dataclass(frozen=True, slots=True)
class NetworkEwma:
    """The two EWMAs of B_net the breaker reads: fast (spikes) and slow (drift).

    A step whose B_net is ``None`` (no node has a score) leaves both unchanged: no evidence
    neither raises nor lowers the alarm. Before the first scored step both values are ``None``.

    Args:
        fast: The fast EWMA (larger smoothing factor).
        slow: The slow EWMA.

    Raises:
        ConfigError: If the fast EWMA is not faster than the slow one.
    """

    fast: Ewma
    slow: Ewma

    def __post_init__(self) -> None:
        if self.fast.smoothing <= self.slow.smoothing:
            raise ConfigError(
                f"fast EWMA smoothing {self.fast.smoothing!r} must exceed slow smoothing "
                f"{self.slow.smoothing!r} (fast half-life shorter than slow half-life)"
            )

    @classmethod
    def create(
        cls,
        *,
        fast_half_life: float | None = None,
        slow_half_life: float | None = None,
        fast_smoothing: float | None = None,
        slow_smoothing: float | None = None,
    ) -> NetworkEwma:
        """Fresh state from half-lives (steps) or smoothing factors, one of each pair.

        Defaults: fast half-life 2 steps, slow half-life 20 steps.

        Raises:
            ConfigError: If both forms are given for one EWMA, or a value is out of range.
        """

        def pick(name: str, h: float | None, a: float | None, default_h: float) -> Ewma:
            if h is not None and a is not None:
                raise ConfigError(
                    f"propagation.{name}: give either a half-life ({h!r}) or a smoothing "
                    f"factor ({a!r}), not both"
                )
            if a is not None:
                return Ewma(a)
            return Ewma.from_half_life(default_h if h is None else h)

        return cls(
            pick("fast", fast_half_life, fast_smoothing, DEFAULT_FAST_HALF_LIFE),
            pick("slow", slow_half_life, slow_smoothing, DEFAULT_SLOW_HALF_LIFE),
        )

    def update(self, b_net: float | None) -> NetworkEwma:
        """Return the state after one guarded step with network score ``b_net``.

        Args:
            b_net: B_net in [0, 1], or ``None`` (no node scored: state unchanged).

        Raises:
            ScoreError: If ``b_net`` is not a finite number in [0, 1].
        """
        if b_net is None:
            return self
        if (
            isinstance(b_net, bool)
            or not isinstance(b_net, (int, float))
            or not (math.isfinite(b_net) and 0.0 <= b_net <= 1.0)
        ):
            raise ScoreError(f"B_net={b_net!r} must be a finite number in [0, 1] or None")
        return NetworkEwma(self.fast.update(b_net), self.slow.update(b_net))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form: ``{"fast": {...}, "slow": {...}}``."""
        return {"fast": self.fast.to_dict(), "slow": self.slow.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NetworkEwma:
        """Inverse of :meth:`to_dict`.

        Raises:
            ConfigError: On a missing key.
        """
        try:
            return cls(Ewma.from_dict(data["fast"]), Ewma.from_dict(data["slow"]))
        except KeyError as exc:
            raise ConfigError(
                f"network EWMA state dict is missing key {exc.args[0]!r}; expected fast, slow"
            ) from exc
