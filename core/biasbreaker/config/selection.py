"""What the configuration selects, and the validation of one ``[plugin.<name>]`` table.

The registry-facing half of the second validation pass (is each selected name installed?) is
:mod:`biasbreaker.resolution`; this module needs only the settings and the extension points.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from biasbreaker.config.loading import _covered, _missing
from biasbreaker.config.provenance import LoadedSettings
from biasbreaker.config.settings import Settings
from biasbreaker.config.sources import _source_for
from biasbreaker.config.values import (
    ARGUMENT,
    _child_annotation,
    _decode_env_value,
    _file_type_problems,
    shown,
)
from biasbreaker.errors import ConfigError
from biasbreaker.points import EXTENSION_POINTS, PointName


def selection(settings: Settings, point: PointName) -> list[str]:
    """The implementation names the configuration selects for ``point``, in order.

    An unset single selection (``[llm] client`` by default) selects nothing: ``[]``.
    """
    spec = next(p for p in EXTENSION_POINTS if p.name == point)
    section, key = spec.selected_by.split(".")
    value = getattr(getattr(settings, section), key)
    if spec.multiple:
        return list(value)
    return [] if value is None else [value]


def validate_plugin_options(
    loaded: LoadedSettings,
    point: str,
    name: str,
    model: type[BaseModel],
    origin: str,
    table: Mapping[str, Any] | None = None,
) -> BaseModel:
    """Validate ``[plugin.<name>]`` with the plugin's options model.

    Args:
        loaded: The first-pass settings with their provenance.
        point: The implementation's extension point (named in errors).
        name: The implementation's name: the table is ``[plugin.<name>]``.
        model: Its options model.
        origin: Its distribution and version (named in errors).
        table: The values to validate; ``None``: the table in ``loaded``.

    Returns:
        The options instance.

    Raises:
        ConfigError: The table fails the model: every key path, value, source and reason.

    Values from the environment are strings: those of list or table options are decoded first
    (JSON, or comma-separated for a list of scalars), and pydantic coerces the rest. Values from
    a TOML file must already have the option's type (pydantic strict mode on that value).
    """
    data = dict(loaded.settings.plugin.get(name, {}) if table is None else table)
    prefix = ("plugin", name)
    for key, value in list(data.items()):
        source = _source_for(".".join((*prefix, str(key))), loaded.provenance)
        annotation = _child_annotation(model, str(key))
        if isinstance(value, str) and source.startswith("env ") and annotation is not None:
            data[key] = _decode_env_value(
                annotation, value, ".".join((*prefix, str(key))), source.removeprefix("env ")
            )
    typed = _file_type_problems(data, model, prefix, loaded.provenance, (*loaded.files, ARGUMENT))
    problems = [line for _, line in typed]
    seen = {path for path, _ in typed}
    try:
        options = model.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            key = ".".join([*prefix, *(str(p) for p in err["loc"])])
            if _covered(key, seen):
                continue
            source = _source_for(key, loaded.provenance)
            if err["type"] == "extra_forbidden":
                allowed = ", ".join(sorted(model.model_fields)) or "none"
                problems.append(
                    f"unknown key {key} ({source}); "  # never its value: a misspelt secret
                    f"allowed: {allowed}"
                )
            elif err["type"] == "missing":
                problems.append(
                    _missing(key, _source_for(key.rpartition(".")[0], loaded.provenance))
                )
            else:
                problems.append(f"{key} = {shown(key, err.get('input'))} ({source}): {err['msg']}")
        raise ConfigError(
            f"{point} {name!r} ({origin}) options invalid:\n  " + "\n  ".join(problems)
        ) from exc
    if problems:
        raise ConfigError(
            f"{point} {name!r} ({origin}) options invalid:\n  " + "\n  ".join(problems)
        )
    return options
