"""The ``file`` trace sink: one JSON Lines file per thread, continued across processes.

The default sink (``[trace] sink = "file"``): the thread's records go to the file at the
adapter's ``trace_path`` with ``{thread_id}`` replaced, written by
:class:`~biasbreaker.trace.writer.TraceWriter`. It keeps no line store: the commands read its
files and folders directly.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from biasbreaker.errors import ConfigError, TraceError
from biasbreaker.machine import ControlMachine
from biasbreaker.trace import StepRecord, TraceWriter, read_trace, seal_trace
from biasbreaker.trace.sink import LineStore


class Traces:
    """Run traces, one JSON Lines file per thread, continued across processes.

    A resumed run (the checkpoint holds the thread's breaker state) continues its file; a file
    ahead of the checkpoint (steps re-executed after a crash) is cut back to it. A *new* run
    (no breaker state for the thread) never overwrites a file that already holds records: it is
    refused (:meth:`check_new_run`), naming the file, the thread and the record count.

    Args:
        template: The path, ``{thread_id}`` replaced by the thread id; empty for no trace.
        fsync: fsync after every record.
        adapter: The adapter named in each file's header (another framework adapter that
            reuses these traces, e.g. ``"langchain-agent"``, names itself).
    """

    def __init__(self, template: str, *, fsync: bool = False, adapter: str = "langgraph") -> None:
        self.template = template
        self.fsync = fsync
        self.adapter = adapter
        self._open: dict[Path, tuple[TraceWriter, int]] = {}
        self._keys: dict[Path, str] = {}  # open file -> the trace key it was opened for
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether a trace is kept (``trace_path`` is set)."""
        return bool(self.template)

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
            existing = read_trace(path, warn=False)
        except TraceError as exc:
            raise TraceError(
                f"{path}: a new run on thread {thread_id!r} would overwrite this file, which "
                f"is not a readable run trace ({exc}); {_fixes(self.adapter)}"
            ) from exc
        if existing.records:
            raise self._taken(path, thread_id, len(existing.records), existing.header.meta)

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
                header = machine.config.trace_header({"adapter": self.adapter, "thread": thread_id})
                writer = self._reopen(path, header, first, thread_id)
            for record in records:
                writer.write(record)
            self._open[path] = (writer, records[-1].step + 1)
            self._keys[path] = thread_id

    def _reopen(self, path: Path, header: Any, step: int, thread_id: str) -> TraceWriter:
        if path.exists() and path.stat().st_size > 0:
            existing = read_trace(path, warn=False)
            if step == 0 and existing.records:
                raise self._taken(path, thread_id, len(existing.records), existing.header.meta)
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

    def seal(self, thread_id: str) -> None:
        """Seal the trace of ``thread_id`` (a run paused for review, or ended).

        Idempotent: a trace with nothing written since its last seal is left as it is; a
        thread with no trace file (nothing guarded ran) has nothing to seal.

        Raises:
            TraceError: The file is not a trace this version writes.
        """
        path = self.path(thread_id)
        if path is None:
            return
        with self._lock:
            writer, _ = self._open.get(path, (None, -1))
            if writer is not None:
                writer.seal()
            elif path.exists() and path.stat().st_size > 0:
                seal_trace(path, fsync=self.fsync)

    def _taken(self, path: Path, thread_id: str, count: int, meta: Mapping[str, Any]) -> TraceError:
        """The error for a new run on ``thread_id`` whose file holds ``count`` records.

        The records' thread is the one the file's header names (``meta.thread``), which is
        not ``thread_id`` when two threads share the file (``trace_path`` without
        ``{thread_id}``).
        """
        owner = meta.get("thread")
        if not isinstance(owner, str) or owner == thread_id:
            return _taken(path, thread_id, count, self.adapter)
        fix = (
            f"[plugin.{self.adapter}] trace_path = {self.template!r} has no {{thread_id}}, so "
            "every thread's run is written to this one file, and a trace file holds the run of "
            f"one thread: put {{thread_id}} in trace_path (e.g. 'traces/{{thread_id}}.jsonl') "
            "to give each thread its own file"
            if "{thread_id}" not in self.template
            else f"[plugin.{self.adapter}] trace_path = {self.template!r} gives both threads "
            "this file: use thread ids that differ where trace_path puts them"
        )
        return TraceError(
            f"{path} already holds {count} record(s) of a run on thread {owner!r}; the new run "
            f"on thread {thread_id!r} cannot be written there: {fix}."
        )

    def close(self, thread_id: str | None = None) -> None:
        """Close every open trace file, or only those of ``thread_id`` (and its subgraphs').

        Args:
            thread_id: A thread whose run returned, while other threads may still be writing
                (runs of several threads at once); ``None``: every file.
        """
        with self._lock:
            if thread_id is None:
                paths = list(self._open)
            else:
                paths = [
                    p
                    for p, key in self._keys.items()
                    if key == thread_id or key.startswith(thread_id + ".")
                ]
            for path in paths:
                writer, _ = self._open.pop(path)
                self._keys.pop(path, None)
                writer.close()


def _fixes(adapter: str) -> str:
    return (
        f"run it on a new thread id, set another [plugin.{adapter}] trace_path (it may contain "
        "{thread_id}), or delete the file if that run's trace is no longer needed"
    )


def _taken(path: Path, thread_id: str, count: int, adapter: str) -> TraceError:
    return TraceError(
        f"{path} already holds {count} record(s) of a run on thread {thread_id!r}, but the "
        "checkpointer has no breaker state for that thread, so this is a new run, not a resume: "
        f"it would overwrite them. To keep them, {_fixes(adapter)}. (If that thread's process "
        "was killed before its first breaker step was checkpointed, the file holds only that "
        "lost step: delete it.)"
    )


class FileBackend:
    """The ``file`` trace sink's backend: opens :class:`Traces`; it has no line store."""

    def open_sink(self, location: str, *, adapter: str, fsync: bool) -> Traces:
        """Traces at ``location`` (a ``trace_path`` template; empty: no trace)."""
        return Traces(location, fsync=fsync, adapter=adapter)

    def open_store(self, location: str) -> LineStore:
        """Refused: file traces are read from their files and folders.

        Raises:
            ConfigError: Always.
        """
        raise ConfigError(
            f"{location!r}: the 'file' trace sink keeps no database; give the trace file or "
            "its folder to the command instead"
        )


__all__ = ["FileBackend", "Traces"]
