"""Each command's --help and its heading in docs/cli.md list the same options and arguments."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from biasbreaker.cli import app

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
HEADING = re.compile(
    r"^## `biasbreaker (?P<name>[a-z]+(?: [a-z]+)?)(?P<synopsis>[^`]*)`$", re.MULTILINE
)


def _commands() -> dict[str, Any]:
    """Every command by its words: a group's subcommands as ``"group sub"`` (``trace export``)."""
    # typer ships its own copy of click: its objects are click's, duck-typed
    out: dict[str, Any] = {}
    for name, command in typer.main.get_command(app).commands.items():  # type: ignore[attr-defined]
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            out[name] = command
        else:
            out.update({f"{name} {sub}": c for sub, c in subcommands.items()})
    return out


def _options(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "option" and p.name != "help"]


def _headings() -> dict[str, str]:
    return {m["name"]: m["synopsis"] for m in HEADING.finditer(DOCS.read_text(encoding="utf-8"))}


def _synopsis(synopsis: str, command: Any) -> tuple[set[str], int]:
    """The options a heading names and how many positional arguments it shows."""
    takes_value = {opt for p in _options(command) if not p.is_flag for opt in p.opts}
    named: set[str] = set()
    positional = 0
    skip = False
    for token in synopsis.replace("[", " ").replace("]", " ").split():
        if skip:
            skip = False
        elif token.startswith("-"):
            parts = token.split("|")
            named.update(parts)
            skip = any(part in takes_value for part in parts)
        elif token != "…" and any(c.isupper() for c in token):
            positional += 1
    return named, positional


def test_every_command_has_a_heading_and_every_heading_a_command() -> None:
    assert set(_commands()) == set(_headings())


@pytest.mark.parametrize("name", sorted(_commands()))
def test_help_and_docs_list_the_same_options(name: str) -> None:
    command = _commands()[name]
    named, positional = _synopsis(_headings()[name], command)
    options = _options(command)
    for option in options:
        spellings = {*option.opts, *option.secondary_opts}
        assert spellings & named, f"{name}: {sorted(spellings)} is in --help, not in docs/cli.md"
    known = {s for o in options for s in (*o.opts, *o.secondary_opts)}
    assert named <= known, f"{name}: docs/cli.md names {sorted(named - known)}, --help does not"
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    assert positional == len(arguments), f"{name}: arguments differ"
    shown = CliRunner().invoke(app, [*name.split(), "--help"], terminal_width=200)
    assert shown.exit_code == 0
    for option in options:
        assert option.opts[0] in shown.output
