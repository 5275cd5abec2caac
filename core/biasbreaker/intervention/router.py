"""The routing seam (R7): which mitigation strategy a tripped step goes to.

``route_intervention(context)`` returns ``"skeptics"`` (a panel of skeptics debating the
output: for conformity spreading through many nodes), ``"madera"`` (diagnose, retrieve,
rewrite: for one node with a persistent parametric bias) or ``"none"``. The classifier is a
``classify_route`` plugin chosen by name in ``[intervention] router``; the first-party
``heuristic`` router is a documented heuristic awaiting validation, not a solved diagnosis.

The kernel checks the router's answer: anything but the three routes is a
:class:`~biasbreaker.errors.PluginError`, and so is an exception raised by the router (with the
original chained), so that the calling intervention fails closed.

Source:
    Phase 3 design (M3), R7 and WP4.
"""

from __future__ import annotations

from typing import Protocol

from biasbreaker.errors import PluginError
from biasbreaker.types import ROUTES, InterventionContext, Route


class Router(Protocol):
    """What a ``classify_route`` plugin's factory returns."""

    def classify(self, context: InterventionContext) -> Route:
        """Return ``"skeptics"``, ``"madera"`` or ``"none"`` for a tripped step."""
        ...


def checked_route(router: Router, context: InterventionContext, *, name: str) -> Route:
    """Ask ``router`` for a route and enforce the kernel's check on the answer.

    Args:
        router: The router object.
        context: The intervention context.
        name: The router's registry name, for messages.

    Returns:
        The route.

    Raises:
        PluginError: If the router raises or returns anything but one of :data:`ROUTES`.
    """
    try:
        route = router.classify(context)
    except Exception as exc:
        raise PluginError(f"router {name!r} raised {type(exc).__name__}: {exc}") from exc
    if route not in ROUTES:
        raise PluginError(
            f"router {name!r} returned {route!r}; a router must return one of "
            f"{', '.join(map(repr, ROUTES))}"
        )
    return route


__all__ = ["Router", "checked_route"]
