"""JSON documents that satisfy a JSON Schema, for the simulated fake LLM's structured replies.

Covers the subset that pydantic's ``model_json_schema()`` and hand-written tool schemas use:
``type`` (one or a list), ``properties`` (every property is filled, required or not),
``items`` and ``prefixItems``, ``minItems``/``maxItems``, ``uniqueItems``, ``enum``, ``const``,
``minimum``/``maximum`` and their exclusive forms, ``minLength``/``maxLength``, ``anyOf``/``oneOf``
(the first alternative that is not ``null``), ``allOf`` (merged), local ``$ref``
(``#/$defs/...``, ``#/definitions/...``) and ``default``-free optional fields. ``pattern`` and
``format`` are not honoured (strings are plain words); a schema that needs them will be violated,
which the caller's validation then reports like any malformed reply.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from typing import Any

from biasbreaker.errors import LLMError

__all__ = ["instance"]

TEXT_FIELDS = frozenset(
    {
        "text",
        "rewrite",
        "rewritten",
        "revised",
        "revision",
        "corrected",
        "correction",
        "edited",
        "output",
        "content",
        "answer",
    }
)
"""Property names that receive the prompt's subject text (see :func:`instance`)."""

_WORDS = (
    "evidence",
    "context",
    "claim",
    "source",
    "assumption",
    "reasoning",
    "consistent",
    "unsupported",
    "relevant",
    "qualification",
    "record",
    "statement",
)

StringHook = Callable[[str, random.Random], str | None]


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    seen = 0
    while "$ref" in schema:
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise LLMError(f"fake LLM: response_schema $ref {ref!r} is not a local '#/...' ref")
        node: Any = root
        for part in ref[2:].split("/"):
            if not isinstance(node, Mapping) or part not in node:
                raise LLMError(f"fake LLM: response_schema $ref {ref!r} does not resolve")
            node = node[part]
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**node, **rest}
        seen += 1
        if seen > 50:
            raise LLMError(f"fake LLM: response_schema $ref {ref!r} is circular")
    return schema


def _phrase(rng: random.Random, lo: int, hi: int | None) -> str:
    words = [rng.choice(_WORDS) for _ in range(3 + rng.randrange(4))]
    text = "simulated " + " ".join(words)
    while len(text) < lo:
        text += " " + rng.choice(_WORDS)
    if hi is not None:
        text = text[:hi]
    return text


def _number(schema: Mapping[str, Any], rng: random.Random, integer: bool) -> float | int:
    lo = schema.get("minimum", schema.get("exclusiveMinimum"))
    hi = schema.get("maximum", schema.get("exclusiveMaximum"))
    lo_f = float(lo) if lo is not None else (0.0 if hi is None or hi >= 0 else float(hi) - 10.0)
    hi_f = float(hi) if hi is not None else (max(lo_f, 0.0) + (10.0 if integer else 1.0))
    if integer:
        ilo = math.ceil(lo_f) + (1 if "exclusiveMinimum" in schema and lo_f.is_integer() else 0)
        ihi = math.floor(hi_f) - (1 if "exclusiveMaximum" in schema and hi_f.is_integer() else 0)
        if ilo > ihi:
            raise LLMError(f"fake LLM: integer schema with empty range {dict(schema)!r}")
        return rng.randint(ilo, ihi)
    x = lo_f + (hi_f - lo_f) * rng.random()
    if "exclusiveMinimum" in schema and x <= lo_f:
        x = math.nextafter(lo_f, math.inf)
    if "exclusiveMaximum" in schema and x >= hi_f:
        x = math.nextafter(hi_f, -math.inf)
    return round(x, 4) if lo_f < round(x, 4) < hi_f else x


def instance(
    schema: Mapping[str, Any],
    rng: random.Random,
    *,
    strings: StringHook | None = None,
    root: Mapping[str, Any] | None = None,
    name: str = "",
) -> Any:
    """A JSON value that satisfies ``schema``, drawn with ``rng``.

    Args:
        schema: A JSON Schema (a dict).
        rng: The randomness source; same schema and rng state give the same value.
        strings: Called as ``strings(property_name, rng)`` for each string; a non-``None``
            return is used as the value (the fake uses it to put the prompt's subject text into
            fields named like :data:`TEXT_FIELDS`).
        root: The document ``$ref`` resolves against (default: ``schema``).
        name: The property name this value is for ("" at the top).

    Returns:
        A value made of dicts, lists, str, int, float, bool and None.

    Raises:
        LLMError: On a schema the generator cannot satisfy (unresolvable ``$ref``, empty range).
    """
    root = schema if root is None else root
    schema = _resolve(schema, root)

    def sub(s: Mapping[str, Any], n: str = name) -> Any:
        return instance(s, rng, strings=strings, root=root, name=n)

    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(list(schema["enum"]))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [_resolve(o, root) for o in schema[key]]
            usable = [o for o in options if o.get("type") != "null"] or options
            return sub(usable[0])
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            part = _resolve(part, root)
            for k, v in part.items():
                if k in ("properties",) and k in merged:
                    merged[k] = {**merged[k], **v}
                elif k == "required" and k in merged:
                    merged[k] = [*merged[k], *v]
                else:
                    merged[k] = v
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        return sub({**merged, **rest})
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"] or kind
        kind = kinds[0]
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        props: Mapping[str, Any] = schema.get("properties", {})
        return {k: sub(v, k) for k, v in props.items()}
    if kind == "array":
        prefix = [sub(s) for s in schema.get("prefixItems", [])]
        lo = int(schema.get("minItems", 1))
        hi = schema.get("maxItems")
        n = max(lo, len(prefix), 1 if hi is None or hi >= 1 else 0)
        if hi is not None:
            n = min(n, int(hi))
        items = schema.get("items", {})
        out = prefix[:n]
        tries = 0
        while len(out) < n:
            value = sub(items) if isinstance(items, Mapping) else None
            tries += 1
            if schema.get("uniqueItems") and value in out:
                if tries > 100:
                    raise LLMError(f"fake LLM: cannot draw {n} unique items for {name!r}")
                continue
            out.append(value)
        return out
    if kind == "string":
        lo = int(schema.get("minLength", 1))
        hi = schema.get("maxLength")
        if strings is not None:
            text = strings(name, rng)
            if text is not None and len(text) >= lo and (hi is None or len(text) <= hi):
                return text
        return _phrase(rng, lo, None if hi is None else int(hi))
    if kind == "integer":
        return _number(schema, rng, integer=True)
    if kind == "number":
        return _number(schema, rng, integer=False)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    raise LLMError(f"fake LLM: response_schema type {kind!r} is not a JSON Schema type")
