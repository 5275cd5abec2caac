"""Walking JSON-like payloads: the strings in them, rebuilding them, a stable digest.

A payload is a ``str`` or a nested ``dict`` (values only; keys are never rewritten), ``list``
or ``tuple`` of them; any other value passes through untouched.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Path", "leaves", "payload_digest", "rebuild"]

Path = tuple[str | int, ...]
"""Where a string sits in a payload: dict keys and list indices from the root."""


def leaves(payload: Any, path: Path = ()) -> Iterator[tuple[Path, str]]:
    """Every string of ``payload`` with its path, in payload order."""
    if isinstance(payload, str):
        yield path, payload
    elif isinstance(payload, dict):
        for key, value in payload.items():
            yield from leaves(value, (*path, key))
    elif isinstance(payload, (list, tuple)):
        for i, value in enumerate(payload):
            yield from leaves(value, (*path, i))


def rebuild(payload: Any, fn: Callable[[Path, str], str], path: Path = ()) -> Any:
    """A copy of ``payload`` with every string ``s`` at path ``p`` replaced by ``fn(p, s)``."""
    if isinstance(payload, str):
        return fn(path, payload)
    if isinstance(payload, dict):
        return {key: rebuild(value, fn, (*path, key)) for key, value in payload.items()}
    if isinstance(payload, list):
        return [rebuild(value, fn, (*path, i)) for i, value in enumerate(payload)]
    if isinstance(payload, tuple):
        return tuple(rebuild(value, fn, (*path, i)) for i, value in enumerate(payload))
    return payload


def _canon(payload: Any) -> Any:
    if isinstance(payload, (str, int, float, bool)) or payload is None:
        return payload
    if isinstance(payload, dict):
        return {str(k): _canon(v) for k, v in payload.items()}
    if isinstance(payload, (list, tuple)):
        return [_canon(v) for v in payload]
    return f"<{type(payload).__name__}>"


def payload_digest(payload: Any) -> str:
    """A stable 128-bit hex digest of a JSON-like payload (other objects count by type name)."""
    blob = json.dumps(_canon(payload), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]
