"""The routing seam (R7): which mitigation strategy a tripped step goes to.

:func:`route_intervention` returns ``"skeptics"`` (a panel of skeptics debating the output:
for conformity spreading through many nodes), ``"madera"`` (diagnose, retrieve, rewrite: for
one node with a persistent parametric bias) or ``"none"``. The classifier is a
``classify_route`` plugin chosen by name in ``[intervention] router``; the first-party
``heuristic`` router is a documented heuristic awaiting validation, not a solved diagnosis.

The kernel checks the router's answer: anything but the three routes is a
:class:`~biasbreaker.errors.PluginError`, and so is an exception raised by the router (with the
original chained), so that the calling intervention fails closed.

Source:
    Phase 3 design (M3), R7 and WP4.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Final, Protocol

from biasbreaker.errors import PluginError
from biasbreaker.points import PointName
from biasbreaker.types import ROUTES, InterventionContext, Route

if TYPE_CHECKING:
    from biasbreaker.kernel import Kernel


class Router(Protocol):
    """What a ``classify_route`` plugin's factory returns.

    A router may also have a ``routes`` attribute: the routes it can ever return (a
    collection of :data:`~biasbreaker.types.ROUTES`). Only the strategies in it are built
    (:func:`possible_routes`); a router without one may return any route, so every strategy
    is built and its configuration checked.
    """

    def route(self, context: InterventionContext) -> Route:
        """Return ``"skeptics"``, ``"madera"`` or ``"none"`` for a tripped step."""
        ...


STRATEGY_POINTS: Final[Mapping[Route, tuple[PointName, ...]]] = {
    "skeptics": ("skeptic", "aggregator"),
    "madera": ("diagnoser", "retriever", "editor"),
    "none": (),
}
"""The extension points each repair strategy builds."""


def possible_routes(router: object, *, name: str) -> frozenset[Route]:
    """The routes ``router`` can return: its ``routes`` attribute, else all of them.

    Args:
        router: The built router.
        name: Its registry name, for messages.

    Returns:
        A subset of :data:`~biasbreaker.types.ROUTES`; every route when the router does not
        say (fail closed: every strategy is built and checked).

    Raises:
        PluginError: ``routes`` is not a collection of routes (a string, an unknown route).
    """
    routes = getattr(router, "routes", None)
    if routes is None:
        return frozenset(ROUTES)
    if isinstance(routes, str) or not isinstance(routes, Collection):
        raise PluginError(
            f"router {name!r} has routes = {routes!r}; it must be a collection of "
            f"{', '.join(map(repr, ROUTES))}"
        )
    unknown = [r for r in routes if r not in ROUTES]
    if unknown:
        raise PluginError(
            f"router {name!r} lists unknown route(s) {unknown!r} in routes; a router can "
            f"return only {', '.join(map(repr, ROUTES))}"
        )
    return frozenset(routes)


def checked_route(router: object, context: InterventionContext, *, name: str) -> Route:
    """Ask ``router`` for a route and enforce the kernel's check on the answer.

    Args:
        router: The router object (it should satisfy :class:`Router`).
        context: The intervention context.
        name: The router's registry name, for messages.

    Returns:
        The route.

    Raises:
        PluginError: If the router has no ``route`` method, raises, or returns anything but
            one of :data:`~biasbreaker.types.ROUTES`.
    """
    method = getattr(router, "route", None)
    if not callable(method):
        raise PluginError(
            f"router {name!r} built a {type(router).__name__} without a route(context) method"
        )
    try:
        route = method(context)
    except Exception as exc:
        raise PluginError(f"router {name!r} raised {type(exc).__name__}: {exc}") from exc
    if route not in ROUTES:
        raise PluginError(
            f"router {name!r} returned {route!r}; a router must return one of "
            f"{', '.join(map(repr, ROUTES))}"
        )
    return route  # type: ignore[no-any-return]


def route_intervention(context: InterventionContext, kernel: Kernel | None = None) -> Route:
    """Choose the mitigation strategy for a tripped step with the configured router.

    Args:
        context: The intervention context the control machine built.
        kernel: The kernel whose configuration (``[intervention] router``) and plugins to use;
            default :meth:`Kernel.load() <biasbreaker.kernel.Kernel.load>` (the current
            directory's configuration, installed plugins). Pass one kernel per run: loading is
            not free.

    Returns:
        ``"skeptics"``, ``"madera"`` or ``"none"``.

    Raises:
        PluginError: If the router cannot be built, raises, or answers outside the routes.
        ConfigError: If the configured router is not installed or its options are invalid.

    Source:
        Phase 3 design (M3), R7.
    """
    from biasbreaker.kernel import Kernel

    if kernel is None:
        kernel = Kernel.load()
    name = kernel.selected("classify_route")[0]
    return checked_route(kernel.build("classify_route", name), context, name=name)


__all__ = ["STRATEGY_POINTS", "Router", "checked_route", "possible_routes", "route_intervention"]
