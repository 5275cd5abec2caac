"""Walking JSON-like payloads: the strings in them, rebuilding them, a stable digest.

A payload is a ``str`` or a nested ``dict``, ``list`` or ``tuple`` of them; any other value
passes through untouched. The strings of a payload are its string values and the text of its
``str`` dict keys: ``{"Jamal Washington": {"score": 710}}`` names a person in a key only, and
a probe that read values only called it group-blind. A key's text sits at its own path, the
dict's path followed by :class:`Key` (``("applicants", Key("Jamal Washington"))``), and the
value under it at the dict's path followed by the key itself (``("applicants", "Jamal
Washington", "score")``), so a key is never taken for a value. Keys of other types (``int``,
``tuple``) are no text: they pass through.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EMBEDDED_JSON_LENGTH",
    "Key",
    "KeyClash",
    "Path",
    "describe_path",
    "embedded_json",
    "leaves",
    "payload_digest",
    "rebuild",
]

EMBEDDED_JSON_LENGTH = 1_000_000
"""Longest string (characters) :func:`embedded_json` parses."""


@dataclass(frozen=True, slots=True)
class Key:
    """The last step of a path that leads to a dict key's own text, not to its value.

    Args:
        text: The key as written in the payload the path was taken in.
    """

    text: str

    def __str__(self) -> str:
        return f"[key {self.text!r}]"


Path = tuple[str | int | Key, ...]
"""Where a string sits in a payload: dict keys and list indices from the root, then
:class:`Key` when the string is a key's text (``()`` for a plain string)."""


class KeyClash(ValueError):
    """Two keys of one dict would be one key after a rewrite, so one value would be lost.

    Args:
        path: The dict's path.
        first: The first key, as it was.
        second: The second key, as it was.
        new: What both became.
    """

    def __init__(self, path: Path, first: str, second: str, new: str) -> None:
        self.path, self.first, self.second, self.new = path, first, second, new
        where = ".".join(str(p) for p in path) or "the top level"
        super().__init__(
            f"keys {first!r} and {second!r} of the dict at {where} would both become {new!r}, "
            "so the rewritten payload would lose one of their values"
        )


def describe_path(path: Path) -> str:
    """``path`` for a message: ``applicants.0.note``, ``the key 'Ms. Jones' of applicants``."""
    if path and isinstance(path[-1], Key):
        where = ".".join(str(p) for p in path[:-1])
        return f"the key {path[-1].text!r} " + (f"of {where}" if where else "at the top level")
    return ".".join(str(p) for p in path) or "the input"


def leaves(payload: Any, path: Path = (), *, keys: bool = True) -> Iterator[tuple[Path, str]]:
    """Every string of ``payload`` with its path, in payload order (a key before its value).

    Args:
        payload: The payload.
        path: The path of ``payload`` itself.
        keys: Also yield each ``str`` dict key's text, at ``(*dict_path, Key(key))``; false
            for string values only.
    """
    if isinstance(payload, str):
        yield path, payload
    elif isinstance(payload, dict):
        for key, value in payload.items():
            if keys and isinstance(key, str):
                yield (*path, Key(key)), key
            yield from leaves(value, (*path, key), keys=keys)
    elif isinstance(payload, (list, tuple)):
        for i, value in enumerate(payload):
            yield from leaves(value, (*path, i), keys=keys)


def rebuild(payload: Any, fn: Callable[[Path, str], str], path: Path = ()) -> Any:
    """A copy of ``payload`` with every string ``s`` at path ``p`` replaced by ``fn(p, s)``.

    ``str`` dict keys are strings too: ``fn`` is called on each key's text at ``(*dict_path,
    Key(key))``, before the value under it, and the copy has the key ``fn`` returns. Paths are
    those of ``payload`` (a value under a rewritten key is passed the key it had).

    Raises:
        KeyClash: Two keys of one dict would become one.
    """
    if isinstance(payload, str):
        return fn(path, payload)
    if isinstance(payload, dict):
        out: dict[Any, Any] = {}
        was: dict[Any, Any] = {}
        for key, value in payload.items():
            new = fn((*path, Key(key)), key) if isinstance(key, str) else key
            if new in out:
                raise KeyClash(path, was[new], key, new)
            was[new] = key
            out[new] = rebuild(value, fn, (*path, key))
        return out
    if isinstance(payload, list):
        return [rebuild(value, fn, (*path, i)) for i, value in enumerate(payload)]
    if isinstance(payload, tuple):
        return tuple(rebuild(value, fn, (*path, i)) for i, value in enumerate(payload))
    return payload


def embedded_json(text: str) -> dict[str, Any] | list[Any] | None:
    """The JSON object or array a string holds, or ``None`` when it holds none.

    A tool's result (a LangChain ``ToolMessage``'s content), a form posted as a string or a
    model's JSON answer carries fields inside a string: ``'{"applicant": {"age": 63}}'``. The
    text probe reads such a string as text and swaps the words it finds in it; the fields in
    it (a structured attribute, a name in a name field) are read from this parse. A string
    counts when, without surrounding white space, it starts with ``{`` and ends with ``}``
    (or ``[`` … ``]``), is at most :data:`EMBEDDED_JSON_LENGTH` characters and parses as
    JSON (``json.loads``; ``NaN`` and ``Infinity`` are not JSON here).
    """
    body = text.strip()
    if len(body) < 2 or len(body) > EMBEDDED_JSON_LENGTH:
        return None
    if (body[0], body[-1]) not in (("{", "}"), ("[", "]")):
        return None
    try:
        value = json.loads(body, parse_constant=_no_constant)
    except ValueError:
        return None
    return value if isinstance(value, (dict, list)) else None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


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
