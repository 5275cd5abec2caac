"""Parts of a guarded graph's runtime that every copy of the graph shares.

``copy.deepcopy`` of a guarded builder or compiled graph keeps functions as they are, so the
copy's nodes are the same wrapped functions, bound to the same guard. Its runtime objects
(the guard, its decider and prober, the breaker and review nodes, the machine cache, held
streams) hold locks, a thread pool and trace sinks: copying them raised ``cannot pickle
'_thread.lock' object``, and a copy would have been a second runtime no node uses. Each of them
is therefore its own deep copy.
"""

from __future__ import annotations

from typing import Any, TypeVar

_Self = TypeVar("_Self", bound="Shared")


class Shared:
    """A part of one guarded graph's runtime: a deep copy of the graph shares it."""

    __slots__ = ()

    def __deepcopy__(self: _Self, memo: dict[int, Any]) -> _Self:
        """This object itself (module docstring)."""
        memo[id(self)] = self
        return self


__all__ = ["Shared"]
