"""The run trace of a guarded graph: committing a task's records, checking the trace folder.

Every breaker step a task takes is recorded by the machine (its recorder collects the records
in the task's :class:`~biasbreaker_plugins.langgraph.machines.Handle`); when the task commits
the step, :func:`commit_records` appends them to the thread's trace through the configured
trace sink (``[trace] sink``): by default the file sink
(:class:`~biasbreaker_plugins.trace_sinks.file.Traces`, re-exported here), one file per thread
at ``[plugin.langgraph] trace_path`` with ``{thread_id}`` replaced. The trace is sealed
(the sink's ``seal``) when the run pauses for review (``bb_review``, before ``interrupt()``) and
when ``stream``/``invoke`` of the guarded graph returns, so a truncated or shortened trace fails
``biasbreaker verify``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from biasbreaker.errors import ConfigError
from biasbreaker.trace.sink import TraceSink
from biasbreaker_plugins.langgraph.machines import Handle
from biasbreaker_plugins.trace_sinks.file import Traces


def check_trace_folder(template: str, *, adapter: str = "langgraph") -> None:
    """Refuse a ``trace_path`` whose folder cannot be created or written (checked at build).

    The folder is the template's parent up to its first component holding ``{thread_id}``.
    The nearest folder of it that exists must be a folder one can create a folder in: that is
    tried with a temporary folder, removed at once, so nothing is left behind. A path that
    fails here would otherwise fail only when the first guarded step's record is written,
    after the node ran, leaving the thread paused before ``bb_decide``.

    Args:
        template: The ``trace_path`` option; empty (no trace) passes.
        adapter: The adapter whose option it is (``[plugin.<adapter>] trace_path``).

    Raises:
        ConfigError: A file is in the way, the trace file's path is a folder, or the folder
            cannot be created there (no permission, a read-only or virtual file system such as
            ``/proc``); the message names the key, the value, the cause and the fix.
    """
    if not template:
        return
    key = f"[plugin.{adapter}] trace_path = {template!r}"
    fix = (
        f"set [plugin.{adapter}] trace_path to a file in a folder you can write (it may "
        "contain {thread_id}), or leave it empty for no trace"
    )
    path = Path(template)
    parts = path.parent.parts
    fixed = next((i for i, part in enumerate(parts) if "{thread_id}" in part), len(parts))
    folder = Path(*parts[:fixed]) if fixed else Path(".")
    if "{thread_id}" not in template and path.is_dir():
        raise ConfigError(f"{key}: {path} is a folder, not a trace file; {fix}")
    existing = folder
    while not existing.exists():
        if existing.is_symlink():
            raise ConfigError(f"{key}: {existing} is a broken symbolic link; {fix}")
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(
            f"{key}: the trace folder {folder} cannot be created, {existing} is a file, not "
            f"a folder; move that file or {fix}"
        )
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".biasbreaker-trace-check-", dir=existing))
    except OSError as exc:
        raise ConfigError(
            f"{key}: nothing can be created in {existing} ({exc.strerror or exc}), so the "
            f"trace folder {folder} cannot be written; {fix}"
        ) from exc


def commit_records(traces: TraceSink, thread_id: str, handle: Handle) -> None:
    """Write the handle's pending records to the trace (if one is kept) and clear them.

    Raises:
        TraceError: As :meth:`Traces.write` (the records stay pending).
    """
    if traces.enabled:
        traces.write(thread_id, handle.machine, list(handle.records))
    handle.records.clear()


__all__ = ["Traces", "check_trace_folder", "commit_records"]
