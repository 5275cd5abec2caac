"""One rate limiter per endpoint and process: requests in flight and requests per second.

Every :class:`~biasbreaker_openai_compatible.client.OpenAICompatibleClient` of a process that
talks to one ``base_url`` takes its turn from the same :class:`SharedLimiter`, whatever event
loop it runs on (the guarded nodes, the probe's re-runs, skeptics and MADERA may each run on
their own loop or worker thread). Each client passes its own bounds (``max_concurrency``,
``requests_per_second``), so the limits are configured per client: a request waits until fewer
than *its* client's ``max_concurrency`` requests to that endpoint are in flight, counting every
client's, and until its turn in the endpoint's request-per-second schedule, spaced by its own
client's interval.

asyncio's primitives belong to one loop, so the limiter keeps its count under a
:class:`threading.Lock` and wakes a waiter on another loop with
``loop.call_soon_threadsafe``. A woken waiter checks the count again (a release wakes every
waiter; at a few dozen waiters that costs nothing next to an HTTP request).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Awaitable, Callable

Sleep = Callable[[float], Awaitable[None]]
"""``await sleep(seconds)``."""


class SharedLimiter:
    """Requests in flight and requests per second to one endpoint, across loops and threads.

    Args:
        clock: Monotonic seconds for the request-per-second schedule (injectable).
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._in_flight = 0
        self._next_start = -math.inf
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def in_flight(self) -> int:
        """Requests holding a slot now."""
        with self._lock:
            return self._in_flight

    async def acquire(
        self, max_in_flight: int, requests_per_second: float, sleep: Sleep = asyncio.sleep
    ) -> None:
        """Wait for a slot: fewer than ``max_in_flight`` in flight, then the next start time.

        Args:
            max_in_flight: The caller's bound on requests in flight to this endpoint, >= 1.
            requests_per_second: The caller's rate, > 0, or 0 for no rate limit.
            sleep: Awaited with the wait for the request's start time.

        Every successful ``acquire`` must be paired with one :meth:`release`.
        """
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self._in_flight < max_in_flight:
                    self._in_flight += 1
                    wait = 0.0
                    if requests_per_second > 0:
                        now = self._clock()
                        start = max(now, self._next_start)
                        self._next_start = start + 1.0 / requests_per_second
                        wait = start - now
                    break
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, waiter))
            try:
                await waiter
            finally:
                with self._lock:
                    self._waiters = [(lp, w) for lp, w in self._waiters if w is not waiter]
        if wait > 0:
            try:
                await sleep(wait)
            except BaseException:
                self.release()
                raise

    def release(self) -> None:
        """Give a slot back and wake the waiters (each checks the count again)."""
        with self._lock:
            self._in_flight -= 1
            waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:
            # a loop closed since its waiter queued took the waiter with it
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_wake, waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


_REGISTRY: dict[str, SharedLimiter] = {}
_REGISTRY_LOCK = threading.Lock()


def shared_limiter(key: str) -> SharedLimiter:
    """The process's limiter for ``key`` (the client's ``base_url``), made on first use."""
    with _REGISTRY_LOCK:
        limiter = _REGISTRY.get(key)
        if limiter is None:
            limiter = _REGISTRY[key] = SharedLimiter()
        return limiter
