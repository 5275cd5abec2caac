"""Time-outs that hold whatever the client does: skeptics, MADERA stages, synchronous clients.

The clients here block the way real ones do by mistake: a synchronous sleep (an HTTP call with
`requests`) inside `async def`, which blocks the event loop it runs on, or a synchronous
method. The time-out's own precision is the property under test (it must hold within 10 % of
its setting, the issue's bound), so these tests time the calls.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from typing import Any

import pytest

from biasbreaker.deadline import DeadlineExceeded, call_with_deadline
from biasbreaker.errors import InterventionError
from biasbreaker.intervention.madera import Madera
from biasbreaker.intervention.panel import SkepticPanel
from biasbreaker.intervention.types import Diagnosis, Evidence, ReviewRequest, SkepticVerdict
from biasbreaker.llm import LLMRequest, LLMResponse
from biasbreaker_plugins.aggregators import UniformAggregator

TIMEOUT_S = 1.0
BLOCK_S = 4.0
WITHIN = 1.10  # the bound: within 10 % of the setting


def verdict(kind: str) -> SkepticVerdict:
    return SkepticVerdict(
        kind=kind, decision="revise", confidence=0.7, evidence=("e",), revision="fixed"
    )


class Quick:
    def __init__(self, kind: str) -> None:
        self.kind = kind

    async def review(self, request: Any) -> SkepticVerdict:
        await asyncio.sleep(0)
        return verdict(self.kind)


class LoopBlocking:
    """A skeptic whose client makes a synchronous call inside `async def`."""

    kind = "blocking"

    def __init__(self) -> None:
        self.returned = threading.Event()

    async def review(self, request: Any) -> SkepticVerdict:
        time.sleep(BLOCK_S)  # blocks whatever event loop runs it
        self.returned.set()
        return verdict(self.kind)


class Synchronous:
    """A skeptic whose review is a plain method."""

    kind = "sync"

    def review(self, request: Any) -> SkepticVerdict:
        time.sleep(BLOCK_S)
        return verdict(self.kind)


def _panel(*skeptics: Any) -> SkepticPanel:
    return SkepticPanel(
        list(skeptics), UniformAggregator(), aggregator_name="uniform", timeout_s=TIMEOUT_S
    )


@pytest.mark.parametrize("slow", [LoopBlocking, Synchronous])
async def test_a_blocking_skeptic_times_out_on_time_and_its_late_verdict_is_discarded(
    slow: type,
) -> None:
    skeptic = slow()
    panel = _panel(Quick("a"), Quick("b"), skeptic)
    ticks = 0

    async def ticker() -> None:  # the caller's event loop must keep running meanwhile
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    tick = asyncio.create_task(ticker())
    start = time.monotonic()
    run = await panel.run(ReviewRequest(payload="x"))
    elapsed = time.monotonic() - start
    tick.cancel()
    print(f"{slow.__name__}: panel time-out {TIMEOUT_S} s held in {elapsed:.3f} s")
    assert TIMEOUT_S <= elapsed <= TIMEOUT_S * WITHIN
    assert ticks >= 10  # the loop was never blocked
    assert run.ok and [v.kind for v in run.verdicts] == ["a", "b"]
    (failure,) = run.failures
    assert failure.kind == skeptic.kind and failure.failure == "timeout"
    if slow is LoopBlocking:
        assert "blocked its event loop" in failure.reason
        await asyncio.to_thread(skeptic.returned.wait, BLOCK_S * 2)  # its verdict arrives late
    assert [v.kind for v in run.verdicts] == ["a", "b"]  # and is never counted


async def test_without_a_worker_thread_the_same_skeptic_defeats_wait_for() -> None:
    # the control: what the panel did before; this is why the thread is needed
    start = time.monotonic()
    result = await asyncio.wait_for(_ShortBlock().review(None), 0.2)
    assert time.monotonic() - start >= 0.5 and result == "late but counted"


class _ShortBlock:
    async def review(self, request: Any) -> str:
        time.sleep(0.6)
        return "late but counted"


class BlockingRetriever:
    def retrieve(self, query: str, *, top_k: int) -> list[Evidence]:
        time.sleep(BLOCK_S)
        return [Evidence(id="e", text="t", score=1.0)]


class Diag:
    async def diagnose(self, payload: str, context: Any) -> Diagnosis:
        return Diagnosis(span=payload[:3], attribute="gender", query="q")


class Edit:
    async def rewrite(self, payload: str, diagnosis: Diagnosis, evidence: Any) -> str:
        time.sleep(BLOCK_S)  # an editor whose client blocks the loop
        return "rewrite"


class Retr:
    def retrieve(self, query: str, *, top_k: int) -> list[Evidence]:
        return [Evidence(id="e", text="t", score=1.0)]


async def _rescore(text: str, diagnosis: Diagnosis, evidence: Any) -> float:
    return 0.0


@pytest.mark.parametrize(
    ("retriever", "editor", "stage"),
    [(BlockingRetriever(), Edit(), "retriever"), (Retr(), Edit(), "editor")],
)
async def test_a_blocking_madera_stage_fails_the_attempt_on_time(
    retriever: Any, editor: Any, stage: str
) -> None:
    madera = Madera(Diag(), retriever, editor, stage_timeout_s=TIMEOUT_S)
    start = time.monotonic()
    with pytest.raises(InterventionError, match=rf"MADERA {stage} .*no result within 1 s"):
        await madera.run("payload", ReviewRequest(payload="x"), rescore=_rescore, tau_exit=0.1)
    elapsed = time.monotonic() - start
    print(f"MADERA {stage}: stage time-out {TIMEOUT_S} s held in {elapsed:.3f} s")
    assert TIMEOUT_S <= elapsed <= TIMEOUT_S * WITHIN


async def test_the_call_sees_the_callers_context_and_its_errors() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("caller's")

    async def read() -> str:
        return var.get()

    assert await call_with_deadline(read, 1.0, what="reader") == "caller's"
    assert await call_with_deadline(lambda: var.get() + " too", 1.0, what="sync") == "caller's too"

    async def boom() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        await call_with_deadline(boom, 1.0, what="boom")


async def test_a_cancelled_caller_cancels_the_call() -> None:
    cancelled = threading.Event()

    async def waits() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    task = asyncio.create_task(call_with_deadline(waits, 30, what="waiter"))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(cancelled.wait, 5)


async def test_an_awaiting_call_that_is_late_is_not_said_to_block() -> None:
    with pytest.raises(DeadlineExceeded) as info:
        await call_with_deadline(lambda: asyncio.sleep(5), 0.2, what="sleeper")
    assert info.value.blocked_s is None and not info.value.synchronous
    assert "blocked" not in str(info.value)


class SyncClient:
    model = "sync-model"

    def __init__(self) -> None:
        self.threads: set[str] = set()

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.threads.add(threading.current_thread().name)
        time.sleep(0.3)
        return LLMResponse(text="ok", model=self.model)

    async def aclose(self) -> None:
        return None


def test_the_kernel_runs_a_synchronous_client_in_worker_threads(
    register_plugin: Any, make_kernel: Any
) -> None:
    from biasbreaker.hookspecs import hookimpl

    client = SyncClient()

    class Plugin:
        @hookimpl
        def llm_client(self, register: Any) -> None:
            register("sync-client", lambda options, context: client)

    register_plugin(Plugin(), name="undo-sync-client")
    kernel = make_kernel({"llm": {"client": "sync-client"}})
    llm = kernel.llm()
    assert llm is kernel.llm() and llm.model == "sync-model"

    async def two_at_once() -> float:
        start = time.monotonic()
        replies = await asyncio.gather(*(llm.complete(LLMRequest.chat(q)) for q in "ab"))
        assert [r.text for r in replies] == ["ok", "ok"]
        return time.monotonic() - start

    assert asyncio.run(two_at_once()) < 0.55  # concurrent: the loop was never blocked
    assert threading.main_thread().name not in client.threads
