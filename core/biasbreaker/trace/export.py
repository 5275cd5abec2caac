"""Exporting a line store's threads to trace files, atomically.

A thread's stored lines, in seq order, are the bytes of its trace file:
:func:`export_thread` writes them to a temporary file beside the target, fsyncs it and moves it
into place in one step, so the target is never seen half-written; it refuses to replace an
existing file unless told to. The exported file verifies exactly as the file sink's would.

Source:
    Issue 19 part 2 (``biasbreaker trace export``); ``docs/cli.md``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import quote

from biasbreaker.errors import InputError, TraceError
from biasbreaker.trace.sink import LineStore


def thread_file_name(thread_id: str) -> str:
    """The file name of a thread's export: the id percent-encoded (no ``/``), ``.jsonl``."""
    return quote(thread_id, safe="") + ".jsonl"


def export_thread(store: LineStore, thread_id: str, out: Path, *, overwrite: bool = False) -> int:
    """Write one thread's trace lines to ``out`` (temporary file, fsync, then rename).

    Args:
        store: The line store.
        thread_id: The thread to export.
        out: The trace file to write; its folder is created if missing.
        overwrite: Replace ``out`` if it exists (else refuse).

    Returns:
        The number of lines written (header, steps and seals).

    Raises:
        TraceError: The store holds no lines of ``thread_id``, or its seqs have a gap.
        InputError: ``out`` exists and ``overwrite`` is false, or it cannot be written; nothing
            is left behind (no temporary file, ``out`` untouched).
    """
    lines = store.lines(thread_id)
    if not lines:
        known = store.threads()
        shown = ", ".join(repr(t) for t in known[:10]) + (" …" if len(known) > 10 else "")
        raise TraceError(
            f"{store.location} holds no trace of thread {thread_id!r}; its threads: "
            f"{shown or 'none'}"
        )
    if out.exists() and not overwrite:
        raise InputError(f"{out} exists; pass --overwrite to replace it, or choose another --out")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as exc:
        raise InputError(f"{out}: cannot write there ({exc.strerror or exc})") from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(b"".join(lines))
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            os.replace(tmp, out)
        else:
            os.link(tmp, out)  # fails if out appeared meanwhile: never replaced silently
            os.unlink(tmp)
    except FileExistsError as exc:
        os.unlink(tmp)
        raise InputError(
            f"{out} exists; pass --overwrite to replace it, or choose another --out"
        ) from exc
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise InputError(f"{out}: cannot write it ({exc.strerror or exc})") from exc
    return len(lines)


def export_all(store: LineStore, folder: Path, *, overwrite: bool = False) -> list[Path]:
    """Export every thread of the store into ``folder``, one :func:`thread_file_name` each.

    Refuses before writing anything if any target exists (without ``overwrite``), so a
    refused export leaves the folder as it was.

    Returns:
        The files written, in thread order.

    Raises:
        InputError: ``folder`` is a file, or a target exists and ``overwrite`` is false.
        TraceError: As :func:`export_thread`.
    """
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{folder} is a file; give a folder to export every thread into")
    threads = store.threads()
    targets = [(t, folder / thread_file_name(t)) for t in threads]
    taken = [str(path) for _, path in targets if path.exists()]
    if taken and not overwrite:
        raise InputError(
            f"{len(taken)} of the {len(targets)} files exist ({', '.join(taken[:3])}"
            f"{' …' if len(taken) > 3 else ''}); pass --overwrite to replace them, or "
            "export into an empty folder"
        )
    for thread_id, path in targets:
        export_thread(store, thread_id, path, overwrite=overwrite)
    return [path for _, path in targets]


__all__ = ["export_all", "export_thread", "thread_file_name"]
