"""The ``biasbreaker`` command line (typer).

typer is used because commands are plain typed functions (the same annotations mypy checks
become the CLI's parsing and ``--help``) and it is built on click (mature, widely used). Help is
click's plain text; tables and progress bars are drawn with rich.

One module per command; each defines ``register(app)`` and is listed in :data:`COMMANDS`.
Commands that need a plugin's libraries (``demo`` and ``run`` need LangGraph) live in the plugin
and are added through the ``biasbreaker.commands`` entry-point group (:data:`COMMAND_GROUP`):
each entry point names a ``register(app)`` callable, loaded in name order after the built-in
commands, so the kernel never imports a plugin module. A command that fails to load is left out
with a warning on stderr; the other commands work.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
from importlib import metadata

import typer

from biasbreaker import __version__
from biasbreaker.redaction import redacting_streams

COMMANDS: tuple[str, ...] = (
    "biasbreaker.cli.plugins",
    "biasbreaker.cli.config",
    "biasbreaker.cli.simulate",
    "biasbreaker.cli.calibrate",
    "biasbreaker.cli.verify",
    "biasbreaker.cli.trace",
    "biasbreaker.cli.keygen",
    "biasbreaker.cli.score",
)
"""Modules whose ``register(app)`` adds a command, in ``--help`` order."""
INTERRUPTED = (128 + signal.SIGINT, 128 + signal.SIGTERM)
"""Exit statuses of a command stopped by SIGINT (130) or SIGTERM (143)."""
COMMAND_GROUP = "biasbreaker.commands"
"""Entry-point group of commands contributed by plugins (``name = "module:register"``)."""

app = typer.Typer(
    name="biasbreaker",
    help="Stop demographic bias from spreading through multi-agent LLM pipelines.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: rich help panels print a type placeholder such as `<bool>` after every
    # flag and read `[probe]` in a help text as markup, dropping it.
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"biasbreaker {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Stop demographic bias from spreading through multi-agent LLM pipelines."""


for _module in COMMANDS:
    importlib.import_module(_module).register(app)


def load_plugin_commands(target: typer.Typer) -> list[str]:
    """Add the commands of the ``biasbreaker.commands`` entry points to ``target``.

    Returns:
        One message per entry point that failed to load (also printed to stderr).
    """
    failures = []
    for ep in sorted(metadata.entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        try:
            ep.load()(target)
        except Exception as exc:
            message = f"command {ep.name!r} ({ep.value}) failed to load and is left out: {exc!r}"
            print(f"warning: {message}", file=sys.stderr)
            failures.append(message)
    return failures


load_plugin_commands(app)


def main() -> None:
    """Entry point of the ``biasbreaker`` console script.

    The commands report plugin load failures and notices themselves (``warning: …``), so the
    library's log records are not printed a second time: a ``NullHandler`` on the
    ``biasbreaker`` logger stops Python's last-resort handler. ``BIASBREAKER_TRACE_PLUGINS=1``
    still configures logging and shows every record.

    Standard output and standard error are redacted (:func:`~biasbreaker.redaction.
    redacting_streams`): a secret never reaches the screen, whatever prints it, tracebacks
    included.

    A command stopped by SIGINT or SIGTERM has finished its files when it exits with
    ``128 + signum`` (:data:`INTERRUPTED`); the process then ends at once, without the
    interpreter's teardown (seconds, with LangGraph loaded) or waiting for threads still
    blocked in a synchronous call.
    """
    logging.getLogger("biasbreaker").addHandler(logging.NullHandler())
    try:
        with redacting_streams():
            app()
    except SystemExit as exc:
        if exc.code in INTERRUPTED:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os._exit(int(exc.code))
        raise
