"""Scans of a text kept once for every finder whose scan of it is the same.

A scan that is a pure function of a text and of some read-only inputs (a name book, a word
set, a pattern) gives the same hits in every finder built on those inputs. The simulated
fake LLM builds two finders over one name book (one to mask a prompt, one to find its
mentions) and reads every prompt with both, so the name hits of each prompt were found twice.
:func:`shared_scan` gives finders one bounded cache per key of inputs.

Keys name unhashable inputs by ``id``; the :class:`SharedScan` holds those inputs (its
``owner``), so no other object can take their ``id`` while the cache lives, and it lives
while a finder holds it (the registry keeps it only weakly).
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["SharedScan", "shared_scan"]

T = TypeVar("T")


class SharedScan(Generic[T]):
    """A bounded, thread-safe cache of ``scan(text)``, shared by finders of one key.

    Args:
        owner: The inputs the key names by ``id``, held while the cache lives.
        scan: Pure function of the text (its result is returned to every finder, so it must
            be immutable: a tuple of frozen hits).
        size: Texts kept (count, at least 1; the least recently used dropped first).
    """

    __slots__ = ("__weakref__", "kept", "owner")

    def __init__(self, owner: object, scan: Callable[[str], T], size: int) -> None:
        self.owner = owner
        self.kept: Callable[[str], T] = functools.lru_cache(maxsize=size)(scan)


_SHARED: weakref.WeakValueDictionary[Hashable, SharedScan[object]] = weakref.WeakValueDictionary()
_LOCK = threading.Lock()


def shared_scan(key: Hashable, owner: object, scan: Callable[[str], T], size: int) -> SharedScan[T]:
    """The cache of ``key``'s scan: the one a live finder made already, else a new one.

    Args:
        key: Everything the scan's result depends on besides the text (objects without a
            value hash by ``id``, with the objects themselves in ``owner``).
        owner: Held by the cache (see the module docstring).
        scan: The scan, used when the cache is new.
        size: Texts kept by a new cache (count, at least 1).

    Returns:
        The shared cache; the caller keeps a reference to it for as long as it uses it.
    """
    with _LOCK:
        found = _SHARED.get(key)
        if found is None:
            found = SharedScan(owner, scan, size)
            _SHARED[key] = found
    return found  # type: ignore[return-value]
