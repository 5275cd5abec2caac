"""What installed plugins declare they provide, read from their metadata without importing them.

A plugin is an entry point of the ``biasbreaker`` group; what it registers is known only once
its module is imported and its hooks are called. So that installing a plugin never runs its
code unless the configuration selects it, a distribution declares its implementations in a
second entry-point group, :data:`DECLARATIONS` (``biasbreaker.implementations``): one entry per
implementation, named ``<extension point>.<name>``, whose value is the target of the plugin
entry point that registers it::

    [project.entry-points.biasbreaker]
    bm25 = "biasbreaker_retriever_bm25.plugin"

    [project.entry-points."biasbreaker.implementations"]
    "retriever.bm25" = "biasbreaker_retriever_bm25.plugin"

The plugin host (:class:`biasbreaker.plugins.PluginHost`) then imports a plugin only when one
of its declared implementations is selected, or has a ``[plugin.<name>]`` table, or when
``biasbreaker plugins --verbose`` asks for everything. A plugin that declares nothing must be
imported to learn what it provides, so it always is (the reason the declarations exist); a
malformed declaration is a notice and its plugin is treated as declaring nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from importlib import metadata
from typing import cast

from biasbreaker.points import POINTS, PointName
from biasbreaker.registry import NAME_PATTERN

DECLARATIONS = "biasbreaker.implementations"
"""The entry-point group in which a distribution declares its implementations."""

Declared = tuple[tuple[PointName, str], ...]
"""``(extension point, name)`` pairs, sorted."""


@dataclass(frozen=True)
class Wanted:
    """What a configuration needs from the plugins: the plugins to import.

    Args:
        points: Every selected ``(extension point, name)``.
        names: Every name with a ``[plugin.<name>]`` table (validated whatever its point).
    """

    points: frozenset[tuple[str, str]] = frozenset()
    names: frozenset[str] = frozenset()

    def needs(self, declared: Declared) -> bool:
        """Whether a plugin declaring ``declared`` provides something wanted."""
        return any(pair in self.points or pair[1] in self.names for pair in declared)


def _dist_name(ep: metadata.EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    return None if dist is None else cast(str, dist.metadata["Name"])


def read_declarations(
    plugins: Iterable[metadata.EntryPoint],
    declarations: Iterable[metadata.EntryPoint] | None = None,
) -> tuple[dict[str, Declared | None], list[str]]:
    """What each plugin entry point declares, and a notice per malformed declaration.

    Args:
        plugins: The ``biasbreaker`` group's entry points.
        declarations: The :data:`DECLARATIONS` group's; ``None`` reads the installed group.

    Returns:
        Plugin name → its declared implementations, or ``None`` when it declares none (or a
        declaration for it is malformed: it must then be imported to be known), and the
        notices.
    """
    eps = list(metadata.entry_points(group=DECLARATIONS) if declarations is None else declarations)
    by_target: dict[tuple[str | None, str], str] = {}
    for ep in plugins:
        by_target.setdefault((_dist_name(ep), ep.value), ep.name)
    found: dict[str, set[tuple[PointName, str]]] = {}
    broken: set[str] = set()
    notices: list[str] = []
    for ep in sorted(eps, key=lambda e: (e.name, e.value)):
        dist = _dist_name(ep)
        plugin = by_target.get((dist, ep.value))
        point, _, name = ep.name.partition(".")
        where = f"{dist or 'a distribution'} declares {ep.name!r} = {ep.value!r}"
        if plugin is None:
            notices.append(
                f"{where}, but none of its [biasbreaker] entry points has that target; the "
                "declaration is ignored"
            )
            continue
        if point not in POINTS or not NAME_PATTERN.match(name):
            notices.append(
                f"{where}: the name must be <extension point>.<lower-kebab name>, e.g. "
                f"'retriever.bm25'; plugin {plugin!r} is imported to learn what it provides"
            )
            broken.add(plugin)
            continue
        found.setdefault(plugin, set()).add((cast(PointName, point), name))
    declared: dict[str, Declared | None] = {}
    for ep in plugins:
        pairs = found.get(ep.name)
        declared[ep.name] = None if pairs is None or ep.name in broken else tuple(sorted(pairs))
    return declared, notices


def declaration_problems(
    plugin: str,
    declared: Declared | None,
    registered: Collection[tuple[str, str]],
) -> list[str]:
    """What an imported plugin registers and does not declare, or declares and does not register.

    Args:
        plugin: The plugin's name.
        declared: Its declarations (``None``: it declares nothing; then nothing is checked).
        registered: The ``(point, name)`` pairs it registered.

    Returns:
        One notice per mismatch: an undeclared implementation is invisible (and cannot be
        selected) whenever the plugin is not imported for another reason.
    """
    if declared is None:
        return []
    problems = []
    for point, name in sorted(set(registered) - set(declared)):
        problems.append(
            f"plugin {plugin!r} registers {point} {name!r} but does not declare it in "
            f"[{DECLARATIONS}]; it can be selected only while the plugin is imported for "
            f'another reason: add "{point}.{name}" to its declarations'
        )
    for point, name in sorted(set(declared) - set(registered)):
        problems.append(
            f"plugin {plugin!r} declares {point} {name!r} in [{DECLARATIONS}] but does not "
            "register it; selecting it imports the plugin for nothing: fix its declarations"
        )
    return problems


__all__ = ["DECLARATIONS", "Declared", "Wanted", "declaration_problems", "read_declarations"]
