"""``biasbreaker plugins``: every installed plugin, what it provides and what is selected."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from biasbreaker.catalog import Wanted
from biasbreaker.cli._common import (
    ConfigOption,
    JsonOption,
    StrictOption,
    fail,
    report_host,
    stdout,
    warn,
)
from biasbreaker.config import load_settings, selection
from biasbreaker.errors import BiasbreakerError
from biasbreaker.kernel import wanted
from biasbreaker.plugins import DISABLE_ENV, PluginHost
from biasbreaker.points import POINTS
from biasbreaker.registry import Registry

WIDE_WIDTH = 1000
"""Console width for ``--wide``: nothing is wrapped."""


def collect(
    host: PluginHost, registry: Registry, selected: set[tuple[str, str]] | None
) -> list[dict[str, Any]]:
    """Describe every plugin the host knows as plain data (the ``--json`` output).

    Args:
        host: The loaded plugin host.
        registry: Its registry.
        selected: ``(point, name)`` pairs the configuration selects, or ``None`` if the
            configuration could not be read.

    Returns:
        One dict per plugin, sorted by name: ``name``, ``distribution``, ``version``,
        ``status`` (loaded / failed / disabled / declared: listed from its metadata, not
        imported), ``hooks``, ``implementations`` and ``error``. Each implementation has
        ``point``, ``name``, ``summary``, ``selected``, ``conflict`` (another plugin registers
        the same name), ``missing`` (modules it needs that are not installed, found with
        ``importlib.util.find_spec``, nothing imported), ``install`` (how to get them) and
        ``imported``; a declared plugin's implementations have no summary and no checks
        (``--verbose`` imports it).
    """
    rows: list[dict[str, Any]] = []
    for name in sorted(host.infos):
        info = host.infos[name]
        impls = [
            {
                "point": impl.point,
                "name": impl.name,
                "summary": impl.summary,
                "selected": None if selected is None else (impl.point, impl.name) in selected,
                "conflict": registry.conflicted(impl.point, impl.name),
                "missing": impl.missing(),
                "install": impl.install,
                "imported": True,
            }
            for impl in sorted(registry.registered_by(name), key=lambda i: (i.point, i.name))
        ]
        if info.status == "declared":
            impls = [
                {
                    "point": point,
                    "name": impl_name,
                    "summary": "",
                    "selected": None if selected is None else (point, impl_name) in selected,
                    "conflict": False,
                    "missing": [],
                    "install": "",
                    "imported": False,
                }
                for point, impl_name in info.declared or ()
            ]
        rows.append(
            {
                "name": name,
                "distribution": info.distribution,
                "version": info.version,
                "status": info.status,
                "hooks": list(info.hooks),
                "implementations": impls,
                "error": str(info.error) if info.error else None,
            }
        )
    return rows


def _status(impl: dict[str, Any]) -> str:
    """The state of one implementation: selected, usable, registered twice."""
    parts = []
    if impl["selected"]:
        parts.append("selected")
    if impl["missing"]:
        parts.append("needs extra")
    if impl["conflict"]:
        parts.append("registered twice")
    return ", ".join(parts)


def render(rows: list[dict[str, Any]], *, wide: bool = False) -> list[Text]:
    """The listing as lines: a heading per plugin, then one line per implementation.

    Each implementation line is ``point  name  status`` in aligned columns (``--wide`` adds the
    summary); an implementation whose optional modules are missing gets a second line saying
    which and how to install them. Nothing is parsed as markup.
    """
    impls = [i for row in rows for i in row["implementations"]]
    point_w = max((len(i["point"]) for i in impls), default=0)
    name_w = max((len(i["name"]) for i in impls), default=0)
    status_w = max((len(_status(i)) for i in impls), default=0)
    lines: list[Text] = []
    for row in rows:
        origin = f"{row['distribution']} {row['version'] or ''}".strip()
        head = Text(row["name"], style="bold")
        head.append(f"  {origin or 'not from a distribution'}")
        if row["status"] == "failed":
            head.append(f"  failed: {row['error']}", style="red")
        elif row["status"] == "disabled":
            head.append(f"  disabled by {DISABLE_ENV}", style="yellow")
        elif row["status"] == "declared":
            head.append("  not imported")
        elif not row["implementations"]:
            head.append("  registers nothing")
        lines.append(head)
        for impl in row["implementations"]:
            status = _status(impl)
            line = f"  {impl['point']:<{point_w}}  {impl['name']:<{name_w}}"
            if wide:
                line += f"  {status:<{status_w}}  {impl['summary']}"
            elif status:
                line += f"  {status}"
            lines.append(Text(line.rstrip()))
            if impl["missing"]:
                indent = " " * (point_w + 4)
                notes = [f"missing: {', '.join(impl['missing'])}"]
                if impl["install"]:
                    notes.append(f"install: {impl['install']}")
                lines += [Text(indent + note, style="yellow") for note in notes]
    return lines


def plugins(
    config: ConfigOption = None,
    strict: StrictOption = False,
    as_json: JsonOption = False,
    hook: Annotated[
        str | None,
        typer.Option(
            "--hook", metavar="POINT", help="Only plugins implementing this extension point."
        ),
    ] = None,
    wide: Annotated[
        bool,
        typer.Option("--wide", help="Add each implementation's summary; never wrap lines."),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="Import every plugin, selected or not, to show its summaries, missing extras "
            "and conflicts (by default a plugin nothing of which is selected is listed from "
            "its metadata and not imported).",
        ),
    ] = False,
) -> None:
    """List installed plugins: distribution, version, extension points, selected or not."""
    if hook is not None and hook not in POINTS:
        fail(f"--hook {hook!r} is not an extension point; choose one of {', '.join(POINTS)}")
    selected: set[tuple[str, str]] | None
    try:
        settings = load_settings(config).settings
        selected = {(p, n) for p in POINTS for n in selection(settings, p)}  # type: ignore[arg-type]
        needed = wanted(settings)
    except BiasbreakerError as exc:
        warn(f"selection unknown, the configuration is invalid: {exc}")
        selected = None
        needed = Wanted()
    try:
        host = PluginHost(strict=strict, wanted=None if verbose else needed)
        registry = host.build_registry()
    except BiasbreakerError as exc:
        fail(str(exc))
    rows = collect(host, registry, selected)
    if hook is not None:
        rows = [r for r in rows if hook in r["hooks"]]
        for row in rows:
            row["implementations"] = [i for i in row["implementations"] if i["point"] == hook]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
    elif not rows:
        stdout().print(f"no installed plugin implements {hook}")
    else:
        out = Console(highlight=False, soft_wrap=True, width=WIDE_WIDTH) if wide else stdout()
        for line in render(rows, wide=wide):
            out.print(line, soft_wrap=wide)
    for conflict in registry.conflicts:
        warn(str(conflict))
    report_host(host)
    if strict and (registry.conflicts or host.failures):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the ``plugins`` command."""
    app.command("plugins")(plugins)
