from __future__ import annotations

import pytest
from pydantic import ValidationError

from biasbreaker.types import BreakerState, InterventionContext, Thresholds
from biasbreaker_plugins.router_heuristic import (
    HeuristicRouter,
    HeuristicRouterOptions,
    make_heuristic,
)

TH = Thresholds(0.5, 0.35, 0.25, 0.05)


def context(scores: dict[str, float], history: dict[str, list[float]] | None = None,
            weights: dict[str, float] | None = None) -> InterventionContext:
    return InterventionContext(step=9, node="a", state=BreakerState.NORMAL, fast=0.6, slow=0.3,
                               mixing_ratio=0.9, thresholds=TH, local_scores=scores,
                               weights=weights or {}, history=history or {}, attempt=1)


ROUTER = HeuristicRouter()


@pytest.mark.parametrize(("scores", "history", "weights", "route"), [
    # broad contamination: conformity across several agents -> skeptics
    ({"a": 0.6, "b": 0.5, "c": 0.4, "d": 0.0}, None, None, "skeptics"),
    ({"a": 0.31, "b": 0.3}, None, None, "skeptics"),
    # one node high for the last three steps, carrying most of B_net -> madera
    ({"a": 0.8, "b": 0.1, "c": 0.0}, {"a": [0.1, 0.5, 0.7, 0.8]},
     {"a": 0.5, "b": 0.3, "c": 0.2}, "madera"),
    # no weights known: the share condition is not applied
    ({"a": 0.8, "b": 0.1}, {"a": [0.5, 0.7, 0.8]}, None, "madera"),
    # one node high only now (a one-off spike) -> none
    ({"a": 0.8, "b": 0.1}, {"a": [0.1, 0.1, 0.8]}, None, "none"),
    # persistent but too short a history -> none
    ({"a": 0.8, "b": 0.1}, {"a": [0.7, 0.8]}, None, "none"),
    # persistent but carries little of B_net (a peripheral node) -> none
    ({"a": 0.8, "b": 0.29, "c": 0.29}, {"a": [0.5, 0.6, 0.8]},
     {"a": 0.05, "b": 0.5, "c": 0.45}, "none"),
    # nothing contaminated -> none
    ({"a": 0.2, "b": 0.1}, {"a": [0.2, 0.2, 0.2]}, None, "none"),
])
def test_routes_representative_contamination_patterns(
        scores: dict[str, float], history: dict[str, list[float]] | None,
        weights: dict[str, float] | None, route: str) -> None:
    assert ROUTER.classify(context(scores, history, weights)) == route


def test_thresholds_are_options() -> None:
    strict = HeuristicRouter(node_threshold=0.7, broad_min_nodes=3, persistence_steps=1,
                             min_share=0.9)
    assert strict.classify(context({"a": 0.8, "b": 0.6}, {"a": [0.8]})) == "madera"
    assert strict.classify(context({"a": 0.8, "b": 0.75}, {"a": [0.8]})) == "none"  # 2 < 3
    assert strict.classify(context({"a": 0.8, "b": 0.75, "c": 0.7})) == "skeptics"
    assert strict.contaminated(context({"a": 0.8, "b": 0.69})) == ["a"]


@pytest.mark.parametrize("options", [{"node_threshold": 0.0}, {"broad_min_nodes": 1},
                                     {"persistence_steps": 0}, {"min_share": 1.5},
                                     {"unknown": 1}])
def test_options_are_validated(options: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        HeuristicRouterOptions(**options)  # type: ignore[arg-type]


def test_factory_builds_from_options() -> None:
    router = make_heuristic(HeuristicRouterOptions(persistence_steps=2), context=None)
    assert router.options.persistence_steps == 2
    assert router.classify(context({"a": 0.8}, {"a": [0.7, 0.8]})) == "madera"
