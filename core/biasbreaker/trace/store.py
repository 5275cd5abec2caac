"""A trace sink over any line store: the file trace's very lines, one row each.

:class:`StoreSink` writes exactly the lines :class:`~biasbreaker.trace.writer.TraceWriter`
would write to a thread's file — the header at seq 0, each step record chained (``prev``) to
the line before it, a seal (signed when a key is configured) at each pause and end — and
appends each as one row keyed ``(thread_id, seq)``. The store's primary key is the guard
against two writers: an append at a seq the thread already holds fails with a
:class:`~biasbreaker.errors.TraceError`, nothing is overwritten.

A worker that continues a thread another worker wrote (a resume) reads the thread's rows
first. Records at steps the store already holds (re-executed after a crash whose checkpoint
was never saved) must be the same bytes as the stored ones: they are then not appended again;
other bytes are a :class:`~biasbreaker.errors.TraceError` (the append-only store is never cut
back, unlike a file).

Source:
    Issue 19 part 2; ``docs/langgraph.md`` §6.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field

from biasbreaker.errors import TraceError
from biasbreaker.machine import ControlMachine
from biasbreaker.trace.chain import line_digest, seal_message
from biasbreaker.trace.records import SealRecord, Signature, StepRecord, record_line
from biasbreaker.trace.signing import signer_from_environment
from biasbreaker.trace.sink import LineStore
from biasbreaker.trace.writer import FROM_ENVIRONMENT, SignerChoice


@dataclass
class _Thread:
    """What a sink knows of one thread's stored lines: their count, head, steps and seal."""

    lines: int = 0
    head: str = ""
    steps: int = 0
    sealed: bool = False
    header: bytes = b""
    step_seqs: list[int] = field(default_factory=list)  # seq of step i's line


def _scan(thread_id: str, where: str, lines: list[bytes]) -> _Thread:
    state = _Thread()
    for seq, line in enumerate(lines):
        try:
            kind = json.loads(line).get("kind")
        except (ValueError, AttributeError) as exc:
            raise TraceError(
                f"{where}: thread {thread_id!r} seq {seq} is not a JSON trace line: {exc}"
            ) from exc
        if seq == 0:
            if kind != "header":
                raise TraceError(f"{where}: thread {thread_id!r} seq 0 is not a header")
            state.header = line
        elif kind == "step":
            state.step_seqs.append(seq)
            state.steps += 1
        elif kind != "seal":
            raise TraceError(f"{where}: thread {thread_id!r} seq {seq} has kind {kind!r}")
        state.sealed = kind == "seal"
        state.head = line_digest(line)
        state.lines = seq + 1
    return state


class StoreSink:
    """Append-only trace rows for every thread, through a line store, chained and sealed.

    Args:
        store: The rows (``(thread_id, seq) → line``).
        adapter: The adapter named in each header (``"langgraph"``).
        signer: Who signs seals, as :class:`~biasbreaker.trace.writer.TraceWriter`: by default
            the key file named by ``BIASBREAKER_SIGNING_KEY_FILE`` if set (the file sink's
            default), a :class:`~biasbreaker.trace.signing.Signer`, or ``None`` (unsigned).
    """

    def __init__(
        self,
        store: LineStore,
        *,
        adapter: str = "langgraph",
        signer: SignerChoice = FROM_ENVIRONMENT,
    ) -> None:
        self.store = store
        self.adapter = adapter
        self._signer = signer_from_environment() if signer == FROM_ENVIRONMENT else signer
        self._threads: dict[str, _Thread] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Always: a database sink records every guarded thread."""
        return True

    def _load(self, thread_id: str) -> _Thread:
        state = _scan(thread_id, self.store.location, self.store.lines(thread_id))
        self._threads[thread_id] = state
        return state

    def check_new_run(self, thread_id: str) -> None:
        """Refuse a new run on a thread the store already holds records of.

        Raises:
            TraceError: Naming the store, the thread and the record count.
        """
        with self._lock:
            state = self._load(thread_id)
        if state.steps:
            raise TraceError(
                f"{self.store.location} already holds {state.steps} record(s) of a run on "
                f"thread {thread_id!r}, but the checkpointer has no breaker state for that "
                "thread, so this is a new run, not a resume: it would mix two runs in one "
                "trace. Run it on a new thread id, or use another [trace] url."
            )

    def write(self, thread_id: str, machine: ControlMachine, records: list[StepRecord]) -> None:
        """Append ``records`` (consecutive steps) to the thread's rows.

        Raises:
            TraceError: The stored header differs; the store is behind the machine; a stored
                record at the same step has other bytes; or another writer took a seq.
        """
        if not records:
            return
        header = machine.config.trace_header({"adapter": self.adapter, "thread": thread_id})
        header_line = record_line(header.to_json()).encode("utf-8")
        first = records[0].step
        with self._lock:
            state = self._threads.get(thread_id)
            if state is None or state.steps != first:
                state = self._load(thread_id)
            if state.lines == 0:
                if first != 0:
                    raise TraceError(
                        f"{self.store.location} holds no records of thread {thread_id!r} but "
                        f"the run is at breaker step {first}: configure the trace sink before "
                        "the run's first guarded step"
                    )
                self._append(thread_id, state, header_line)
                state.header = header_line
            elif state.header != header_line:
                raise TraceError(
                    f"{self.store.location}: thread {thread_id!r} has a header that differs "
                    "from this run's (other thresholds, window or seed); use another thread "
                    "id or [trace] url"
                )
            if state.steps < first:
                raise TraceError(
                    f"{self.store.location} holds {state.steps} steps of thread {thread_id!r} "
                    f"but the run is at breaker step {first}: the trace was not written for "
                    "the earlier steps"
                )
            for record in records:
                if record.step < state.steps:
                    self._same_as_stored(thread_id, state, record)
                    continue
                data = record.to_json()
                data["prev"] = state.head
                self._append(thread_id, state, record_line(data).encode("utf-8"))
                state.step_seqs.append(state.lines - 1)
                state.steps += 1

    def _same_as_stored(self, thread_id: str, state: _Thread, record: StepRecord) -> None:
        seq = state.step_seqs[record.step]
        lines = self.store.lines(thread_id)
        data = record.to_json()
        data["prev"] = line_digest(lines[seq - 1])
        if record_line(data).encode("utf-8") != lines[seq]:
            raise TraceError(
                f"{self.store.location}: thread {thread_id!r} already holds step "
                f"{record.step} at seq {seq} with other content than this run's (a step "
                "re-executed differently, or two runs on one thread); the append-only store "
                "is not rewritten: inspect the thread, and resume it on a new thread id"
            )

    def _append(self, thread_id: str, state: _Thread, line: bytes) -> None:
        try:
            self.store.append(thread_id, state.lines, line)
        except TraceError:
            self._threads.pop(thread_id, None)  # reread on the next write
            raise
        state.lines += 1
        state.head = line_digest(line)
        state.sealed = False

    def seal(self, thread_id: str) -> None:
        """Seal the thread's rows: the step count and the chain head, signed if a key is set.

        Idempotent: rows that already end with a seal are left as they are; a thread with no
        rows has nothing to seal.

        Raises:
            TraceError: Another writer took the seal's seq.
        """
        with self._lock:
            state = self._load(thread_id)
            if state.lines == 0 or state.sealed:
                return
            signature = None
            if self._signer is not None:
                message = seal_message(state.steps, state.head)
                signature = Signature(self._signer.public_key, self._signer.sign(message))
            seal = SealRecord(state.steps, state.head, signature)
            self._append(thread_id, state, record_line(seal.to_json()).encode("utf-8"))
            state.sealed = True

    def close(self, thread_id: str | None = None) -> None:
        """Close the store (idempotent), or forget one thread's cached chain state.

        Args:
            thread_id: A thread whose run returned (its state is read again from the store
                if it continues); ``None``: every thread, and the connection is closed.
        """
        with self._lock:
            if thread_id is not None:
                self._threads.pop(thread_id, None)
                return
            self._threads.clear()
            self.store.close()


__all__ = ["StoreSink"]
