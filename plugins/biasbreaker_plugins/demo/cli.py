"""The ``biasbreaker demo`` and ``biasbreaker run`` commands.

They come in through the entry-point group ``biasbreaker.commands``. This module is imported by
the command line at start-up, so it imports neither LangGraph nor matplotlib: the commands
import the demo's modules when they run.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

from biasbreaker.cli._common import ConfigOption, fail, report_host, stderr, stdout
from biasbreaker.errors import BiasbreakerError, ConfigError

if TYPE_CHECKING:
    from biasbreaker.kernel import Kernel
    from biasbreaker_plugins.demo.report import Table

DEMO_OUTPUTS = (
    "traces",
    "figures",
    "results.jsonl",
    "report.md",
    "control-runs.jsonl",
    "calibration.toml",
)
"""What ``demo`` writes into ``--out``; removed once its arguments are checked, nothing else is."""

RUN_OUTPUTS = ("traces", "figures", "results.jsonl", "report.md")
"""What ``run`` writes into ``--out``; removed once its arguments are checked, nothing else is."""

DEMO_DEFAULTS: dict[str, Any] = {
    "probe.scorers": ["decision"],
    "probe.r": 0,
    "probe.bootstrap": 0,
    "propagation.fast_smoothing|propagation.fast_half_life": 0.9,
    "calibration.max_history": 2,
    "plugin.heuristic.persistence_steps": 1,
    "plugin.heuristic.persistent_route": "skeptics",
    "plugin.fake.prompt_sensitivity": 0.03,
}
"""The demo's settings where the user's configuration is silent (see docs/demo.md)."""

BBQ_DEFAULTS: dict[str, Any] = {"calibration.target_false_halt_rate": 0.1}
"""The bbq scenario's own, on top: UnifiedQA changes its answer on 3.8 % of disambiguated
items under the group exchange (the control runs), too close to 5 % to calibrate on reliably."""


def _check_out(out: Path) -> None:
    """Fail (exit 1) unless ``--out`` is a folder or can be made one: checked before anything runs.

    A file there, or a file where one of its parent folders would be, is an error naming it.
    """
    for path in (out, *out.parents):
        if path.is_dir():
            return
        if path.exists() or path.is_symlink():
            where = "is a file" if path == out else f"is inside {path}, which is a file"
            fail(f"--out {out} {where}; give a folder")


def _make_out(out: Path, outputs: tuple[str, ...]) -> None:
    """Create ``out`` if needed and remove the command's earlier outputs from it."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot create the folder: {exc}") from exc
    _clear(out, outputs)


def _clear(out: Path, outputs: tuple[str, ...]) -> None:
    for name in outputs:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _check_build(kernel: Kernel) -> None:
    """Raise a :class:`ConfigError` listing what building ``kernel``'s selection would find."""
    problems = kernel.check_build()
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigError(f"{len(problems)} problems:\n- " + "\n- ".join(problems))


@contextmanager
def _progress(phases: dict[str, int | None]) -> Iterator[Any]:
    bar = Progress(
        TextColumn("{task.description:<14}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr(),
        transient=False,
    )
    tasks = {name: bar.add_task(name, total=total, start=False) for name, total in phases.items()}

    def advance(phase: str, n: int) -> None:
        """Advance ``phase`` by ``n`` inputs; its clock starts at its first call (n may be 0)."""
        task = tasks[phase]
        if not bar.tasks[task].started:
            bar.start_task(task)
        bar.advance(task, n)

    with bar:
        yield advance


def print_table(table: Table) -> None:
    """Print a report table with rich."""
    rich = RichTable(title=table.title, title_justify="left", show_lines=False)
    for column in table.header:
        rich.add_column(column, overflow="fold")
    for row in table.rows:
        rich.add_row(*(cell.replace("**", "") for cell in row))
    stdout().print(rich)


def demo(
    scenario: Annotated[
        str,
        typer.Option("--scenario", help="hiring (Bloomberg resumes) or bbq (BBQ questions)."),
    ] = "hiring",
    quick: Annotated[
        bool, typer.Option("--quick", help="Small sizes (seconds), for tests and a first look.")
    ] = False,
    out: Annotated[
        Path, typer.Option("--out", help="Output folder (traces, report.md, figures).")
    ] = Path("biasbreaker-demo"),
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seed of the run; default: the config's seed.")
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Run the reference multi-agent pipeline on real data, unguarded and guarded.

    Offline by default: every agent is the seeded, simulated fake LLM unless [llm] client
    names a real one. Writes the run traces, report.md and PNG figures to --out, and ends by
    verifying every trace.
    """
    if scenario not in ("hiring", "bbq"):
        fail(f"--scenario {scenario!r} is not a scenario; use hiring or bbq")
    _check_out(out)
    from biasbreaker_plugins.demo.phases import RunConfig, defaults_where_silent

    start = time.perf_counter()
    try:
        base = RunConfig(config, Path.cwd(), {} if seed is None else {"seed": seed})
        loaded = base.load()
        defaults = {**DEMO_DEFAULTS, **(BBQ_DEFAULTS if scenario == "bbq" else {})}
        overrides = {**defaults_where_silent(loaded, defaults), **base.overrides}
        run_config = RunConfig(config, Path.cwd(), overrides)
        settings = run_config.load().settings
        kernel = run_config.kernel(check=False)
        report_host(kernel.host)  # once: every phase's kernel loads the same plugins
        # both validation passes, then build what the run builds (as `config --check` does),
        # before anything in --out goes: a client that cannot be built (its API key is not
        # set) would otherwise show only after the earlier outputs were removed
        _check_build(kernel)
        _make_out(out, DEMO_OUTPUTS)
        if scenario == "hiring":
            _hiring(run_config, settings, out, quick)
        else:
            _bbq(run_config, settings, out, quick)
    except BiasbreakerError as exc:
        fail(str(exc))
    stderr().print(f"done in {time.perf_counter() - start:.1f} s")


def _hiring(config: Any, settings: Any, out: Path, quick: bool) -> None:
    from biasbreaker_plugins.demo.hiring_demo import QUICK_SIZES, Sizes, run_hiring, workers_for
    from biasbreaker_plugins.demo.hiring_report import write_hiring_outputs

    d = settings.demo
    sizes = (
        Sizes(*QUICK_SIZES) if quick else Sizes(d.postings, d.control_runs, d.fresh_control_runs)
    )
    phases: dict[str, int | None] = {
        "calibration": sizes.control_runs,
        **({"reference": sizes.postings} if settings.llm.client == "fake" else {}),
        "unguarded": sizes.postings,
        "guarded": sizes.postings,
        "fresh-control": sizes.fresh_control_runs,
    }
    console = stdout()
    with _progress(phases) as advance:
        result = run_hiring(
            config, out, sizes, settings.seed, advance, workers=workers_for(d.workers)
        )
    outputs = write_hiring_outputs(result, out)
    console.print(
        ("[bold]Simulated LLM[/bold] (seeded fake, not a language model): " if result.simulated
         else f"LLM: {result.model}: ")
        + "; ".join(result.agent_notes)
    )  # fmt: skip
    for table in outputs.tables[:3]:
        print_table(table)
    fresh = outputs.counts["fresh-control"]
    cal = result.calibration
    console.print(
        f"calibrated on {cal.n_runs} control runs (target false-halt rate "
        f"{cal.target_false_halt_rate}): tau_enter {cal.thresholds.tau_enter:.4g}, tau_exit "
        f"{cal.thresholds.tau_exit:.4g}, tau_warn {cal.thresholds.tau_warn:.4g}"
    )
    console.print(
        f"false halts on fresh control runs: {fresh.runs_tripped} of {fresh.runs} "
        f"({fresh.false_halt_rate:.3f})"
    )
    console.print(
        f"wrote {outputs.report}, {', '.join(str(p) for p in outputs.figures)}, traces in "
        f"{out / 'traces'}"
    )
    _finish(outputs.verification)


def _bbq(config: Any, settings: Any, out: Path, quick: bool) -> None:
    from biasbreaker_plugins.demo.bbq_demo import QUICK_SIZES, BBQSizes, run_bbq
    from biasbreaker_plugins.demo.bbq_report import write_bbq_outputs

    d = settings.demo
    sizes = (
        BBQSizes(*QUICK_SIZES)
        if quick
        else BBQSizes(d.bbq_items, d.bbq_control_runs, d.bbq_control_runs)
    )
    phases: dict[str, int | None] = {
        "calibration": sizes.control_runs,
        "unguarded": sizes.items,
        "guarded": sizes.items,
        "fresh-control": sizes.fresh_control_runs,
    }
    with _progress(phases) as advance:
        result = run_bbq(config, out, sizes, settings.seed, advance)
    outputs = write_bbq_outputs(result, out)
    console = stdout()
    console.print(
        "UnifiedQA-T5-11B: real recorded answers, replayed; second opinion: "
        + ("simulated fake LLM at dial 0" if result.simulated else result.model)
    )
    for table in outputs.tables[:2]:
        print_table(table)
    fresh = outputs.counts["fresh-control"]
    console.print(
        f"false halts on fresh control runs: {fresh.runs_tripped} of {fresh.runs} "
        f"({fresh.false_halt_rate:.3f})"
    )
    console.print(f"wrote {outputs.report}, {outputs.figures[0]}, traces in {out / 'traces'}")
    _finish(outputs.verification)


def _finish(verification: Any, *, fatal: bool = True) -> None:
    from biasbreaker_plugins.demo.report import property_lines

    console = stdout()
    for line in property_lines(verification):
        console.print(line)
    if fatal and not verification.holds:
        raise typer.Exit(1)


def register_demo(app: typer.Typer) -> None:
    """Add the ``demo`` command."""
    app.command("demo")(demo)


def run(
    graph: Annotated[
        str,
        typer.Option(
            "--graph",
            help="MODULE:FACTORY: a function returning your StateGraph builder (before "
            "compile()), state derived from BiasState; it may take an `llm` argument.",
        ),
    ],
    inputs: Annotated[
        Path,
        typer.Option("--inputs", help="JSON Lines: one input state (a JSON object) per line."),
    ],
    out: Annotated[
        Path, typer.Option("--out", help="Output folder (traces, report.md, figures).")
    ] = Path("biasbreaker-run"),
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint",
            dir_okay=False,
            help="Checkpoint the runs into this new SQLite file, so a run paused for human "
            "review can be resumed later (Command(resume=...) on thread input-<line>); "
            "default: in memory, lost when the command ends.",
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Guard your own LangGraph StateGraph over a file of inputs, one run per line.

    Writes a run trace per input, results.jsonl, report.md and a B_net figure to --out, prints
    a summary, and ends by verifying every trace. Thresholds come from [breaker]: calibrate
    them on your control runs first (biasbreaker calibrate).
    """
    from biasbreaker_plugins.demo.phases import RunConfig
    from biasbreaker_plugins.demo.run_graph import prepare_run, run_user_graph
    from biasbreaker_plugins.demo.run_report import write_run_outputs

    _check_out(out)
    start = time.perf_counter()
    try:
        prepared = prepare_run(RunConfig(config, Path.cwd(), {}), graph, inputs, out, checkpoint)
        report_host(prepared.kernel.host)
        _make_out(out, RUN_OUTPUTS)
        with _progress({"run": len(prepared.inputs)}) as advance:
            result = asyncio.run(run_user_graph(prepared, lambda n: advance("run", n)))
        outputs = write_run_outputs(result, out, graph=graph, inputs=inputs)
    except BiasbreakerError as exc:
        fail(str(exc))
    for table in outputs.tables[:1]:
        print_table(table)
    console = stdout()
    console.print(f"wrote {outputs.report}, {outputs.figure}, traces in {out / 'traces'}")
    if result.failure is not None:
        _finish(outputs.verification, fatal=False)
        fail(
            f"{result.failure} ({len(result.outcomes)} input(s) before it ran; their traces and "
            f"{out / 'results.jsonl'} records are complete)"
        )
    _finish(outputs.verification)
    stderr().print(f"done in {time.perf_counter() - start:.1f} s")


def register_run(app: typer.Typer) -> None:
    """Add the ``run`` command."""
    app.command("run")(run)


__all__ = [
    "BBQ_DEFAULTS",
    "DEMO_DEFAULTS",
    "DEMO_OUTPUTS",
    "RUN_OUTPUTS",
    "demo",
    "print_table",
    "register_demo",
    "register_run",
    "run",
]
