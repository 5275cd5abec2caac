from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

import biasbreaker_plugins.router_heuristic as router_plugin
from biasbreaker.errors import ConfigError
from biasbreaker.intervention.router import route_intervention
from biasbreaker.types import BreakerState, InterventionContext, Thresholds
from biasbreaker_plugins.router_heuristic import HeuristicRouter, HeuristicRouterOptions

TH = Thresholds(0.5, 0.35, 0.25, 0.05)


def context(
    scores: dict[str, float],
    history: dict[str, list[float]] | None = None,
    weights: dict[str, float] | None = None,
) -> InterventionContext:
    return InterventionContext(
        step=9,
        node="a",
        state=BreakerState.NORMAL,
        fast=0.6,
        slow=0.3,
        mixing_ratio=0.9,
        thresholds=TH,
        local_scores=scores,
        weights=weights or {},
        history=history or {},
        attempt=1,
    )


ROUTER = HeuristicRouter()


@pytest.mark.parametrize(
    ("scores", "history", "weights", "route"),
    [
        # broad contamination: conformity across several agents -> skeptics
        ({"a": 0.6, "b": 0.5, "c": 0.4, "d": 0.0}, None, None, "skeptics"),
        ({"a": 0.31, "b": 0.3}, None, None, "skeptics"),
        # one node high for the last three steps, carrying most of B_net -> madera
        (
            {"a": 0.8, "b": 0.1, "c": 0.0},
            {"a": [0.1, 0.5, 0.7, 0.8]},
            {"a": 0.5, "b": 0.3, "c": 0.2},
            "madera",
        ),
        # no weights known: the share condition is not applied
        ({"a": 0.8, "b": 0.1}, {"a": [0.5, 0.7, 0.8]}, None, "madera"),
        # one node high only now (a one-off spike) -> none
        ({"a": 0.8, "b": 0.1}, {"a": [0.1, 0.1, 0.8]}, None, "none"),
        # persistent but too short a history -> none
        ({"a": 0.8, "b": 0.1}, {"a": [0.7, 0.8]}, None, "none"),
        # persistent but carries little of B_net (a peripheral node) -> none
        (
            {"a": 0.8, "b": 0.29, "c": 0.29},
            {"a": [0.5, 0.6, 0.8]},
            {"a": 0.05, "b": 0.5, "c": 0.45},
            "none",
        ),
        # nothing contaminated -> none
        ({"a": 0.2, "b": 0.1}, {"a": [0.2, 0.2, 0.2]}, None, "none"),
    ],
)
def test_routes_representative_contamination_patterns(
    scores: dict[str, float],
    history: dict[str, list[float]] | None,
    weights: dict[str, float] | None,
    route: str,
) -> None:
    assert ROUTER.route(context(scores, history, weights)) == route


def test_thresholds_are_options() -> None:
    strict = HeuristicRouter(
        node_threshold=0.7, broad_min_nodes=3, persistence_steps=1, min_share=0.9
    )
    assert strict.route(context({"a": 0.8, "b": 0.6}, {"a": [0.8]})) == "madera"
    assert strict.route(context({"a": 0.8, "b": 0.75}, {"a": [0.8]})) == "none"  # 2 < 3
    assert strict.route(context({"a": 0.8, "b": 0.75, "c": 0.7})) == "skeptics"
    assert strict.contaminated(context({"a": 0.8, "b": 0.69})) == ["a"]


def test_a_lone_persistent_node_can_go_to_the_skeptics() -> None:
    panel = HeuristicRouter(persistence_steps=1, persistent_route="skeptics")
    assert panel.route(context({"a": 0.8}, {"a": [0.8]})) == "skeptics"
    assert panel.route(context({"a": 0.8, "b": 0.5})) == "skeptics"  # broad, as before
    assert panel.route(context({"a": 0.2}, {"a": [0.2]})) == "none"  # nothing contaminated
    default = HeuristicRouter(persistence_steps=1)
    assert default.route(context({"a": 0.8}, {"a": [0.8]})) == "madera"


@pytest.mark.parametrize(
    "options",
    [
        {"persistent_route": "none"},
        {"node_threshold": 0.0},
        {"broad_min_nodes": 1},
        {"persistence_steps": 0},
        {"min_share": 1.5},
        {"unknown": 1},
    ],
)
def test_options_are_validated(options: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        HeuristicRouterOptions(**options)  # type: ignore[arg-type]


def test_registered_through_classify_route_with_options_from_plugin_heuristic(
    register_plugin: Any, make_kernel: Any
) -> None:
    register_plugin(router_plugin, name="router-heuristic")
    kernel = make_kernel({"plugin": {"heuristic": {"persistence_steps": 2}}})
    router = kernel.build("classify_route")
    assert isinstance(router, HeuristicRouter)
    assert router.options.persistence_steps == 2
    assert route_intervention(context({"a": 0.8}, {"a": [0.7, 0.8]}), kernel) == "madera"
    assert route_intervention(context({"a": 0.8, "b": 0.5}), kernel) == "skeptics"


def test_persistence_longer_than_the_kept_history_is_a_config_error(
    register_plugin: Any, make_kernel: Any
) -> None:
    register_plugin(router_plugin, name="router-heuristic")
    kernel = make_kernel(
        {"breaker": {"history_steps": 4}, "plugin": {"heuristic": {"persistence_steps": 5}}}
    )
    with pytest.raises(
        ConfigError, match="persistence_steps = 5 exceeds breaker.history_steps = 4"
    ):
        kernel.build("classify_route")


def test_bad_options_in_the_config_name_the_key(register_plugin: Any, make_kernel: Any) -> None:
    register_plugin(router_plugin, name="router-heuristic")
    kernel = make_kernel({"plugin": {"heuristic": {"node_threshold": 2}}})
    with pytest.raises(ConfigError, match="plugin.heuristic.node_threshold = 2"):
        kernel.build("classify_route")
