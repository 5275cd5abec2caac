"""The ``biasbreaker`` command line (typer).

typer is used because commands are plain typed functions (the same annotations mypy checks
become the CLI's parsing and ``--help``), it is built on click (mature, widely used) and renders
help and errors with rich, which the project already uses for tables and progress bars.

One module per command; each defines ``register(app)`` and is listed in :data:`COMMANDS`.
"""

from __future__ import annotations

import importlib
import logging

import typer

from biasbreaker import __version__

COMMANDS: tuple[str, ...] = (
    "biasbreaker.cli.plugins",
    "biasbreaker.cli.config",
    "biasbreaker.cli.simulate",
    "biasbreaker.cli.calibrate",
    "biasbreaker.cli.verify",
    "biasbreaker.cli.score",
)
"""Modules whose ``register(app)`` adds a command, in ``--help`` order."""

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


def main() -> None:
    """Entry point of the ``biasbreaker`` console script.

    The commands report plugin load failures and notices themselves (``warning: …``), so the
    library's log records are not printed a second time: a ``NullHandler`` on the
    ``biasbreaker`` logger stops Python's last-resort handler. ``BIASBREAKER_TRACE_PLUGINS=1``
    still configures logging and shows every record.
    """
    logging.getLogger("biasbreaker").addHandler(logging.NullHandler())
    app()
