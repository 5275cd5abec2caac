"""SIGINT and SIGTERM: ``demo`` and ``run`` stop within two seconds and leave whole files.

While a command runs, :class:`StopOnSignal` holds both signals:

* when the asyncio task it runs (:meth:`StopOnSignal.run`) is awaiting, the task is cancelled:
  LangGraph cancels the running nodes, an LLM client's in-flight HTTP requests are cancelled
  with them, and the ``finally`` blocks close the files (a trace or ``results.jsonl`` line is
  written and flushed in one synchronous step, so cancellation never cuts one);
* in synchronous code it raises :class:`Interrupted` at once, except inside
  :meth:`StopOnSignal.shielded` (a file being written), where it is raised on leaving it;
* a watchdog thread then gives the run :data:`GRACE_S` to unwind; if the main thread is stuck
  (a node or client blocking the event loop with a synchronous call), the watchdog calls the
  command's ``on_force`` (marker and report, then one line) and ends the process.

Worker processes (the demo's ``[demo] workers``) ignore SIGINT (a terminal sends it to the
whole process group; the parent decides) and stop on SIGTERM the same way; the parent sends
SIGTERM to each, waits, then kills what is left (:func:`stop_workers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Executor
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

SIGNALS = (signal.SIGINT, signal.SIGTERM)
GRACE_S = 1.0
"""Seconds the run has after a signal to unwind by itself before the watchdog ends it."""
WORKER_GRACE_S = 0.6
"""Seconds worker processes have after SIGTERM before they are killed."""


class Interrupted(BaseException):
    """The run was stopped by a signal (a ``BaseException``, so no ``except Exception`` eats it).

    Args:
        signum: The signal's number.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        """``SIGINT`` or ``SIGTERM``."""
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 + the signal's number (130 for SIGINT)."""
        return 128 + self.signum


def flush_std() -> None:
    """Flush standard output and error (before :func:`os._exit`, which does not)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


class StopOnSignal:
    """Stop the running work on SIGINT or SIGTERM (see the module docstring).

    Args:
        signals: The signals to handle (workers pass only SIGTERM).
        on_force: Called from the watchdog thread when the run has not unwound within
            :data:`GRACE_S`; it must finish the outputs and print the line; the process then
            ends with ``128 + signum``. ``None``: the process just ends.
        grace_s: Seconds before the watchdog acts.
        idle_exit: A signal that arrives while no task runs and nothing is shielded ends the
            process at once instead of raising (a worker process waiting for its next task).
    """

    def __init__(
        self,
        signals: tuple[signal.Signals, ...] = SIGNALS,
        *,
        on_force: Callable[[Interrupted], None] | None = None,
        grace_s: float = GRACE_S,
        idle_exit: bool = False,
    ) -> None:
        self.signals = signals
        self.idle_exit = idle_exit
        self.on_force = on_force
        self.grace_s = grace_s
        self.signum: int | None = None
        self.received_at: float | None = None
        self.done = threading.Event()
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._shield = 0
        self._saved: dict[int, Any] = {}
        self._outer: StopOnSignal | None = None

    def __enter__(self) -> StopOnSignal:
        global _ACTIVE
        for sig in self.signals:
            self._saved[sig] = signal.signal(sig, self._handle)
        self._outer, _ACTIVE = _ACTIVE, self
        return self

    def __exit__(self, *exc_info: object) -> None:
        global _ACTIVE
        self.done.set()
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        self._saved.clear()
        _ACTIVE = self._outer

    @property
    def interrupted(self) -> Interrupted | None:
        """The interruption, once a signal has arrived."""
        return None if self.signum is None else Interrupted(self.signum)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            return  # already stopping; a second signal changes nothing
        self.signum = signum
        self.received_at = time.monotonic()
        threading.Thread(target=self._watchdog, name="biasbreaker-stop", daemon=True).start()
        task, loop = self._task, self._loop
        if task is not None and loop is not None and not task.done():
            loop.call_soon_threadsafe(task.cancel)
        elif self._shield == 0:
            if self.idle_exit:
                flush_std()
                os._exit(128 + signum)
            raise Interrupted(signum)

    def _watchdog(self) -> None:
        if self.done.wait(self.grace_s):
            return
        assert self.signum is not None
        interrupted = Interrupted(self.signum)
        try:
            if self.on_force is not None:
                self.on_force(interrupted)
        finally:
            flush_std()
            os._exit(interrupted.exit_code)

    def check(self) -> None:
        """Raise :class:`Interrupted` if a signal has arrived."""
        if self.signum is not None:
            raise Interrupted(self.signum)

    @contextlib.contextmanager
    def shielded(self) -> Iterator[None]:
        """A block a signal does not cut (writing a file); it is raised on leaving the block."""
        self._shield += 1
        try:
            yield
        finally:
            self._shield -= 1
        if self._shield == 0:
            self.check()

    def run(self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
        """``loop.run_until_complete(coro)``, cancelled by a signal.

        Raises:
            Interrupted: A signal arrived before or while it ran.
        """
        if self.signum is not None:
            coro.close()
            self.check()
        task = loop.create_task(coro)
        self._task, self._loop = task, loop
        try:
            return loop.run_until_complete(task)
        except asyncio.CancelledError:
            self.check()
            raise
        finally:
            self._task = self._loop = None
            if self.signum is not None and not task.done():
                task.cancel()
            self.check()


_ACTIVE: StopOnSignal | None = None
"""The innermost :class:`StopOnSignal` in effect (signal handlers are per process)."""


def run_in(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """``loop.run_until_complete(coro)``, cancelled by a signal when one is being held."""
    if _ACTIVE is None:
        return loop.run_until_complete(coro)
    return _ACTIVE.run(loop, coro)


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
    """Hold SIGINT back (delivered when the block ends) while worker processes are started.

    A process started meanwhile inherits the mask, so a Ctrl-C cannot interrupt its start-up
    with a traceback before :func:`worker_init` ignores SIGINT.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def run_async(stop: StopOnSignal, coro: Coroutine[Any, Any, T]) -> T:
    """:func:`asyncio.run` that a signal stops without waiting for worker threads.

    On a normal end the loop is closed as ``asyncio.run`` closes it. After a signal, threads
    still running a synchronous node are not waited for (``asyncio.run`` would block until they
    return): the loop is closed and :func:`exit_if_threads` ends the process once the command
    has finished its outputs.
    """
    loop = asyncio.new_event_loop()
    try:
        result = stop.run(loop, coro)
    except BaseException:
        with contextlib.suppress(Exception):
            _cancel_all(loop)
        loop.close()
        raise
    try:
        _cancel_all(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()
    return result


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


def exit_if_threads(code: int) -> None:
    """End the process now with ``code`` if threads other than this one are still running.

    Python waits for every non-daemon thread at exit (a worker thread blocked in a synchronous
    LLM call may take minutes); after an interruption biasbreaker does not wait for them.
    """
    others = [
        t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon
    ]
    if others:
        flush_std()
        os._exit(code)


def stop_workers(executor: Executor | None) -> None:
    """Stop a process pool's workers: SIGTERM, :data:`WORKER_GRACE_S` to exit, then SIGKILL.

    Pending tasks are cancelled; the pool is shut down without waiting.
    """
    if executor is None:
        return
    processes = list(getattr(executor, "_processes", None) or {})  # pid -> Process (3.10-3.13)
    for pid in processes:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + WORKER_GRACE_S
    alive = set(processes)
    while alive and time.monotonic() < deadline:
        for pid in list(alive):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                alive.discard(pid)
        time.sleep(0.02)
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    executor.shutdown(wait=False, cancel_futures=True)


_WORKER_STOP: StopOnSignal | None = None


def worker_init() -> None:
    """Initializer of a worker process: SIGINT ignored, SIGTERM stops it (see above).

    Its standard streams are redacted like the command line's.
    """
    global _WORKER_STOP
    from biasbreaker.redaction import RedactingStream, register_environment

    register_environment()
    sys.stdout = RedactingStream(sys.stdout)
    sys.stderr = RedactingStream(sys.stderr)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER_STOP = StopOnSignal(
        (signal.SIGTERM,), grace_s=WORKER_GRACE_S, idle_exit=True
    ).__enter__()


def worker_stop() -> StopOnSignal | None:
    """The worker's :class:`StopOnSignal` (``None`` outside a worker process)."""
    return _WORKER_STOP


def end_worker(interrupted: Interrupted) -> None:
    """End a worker process whose task a signal cancelled (its files are closed by then)."""
    flush_std()
    os._exit(interrupted.exit_code)


__all__ = [
    "GRACE_S",
    "SIGNALS",
    "Interrupted",
    "StopOnSignal",
    "end_worker",
    "exit_if_threads",
    "flush_std",
    "run_async",
    "run_in",
    "sigint_blocked",
    "stop_workers",
    "worker_init",
    "worker_stop",
]
