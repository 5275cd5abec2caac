from __future__ import annotations

import pytest

from biasbreaker.errors import PluginError
from biasbreaker.intervention.router import checked_route
from biasbreaker.types import BreakerState, InterventionContext, Route, Thresholds

CONTEXT = InterventionContext(step=0, node="a", state=BreakerState.NORMAL, fast=0.6, slow=0.1,
                              mixing_ratio=0.9, thresholds=Thresholds(0.5, 0.35, 0.25, 0.05))


class Answer:
    def __init__(self, answer: object) -> None:
        self.answer = answer

    def classify(self, context: InterventionContext) -> Route:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer  # type: ignore[return-value]


@pytest.mark.parametrize("route", ["skeptics", "madera", "none"])
def test_valid_routes_pass(route: str) -> None:
    assert checked_route(Answer(route), CONTEXT, name="x") == route


@pytest.mark.parametrize("answer", ["debate", None, 1])
def test_an_unknown_route_is_a_plugin_error(answer: object) -> None:
    with pytest.raises(PluginError, match=f"router 'odd' returned {answer!r}; a router must "
                                          "return one of 'skeptics', 'madera', 'none'"):
        checked_route(Answer(answer), CONTEXT, name="odd")


def test_a_raising_router_is_a_plugin_error_with_the_cause_chained() -> None:
    with pytest.raises(PluginError, match="router 'boom' raised KeyError") as info:
        checked_route(Answer(KeyError("x")), CONTEXT, name="boom")
    assert isinstance(info.value.__cause__, KeyError)
