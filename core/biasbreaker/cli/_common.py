"""Options and helpers shared by the commands."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, NoReturn, TextIO

import typer
from rich.console import Console
from rich.text import Text

from biasbreaker.errors import BiasbreakerError
from biasbreaker.kernel import Kernel
from biasbreaker.plugins import PluginHost

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        help="TOML configuration file (below arguments and environment, above "
        "./biasbreaker.toml and pyproject.toml).",
        dir_okay=False,
    ),
]
StrictOption = Annotated[bool, typer.Option("--strict", help="Make any plugin load failure fatal.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]

WIDE = 160
"""Width for tables when the stream is not a terminal (pipes, files, CI logs) and ``COLUMNS``
is not set: wide, not wrapped."""


def _width(stream: TextIO) -> int | None:
    """The terminal's width (``None``: let rich ask it), else ``COLUMNS``, else :data:`WIDE`."""
    if stream.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else WIDE


def stdout() -> Console:
    """A console on the current ``sys.stdout``; wide when that is not a terminal."""
    return Console(highlight=False, soft_wrap=True, width=_width(sys.stdout))


def stderr() -> Console:
    """A console on the current ``sys.stderr``; wide when that is not a terminal."""
    return Console(stderr=True, highlight=False, soft_wrap=True, width=_width(sys.stderr))


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``error: message`` to stderr and exit with ``code``."""
    stderr().print(Text.assemble(("error: ", "bold red"), message))
    raise typer.Exit(code)


def warn(message: str) -> None:
    """Print ``warning: message`` to stderr."""
    stderr().print(Text.assemble(("warning: ", "yellow"), message))


def report_host(host: PluginHost) -> None:
    """Warn once about every plugin that failed to load and every plugin-host notice."""
    for failure in host.failures:
        warn(str(failure))
    for notice in host.notices:
        warn(notice)


def load_kernel(
    config: Path | None, strict: bool, overrides: dict[str, object] | None = None
) -> Kernel:
    """Load configuration and plugins, turning biasbreaker errors into a clean exit 1."""
    try:
        kernel = Kernel.load(config, strict=strict, overrides=overrides)
    except BiasbreakerError as exc:
        fail(str(exc))
    report_host(kernel.host)
    return kernel
