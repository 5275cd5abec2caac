"""``biasbreaker plugins``: every installed plugin, what it provides and what is selected."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from biasbreaker.cli._common import ConfigOption, JsonOption, StrictOption, fail, stdout, warn
from biasbreaker.config import load_settings, selection
from biasbreaker.errors import BiasbreakerError
from biasbreaker.plugins import PluginHost
from biasbreaker.registry import POINTS, Registry


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
        ``status`` (loaded / failed / disabled), ``hooks``, ``implementations`` (each with
        ``point``, ``name``, ``summary``, ``selected``) and ``error``.
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
            }
            for impl in registry
            if impl.plugin == name
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


def plugins(
    config: ConfigOption = None,
    strict: StrictOption = False,
    as_json: JsonOption = False,
    hook: Annotated[
        str | None,
        typer.Option("--hook", help="Only plugins implementing this extension point."),
    ] = None,
) -> None:
    """List installed plugins: distribution, version, extension points, selected or not."""
    if hook is not None and hook not in POINTS:
        fail(f"--hook {hook!r} is not an extension point; choose one of {', '.join(POINTS)}")
    try:
        host = PluginHost(strict=strict)
        registry = host.build_registry()
    except BiasbreakerError as exc:
        fail(str(exc))
    selected: set[tuple[str, str]] | None
    try:
        settings = load_settings(config).settings
        selected = {(p, n) for p in POINTS for n in selection(settings, p)}  # type: ignore[arg-type]
    except BiasbreakerError as exc:
        warn(f"selection unknown, the configuration is invalid: {exc}")
        selected = None
    rows = collect(host, registry, selected)
    if hook is not None:
        rows = [r for r in rows if hook in r["hooks"]]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
    else:
        table = Table(title="biasbreaker plugins")
        for col in ("plugin", "distribution", "version", "status", "hooks", "implementations"):
            table.add_column(col, overflow="fold")
        for row in rows:
            impls = ", ".join(
                f"{i['point']}:{i['name']}" + (" (selected)" if i["selected"] else "")
                for i in row["implementations"]
            )
            status = row["status"] if not row["error"] else f"failed: {row['error']}"
            table.add_row(
                row["name"],
                row["distribution"] or "-",
                row["version"] or "-",
                status,
                ", ".join(row["hooks"]) or "-",
                impls or "-",
            )
        stdout().print(table)
    for conflict in registry.conflicts:
        warn(str(conflict))
    for failure in host.failures:
        warn(str(failure))
    if strict and (registry.conflicts or host.failures):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the ``plugins`` command."""
    app.command("plugins")(plugins)
