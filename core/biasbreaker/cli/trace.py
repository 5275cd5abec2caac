"""``biasbreaker trace export``: a trace store's threads written out as trace files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from biasbreaker.cli._common import ConfigOption, StrictOption, fail, stdout
from biasbreaker.cli._stores import open_store
from biasbreaker.errors import BiasbreakerError
from biasbreaker.trace.export import export_all, export_thread
from biasbreaker.trace.sink import is_url, redact_url

trace_app = typer.Typer(
    help="Work with trace stores (the database trace sinks).",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@trace_app.command("export")
def export(
    url: Annotated[
        str,
        typer.Argument(
            help="The trace store: sqlite:///PATH.db or postgresql://host/db (as [trace] url).",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="With --thread, the trace file to write (FILE.jsonl); without, the folder to "
            "write every thread into (one <thread id, percent-encoded>.jsonl each).",
            show_default=False,
        ),
    ],
    thread: Annotated[
        str | None,
        typer.Option("--thread", help="The thread to export; default every thread."),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace files that exist (else refuse).")
    ] = False,
    config: ConfigOption = None,
    strict: StrictOption = False,
) -> None:
    """Write stored trace lines to JSON Lines files that verify as the file sink's traces.

    Each file holds the thread's stored lines byte for byte (header, chained steps, seals), so
    `biasbreaker verify` gives it the verdicts a file trace of the same run gets. Each file is
    written to a temporary file, fsynced and renamed into place: never half-written. An
    existing file is refused (nothing written) unless --overwrite is given.
    """
    if not is_url(url):
        fail(f"{url!r} is not a trace store URL; give sqlite:///PATH.db or postgresql://host/db")
    try:
        store = open_store(url, config, strict)
        try:
            if thread is not None:
                count = export_thread(store, thread, out, overwrite=overwrite)
                stdout().print(f"wrote {count} lines of thread {thread!r} to {out}")
                return
            files = export_all(store, out, overwrite=overwrite)
        finally:
            store.close()
    except BiasbreakerError as exc:
        fail(str(exc))
    stdout().print(f"wrote {len(files)} thread trace(s) of {redact_url(url)} into {out}")


def register(app: typer.Typer) -> None:
    """Add the ``trace`` command group (``trace export``)."""
    app.add_typer(trace_app, name="trace")
