"""The ``biasbreaker demo`` and ``biasbreaker run`` commands.

They come in through the entry-point group ``biasbreaker.commands``. This module is imported by
the command line at start-up, so it imports neither LangGraph nor matplotlib: the commands
import the demo's modules when they run.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

from biasbreaker.cli._common import ConfigOption, fail, report_host, stderr, stdout, warn
from biasbreaker.errors import BiasbreakerError
from biasbreaker.redaction import RedactingFormatter
from biasbreaker.trace.signing import signer_from_environment
from biasbreaker.usage import describe_usage
from biasbreaker_plugins.demo.interrupts import (
    Interrupted,
    StopOnSignal,
    exit_if_threads,
    run_async,
)
from biasbreaker_plugins.demo.output import MARKER, OutputFolder, write_text_atomic

if TYPE_CHECKING:
    from biasbreaker_plugins.demo.checkpoints import PostgresCheckpoint
    from biasbreaker_plugins.demo.estimate import Estimate
    from biasbreaker_plugins.demo.phases import RunConfig
    from biasbreaker_plugins.demo.report import Table
    from biasbreaker_plugins.demo.run_graph import PreparedRun

DEMO_FILES = (
    "results.jsonl",
    "results.jsonl.seal",
    "report.md",
    "control-runs.jsonl",
    "calibration.toml",
    "figures/bnet.png",
    "figures/selection.png",
    "figures/lean.png",
)
"""What ``demo`` writes into ``--out`` besides its traces (``traces/<phase>/<thread>.jsonl``)."""

DEMO_PHASES = ("calibration", "reference", "unguarded", "guarded", "fresh-control")
"""Every phase of either scenario; guarded phases write ``traces/<phase>/*.jsonl``."""

DEMO_DEFAULTS: dict[str, Any] = {
    "llm.client": "fake",
    "probe.scorers": ["decision"],
    "probe.r": 0,
    "probe.bootstrap": 0,
    "propagation.fast_smoothing|propagation.fast_half_life": 0.9,
    "calibration.max_history": 2,
    "plugin.heuristic.persistence_steps": 1,
    "plugin.heuristic.persistent_route": "skeptics",
    "plugin.fake.prompt_sensitivity": 0.03,
}
"""The demo's settings where the user's configuration is silent (see docs/demo.md). The demo
names the seeded simulated client (``llm.client = "fake"``) unless ``[llm] client`` names
another; it says so in its output and report."""

PRESETS: dict[str, dict[str, Any]] = {
    "real-model": {
        "demo.postings": 4,
        "demo.control_runs": 4,
        "demo.fresh_control_runs": 4,
        "demo.workers": 1,
        "demo.prompts": "short",
        "probe.k": 2,
        "probe.per_person": False,
        "probe.joint": False,
        "calibration.target_false_halt_rate": 0.2,
    },
}
"""``biasbreaker demo --preset NAME``: settings applied where the user's configuration is
silent, on top of :data:`DEMO_DEFAULTS` (hiring only). ``real-model`` is sized for a small
model on a CPU (SmolLM2-135M behind llama-cpp-python's one-slot server on 2 cores: 440
calls without repairs, docs/demo.md §7): 4 postings (each job once), 4 control and 4 fresh
control postings, one process (a one-slot server serves one request at a time whatever the
number of processes), short prompts within a 2,048-token context, and k = 2 variants per
probed step without the per-person and joint variants (with them a posting's eight names
make about 30 re-runs per step instead of 2). Four control runs bound a per-run false-halt
target of 0.2 at best (the conformal bound needs ⌈(1 − α)/α⌉ runs), so that is its target.
It needs a configured ``[llm] client``; the simulated fake runs it only when named. Measured
on SmolLM2-135M (docs/demo.md §7.1): 8 s a call on a loaded 2-core machine, and the
calibration refused its control runs (the model's scores reach the top of the scale)."""

PRESET_CLIENT = (
    "--preset {preset} is sized for a real model and [llm] client is not set: configure one "
    '(e.g. client = "openai-compatible" with [plugin.openai-compatible] base_url and model, '
    'docs/llm-clients.md), or set [llm] client = "fake" to try the preset on the simulated '
    "fake"
)
"""The error of a preset run whose configuration names no client (``{preset}``: its name)."""

BBQ_DEFAULTS: dict[str, Any] = {"calibration.target_false_halt_rate": 0.1}
"""The bbq scenario's own, on top: UnifiedQA changes its answer on 3.8 % of disambiguated
items under the group exchange (the control runs), too close to 5 % to calibrate on reliably."""


def _check_out(out: Path) -> None:
    """Fail (exit 1) unless ``--out`` is a folder or can be made one: checked before anything runs.

    A file there, or a file where one of its parent folders would be, is an error naming it.
    Whether the run may write into the folder is checked once the configuration is
    (:meth:`~biasbreaker_plugins.demo.output.OutputFolder.claim`).
    """
    for path in (out, *out.parents):
        if path.is_dir():
            return
        if path.exists() or path.is_symlink():
            where = "is a file" if path == out else f"is inside {path}, which is a file"
            fail(f"--out {out} {where}; give a folder")


def _checkpoint(value: str | None) -> Path | PostgresCheckpoint | None:
    """``--checkpoint``: a PostgreSQL URL (``postgresql://``, ``postgres://``) or a file path."""
    from biasbreaker_plugins.demo.checkpoints import PostgresCheckpoint, is_postgres_url

    if value is None:
        return None
    return PostgresCheckpoint(value) if is_postgres_url(value) else Path(value)


class _Stop:
    """What an interrupted command does last, once, from the main thread or the watchdog.

    ``partial(exc)`` writes the partial report and returns a few words on what completed; the
    marker is then rewritten as ``partial`` and one line says where the output is.

    Args:
        partial: Writes ``report.md`` for the interrupted run.
    """

    def __init__(self, partial: Callable[[OutputFolder, Interrupted], dict[str, Any]]) -> None:
        self.partial = partial
        self.folder: OutputFolder | None = None
        self._lock = threading.Lock()
        self._done = False

    def __call__(self, exc: Interrupted) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            folder = self.folder
            if folder is None:
                stderr().print(f"interrupted by {exc.name}: nothing was written")
                return
            completed = {"interrupted_by": exc.name}
            try:
                completed.update(self.partial(folder, exc))
            finally:
                folder.finish("partial", completed)
            for tmp in folder.path.rglob(".*.tmp"):  # a file being replaced when it stopped
                tmp.unlink(missing_ok=True)
            stderr().print(
                f"interrupted by {exc.name}: the partial output is in {folder.path} "
                f"({folder.path / 'report.md'} says what completed; {MARKER} lists the files)"
            )

    def exit(self, exc: Interrupted) -> None:
        """Finish (if the watchdog has not), then exit with ``128 + signum``."""
        self(exc)
        exit_if_threads(exc.exit_code)
        raise typer.Exit(exc.exit_code)


PROGRESS_EVERY_S = 10.0
"""Without a terminal: the least time (seconds) between two progress lines of one phase."""


class PlainProgress:
    """Progress as whole lines, for a standard error that is not a terminal (a log, a pipe, CI).

    A line when a phase starts, when it finishes, and between at most every ``every``
    seconds: ``progress: guarded 3/8 (12:04 elapsed)``, the elapsed time since the first
    phase started. Nothing is redrawn, so a log shows how far a long run got.

    Args:
        phases: Phase -> inputs it runs (``None``: unknown).
        write: Prints one line.
        clock: Seconds, monotonic (injectable for tests).
        every: Seconds between two lines of a phase in progress.
    """

    def __init__(
        self,
        phases: dict[str, int | None],
        write: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        every: float = PROGRESS_EVERY_S,
    ) -> None:
        self.totals = dict(phases)
        self.done = dict.fromkeys(phases, 0)
        self.write = write
        self.clock = clock
        self.every = every
        self.start: float | None = None
        self.last: dict[str, float] = {}

    def __call__(self, phase: str, n: int) -> None:
        """Advance ``phase`` by ``n`` inputs (n may be 0: the phase starts)."""
        now = self.clock()
        if self.start is None:
            self.start = now
        self.done[phase] += n
        total = self.totals.get(phase)
        finished = total is not None and self.done[phase] >= total
        if phase in self.last and not finished and now - self.last[phase] < self.every:
            return
        self.last[phase] = now
        minutes, seconds = divmod(int(now - self.start), 60)
        of = "" if total is None else f"/{total}"
        self.write(f"progress: {phase} {self.done[phase]}{of} ({minutes}:{seconds:02d} elapsed)")


@contextmanager
def _progress(phases: dict[str, int | None]) -> Iterator[Any]:
    console = stderr()
    if not console.is_terminal:
        yield PlainProgress(phases, lambda line: console.print(line, markup=False))
        return
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


def demo_config(
    config: Path | None, seed: int | None, scenario: str = "hiring", preset: str | None = None
) -> RunConfig:
    """The demo's configuration: the user's, with :data:`DEMO_DEFAULTS` where it is silent.

    Args:
        config: ``--config FILE`` or ``None``.
        seed: ``--seed`` or ``None``.
        scenario: ``hiring`` or ``bbq`` (which adds :data:`BBQ_DEFAULTS`).
        preset: A name in :data:`PRESETS` (hiring only), whose settings are added where the
            user's configuration is silent, or ``None``.

    Raises:
        ConfigError: ``preset`` is not a preset, is given with ``bbq``, or (a preset needs a
            client) the configuration names no ``[llm] client``: the message names the fix.
    """
    from biasbreaker.errors import ConfigError
    from biasbreaker_plugins.demo.phases import RunConfig, defaults_where_silent

    base = RunConfig(config, Path.cwd(), {} if seed is None else {"seed": seed})
    loaded = base.load()
    defaults = {**DEMO_DEFAULTS, **(BBQ_DEFAULTS if scenario == "bbq" else {})}
    if preset is not None:
        if preset not in PRESETS:
            raise ConfigError(
                f"--preset {preset!r} is not a preset; use one of: {', '.join(sorted(PRESETS))}"
            )
        if scenario != "hiring":
            raise ConfigError(
                f"--preset {preset} is a size of the hiring scenario; drop --scenario {scenario} "
                "or the preset"
            )
        if loaded.source_of("llm.client") == "default":
            raise ConfigError(PRESET_CLIENT.format(preset=preset))
        defaults = {**defaults, **PRESETS[preset]}
    overrides = {**defaults_where_silent(loaded, defaults), **base.overrides}
    return RunConfig(config, Path.cwd(), overrides)


def demo(
    scenario: Annotated[
        str,
        typer.Option("--scenario", help="hiring (Bloomberg resumes) or bbq (BBQ questions)."),
    ] = "hiring",
    quick: Annotated[
        bool, typer.Option("--quick", help="Small sizes (seconds), for tests and a first look.")
    ] = False,
    preset: Annotated[
        str | None,
        typer.Option(
            "--preset",
            help="Settings for a purpose, where your configuration is silent: real-model "
            "(hiring sized for a small model on a CPU: 440 LLM calls before repairs, 4 "
            "postings, 4 + 4 control, short prompts, k = 2 without per-person or joint "
            "variants; needs [llm] client; docs/demo.md section 7).",
        ),
    ] = None,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help=f"Output folder (traces, report.md, figures): new, empty, or written by "
            f"biasbreaker before ({MARKER} in it); only the files it lists are replaced.",
        ),
    ] = Path("biasbreaker-demo"),
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seed of the run; default: the config's seed.")
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Run the reference multi-agent pipeline on real data, unguarded and guarded.

    Offline by default: every agent is the seeded, simulated fake LLM unless [llm] client
    names a real one. Writes the run traces, report.md and PNG figures to --out, and ends by
    verifying every trace. SIGINT or SIGTERM stops it within two seconds, leaving whole files
    and a report of what completed (an error once it has started leaves the same).
    """
    if scenario not in ("hiring", "bbq"):
        fail(f"--scenario {scenario!r} is not a scenario; use hiring or bbq")
    if preset is not None and quick:
        fail(f"--quick and --preset {preset} both set the sizes; give one of them")
    _check_out(out)
    from biasbreaker_plugins.demo.phases import refuse_store_sink

    start = time.perf_counter()
    stop = _Stop(lambda folder, exc: _demo_partial(folder, scenario, f"Interrupted by {exc.name}"))
    with StopOnSignal(on_force=stop) as signals:
        try:
            run_config = demo_config(config, seed, scenario, preset)
            settings = run_config.load().settings
            if preset is not None and settings.llm.client == "fake":
                warn(
                    f'--preset {preset} on the simulated fake ([llm] client = "fake"): the '
                    "sizes are a real model's; the numbers are the fake's, not a model's"
                )
            kernel = run_config.kernel(check=False)
            report_host(kernel.host)  # once: every phase's kernel loads the same plugins
            # both validation passes, then build what the run builds (as `config --check`
            # does), before anything in --out is written: a client that cannot be built (its
            # API key is not set) would otherwise show only once the run had started
            kernel.validate()
            refuse_store_sink(settings.trace.sink, out / "traces")
            signer_from_environment()  # a bad signing key: refused before --out is claimed
            folder = OutputFolder.claim(
                out, "demo", DEMO_FILES, [f"traces/{p}/*.jsonl" for p in DEMO_PHASES]
            )
            signals.check()
            folder.begin()
            stop.folder = folder
            folder.plan(DEMO_FILES)
            with _calibration_warnings():
                if scenario == "hiring":
                    _hiring(run_config, settings, folder, quick)
                else:
                    _bbq(run_config, settings, folder, quick)
        except Interrupted as exc:
            stop.exit(exc)
        except BiasbreakerError as exc:
            if stop.folder is not None:
                completed = _demo_partial(stop.folder, scenario, "Stopped by an error", str(exc))
                stop.folder.finish("partial", {"error": str(exc), **completed})
                stderr().print(
                    f"the partial output is in {stop.folder.path} "
                    f"({stop.folder.path / 'report.md'} says what completed)"
                )
            fail(str(exc))
        finally:
            signals.done.set()
    folder.finish(
        "complete",
        {"scenario": scenario, "quick": quick, **({} if preset is None else {"preset": preset})},
    )
    stderr().print(f"done in {time.perf_counter() - start:.1f} s")


@contextmanager
def _calibration_warnings() -> Iterator[None]:
    """Say the calibration's warnings (e.g. control runs that all score 0) as warning lines.

    Other warnings pass through as they came.
    """
    from biasbreaker.calibration import CalibrationWarning

    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as recorded:
            warnings.simplefilter("always", CalibrationWarning)
            caught = recorded
            yield
    finally:  # also when the run fails: the warning may say why
        for item in caught:
            if issubclass(item.category, CalibrationWarning):
                warn(f"calibration: {item.message}")
            else:
                warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)


def _demo_partial(
    folder: OutputFolder, scenario: str, why: str, error: str | None = None
) -> dict[str, Any]:
    """``report.md`` of a demo that stopped early: the postings or items each phase finished.

    Args:
        folder: The output folder.
        scenario: ``hiring`` or ``bbq``.
        why: What stopped it, as the report's bold lead (``"Interrupted by SIGINT"``,
            ``"Stopped by an error"``).
        error: The error's message, quoted in the report, or ``None``.

    Returns:
        ``{"phases": {phase: records in results.jsonl}}`` for the marker.
    """
    from biasbreaker_plugins.demo.driver import read_results

    path = folder.path / "results.jsonl"
    records = read_results(path) if path.exists() else []
    finished: dict[str, int] = {}
    for record in records:
        finished[str(record.get("phase"))] = finished.get(str(record.get("phase")), 0) + 1
    traces = {
        phase: len(list((folder.path / "traces" / phase).glob("*.jsonl")))
        for phase in DEMO_PHASES
        if (folder.path / "traces" / phase).is_dir()
    }
    rows = [
        f"| {phase} | {finished.get(phase, 0)} | {traces.get(phase, '—')} |"
        for phase in DEMO_PHASES
        if phase in finished or phase in traces
    ]
    text = [
        f"# biasbreaker demo ({scenario}) — partial",
        "",
        f"**{why}** before the demo finished"
        + ("" if error is None else f" ({error})")
        + ": no calibration summary, figure or verification was made. What completed:",
        "",
        "| phase | records in results.jsonl | trace files |",
        "|---|---|---|",
        *(rows or ["| (none) | 0 | — |"]),
        "",
        "Every file written is whole: `results.jsonl` holds one whole line per finished "
        "posting, and each trace holds whole records up to where its run stopped (check them "
        f"with `biasbreaker verify {folder.path / 'traces'}`). `{MARKER}` lists the files and "
        "says `partial`; run the demo again into this folder to replace them.",
        "",
    ]
    write_text_atomic(folder.path / "report.md", "\n".join(text))
    return {"phases": finished}


def _hiring(config: Any, settings: Any, folder: OutputFolder, quick: bool) -> None:
    from biasbreaker_plugins.demo.hiring import GROUPS, group_label
    from biasbreaker_plugins.demo.hiring_demo import QUICK_SIZES, Sizes, run_hiring, workers_for
    from biasbreaker_plugins.demo.hiring_report import paired_table, write_hiring_outputs

    out = folder.path
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
    from biasbreaker_plugins.demo.estimate import estimate_hiring

    predicted = estimate_hiring(config, sizes, settings.seed)
    console.print(estimate_line(predicted), markup=False)
    with _progress(phases) as advance:
        result = run_hiring(
            config,
            out,
            sizes,
            settings.seed,
            advance,
            workers=workers_for(d.workers),
            plan=folder.plan,
        )
    result.estimate = predicted
    outputs = write_hiring_outputs(result, out)
    console.print(
        ("[bold]Simulated LLM[/bold] (seeded fake, not a language model): " if result.simulated
         else f"LLM: {result.model}: ")
        + "; ".join(result.agent_notes)
    )  # fmt: skip
    for table in outputs.tables[:3]:
        print_table(table)
    if outputs.paired is not None:
        print_table(paired_table(outputs.paired, {g: group_label(g) for g in GROUPS}))
        console.print(outputs.headline.replace("**", ""), markup=False)
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


def _bbq(config: Any, settings: Any, folder: OutputFolder, quick: bool) -> None:
    from biasbreaker_plugins.demo.bbq_demo import QUICK_SIZES, BBQSizes, run_bbq
    from biasbreaker_plugins.demo.bbq_report import write_bbq_outputs

    out = folder.path
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
        result = run_bbq(config, out, sizes, settings.seed, advance, plan=folder.plan)
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


def estimate_line(predicted: Estimate) -> str:
    """The demo's line before it starts: its calls without repairs, the range, per trip."""
    from biasbreaker_plugins.demo.estimate import ADAPTIVE_ASSUMPTION

    total = predicted.total
    # with adaptive probing the probe's re-runs are the full probe's: an upper bound
    exact = "at most: adaptive probing" if ADAPTIVE_ASSUMPTION in predicted.assumptions else "exact"
    return (
        f"estimate (nothing called yet; biasbreaker estimate --demo): "
        f"{round(total.without_repairs)} LLM calls without repairs ({exact}), up to "
        f"{round(total.at_most)} if every guarded step trips; each trip adds about "
        f"{total.repair_per_trip:.0f}"
    )


def estimate(
    graph: Annotated[
        str | None,
        typer.Option("--graph", help="MODULE:FACTORY, as biasbreaker run takes it."),
    ] = None,
    inputs: Annotated[
        Path | None,
        typer.Option("--inputs", help="JSON Lines inputs, as biasbreaker run takes them."),
    ] = None,
    demo_: Annotated[
        bool, typer.Option("--demo", help="Estimate biasbreaker demo (hiring) instead.")
    ] = False,
    quick: Annotated[bool, typer.Option("--quick", help="With --demo: its --quick sizes.")] = False,
    preset: Annotated[
        str | None, typer.Option("--preset", help="With --demo: its --preset (real-model).")
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="With --demo: the run's seed (default: config).")
    ] = None,
    steps: Annotated[
        str | None,
        typer.Option(
            "--steps",
            help="With --graph: the nodes one input passes through, comma-separated, in order "
            "(needed when the graph branches or loops; default: its one path START -> END). "
            "List a node once per run of it: more than once only where the graph can run it "
            "again (a loop, a conditional edge, a Command).",
        ),
    ] = None,
    calls: Annotated[
        list[str] | None,
        typer.Option(
            "--calls",
            help="With --graph: NODE=N, the LLM calls one run of the node makes (default 1; "
            "0 for a node that calls no model). Repeat for several nodes, each node once.",
        ),
    ] = None,
    trip_rate: Annotated[
        float | None,
        typer.Option(
            "--trip-rate",
            help="Share of guarded steps that trip (0 to 1), e.g. measured on earlier runs: "
            "adds the expected repair calls (default: repairs as a range only).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    config: ConfigOption = None,
) -> None:
    """Predict a run's LLM calls and tokens before anything is called (no model is called).

    From the configuration ([probe] k, r, joint, per_person, probe_rate, budgets;
    [intervention] routes, panel, max_rewrites), the graph (its nodes and path) and the inputs
    (which name protected groups, how many persons). Calls without repairs are exact for the
    steps assumed; repairs depend on trips and are given as a range (docs/cost.md).
    """
    from biasbreaker.estimate import describe
    from biasbreaker_plugins.demo.estimate import estimate_graph, estimate_hiring, parse_calls
    from biasbreaker_plugins.demo.phases import RunConfig

    if demo_ == (graph is not None or inputs is not None):
        fail(
            "give either --graph MODULE:FACTORY --inputs FILE (your graph, as biasbreaker run "
            "takes them) or --demo (the hiring demo)"
        )
    if not demo_ and (graph is None or inputs is None):
        missing = "--inputs FILE" if graph is not None else "--graph MODULE:FACTORY"
        fail(f"{missing} is missing: the estimate of a graph needs both --graph and --inputs")
    if demo_ and (steps is not None or calls):
        fail("--steps and --calls describe your graph; the demo's steps and calls are known")
    if not demo_ and (quick or seed is not None or preset is not None):
        fail(
            "--quick, --preset and --seed are the demo's (--demo); a graph's run takes [seed] "
            "from config"
        )
    if preset is not None and quick:
        fail(f"--quick and --preset {preset} both set the sizes; give one of them")
    try:
        if demo_:
            from biasbreaker_plugins.demo.hiring_demo import QUICK_SIZES, Sizes

            run_config = demo_config(config, seed, preset=preset)
            d = run_config.load().settings
            sizes = (
                Sizes(*QUICK_SIZES)
                if quick
                else Sizes(d.demo.postings, d.demo.control_runs, d.demo.fresh_control_runs)
            )
            predicted = estimate_hiring(run_config, sizes, d.seed, trip_rate=trip_rate)
        else:
            assert graph is not None
            assert inputs is not None
            predicted = estimate_graph(
                RunConfig(config, Path.cwd(), {}),
                graph,
                inputs,
                steps=None if steps is None else steps.split(","),
                calls=parse_calls(calls or []),
                trip_rate=trip_rate,
            )
    except BiasbreakerError as exc:
        fail(str(exc))
    if as_json:
        import json

        typer.echo(json.dumps(predicted.to_json(), indent=2))
        return
    console = stdout()
    console.print(f"estimate of {predicted.subject} (no model called):", markup=False)
    if len(predicted.phases) > 1:
        for name, phase in predicted.phases.items():
            for line in describe(phase, label=name):
                console.print(f"  {line}", markup=False)
    for line in describe(predicted.total, label="total" if len(predicted.phases) > 1 else ""):
        console.print(line, markup=False)
    if predicted.held:
        console.print(
            f"held for review ({len(predicted.held)} input(s): the run pauses at the node, "
            "nothing re-run, no repair):",
            markup=False,
        )
        for h in predicted.held:
            console.print(
                f"- line {h['line']} at {h['node']} ({h['held']}): {h['reason']}", markup=False
            )
    console.print("assumes:", markup=False)
    for sentence in predicted.assumptions:
        console.print(f"- {sentence}", markup=False)


def register_estimate(app: typer.Typer) -> None:
    """Add the ``estimate`` command."""
    app.command("estimate")(estimate)


def register_demo(app: typer.Typer) -> None:
    """Add the ``demo`` command."""
    app.command("demo")(demo)


def run(
    graph: Annotated[
        str,
        typer.Option(
            "--graph",
            help="MODULE:FACTORY: a function returning your StateGraph builder (before "
            "compile()), any state guard() takes (MessagesState, a TypedDict, a pydantic "
            "model or a dataclass); it may take an `llm` argument.",
        ),
    ],
    inputs: Annotated[
        Path,
        typer.Option("--inputs", help="JSON Lines: one input state (a JSON object) per line."),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            help=f"Output folder (traces, report.md, figures, run.log): new, empty, or written "
            f"by biasbreaker before ({MARKER} in it); only the files it lists are replaced.",
        ),
    ] = Path("biasbreaker-run"),
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            help="Checkpoint the runs into this new SQLite file, or a PostgreSQL database "
            "(postgresql://...; the postgres extra) that holds none of the run's threads yet, "
            "so a run paused for human review can be resumed later, by any process "
            "(Command(resume=...) on thread input-<line>); default: in memory, lost when the "
            "command ends.",
        ),
    ] = None,
    fail_fast: Annotated[
        bool,
        typer.Option(
            "--fail-fast",
            help="Stop at the first input that fails (default: record it and run the next); "
            "with --concurrency N the inputs already running finish and are recorded.",
        ),
    ] = False,
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency",
            help="Inputs run at once in this process (asyncio), >= 1. The traces, "
            "results.jsonl (in input order) and report are the same bytes as with 1 (one "
            "after another, the default); a node's first probe in a thread waits for the "
            "inputs before it (docs/cli.md).",
        ),
    ] = 1,
    control: Annotated[
        bool,
        typer.Option(
            "--control",
            help="Record control runs for `biasbreaker calibrate`: the graph as it is on these "
            "inputs, the breaker observing only (tau_enter = 1, no calibration window), and "
            "control-runs.jsonl (every trace, in input order) besides traces/. Calibration "
            "treats every control run as fair: review their outputs in results.jsonl first.",
        ),
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Guard your own LangGraph StateGraph over a file of inputs, one run per line.

    Writes a run trace per input, results.jsonl, report.md and a B_net figure to --out, prints
    a summary, and ends by verifying every trace. An input that fails (a bad line, a node that
    raises, a failed LLM call) is recorded with its line, node and error, its traceback in
    run.log, and the next one runs; exit status 1 if any failed. Thresholds come from
    [breaker]: calibrate them on your control runs first (run --control, then biasbreaker
    calibrate).
    """
    from biasbreaker_plugins.demo.phases import RunConfig
    from biasbreaker_plugins.demo.run_graph import (
        describe_roles,
        prepare_run,
        run_user_graph,
        write_control_runs,
    )
    from biasbreaker_plugins.demo.run_report import write_run_outputs

    _check_out(out)
    if concurrency < 1:
        fail(
            f"--concurrency {concurrency}: must be a whole number >= 1 (how many inputs run at "
            "once); use --concurrency 1 to run them one after another, or e.g. --concurrency 4"
        )
    start = time.perf_counter()
    done: list[Any] = []
    prepared_runs: list[PreparedRun] = []

    def partial(folder: OutputFolder, exc: Interrupted) -> dict[str, Any]:
        from biasbreaker_plugins.demo.run_report import write_partial_run_report

        lines = prepared_runs[0].inputs
        write_partial_run_report(
            folder.path,
            graph=graph,
            inputs=inputs,
            lines=lines,
            outcomes=done,
            why=f"interrupted by {exc.name}",
        )
        return _run_completed(len(lines), done)

    stop = _Stop(partial)
    with StopOnSignal(on_force=stop) as signals:
        try:
            prepared = prepare_run(
                RunConfig(config, Path.cwd(), {}),
                graph,
                inputs,
                out,
                _checkpoint(checkpoint),
                control=control,
            )
            prepared_runs.append(prepared)
            report_host(prepared.kernel.host)
            stdout().print(f"LLM per role: {describe_roles(prepared.roles)}")
            folder = OutputFolder.claim(out, "run", prepared.planned())
            signals.check()
            folder.begin()
            stop.folder = folder
            folder.plan(prepared.planned())
            errors = _error_log(out / "run.log")
            try:
                with _progress({"run": len(prepared.inputs)}) as advance:
                    result = run_async(
                        signals,
                        run_user_graph(
                            prepared,
                            lambda n: advance("run", n),
                            fail_fast=fail_fast,
                            errors=errors,
                            done=done,
                            concurrency=concurrency,
                        ),
                    )
            finally:
                for handler in errors.handlers:
                    handler.close()
            outputs = write_run_outputs(
                result, out, graph=graph, inputs=inputs, lines=prepared.inputs
            )
            recorded = write_control_runs(prepared) if control else None
        except Interrupted as exc:
            stop.exit(exc)
        except BiasbreakerError as exc:
            if stop.folder is not None:
                stop.folder.finish("partial", {"error": str(exc)})
            fail(str(exc))
        finally:
            signals.done.set()
    completed = _run_completed(len(prepared.inputs), result.outcomes)
    folder.finish("partial" if result.stopped else "complete", completed)
    for table in outputs.tables[:1]:
        print_table(table)
    console = stdout()
    console.print(f"LLM calls and tokens per role: {describe_usage(result.usage)}", markup=False)
    console.print(f"wrote {outputs.report}, {outputs.figure}, traces in {out / 'traces'}")
    if recorded is not None:
        path, sha, count = recorded
        console.print(
            f"control runs: {count} run trace(s) in {path} (sha256 {sha}), the same as "
            f"{out / 'traces'}. Calibration treats every one as fair: review their outputs in "
            f"{out / 'results.jsonl'}, then: biasbreaker calibrate {out / 'traces'} "
            "--write-toml biasbreaker.toml",
            markup=False,
        )
    for outcome in result.failed:
        error = outcome.error or {}
        where = f" in node {error['node']!r}" if error.get("node") else ""
        warn(
            f"input line {int(outcome.thread.rpartition('-')[2])} failed{where}: "
            f"{error.get('class')}: {error.get('message')}"
        )
    _finish(outputs.verification, fatal=not result.failed)
    if result.failed:
        failed_lines = [int(o.thread.rpartition("-")[2]) for o in result.failed]
        stopped = f"; {result.stopped}" if result.stopped else ""
        fail(
            f"{len(result.failed)} of {result.total} input(s) failed (line(s) "
            f"{', '.join(map(str, failed_lines))}){stopped}: {out / 'report.md'} lists them, "
            f"the tracebacks are in {out / 'run.log'}; the other inputs' traces and records are "
            "complete"
        )
    stderr().print(f"done in {time.perf_counter() - start:.1f} s")


def _run_completed(total: int, outcomes: Sequence[Any]) -> dict[str, Any]:
    """The marker's ``completed`` of a run: inputs, how many ran, which lines failed."""
    failed = [int(o.thread.rpartition("-")[2]) for o in outcomes if o.status == "failed"]
    return {"inputs": total, "ran": len(outcomes), "failed_lines": failed}


def _error_log(path: Path) -> logging.Logger:
    """A logger writing each failed input's traceback to ``path`` (created on the first one).

    A logger of its own (not in the ``logging`` tree), so nothing it logs reaches the screen;
    its text goes through the one redaction rule.
    """
    errors = logging.Logger("biasbreaker.run.errors", logging.ERROR)
    handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    handler.setFormatter(RedactingFormatter("%(levelname)s %(message)s"))
    errors.addHandler(handler)
    return errors


def register_run(app: typer.Typer) -> None:
    """Add the ``run`` command."""
    app.command("run")(run)


__all__ = [
    "BBQ_DEFAULTS",
    "DEMO_DEFAULTS",
    "DEMO_FILES",
    "DEMO_PHASES",
    "PRESETS",
    "PRESET_CLIENT",
    "PROGRESS_EVERY_S",
    "PlainProgress",
    "demo",
    "demo_config",
    "estimate",
    "estimate_line",
    "print_table",
    "register_demo",
    "register_estimate",
    "register_run",
    "run",
]
