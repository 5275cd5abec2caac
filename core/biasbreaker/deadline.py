"""Time-outs that hold whatever the called code does: each call runs in a worker thread.

``asyncio.wait_for`` cannot stop a coroutine that blocks its event loop (a synchronous HTTP call
inside ``async def``): the loop that would fire the time-out is the one that is blocked, so a
2 s time-out takes as long as the call does, and its late result is then counted. Here the call
runs in a thread of its own, on an event loop of its own (:func:`call_with_deadline`); the
caller's loop only waits, so the time-out fires on time. On time-out the call's task is
cancelled (it stops at its next ``await``; a call stuck in synchronous code is abandoned, its
thread is a daemon) and its result, whenever it comes, is discarded: nothing reads it.

A call whose coroutine held its own loop for longer than :data:`BLOCKED_S` at a time is named
in the error (:attr:`DeadlineExceeded.blocked_s`) and, when it finished in time, in a warning:
it blocks any event loop it runs on. A synchronous callable simply runs in the thread.

The call sees the caller's context variables (a copy), as an ``asyncio`` task would.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any

log = logging.getLogger("biasbreaker.deadline")

BLOCKED_S = 0.5
"""A coroutine step holding its event loop this long (seconds) counts as blocking it."""
_BEAT_S = 0.05


class DeadlineExceeded(TimeoutError):
    """A call did not finish within its time-out; its result, if it ever comes, is discarded.

    Attributes:
        what: What was called, e.g. ``"skeptic 'devils-advocate'"``.
        timeout_s: The time-out, in seconds.
        blocked_s: How long the call had been holding its event loop when the time-out
            fired (``None``: it was not: it was awaiting, or it is synchronous).
        synchronous: Whether the callable is synchronous (it blocks its thread by design).
    """

    def __init__(
        self, what: str, timeout_s: float, blocked_s: float | None, synchronous: bool
    ) -> None:
        self.what = what
        self.timeout_s = timeout_s
        self.blocked_s = blocked_s
        self.synchronous = synchronous
        if blocked_s is not None:
            detail = (
                f"; it has blocked its event loop for {blocked_s:.1f} s (a synchronous call "
                "inside `async def`?): it ran in a worker thread, so the time-out held, but it "
                "blocks any event loop it shares; make its client asynchronous or its method "
                "synchronous"
            )
        elif synchronous:
            detail = " (a synchronous call, run in a worker thread)"
        else:
            detail = ""
        super().__init__(f"{what}: no result within {timeout_s:g} s{detail}")


class _Beat:
    """The worker loop's heartbeat: when it last ran, and the longest gap between runs."""

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.longest = 0.0

    def __call__(self, loop: asyncio.AbstractEventLoop) -> None:
        now = time.monotonic()
        self.longest = max(self.longest, now - self.last)
        self.last = now
        loop.call_later(_BEAT_S, self, loop)

    def stalled(self) -> float:
        return time.monotonic() - self.last


async def call_with_deadline(call: Callable[[], object], timeout_s: float, *, what: str) -> Any:
    """Run ``call()`` in a worker thread and wait at most ``timeout_s`` seconds for its result.

    Args:
        call: A zero-argument callable returning an awaitable (``lambda: skeptic.review(r)``)
            or a plain value (a synchronous method); it is called in the worker thread.
        timeout_s: Seconds to wait, > 0, measured by the caller's event loop.
        what: What is called, named in errors and warnings.

    Returns:
        The call's result.

    Raises:
        DeadlineExceeded: No result within ``timeout_s`` (also a :class:`TimeoutError`).
        Exception: Whatever the call raised.
        asyncio.CancelledError: The caller was cancelled; the call's task is cancelled too.
    """
    result: Future[Any] = Future()
    beat = _Beat()
    started: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = []
    synchronous = [False]
    context = contextvars.copy_context()

    def work() -> None:
        result.set_running_or_notify_cancel()
        loop = asyncio.new_event_loop()
        try:
            asyncio.set_event_loop(loop)
            value = call()
            if inspect.isawaitable(value):
                task = loop.create_task(_awaited(value))
                started.append((loop, task))
                beat(loop)
                value = loop.run_until_complete(task)
            else:
                synchronous[0] = True
            result.set_result(value)
        except BaseException as exc:  # handed to the caller, never raised in this thread
            result.set_exception(exc)
        finally:
            _close(loop)

    thread = threading.Thread(target=context.run, args=(work,), name=f"bb {what}", daemon=True)
    thread.start()
    try:
        value = await asyncio.wait_for(asyncio.wrap_future(result), timeout_s)
    except (asyncio.TimeoutError, TimeoutError):
        blocked = beat.stalled() if started and not synchronous[0] else None
        _cancel(started)
        raise DeadlineExceeded(
            what,
            timeout_s,
            blocked if blocked is not None and blocked >= BLOCKED_S else None,
            synchronous[0] or not started,  # no task yet: call() itself has not returned
        ) from None
    except asyncio.CancelledError:
        _cancel(started)
        raise
    if beat.longest >= BLOCKED_S and not synchronous[0]:
        log.warning(
            "%s blocked its event loop for %.1f s at a time (a synchronous call inside "
            "`async def`?); it ran in a worker thread, so no time-out was affected",
            what,
            beat.longest,
        )
    return value


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _cancel(started: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]]) -> None:
    for loop, task in started:
        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed in between
                loop.call_soon_threadsafe(task.cancel)


def _close(loop: asyncio.AbstractEventLoop) -> None:
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        asyncio.set_event_loop(None)
        loop.close()


__all__ = ["BLOCKED_S", "DeadlineExceeded", "call_with_deadline"]
