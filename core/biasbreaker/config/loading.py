"""The first validation pass: every source read, merged and validated into :class:`Settings`."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ValidationError,
)
from pydantic_settings import (
    SettingsError,
)

from biasbreaker.config.provenance import LoadedSettings
from biasbreaker.config.settings import _LOAD_CONTEXT, Settings, _LoadContext
from biasbreaker.config.sources import (
    DEFAULT_SOURCE,
    _canonical_path,
    _env_var,
    _file_layers,
    _kebab_plugin_tables,
    _leaves,
    _scan_env,
    _source_for,
)
from biasbreaker.config.values import (
    ARGUMENT,
    _decode_env,
    _file_type_problems,
    shown,
)
from biasbreaker.errors import ConfigError
from biasbreaker.redaction import credential_kind, secret_name


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    *,
    cwd: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> LoadedSettings:
    """Load and validate the configuration from all six sources (first pass).

    Args:
        config_file: The ``--config FILE`` path, or ``None``.
        cwd: Directory searched for ``biasbreaker.toml`` and ``pyproject.toml``; default ``.``.
        overrides: Explicit arguments, nested like the TOML (``{"breaker": {"tau_enter": 0.4}}``);
            they win over every other source.

    Returns:
        The settings with the source of every value.

    Raises:
        ConfigError: On a TOML syntax error (with line and column), an unknown key, an unknown
            ``BIASBREAKER_*`` environment variable, or a value out of range; the message names
            the source, key path, value and what is allowed. Before anything else, on a secret
            in any source (:func:`_refuse_secrets`): the message names the key and the
            source, never the value.
    """
    files = _file_layers(
        Path(config_file) if config_file is not None else None,
        Path(cwd) if cwd is not None else Path.cwd(),
    )
    args = _kebab_plugin_tables(overrides or {}, ARGUMENT)
    env, variables = _scan_env()
    layers: list[tuple[str, dict[str, Any]]] = [(ARGUMENT, args), ("env", env), *files]
    provenance: dict[str, str] = {}
    for label, data in reversed(layers):
        for key, value in _leaves(data):
            if value == {} and _is_table(key):
                continue  # an empty `[probe]` sets nothing: its keys keep their own sources
            source = f"env {variables[key]}" if label == "env" else label
            provenance[_canonical_path(key)] = source
    _refuse_secrets(layers, variables)
    _check_env_names(env, variables)
    ctx = _LoadContext(env=_decode_env(env, Settings), files=tuple(files))
    labels = tuple(label for label, _ in files)
    typed: list[tuple[str, str]] = []
    for label, data in files:
        typed += _file_type_problems(data, Settings, (), provenance, labels, label)
    typed += _file_type_problems(args, Settings, (), provenance, (ARGUMENT,), ARGUMENT)
    token = _LOAD_CONTEXT.set(ctx)
    try:
        settings = Settings(**args)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, provenance, typed)) from exc
    except SettingsError as exc:
        raise ConfigError(f"cannot read the configuration: {exc}") from exc
    finally:
        _LOAD_CONTEXT.reset(token)
    if typed:
        raise ConfigError(_describe(None, provenance, typed))
    return LoadedSettings(settings, provenance, labels)


SECRETS_FIX = (
    "secrets are read only from the environment variable an option names (an LLM client's "
    'api_key_env, e.g. [plugin.openai-compatible] api_key_env = "OPENAI_API_KEY"), never from '
    "the configuration: remove each of these and export the key in that variable (a trace "
    "store's database password is the database driver's to read, never in [trace] url: for "
    "PostgreSQL, PGPASSWORD or ~/.pgpass)"
)
"""What to do about a secret in the configuration (the end of the refusal's message)."""


def _is_table(key: str) -> bool:
    """Whether dotted ``key`` names a table of the settings, not an option.

    A table is a section (``probe``, ``calibration.control``), ``plugin`` or a
    ``[plugin.<name>]`` table; an option's value may itself be an empty mapping.
    """
    parts = key.split(".")
    if parts[0] == "plugin":
        return len(parts) <= 2
    model: Any = Settings
    for part in parts:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return False
        model = field.annotation
    return isinstance(model, type) and issubclass(model, BaseModel)


def _secret_leaves(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """(dotted path, value) for every scalar in ``value``, inside tables and lists too."""
    if isinstance(value, Mapping):
        for key, child in value.items():
            yield from _secret_leaves(child, (*path, str(key)))
    elif isinstance(value, (list, tuple)):
        for index, child in enumerate(value):
            yield from _secret_leaves(child, (*path[:-1], f"{path[-1]}[{index}]") if path else ())
    else:
        yield ".".join(path), value


def _refuse_secrets(
    layers: Sequence[tuple[str, Mapping[str, Any]]], variables: Mapping[str, str]
) -> None:
    """Refuse a secret in any source: configuration files, ``BIASBREAKER_*`` variables, arguments.

    A value is a secret when a key on its path names one (``api_key``, ``bearer_token``,
    ``headers.Authorization``: :func:`biasbreaker.redaction.secret_name`) and it is a non-empty
    string, or when it looks like a credential whatever its key (a provider key prefix,
    ``Bearer …``, URL user info, a long random string: :func:`~biasbreaker.redaction.
    credential_kind`). The one place a key may be is the environment variable an option names
    (``api_key_env``), which is no ``BIASBREAKER_*`` variable and never read as a setting.

    Raises:
        ConfigError: Naming every such key and its source (the variable, for the
            environment), never the value.
    """
    problems = []
    for label, data in layers:
        for path, value in _secret_leaves(data):
            if not isinstance(value, str) or not value:
                continue
            named = next((part for part in path.split(".") if secret_name(part)), None)
            kind = credential_kind(value)
            if named is None and kind is None:
                continue
            key = _canonical_path(path.split("[")[0])
            if label == "env":
                var = variables.get(key) or next(
                    (v for k, v in variables.items() if key.startswith(k + ".")), _env_var(key)
                )
                source = f"env {var}"
            else:
                source = label
            why = (
                f"the key {named!r} names a secret"
                if named is not None
                else f"the value looks like {kind}"
            )
            problems.append(f"{path} ({source}): {why}; the value is not shown")
    if problems:
        raise ConfigError(f"{SECRETS_FIX}:\n  " + "\n  ".join(dict.fromkeys(problems)))


def _check_env_names(env: Mapping[str, Any], variables: Mapping[str, str]) -> None:
    known = set(Settings.model_fields)
    for key in env:
        if key not in known:
            var = min(
                (v for k, v in variables.items() if k == key or k.startswith(key + ".")),
                default=_env_var(key),
            )
            raise ConfigError(
                f"unknown environment variable {var}: no setting {key!r}; "
                f"settings are {', '.join(sorted(known))} (nest keys with '__', e.g. "
                "BIASBREAKER_BREAKER__TAU_ENTER)"
            )


def _allowed_keys(path: tuple[str | int, ...]) -> list[str]:
    model: type[BaseModel] | None = Settings
    for part in path[:-1]:
        if model is None or not isinstance(part, str) or part not in model.model_fields:
            return []
        annotation = model.model_fields[part].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        else:
            model = None
    return sorted(model.model_fields) if model is not None else []


def _describe(
    exc: ValidationError | None,
    provenance: Mapping[str, str],
    typed: Sequence[tuple[str, str]] = (),
) -> str:
    """One message for every problem: file type errors first, then pydantic's, once per key."""
    lines = [line for _, line in typed]
    seen = {path for path, _ in typed}
    for err in exc.errors() if exc is not None else []:
        loc = tuple(err["loc"])
        path = ".".join(str(p) for p in loc)
        if _covered(path, seen):
            continue
        source = _source_for(path, provenance)
        value = err.get("input")
        if err["type"] == "extra_forbidden":
            allowed = _allowed_keys(loc)
            hint = f"; allowed keys here: {', '.join(allowed)}" if allowed else ""
            # never the value: an unknown key may be a secret's misspelt name (api_kay)
            lines.append(f"unknown key {path} ({source}){hint}")
        elif err["type"] == "missing":
            lines.append(_missing(path, _source_for(path.rpartition(".")[0], provenance)))
        elif err["type"] == "value_error" and isinstance(value, Mapping):
            lines.append(f"[{path}] ({source}): {err['msg'].removeprefix('Value error, ')}")
        else:
            lines.append(f"{path} = {shown(path, value)} ({source}): {err['msg']}")
    return "invalid configuration:\n  " + "\n  ".join(lines)


def _covered(path: str, reported: Iterable[str]) -> bool:
    """Whether ``path`` is, or lies inside, a key already reported."""
    return any(path == r or path.startswith(r + ".") for r in reported)


def _missing(path: str, source: str) -> str:
    """The message for a required key that no source sets."""
    table, _, key = path.rpartition(".")
    where = f" (the rest of [{table}] comes from {source})" if source != DEFAULT_SOURCE else ""
    return (
        f"{path} is required and has no default{where}: set {key} = ... under [{table}] in "
        f"the configuration file, or set {_env_var(path)}"
    )
