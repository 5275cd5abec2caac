"""``biasbreaker config``: the effective configuration and where each value came from."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from biasbreaker.cli._common import (
    ConfigOption,
    JsonOption,
    StrictOption,
    fail,
    load_kernel,
    stderr,
    stdout,
    warn,
)
from biasbreaker.config import dump_value
from biasbreaker.config.advice import advice
from biasbreaker.resolution import typed_plugin_tables


def config(
    config: ConfigOption = None,
    strict: StrictOption = False,
    as_json: JsonOption = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Exit 1 on any problem a guarded run would find (every selected plugin built "
            "with its options, the probe's term lists, the skeptic panel, the framework "
            "adapter); without it the same problems are printed as warnings.",
        ),
    ] = False,
) -> None:
    """Print the effective configuration with the source of each value.

    Every problem --check fails on is shown as a warning (exit 0 without --check).
    """
    kernel = load_kernel(config, strict)
    problems = kernel.check_build()
    if check:
        if len(problems) == 1:
            fail(problems[0])
        if problems:
            fail(f"{len(problems)} problems:\n- " + "\n- ".join(problems))
    for problem in problems:
        warn(problem)
    for said in advice(kernel.settings):
        warn(said)
    rows = kernel.loaded.rows(typed_plugin_tables(kernel.loaded, kernel.registry))
    for key, value, source in rows:
        if _one_file_for_every_thread(key, value):
            warn(
                f"{key} = {value!r} ({source}) has no {{thread_id}}: every thread's run is "
                "written to this one file, and a trace file holds the run of one thread, so a "
                "run on a second thread is refused (TraceError). Fine for a graph run on one "
                "thread only; otherwise put {thread_id} in it, e.g. 'traces/{thread_id}.jsonl'."
            )
    if as_json:
        typer.echo(json.dumps([{"key": k, "value": v, "source": s} for k, v, s in rows], indent=2))
    else:
        table = Table(title="biasbreaker configuration")
        table.add_column("key", overflow="fold")
        table.add_column("value", overflow="fold")
        table.add_column("source", overflow="fold")
        for key, value, source in rows:
            table.add_row(Text(key), Text(dump_value(value)), Text(source))
        stdout().print(table)
        if any(k.startswith("breaker.tau") and s == "default" for k, _, s in rows):
            stdout().print(
                "Thresholds at their defaults are starting points, not validated values: "
                "calibrate them on your own control runs."
            )
    if check:
        # with --json, stdout holds only the JSON document
        (stderr() if as_json else stdout()).print(
            "configuration OK: every selected plugin built with its options, and the probe, "
            "the skeptic panel and the MADERA stages assembled."
        )


def _one_file_for_every_thread(key: str, value: object) -> bool:
    """Whether ``key`` is an adapter's ``trace_path`` set to a path without ``{thread_id}``."""
    return (
        key.startswith("plugin.")
        and key.endswith(".trace_path")
        and isinstance(value, str)
        and bool(value)
        and "{thread_id}" not in value
    )


def register(app: typer.Typer) -> None:
    """Add the ``config`` command."""
    app.command("config")(config)
