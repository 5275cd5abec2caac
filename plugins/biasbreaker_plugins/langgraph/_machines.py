"""Control machines restored from the graph state, cached between steps, and the run trace.

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
from collections import OrderedDict
from collections.abc import Awaitable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from biasbreaker.errors import TraceError
from biasbreaker.machine import AnyHook, ControlMachine, MachineConfig
from biasbreaker.trace import StepRecord, TraceWriter, read_trace
from biasbreaker.types import InterventionContext, InterventionResult

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


class Machines:
    """A small cache of machines keyed by the identity of the snapshot they produced.

    Args:
        config: The configuration of a fresh machine (a state without ``bb_breaker``).
        size: Handles kept, least recently released evicted.
    """

    def __init__(self, config: MachineConfig, size: int = 64) -> None:
        self.config = config
        self.size = size
        self._cache: OrderedDict[int, Handle] = OrderedDict()
        self._lock = threading.Lock()

    def acquire(self, value: Mapping[str, Any] | None) -> Handle:
        """Check out the machine for ``value`` (a ``bb_breaker`` state value, or empty).

        Raises:
            InputError: The snapshot is malformed or of another version.
        """
        if value:
            with self._lock:
                handle = self._cache.pop(id(value), None)
            if handle is not None and handle.base is value:
                handle.records.clear()
                handle.dispatch.target = None
                handle.dispatch.captured = None
                return handle
        dispatch = Dispatch()
        records: list[StepRecord] = []
        if value:
            machine = ControlMachine.restore(
                value["machine"], hook=cast(AnyHook, dispatch), recorder=records.append
            )
        else:
            machine = ControlMachine(
                self.config, hook=cast(AnyHook, dispatch), recorder=records.append
            )
        return Handle(machine, dispatch, records, value)

    def release(self, handle: Handle, value: Mapping[str, Any]) -> None:
        """Return a handle whose machine is now in the state ``value`` describes."""
        handle.base = value
        with self._lock:
            self._cache[id(value)] = handle
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)


class Traces:
    """Run traces, one JSON Lines file per thread, continued across processes.

    A resumed run (the checkpoint holds the thread's breaker state) continues its file; a file
    ahead of the checkpoint (steps re-executed after a crash) is cut back to it. A *new* run
    (no breaker state for the thread) never overwrites a file that already holds records: it is
    refused (:meth:`check_new_run`), naming the file, the thread and the record count.

    Args:
        template: The path, ``{thread_id}`` replaced by the thread id; empty for no trace.
        fsync: fsync after every record.
    """

    def __init__(self, template: str, *, fsync: bool = False) -> None:
        self.template = template
        self.fsync = fsync
        self._open: dict[Path, tuple[TraceWriter, int]] = {}
        self._lock = threading.Lock()

    def path(self, thread_id: str) -> Path | None:
        """The trace file of ``thread_id``, or ``None`` when no trace is configured."""
        if not self.template:
            return None
        return Path(self.template.replace("{thread_id}", thread_id))

    def check_new_run(self, thread_id: str) -> None:
        """Refuse to start a new run on ``thread_id`` whose trace file already holds records.

        Call it before a thread's first breaker step, when the checkpointer has no breaker
        state for the thread: a new run, not a resume, which would overwrite the file.

        Raises:
            TraceError: The file holds records (or cannot be read); the message names the
                file, the thread id, the record count and the fixes.
        """
        path = self.path(thread_id)
        if path is None or not path.exists() or path.stat().st_size == 0:
            return
        try:
            count = len(read_trace(path, warn=False).records)
        except TraceError as exc:
            raise TraceError(
                f"{path}: a new run on thread {thread_id!r} would overwrite this file, which "
                f"is not a readable run trace ({exc}); {_FIXES}"
            ) from exc
        if count:
            raise _taken(path, thread_id, count)

    def write(self, thread_id: str, machine: ControlMachine, records: list[StepRecord]) -> None:
        """Append ``records`` (consecutive steps) to the thread's trace.

        A trace whose last records are ahead of ``records[0].step`` (steps re-executed after a
        crash, whose checkpoint was never saved) is cut back to that step first, so the file
        always matches the checkpointed machine.

        Raises:
            TraceError: The file's header differs (other thresholds or seed), the file is
                behind the machine (the trace was not written for earlier steps), or the
                records start a new run (step 0) on a file that holds another run's records.
        """
        path = self.path(thread_id)
        if path is None or not records:
            return
        first = records[0].step
        with self._lock:
            writer, expected = self._open.get(path, (None, -1))
            if writer is None or expected != first:
                if writer is not None:
                    writer.close()
                header = machine.config.trace_header({"adapter": "langgraph", "thread": thread_id})
                writer = self._reopen(path, header, first, thread_id)
            for record in records:
                writer.write(record)
            self._open[path] = (writer, records[-1].step + 1)

    def _reopen(self, path: Path, header: Any, step: int, thread_id: str) -> TraceWriter:
        if path.exists() and path.stat().st_size > 0:
            existing = read_trace(path, warn=False)
            if step == 0 and existing.records:
                raise _taken(path, thread_id, len(existing.records))
            if existing.header != header:
                raise TraceError(
                    f"{path}: its header differs from this run's (other thresholds, window or "
                    "seed); use another trace_path or thread id"
                )
            if len(existing.records) > step:
                with TraceWriter(path, header, fsync=self.fsync) as rewrite:
                    for record in existing.records[:step]:
                        rewrite.write(record)
            elif len(existing.records) < step:
                raise TraceError(
                    f"{path} holds {len(existing.records)} steps but the run is at breaker "
                    f"step {step}: the trace was not written for the earlier steps"
                )
            return TraceWriter(path, header, fsync=self.fsync, append=True)
        if step != 0:
            raise TraceError(
                f"{path} does not exist but the run is at breaker step {step}: configure "
                "trace_path before the run's first guarded step"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        return TraceWriter(path, header, fsync=self.fsync)

    def close(self) -> None:
        """Close every open trace file."""
        with self._lock:
            for writer, _ in self._open.values():
                writer.close()
            self._open.clear()


_FIXES = (
    "run it on a new thread id, set another [plugin.langgraph] trace_path (it may contain "
    "{thread_id}), or delete the file if that run's trace is no longer needed"
)


def _taken(path: Path, thread_id: str, count: int) -> TraceError:
    return TraceError(
        f"{path} already holds {count} record(s) of a run on thread {thread_id!r}, but the "
        "checkpointer has no breaker state for that thread, so this is a new run, not a resume: "
        f"it would overwrite them. To keep them, {_FIXES}. (If that thread's process was killed "
        "before its first breaker step was checkpointed, the file holds only that lost step: "
        "delete it.)"
    )


def commit_records(traces: Traces, thread_id: str, handle: Handle) -> None:
    """Write the handle's pending records to the trace and clear them.

    Raises:
        TraceError: As :meth:`Traces.write` (the records stay pending).
    """
    traces.write(thread_id, handle.machine, list(handle.records))
    handle.records.clear()


__all__ = ["Dispatch", "Handle", "Machines", "Traces", "commit_records", "run_sync"]
