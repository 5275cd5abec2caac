"""Options and helpers shared by the commands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from biasbreaker.errors import BiasbreakerError
from biasbreaker.kernel import Kernel

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="TOML configuration file (below arguments and environment, above "
        "./biasbreaker.toml and pyproject.toml).",
        dir_okay=False,
    ),
]
StrictOption = Annotated[bool, typer.Option("--strict", help="Make any plugin load failure fatal.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]

WIDE = 160
"""Width for tables when the stream is not a terminal (pipes, files, CI logs): wide, not wrapped."""


def stdout() -> Console:
    """A console on the current ``sys.stdout``; wide when that is not a terminal."""
    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else WIDE)


def stderr() -> Console:
    """A console on the current ``sys.stderr``; wide when that is not a terminal."""
    return Console(
        stderr=True, highlight=False, soft_wrap=True, width=None if sys.stderr.isatty() else WIDE
    )


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: message`` to stderr and exit with ``code``."""
    stderr().print(Text.assemble(("error: ", "bold red"), message))
    raise typer.Exit(code)


def warn(message: str) -> None:
    """Print ``warning: message`` to stderr."""
    stderr().print(Text.assemble(("warning: ", "yellow"), message))


def load_kernel(config: Path | None, strict: bool) -> Kernel:
    """Load configuration and plugins, turning biasbreaker errors into a clean exit 1."""
    try:
        kernel = Kernel.load(config, strict=strict)
    except BiasbreakerError as exc:
        fail(str(exc))
    for failure in kernel.host.failures:
        warn(str(failure))
    return kernel
