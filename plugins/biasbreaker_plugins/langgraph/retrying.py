"""A guarded node's ``RetryPolicy``, applied to the probe's re-runs as LangGraph applies it.

LangGraph retries a node's own call (``add_node(..., retry_policy=...)``, or
``set_node_defaults(retry_policy=...)``); the probe calls the node's function again ``k + r``
times outside LangGraph's task runner, so a transient failure on one of them (a timed-out model
call) would fail the probe and hold a fair step. Each re-run that raises is retried here with
the node's own policies and LangGraph's semantics (``langgraph/pregel/_retry.py``): the first
policy whose ``retry_on`` matches the exception applies (``default_retry_on`` when none is
given), ``max_attempts`` counts the first call, and the wait before retry ``n`` is
``min(max_interval, initial_interval * backoff_factor ** (n - 1))`` seconds. One difference:
no jitter. How long a re-run waited never enters the trace, but a random wait could make a
re-run miss ``[probe] call_timeout_s`` on one run and not on another; the waits are the same
on every run.

A node without a policy is not retried: its re-run's exception fails the probe, which holds the
step (fail closed). A re-run whose results will never be read (a speculation discarded because
the node's own call raised: :data:`DISCARDED`) is not retried either, so a failing backend is
not called ``max_attempts`` times more per re-run. LangGraph's interrupts and commands
(``GraphBubbleUp``) are never retried, as LangGraph never retries them.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

from langgraph.errors import GraphBubbleUp
from langgraph.pregel._retry import _should_retry_on
from langgraph.types import RetryPolicy

DISCARDED: ContextVar[threading.Event | None] = ContextVar("biasbreaker_discarded", default=None)
"""Set, in the re-runs' context, to an event set when their results will never be read."""


def _discarded() -> bool:
    event = DISCARDED.get()
    return event is not None and event.is_set()


def retry_policies(value: RetryPolicy | Sequence[RetryPolicy] | None) -> tuple[RetryPolicy, ...]:
    """A node spec's ``retry_policy`` (one policy, several, or ``None``) as a tuple."""
    if value is None:
        return ()
    if isinstance(value, RetryPolicy):
        return (value,)
    return tuple(value)


def retry_delay(policies: Sequence[RetryPolicy], exc: BaseException, failures: int) -> float | None:
    """Seconds to wait before calling the node again after its ``failures``-th failure, or ``None``.

    Args:
        policies: The node's retry policies, in order (:func:`retry_policies`).
        exc: What the latest call raised.
        failures: How many calls failed so far, this one included (>= 1).

    Returns:
        ``None`` when the call is not to be retried: no policy matches ``exc`` (or there is
        none), ``exc`` is LangGraph's ``GraphBubbleUp`` or not an ``Exception``, or the matching
        policy's ``max_attempts`` is spent; else the backoff, without jitter (module docstring).
    """
    if not isinstance(exc, Exception) or isinstance(exc, GraphBubbleUp):
        return None
    policy = next((p for p in policies if _should_retry_on(p, exc)), None)
    if policy is None or failures >= policy.max_attempts:
        return None
    wait: Any = policy.initial_interval * (policy.backoff_factor ** (failures - 1))
    return float(min(policy.max_interval, wait))


def retried(
    fn: Callable[..., Any], policies: Sequence[RetryPolicy], is_async: bool
) -> Callable[..., Any]:
    """``fn`` (sync or async, as ``is_async`` says), retried per ``policies``; ``fn`` if none.

    Each call that raises is retried after :func:`retry_delay` seconds (``time.sleep`` for a
    sync function, which the probe runs in a worker thread; ``asyncio.sleep`` for an async
    one), with the same arguments, as LangGraph retries a task with its same input; the last
    exception is raised when no retry is left.
    """
    if not policies:
        return fn
    if is_async:

        @functools.wraps(fn)
        async def retried_async(*args: Any, **kwargs: Any) -> Any:
            failures = 0
            while True:
                try:
                    return await fn(*args, **kwargs)
                except Exception as exc:
                    failures += 1
                    delay = retry_delay(policies, exc, failures)
                    if delay is None or _discarded():
                        raise
                await asyncio.sleep(delay)

        return retried_async

    @functools.wraps(fn)
    def retried_sync(*args: Any, **kwargs: Any) -> Any:
        failures = 0
        while True:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                failures += 1
                delay = retry_delay(policies, exc, failures)
                if delay is None or _discarded():
                    raise
            time.sleep(delay)
            if _discarded():  # discarded while it waited: no call more
                raise RuntimeError("re-run discarded: its results are never read")

    return retried_sync


__all__ = ["DISCARDED", "retried", "retry_delay", "retry_policies"]
