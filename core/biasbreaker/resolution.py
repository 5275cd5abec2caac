"""The second validation pass: the configuration's choices resolved in the registry.

Once plugins are loaded, every selected implementation is looked up by name (an unknown name
lists what is installed) and its ``[plugin.<name>]`` table is validated with the options
model the implementation declared (:func:`biasbreaker.config.validate_plugin_options`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from biasbreaker.config import LoadedSettings, selection, validate_plugin_options
from biasbreaker.errors import ConfigError, DuplicateImplementationError
from biasbreaker.points import EXTENSION_POINTS, PointName
from biasbreaker.registry import Registry


def resolve_selection(
    loaded: LoadedSettings,
    registry: Registry,
    points: Iterable[PointName] | None = None,
) -> dict[tuple[str, str], BaseModel]:
    """Second validation pass, once plugins are loaded.

    Checks that every selected implementation of ``points`` is installed and validates its
    ``[plugin.<name>]`` table (or its defaults) with the options model it declared. With
    ``points=None`` it checks every extension point and also every ``[plugin.<name>]`` table,
    selected or not.

    Args:
        loaded: The first-pass settings with their provenance.
        registry: The registry filled by the plugin host.
        points: The extension points to resolve; ``None`` for all, plus every plugin table.

    Returns:
        ``(point, name) -> options instance`` for every selected implementation resolved.

    Raises:
        UnknownImplementationError: The only problem is a selected name that is not
            installed; the message lists what is installed, with distributions.
        ConfigError: A selected name is registered twice, a ``[plugin.<name>]`` table matches
            no installed implementation or fails its plugin's options model (key path, value
            and reason); several problems are reported together in one error.
    """
    resolved, problems = selection_problems(loaded, registry, points)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise ConfigError(
            f"{len(problems)} configuration problems:\n- " + "\n- ".join(str(p) for p in problems)
        )
    return resolved


def selection_problems(
    loaded: LoadedSettings,
    registry: Registry,
    points: Iterable[PointName] | None = None,
) -> tuple[dict[tuple[str, str], BaseModel], list[ConfigError]]:
    """:func:`resolve_selection` without raising: what resolved, and every distinct problem.

    Args:
        loaded: The first-pass settings with their provenance.
        registry: The registry filled by the plugin host.
        points: The extension points to resolve; ``None`` for all, plus every plugin table.

    Returns:
        ``(point, name) -> options instance`` for every selected implementation resolved, and
        one error per distinct problem (an :class:`UnknownImplementationError` for a selected
        name that is not installed), in the order found.
    """
    settings = loaded.settings
    resolved: dict[tuple[str, str], BaseModel] = {}
    attempted: set[tuple[str, str]] = set()
    problems: list[ConfigError] = []
    wanted = set(points) if points is not None else {p.name for p in EXTENSION_POINTS}
    for point in EXTENSION_POINTS:
        if point.name not in wanted:
            continue
        names = selection(settings, point.name)
        if point.multiple and len(set(names)) != len(names):
            problems.append(
                ConfigError(
                    f"{point.selected_by} = {names!r} ({loaded.source_of(point.selected_by)}) "
                    "lists an implementation twice; list each once"
                )
            )
        for name in names:
            attempted.add((point.name, name))
            try:
                impl = registry.get(
                    point.name,
                    name,
                    where=f"{loaded.source_of(point.selected_by)}: {point.selected_by}",
                )
                resolved[(point.name, name)] = validate_plugin_options(
                    loaded, impl.point, name, impl.options, impl.origin
                )
            except ConfigError as exc:
                problems.append(exc)
            except DuplicateImplementationError as exc:
                problems.append(ConfigError(str(exc)))
    if points is None:
        problems += _check_plugin_tables(loaded, registry, attempted)
    unique: dict[str, ConfigError] = {}
    for problem in problems:
        unique.setdefault(str(problem), problem)
    return resolved, list(unique.values())


def _check_plugin_tables(
    loaded: LoadedSettings,
    registry: Registry,
    attempted: set[tuple[str, str]],
) -> list[ConfigError]:
    """Validate every ``[plugin.<name>]`` table not already validated as part of the selection."""
    problems: list[ConfigError] = []
    for name, table in loaded.settings.plugin.items():
        impls = registry.by_name(name)
        if not impls:
            installed = registry.installed_names()
            problems.append(
                ConfigError(
                    f"[plugin.{name}] ({loaded.source_of('plugin.' + name)}) configures no "
                    f"installed implementation; installed names: {', '.join(installed) or 'none'}."
                    " Check the spelling or install the plugin."
                )
            )
        for impl in impls:
            if (impl.point, name) not in attempted:
                try:
                    validate_plugin_options(
                        loaded, impl.point, name, impl.options, impl.origin, table
                    )
                except ConfigError as exc:
                    problems.append(exc)
    return problems


def typed_plugin_tables(loaded: LoadedSettings, registry: Registry) -> dict[str, dict[str, Any]]:
    """Each ``[plugin.<name>]`` table's values as its plugin's options model types them.

    A table whose name matches no installed implementation, or that fails validation, is left
    out (its raw values stand; ``biasbreaker config --check`` reports why).

    Args:
        loaded: The first-pass settings with their provenance.
        registry: The registry filled by the plugin host.

    Returns:
        Plugin name → {option: validated value in JSON form} for the options the table sets.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, table in loaded.settings.plugin.items():
        for impl in registry.by_name(name):
            try:
                options = validate_plugin_options(
                    loaded, impl.point, name, impl.options, impl.origin
                )
            except ConfigError:
                continue
            values = options.model_dump(mode="json")
            out[name] = {k: values[k] for k in table if k in values}
            break
    return out


__all__ = ["resolve_selection", "selection_problems", "typed_plugin_tables"]
