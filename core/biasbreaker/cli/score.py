"""``biasbreaker score PAIRS.jsonl``: score pre-computed response pairs, no LLM needed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from biasbreaker.cli._common import (
    ConfigOption,
    JsonOption,
    StrictOption,
    fail,
    load_kernel,
    stdout,
)
from biasbreaker.errors import BiasbreakerError
from biasbreaker.probe.counterfactual import CounterfactualGenerator
from biasbreaker.probe.pairs import Neutralisation, PairsReport, read_pairs, score_pairs
from biasbreaker.probe.scoring import check_scorer
from biasbreaker.probe.terms import TermSet


def score(
    pairs: Annotated[
        Path,
        typer.Argument(
            help="JSON Lines file, one pair per line: original, counterfactual, optionally "
            "resample, id, axis and groups (see docs/detection.md).",
            exists=False,
            dir_okay=False,
        ),
    ],
    scorers: Annotated[
        list[str] | None,
        typer.Option(
            "--scorer",
            "-s",
            metavar="NAME",
            help="Scorer to run (repeatable); default: [probe] scorers of the configuration.",
        ),
    ] = None,
    neutralise: Annotated[
        str,
        typer.Option(
            "--neutralise",
            metavar="MODE",
            help="For scorers comparing neutralised text: auto (map back lines with groups, "
            "mask the rest), map-back, mask (LangFair's neutral words) or none.",
        ),
    ] = "auto",
    axes: Annotated[
        list[str] | None,
        typer.Option(
            "--axis",
            metavar="AXIS",
            help="Axis masked in mask mode (repeatable; one of [probe] axes); default: all.",
        ),
    ] = None,
    no_names: Annotated[
        bool, typer.Option("--no-names", help="Do not mask names in mask mode.")
    ] = False,
    config: ConfigOption = None,
    strict: StrictOption = False,
    as_json: JsonOption = False,
) -> None:
    """Score pre-computed response pairs with the selected scorers; print a per-metric table."""
    if neutralise not in ("auto", "map-back", "mask", "none"):
        fail(f"--neutralise {neutralise!r} must be one of auto, map-back, mask, none")
    mode: Neutralisation = neutralise  # type: ignore[assignment]
    overrides: dict[str, Any] = {"probe": {"scorers": list(scorers)}} if scorers else {}
    kernel = load_kernel(config, strict, overrides)
    try:
        cfg = kernel.settings.probe
        terms = TermSet.load(
            axes=cfg.axes,
            extra_files=cfg.term_files,
            inline={a: [dict(r) for r in rows] for a, rows in cfg.extra_terms.items()},
            groups=cfg.groups,
            names=cfg.names,
        )
        for axis in axes or ():
            if axis not in terms.axis_names:
                fail(
                    f"--axis {axis!r} is not an axis of [probe] axes; choose from "
                    f"{', '.join(terms.axis_names)}"
                )
        loaded_pairs = read_pairs(pairs)
        built = [check_scorer(kernel.build("scorer", n), n) for n in cfg.scorers]
        report = score_pairs(
            loaded_pairs,
            built,
            generator=CounterfactualGenerator(terms, seed=kernel.seed),
            neutralisation=mode,
            mask_axes=axes,
            mask_names=not no_names,
            bootstrap=cfg.bootstrap,
            confidence=cfg.confidence,
            seed=kernel.seed,
        )
    except BiasbreakerError as exc:
        fail(str(exc))
    finally:
        kernel.close()
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2, sort_keys=True))
        return
    stdout().print(_table(report, pairs))


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "—" if ci is None else f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def _table(report: PairsReport, path: Path) -> Table:
    level = f"{report.confidence:.0%} CI"
    table = Table(
        title=f"{path.name}: {report.n} pairs, neutralisation {report.neutralisation}",
        caption="divergences in [0, 1] (0 = same); excess = counterfactual − same-group "
        "(the noise floor); local score = clip(excess, 0, 1)",
    )
    table.add_column("scorer")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column(level, justify="right")
    for s in report.scorers:
        table.add_row(
            s.scorer, "counterfactual divergence", _fmt(s.counterfactual), _ci(s.counterfactual_ci)
        )
        if s.same_group is not None:
            table.add_row("", "same-group divergence", _fmt(s.same_group), "")
            table.add_row("", "excess (cf − same-group)", _fmt(s.excess), _ci(s.excess_ci))
        for name, value in s.reported.items():
            table.add_row("", name, _fmt(value), "")
    return table


def register(app: typer.Typer) -> None:
    """Add the ``score`` command."""
    app.command("score")(score)
