"""Typing raw values: environment strings decoded, file values checked strictly.

Values from the environment are strings: lists and tables are decoded (JSON, or
comma-separated for a list of scalars) and pydantic coerces the rest. Values from a TOML file
are not converted: they must already have their option's type (pydantic's strict mode).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime, time
from functools import lru_cache
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    TypeAdapter,
    ValidationError,
)

from biasbreaker.config.sources import (
    ENV_DELIMITER,
    _canonical_path,
    _env_var,
    _source_for,
)
from biasbreaker.errors import ConfigError
from biasbreaker.redaction import redact_value


def _members(annotation: Any) -> tuple[Any, ...]:
    """The members of a union (``X | None`` → ``(X,)``), or ``(annotation,)``."""
    if get_origin(annotation) in (Union, UnionType):
        return tuple(a for a in get_args(annotation) if a is not type(None))
    return (annotation,)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model ``annotation`` is (or is optionally), else ``None``."""
    for member in _members(annotation):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return member
    return None


def _child_annotation(annotation: Any, key: str) -> Any:
    """The annotation of ``key`` inside a value of type ``annotation``; ``None`` if unknown."""
    model = _model_in(annotation)
    if model is not None:
        info = model.model_fields.get(key)
        return info.annotation if info is not None else None
    for member in _members(annotation):
        if get_origin(member) in (dict, Mapping) and len(get_args(member)) == 2:
            return get_args(member)[1]
    return None


_SEQUENCES = (list, tuple, set, frozenset, Sequence)
_SCALARS = (str, int, float, Path)


def _decode_env_value(annotation: Any, raw: str, path: str, var: str | None = None) -> Any:
    """Decode one environment string for a field of type ``annotation``.

    Scalars stay strings (pydantic coerces them). A list of scalars is a JSON list or
    comma-separated values (``lexical,sentiment``); a table or a list of tables is JSON.
    ``var`` is the variable that set it, named in errors (default: the documented spelling).

    Raises:
        ConfigError: The value is not the JSON the field needs; the message names the
            variable, the value and the expected form.
    """
    kinds = _members(annotation)
    sequence = next((k for k in kinds if get_origin(k) in _SEQUENCES), None)
    table = next(
        (k for k in kinds if get_origin(k) in (dict, Mapping) or _model_in(k) is not None),
        None,
    )
    var = var or _env_var(path)
    if sequence is not None:
        args = get_args(sequence)
        scalar_items = bool(args) and all(
            a is Ellipsis or (isinstance(a, type) and issubclass(a, _SCALARS)) for a in args
        )
        text = raw.strip()
        if scalar_items and not text.startswith("["):
            return [part.strip() for part in text.split(",") if part.strip()]
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            form = "a JSON list or comma-separated values" if scalar_items else "a JSON list"
            raise ConfigError(
                f"{var}={shown(path, raw)} ({path}): not valid JSON ({exc.msg} at column "
                f"{exc.colno}); "
                f"{path} is a list: write {form}, e.g. "
                + (f"{var}=lexical,sentiment or " if scalar_items else "")
                + f'{var}=\'["lexical", "sentiment"]\''
            ) from exc
        if not isinstance(value, list):
            raise ConfigError(
                f"{var}={shown(path, raw)} ({path}): expected a JSON list, got {shown(path, value)}"
            )
        return value
    if table is not None:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{var}={shown(path, raw)} ({path}): not valid JSON ({exc.msg} at column "
                f"{exc.colno}); "
                f'{path} is a table: write a JSON object such as \'{{"key": "value"}}\', '
                f"or set its keys one by one ({var}{ENV_DELIMITER}KEY=...)"
            ) from exc
        if not isinstance(value, dict):
            raise ConfigError(
                f"{var}={shown(path, raw)} ({path}): expected a JSON object, got "
                f"{shown(path, value)}"
            )
        return value
    return raw


def _decode_env(
    raw: Mapping[str, Any], annotation: Any, prefix: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Decode the raw environment layer against the settings tree (lists, tables).

    ``annotation`` is the type of ``raw``: the :class:`~biasbreaker.config.Settings` class at
    the top, the annotation of the key ``prefix`` names below it (``None`` if unknown).
    """
    out: dict[str, Any] = {}
    for key, value in raw.items():
        child = _child_annotation(annotation, key)
        path = (*prefix, key)
        if isinstance(value, Mapping):
            out[key] = _decode_env(value, child, path)
        elif child is None:
            out[key] = value
        else:
            out[key] = _decode_env_value(child, value, ".".join(path))
    return out


def shown(path: str, value: Any) -> str:
    """``repr(value)`` for a message about the key ``path``, its secrets hidden.

    The one rule of :mod:`biasbreaker.redaction` (:func:`~biasbreaker.redaction.redact_value`).
    """
    return repr(redact_value(value, path))


def _toml(value: Any) -> str:
    """A value as TOML-like text for messages: ``true``, ``"0.4"``, ``[1, 2]``."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:
        return repr(value)


_KIND_NAMES: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "a table"),
)


def _kind(value: Any) -> str:
    for kind, label in _KIND_NAMES:
        if isinstance(value, kind):
            return label
    return f"a {type(value).__name__}"


def _expected(annotation: Any) -> str:
    """Plain words for the type a configuration field expects."""
    members = _members(annotation)
    if len(members) > 1:
        return " or ".join(_expected(m) for m in members)
    ann = members[0]
    origin = get_origin(ann)
    if origin is Literal:
        return "one of " + ", ".join(_toml(a) for a in get_args(ann))
    if origin in _SEQUENCES:
        args = get_args(ann)
        return (
            f"a list of {_expected(args[0]).removeprefix('a ').removeprefix('an ')}s"
            if args
            else "a list"
        )
    if origin in (dict, Mapping):
        return "a table"
    if ann is bool:
        return "true or false"
    if ann is int:
        return "an integer"
    if ann is float:
        return "a number"
    if ann is str:
        return "a string"
    if ann is Path:
        return "a string (a path)"
    if ann is date:
        return "a date (YYYY-MM-DD)"
    return getattr(ann, "__name__", str(ann))


@lru_cache(maxsize=256)
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


def _json_default(value: Any) -> Any:
    if isinstance(value, (date, datetime, time)):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not a TOML value")


ARGUMENT = "argument"
"""The provenance label of explicit arguments (``overrides``)."""


def _strict_type_error(annotation: Any, value: Any, given: str = "in a file") -> str | None:
    """Why ``value`` (from a TOML file) does not have the type ``annotation``, or ``None``.

    The check is pydantic's strict mode on the value as JSON would carry it: a number is not a
    string, a boolean is not a number, an integer field takes no float; nothing is converted.
    Bounds and cross-field rules are checked afterwards by the ordinary validation.
    """
    try:
        text = json.dumps(value, default=_json_default)
        _adapter(annotation).validate_json(text, strict=True)
    except ValidationError as exc:
        details = []
        for err in exc.errors():
            if not err["type"].endswith("_type"):
                continue  # a right-typed value out of bounds: the ordinary validation says so
            at = ".".join(str(p) for p in err["loc"])
            details.append(f"at {at}: {err['msg']}" if at else err["msg"])
        if not details:
            return None
        got = "" if len(details) > 1 or "at " in details[0] else f", got {_kind(value)}"
        where = f" ({'; '.join(details)})" if got == "" else ""
        return (
            f"expected {_expected(annotation)}{got}{where}; values {given} are not converted "
            "(write numbers without quotes, true/false only for yes/no options)"
        )
    except (TypeError, ValueError, RecursionError):
        return None
    return None


def _typed_values(
    data: Mapping[str, Any], annotation: Any, prefix: tuple[str, ...]
) -> Iterator[tuple[str, Any, Any]]:
    """(dotted path, value, annotation) for every field value in ``data``, by model field.

    Descends into nested models key by key (a file may give only some keys of a table);
    keys that name no field are skipped (the ordinary validation reports them).
    """
    for key, value in data.items():
        child = _child_annotation(annotation, str(key))
        path = (*prefix, str(key))
        if child is None:
            continue
        if _model_in(child) is not None and isinstance(value, Mapping):
            yield from _typed_values(value, child, path)
        else:
            yield ".".join(path), value, child


def _file_type_problems(
    data: Mapping[str, Any],
    annotation: Any,
    prefix: tuple[str, ...],
    provenance: Mapping[str, str],
    files: Iterable[str],
    label: str | None = None,
) -> list[tuple[str, str]]:
    """Type errors of values that came from a file or as arguments: (dotted path, message line).

    Arguments (``load_settings(overrides=...)``, ``guard(builder, {...})``) are Python values
    and are held to the same rule as a file's: ``{"k": "4"}`` or ``{"k": True}`` is refused, not
    converted (label :data:`ARGUMENT` among ``files``).

    Args:
        data: The values (a file's layer, or a merged plugin table).
        annotation: The type of ``data`` (a model class).
        prefix: The dotted path of ``data``.
        provenance: Where every leaf came from.
        files: The labels of the sources to check (files, and :data:`ARGUMENT`).
        label: Only check values whose source is this label (``None``: any file).
    """
    file_labels = set(files)
    problems = []
    for path, value, ann in _typed_values(data, annotation, prefix):
        key = _canonical_path(path)
        source = _source_for(key, provenance)
        if source not in file_labels or (label is not None and source != label):
            continue
        given = "given as arguments" if source == ARGUMENT else "in a file"
        error = _strict_type_error(ann, value, given)
        if error is not None:
            problems.append((key, f"{key} = {_toml(redact_value(value, key))} ({source}): {error}"))
    return problems
