"""Run a LangGraph graph over many inputs, one thread per input, guarded or not.

The guarded graph comes from the LangGraph adapter's public API
(:func:`biasbreaker_plugins.langgraph.guard`); its run trace goes to one JSON Lines file per
thread (``[plugin.langgraph] trace_path`` with ``{thread_id}``). Inputs run one after another in
one event loop, in input order, so the same inputs and seed give the same traces, byte for byte.
A thread whose output was escalated stops at the adapter's review node (``interrupt()``): it is
reported as *waiting for human review*, with the review request, and left paused (a human
resumes it with ``Command(resume=...)`` on a durable checkpointer).

Each finished thread is appended to ``results.jsonl`` (one canonical-JSON line, flushed,
secrets redacted), so a run cut short leaves every finished thread's record readable. When a
thread finishes or pauses for review its trace is sealed (:func:`biasbreaker.trace.seal_trace`,
signed when ``BIASBREAKER_SIGNING_KEY_FILE`` names a key) and its head digest recorded with it,
so ``results.jsonl`` is the manifest ``biasbreaker verify --manifest`` checks the traces
against. With ``failures="record"`` (``biasbreaker run``) an exception raised while a thread
runs is the thread's outcome (status ``failed``, :func:`failure_of`) and the next thread runs.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from biasbreaker.errors import ConfigError
from biasbreaker.redaction import redact_text, redact_value
from biasbreaker.trace import seal_trace
from biasbreaker.trace.signing import signer_from_environment
from biasbreaker.trace.writer import FROM_ENVIRONMENT, SignerChoice
from biasbreaker.types import canonical_json
from biasbreaker.usage import UsageJSON, UsageTally, tallied
from biasbreaker.verify.manifest import seal_manifest, seal_path
from biasbreaker_plugins.demo.checkpoints import PostgresCheckpoint, postgres_saver

Status = Literal["done", "review", "failed", "interrupted"]
"""``done``: the graph reached its end; ``review``: paused, an output waits for a human;
``failed``: an exception ended the thread (its ``error`` says which); ``interrupted``: a signal
stopped the run while this thread ran (its trace holds the records up to the stop)."""

_TASK_NOTE = re.compile(r"^(?:During|Before) task with name '(?P<node>[^']+)'")


@dataclass(frozen=True)
class ThreadOutcome:
    """How one input's run ended.

    Args:
        phase: The run phase (``"guarded"``, ``"unguarded"``, ``"calibration"``, ...).
        thread: The LangGraph thread id.
        status: ``"done"`` or ``"review"``.
        values: The application's part of the final state (no ``bb_`` keys).
        review: The review request the run paused on (JSON), or ``None``.
        trace: The thread's trace file, relative to the output folder, or ``None``.
        trace_head: The trace's head digest once sealed (its last seal's digest), or ``None``.
        error: For ``failed``: :func:`failure_of` the exception; else ``None``.
        exception: For ``failed``: the exception itself (for the log's traceback).
        usage: The LLM calls and tokens of this thread's run per role
            (:meth:`~biasbreaker.usage.UsageTally.to_json`), counted by the run's counting
            clients (:class:`~biasbreaker_plugins.demo.agents.CountingClient`) while it ran;
            a failed run's calls up to its failure.
    """

    phase: str
    thread: str
    status: Status
    values: Mapping[str, Any]
    review: Mapping[str, Any] | None
    trace: str | None
    trace_head: str | None = None
    error: Mapping[str, Any] | None = None
    exception: BaseException | None = None
    usage: UsageJSON | None = None


def failure_of(exc: BaseException) -> dict[str, Any]:
    """What ``results.jsonl`` and the report say about an exception that ended a thread.

    Returns:
        ``class`` (module-qualified name), ``message`` (redacted) and ``node``: the graph node
        it was raised in, from the note LangGraph adds to the exception (Python 3.11+; ``None``
        when there is none, e.g. an input the graph refused before any node ran).
    """
    kind = type(exc)
    module = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
    node = None
    for note in getattr(exc, "__notes__", ()) or ():
        match = _TASK_NOTE.match(str(note))
        if match:
            node = match.group("node")
            break
    return {
        "class": f"{module}{kind.__qualname__}",
        "message": redact_text(str(exc)),
        "node": node,
    }


def user_values(state: Mapping[str, Any]) -> dict[str, Any]:
    """The application's keys of a state (every key but ``bb_*`` and ``__interrupt__``)."""
    return {k: v for k, v in state.items() if not k.startswith(("bb_", "__"))}


class ResultsLog:
    """``results.jsonl``: one canonical-JSON line per finished thread, flushed per line.

    Closing it seals it (:func:`~biasbreaker.verify.manifest.seal_manifest`):
    ``results.jsonl.seal`` records its digest and record count, signed with the key that signs
    the traces (``BIASBREAKER_SIGNING_KEY_FILE``) when one is set, so ``verify --manifest
    --public-key`` can tell a record removed or edited after the run.

    Args:
        path: The file (created, or appended to with ``append=True``).
        append: Continue an existing file.
        signer: Who signs the seal: a :class:`~biasbreaker.trace.signing.Signer`, ``None``
            (unsigned) or by default the key ``BIASBREAKER_SIGNING_KEY_FILE`` names, loaded
            now (a bad key is an error before any thread runs).

    Raises:
        InputError: The signing key cannot be loaded.
    """

    def __init__(
        self, path: Path, *, append: bool = False, signer: SignerChoice = FROM_ENVIRONMENT
    ) -> None:
        self.path = path
        self._signer = signer_from_environment() if signer == FROM_ENVIRONMENT else signer
        path.parent.mkdir(parents=True, exist_ok=True)
        seal_path(path).unlink(missing_ok=True)  # a stale seal never vouches for this file
        self._file = path.open("a" if append else "w", encoding="utf-8", newline="\n")

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record and flush it; secrets are redacted (the one rule)."""
        self._file.write(canonical_json(redact_value(dict(record))) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file and write its seal (once)."""
        if self._file.closed:
            return
        self._file.close()
        seal_manifest(self.path, None if isinstance(self._signer, str) else self._signer)


def read_results(path: Path) -> list[dict[str, Any]]:
    """Read ``results.jsonl`` back (every whole line)."""
    return list(iter_results(path))


def iter_results(path: Path) -> Iterator[dict[str, Any]]:
    """The records of ``results.jsonl``, one at a time (every whole line)."""
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.endswith("\n"):
                yield json.loads(line)


@asynccontextmanager
async def compiled(
    builder: Any, checkpoint: Path | PostgresCheckpoint | None = None
) -> AsyncIterator[Any]:
    """Compile ``builder`` with a checkpointer (``interrupt()`` needs one).

    Args:
        builder: The (guarded) ``StateGraph`` builder.
        checkpoint: A SQLite file, or a PostgreSQL database (``AsyncPostgresSaver``, the
            ``postgres`` extra), to checkpoint into, so a thread paused for review can be
            resumed by another process; ``None``: in memory (lost at the end).

    Raises:
        ConfigError: The checkpoint cannot be opened or set up as a SQLite or PostgreSQL
            checkpoint database (checked before the graph gets it, so this is never a
            traceback mid-run).
    """
    if checkpoint is None:
        from langgraph.checkpoint.memory import InMemorySaver

        yield builder.compile(checkpointer=InMemorySaver())
        return
    if isinstance(checkpoint, PostgresCheckpoint):
        async with postgres_saver(checkpoint) as saver:
            yield builder.compile(checkpointer=saver)
        return
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncExitStack() as stack:
        try:
            # opened once synchronously first: aiosqlite's worker thread outlives a failed
            # connect and reports to a closed event loop (a stray traceback on stderr)
            probe = sqlite3.connect(str(checkpoint))
            try:
                probe.execute("PRAGMA schema_version")
            finally:
                probe.close()
            saver = await stack.enter_async_context(
                AsyncSqliteSaver.from_conn_string(str(checkpoint))
            )
            await saver.setup()  # creates the tables now, not at the first input's first step
        except (sqlite3.Error, OSError) as exc:
            raise ConfigError(
                f"--checkpoint {checkpoint}: cannot open it as a SQLite database: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        yield builder.compile(checkpointer=saver)


async def run_threads(
    app: Any,
    items: Iterable[tuple[str, Mapping[str, Any]]],
    *,
    phase: str,
    trace_of: Callable[[str], str | None],
    after: Callable[[ThreadOutcome], None],
    close_traces: Callable[[str], None] | None = None,
    root: Path | None = None,
    failures: Literal["raise", "record"] = "raise",
    fail_fast: bool = False,
    concurrency: int = 1,
    finished: Callable[[ThreadOutcome], Awaitable[None]] | None = None,
) -> list[ThreadOutcome]:
    """Invoke ``app`` once per ``(thread id, input)``; ``after`` sees them in input order.

    Args:
        app: A compiled LangGraph graph (guarded or not).
        items: Thread ids and input states.
        phase: The phase label recorded in each outcome.
        trace_of: Thread id -> its trace file (relative), or ``None`` when not traced.
        after: Called with each outcome, in input order, as soon as its thread and every
            thread before it have finished or paused.
        close_traces: Called with the thread id after each thread (closes the adapter's open
            trace files of that thread), also after one that raised.
        root: The output folder the traces are relative to: each thread's trace is sealed
            there after ``close_traces`` (the thread finished, paused or failed) and its head
            recorded.
        failures: ``"raise"``: an exception in a thread propagates (with ``concurrency > 1``
            the other running threads are cancelled first); ``"record"``: it becomes the
            thread's ``failed`` outcome and the next thread runs.
        fail_fast: With ``"record"``, start no thread after the first failed one is known
            (as it ends). With ``concurrency > 1`` the threads already running then finish
            and are recorded too, as are later ones that finished while it ran (up to
            ``concurrency - 1`` running at the moment it failed).
        concurrency: Threads run at once, >= 1 (1: one after another). At most
            ``4 * concurrency`` threads are started and not yet handed to ``after``, so a
            slow thread holds back a bounded number of finished ones.
        finished: Awaited with each outcome once ``after`` has had it (e.g. to drop a done
            thread's checkpoints).

    Returns:
        The outcomes, in input order.

    Raises:
        ValueError: ``concurrency < 1``.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency!r} must be an integer >= 1")

    async def one(thread: str, state: Mapping[str, Any]) -> ThreadOutcome:
        config = {"configurable": {"thread_id": thread}}
        tally = UsageTally()  # this thread's calls, whatever else runs meanwhile
        try:
            with tallied(tally):
                final = await app.ainvoke(dict(state), config, durability="sync")
        except Exception as exc:
            if failures == "raise":
                if close_traces is not None:
                    close_traces(thread)
                raise
            if close_traces is not None:
                close_traces(thread)
            trace = trace_of(thread)
            return ThreadOutcome(
                phase=phase,
                thread=thread,
                status="failed",
                values={},
                review=None,
                trace=trace,
                trace_head=sealed_head(root, trace),
                error=failure_of(exc),
                exception=exc,
                usage=tally.to_json(),
            )
        interrupts = final.get("__interrupt__") or ()
        review = None
        if interrupts:
            value = getattr(interrupts[0], "value", None)
            review = dict(value) if isinstance(value, Mapping) else {"value": value}
        if close_traces is not None:
            close_traces(thread)
        trace = trace_of(thread)
        return ThreadOutcome(
            phase=phase,
            thread=thread,
            status="review" if interrupts else "done",
            values=user_values(final),
            review=review,
            trace=trace,
            trace_head=sealed_head(root, trace),
            usage=tally.to_json(),
        )

    out: list[ThreadOutcome] = []
    if concurrency == 1:
        for thread, state in items:
            outcome = await one(thread, state)
            after(outcome)
            out.append(outcome)
            if finished is not None:
                await finished(outcome)
            if fail_fast and outcome.status == "failed":
                break
        return out
    todo = iter(items)
    running: dict[asyncio.Task[ThreadOutcome], int] = {}
    ready: dict[int, ThreadOutcome] = {}
    started = emitted = 0
    stop = False
    try:
        while True:
            while not stop and len(running) < concurrency and started - emitted < 4 * concurrency:
                item = next(todo, None)
                if item is None:
                    stop = True
                    break
                running[asyncio.ensure_future(one(*item))] = started
                started += 1
            if not running:
                break
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=running.__getitem__):
                outcome = ready[running.pop(task)] = task.result()  # "raise": the first failure
                if fail_fast and outcome.status == "failed":
                    stop = True  # known as it ends: start nothing more
            while emitted in ready:
                outcome = ready.pop(emitted)
                emitted += 1
                after(outcome)
                out.append(outcome)
                if finished is not None:
                    await finished(outcome)
                if fail_fast and outcome.status == "failed":
                    stop = True
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
    return out


def sealed_head(root: Path | None, trace: str | None) -> str | None:
    """Seal a thread's trace (idempotent) and return its head, or ``None`` with no trace."""
    if trace is None or root is None or not (root / trace).exists():
        return None
    return seal_trace(root / trace)


def plain_json(values: Mapping[str, Any]) -> Any:
    """``values`` (a state or a review request) as plain JSON for ``results.jsonl``.

    A LangChain message (a ``MessagesState``'s ``messages``) is written as the object of its
    fields, LangChain's own serialisation (``langchain_core.messages.message_to_dict``'s
    ``data``): ``{"type": "human", "content": ..., "id": ..., "name": ..., ...}``, with
    ``tool_calls`` for an AI message and ``tool_call_id`` for a tool's. Other values JSON
    cannot encode are written as their ``repr``; a mapping that cannot be encoded at all
    becomes its ``repr``. LangChain is not imported here: a value can only be a message when
    ``langchain_core.messages`` is loaded already.
    """
    try:
        return json.loads(json.dumps(dict(values), default=_json_default))
    except (TypeError, ValueError):
        return repr(values)


def _json_default(value: Any) -> Any:
    """What :func:`plain_json` writes for a value JSON cannot encode."""
    messages = sys.modules.get("langchain_core.messages")
    if messages is not None and isinstance(value, messages.BaseMessage):
        return dict(messages.message_to_dict(value)["data"])
    return repr(value)


__all__ = [
    "ResultsLog",
    "Status",
    "ThreadOutcome",
    "compiled",
    "failure_of",
    "iter_results",
    "plain_json",
    "read_results",
    "run_threads",
    "sealed_head",
    "user_values",
]
