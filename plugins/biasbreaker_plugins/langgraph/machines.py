"""Control machines restored from the graph state and cached between steps.

The machine's state lives in the graph state (``bb_breaker``), so every guarded step restores
a :class:`~biasbreaker.machine.ControlMachine` from it, steps it and writes the new snapshot
back. Restoring validates the whole snapshot (thresholds, frozen payloads, window), which costs
more than the step itself, so the machine that produced a snapshot is kept, keyed by the
snapshot object's identity: the next step, reading the very same object from its channel,
takes that machine back instead of restoring one. A checkpoint load or any other copy is a
different object and is restored as usual; a handle is taken out of the cache while in use,
so two tasks never share a machine.

The machine's hook is a :class:`Dispatch`: with no target it *captures* the intervention
context and returns a no-op result — a *preview* that tells a guarded node, without running
any repair, that its step would start an intervention (the step is then discarded and run
again, with the real hook, by the mitigation node).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, cast

from biasbreaker.machine import AnyHook, ControlMachine, MachineConfig
from biasbreaker.trace import StepRecord
from biasbreaker.types import InterventionContext, InterventionResult
from biasbreaker_plugins.langgraph.shared import Shared

T = TypeVar("T")


class _ThreadLoop:
    """A thread's own event loop, closed when the thread ends (its thread-local is dropped)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def __del__(self) -> None:
        if not self.loop.is_closed() and not self.loop.is_running():
            self.loop.close()


_LOOPS = threading.local()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code.

    In a thread without a running event loop (a LangGraph sync node, or an async graph's
    executor thread) it runs the coroutine on that thread's own event loop, created on first
    use and reused (``asyncio.run`` would build and tear down a loop per call); inside a
    running loop it runs the coroutine with ``asyncio.run`` in a helper thread and waits.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        holder: _ThreadLoop | None = getattr(_LOOPS, "holder", None)
        if holder is None or holder.loop.is_closed():
            holder = _ThreadLoop()
            _LOOPS.holder = holder
        return holder.loop.run_until_complete(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


class Dispatch:
    """The hook a cached machine is built with; set :attr:`target` before each step.

    ``target=None`` is a preview: the context is captured in :attr:`captured` and a no-op
    result returned (the caller discards the machine).
    """

    def __init__(self) -> None:
        self.target: AnyHook | None = None
        self.captured: InterventionContext | None = None

    def __call__(
        self, context: InterventionContext
    ) -> InterventionResult | Awaitable[InterventionResult]:
        """Capture ``context`` (a preview) or hand it to the target hook."""
        if self.target is None:
            self.captured = context
            return InterventionResult.noop()
        return self.target(context)

    def take(self) -> InterventionContext | None:
        """The context captured by the last preview step (and forget it)."""
        captured, self.captured = self.captured, None
        return captured


@dataclass
class Handle:
    """A machine checked out for one task.

    Args:
        machine: The machine.
        dispatch: Its hook.
        records: Trace records of the steps taken since checkout (written on commit).
        base: The ``bb_breaker`` value it was restored from (or produced), kept alive so its
            identity stays valid as a cache key.
    """

    machine: ControlMachine
    dispatch: Dispatch
    records: list[StepRecord] = field(default_factory=list)
    base: object = None


class _Based(Protocol):
    base: object


_H = TypeVar("_H", bound=_Based)


class SnapshotCache(Generic[_H]):
    """Handles kept under the identity of the state snapshot their machine wrote.

    The next step of a thread reads the very object its last step wrote and takes its machine
    back instead of restoring one; a checkpoint load, another process or any copy is another
    object, so it misses and the caller restores. A handle is taken out while in use (two
    steps never share a machine) and kept again only by :meth:`keep`. Used by the graph
    adapter's :class:`Machines` and the LangChain middleware's machine cache.

    Args:
        size: Handles kept, the least recently kept evicted.
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        # a dict keeps insertion order, so its first key is the least recently kept
        # (an OrderedDict's own linked list costs more on every step's pop and insert)
        self._cache: dict[int, _H] = {}
        self._lock = threading.Lock()

    def take(self, value: object) -> _H | None:
        """The handle kept for exactly ``value`` (this object, not an equal one), or ``None``."""
        with self._lock:
            handle = self._cache.pop(id(value), None)
        return handle if handle is not None and handle.base is value else None

    def keep(self, handle: _H, value: object) -> None:
        """Keep ``handle``, whose machine is in the state ``value`` describes, under ``value``."""
        handle.base = value  # kept alive by the handle: its id stays a valid key
        with self._lock:
            cache = self._cache
            cache[id(value)] = handle
            if len(cache) > self.size:  # one in, at most one out
                del cache[next(iter(cache))]


class Machines(Shared):
    """A small cache of machines keyed by the identity of the snapshot they produced.

    Args:
        config: The configuration of a fresh machine (a state without ``bb_breaker``).
        size: Handles kept, least recently released evicted.
        record: Whether the machines' steps are recorded (a run trace is kept): with
            ``False`` a machine has no recorder and :attr:`Handle.records` stays empty.
    """

    def __init__(self, config: MachineConfig, size: int = 64, *, record: bool = True) -> None:
        self.config = config
        self.record = record
        self._kept: SnapshotCache[Handle] = SnapshotCache(size)

    def acquire(self, value: Mapping[str, Any] | None) -> Handle:
        """Check out the machine for ``value`` (a ``bb_breaker`` state value, or empty).

        Raises:
            InputError: The snapshot is malformed or of another version.
        """
        if value:
            handle = self._kept.take(value)
            if handle is not None:
                handle.records.clear()
                handle.dispatch.target = None
                handle.dispatch.captured = None
                return handle
        dispatch = Dispatch()
        records: list[StepRecord] = []
        recorder = records.append if self.record else None
        if value:
            machine = ControlMachine.restore(
                value["machine"], hook=cast(AnyHook, dispatch), recorder=recorder
            )
        else:
            machine = ControlMachine(self.config, hook=cast(AnyHook, dispatch), recorder=recorder)
        return Handle(machine, dispatch, records, value)

    def release(self, handle: Handle, value: Mapping[str, Any]) -> None:
        """Return a handle whose machine is now in the state ``value`` describes."""
        self._kept.keep(handle, value)


__all__ = ["Dispatch", "Handle", "Machines", "SnapshotCache", "run_sync"]
