from __future__ import annotations

from typing import Any

import pytest

from biasbreaker.errors import PluginError, UnknownImplementationError
from biasbreaker.hookspecs import hookimpl
from biasbreaker.intervention.router import checked_route, route_intervention
from biasbreaker.types import BreakerState, InterventionContext, Route, Thresholds

CONTEXT = InterventionContext(
    step=0,
    node="a",
    state=BreakerState.NORMAL,
    fast=0.6,
    slow=0.1,
    mixing_ratio=0.9,
    thresholds=Thresholds(0.5, 0.35, 0.25, 0.05),
)


class Answer:
    def __init__(self, answer: object) -> None:
        self.answer = answer

    def route(self, context: InterventionContext) -> Route:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer  # type: ignore[return-value]


@pytest.mark.parametrize("route", ["skeptics", "madera", "none"])
def test_valid_routes_pass(route: str) -> None:
    assert checked_route(Answer(route), CONTEXT, name="x") == route


@pytest.mark.parametrize("answer", ["debate", None, 1])
def test_an_unknown_route_is_a_plugin_error(answer: object) -> None:
    with pytest.raises(
        PluginError,
        match=f"router 'odd' returned {answer!r}; a router must "
        "return one of 'skeptics', 'madera', 'none'",
    ):
        checked_route(Answer(answer), CONTEXT, name="odd")


def test_a_raising_router_is_a_plugin_error_with_the_cause_chained() -> None:
    with pytest.raises(PluginError, match="router 'boom' raised KeyError") as info:
        checked_route(Answer(KeyError("x")), CONTEXT, name="boom")
    assert isinstance(info.value.__cause__, KeyError)


class RouterPlugin:
    """A throwaway classify_route plugin whose router answers a fixed route."""

    def __init__(self, answer: object) -> None:
        self.answer = answer

    @hookimpl
    def classify_route(self, register: Any) -> None:
        register("fixed", lambda options, context: Answer(self.answer))


def test_route_intervention_dispatches_to_the_configured_router(
    register_plugin: Any, make_kernel: Any
) -> None:
    register_plugin(RouterPlugin("madera"), name="fixed-router")
    kernel = make_kernel({"intervention": {"router": "fixed"}})
    assert route_intervention(CONTEXT, kernel) == "madera"


def test_route_intervention_fails_closed_on_a_bad_answer(
    register_plugin: Any, make_kernel: Any
) -> None:
    register_plugin(RouterPlugin("panel"), name="fixed-router")
    kernel = make_kernel({"intervention": {"router": "fixed"}})
    with pytest.raises(PluginError, match="router 'fixed' returned 'panel'"):
        route_intervention(CONTEXT, kernel)


def test_route_intervention_names_a_missing_router(make_kernel: Any) -> None:
    with pytest.raises(UnknownImplementationError, match="classify_route 'nope'"):
        route_intervention(CONTEXT, make_kernel({"intervention": {"router": "nope"}}))


def test_a_router_without_route_is_a_plugin_error() -> None:
    with pytest.raises(PluginError, match="without a route"):
        checked_route(object(), CONTEXT, name="odd")
