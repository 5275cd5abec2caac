"""``biasbreaker demo --scenario hiring``: the hiring pipeline, unguarded and guarded.

Phases, in order (every one deterministic given the seed):

1. **calibration** — ``[demo] control_runs`` control postings (every agent at dial 0) through
   the guarded pipeline with the breaker recording only (:data:`~.phases.RECORD_ONLY`); their
   traces calibrate ``tau_enter``/``tau_exit``/``tau_warn`` and the calibration window at the
   per-run false-halt target ``[calibration] target_false_halt_rate``;
2. **reference** (fake only) — the same postings through the plain pipeline with every agent
   at dial 0: what a group-blind pipeline's selection rates look like on these postings, so
   the sampling noise of the impact ratio is on the page; **unguarded** — ``[demo] postings``
   postings through the plain pipeline (the ranker biased when the client is the fake);
3. **guarded** — the same postings through the guarded pipeline with the calibrated
   thresholds;
4. **fresh-control** — ``[demo] fresh_control_runs`` other control postings, another fake seed,
   guarded with the calibrated thresholds: the false-halt rate measured after calibration.

Postings are independent (one LangGraph thread and one trace file each), so a phase may run in
``[demo] workers`` processes: the postings are cut into consecutive chunks, every process
builds the phase's kernel and graph once and runs its chunks, and the parent writes
``results.jsonl`` in posting order. The traces and results are the same bytes whatever the
number of processes.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from biasbreaker.calibration import CalibrationReport
from biasbreaker.trace import Trace
from biasbreaker.types import canonical_json
from biasbreaker.usage import UsageJSON, combine_usage, usage_since
from biasbreaker_plugins.demo.agents import agent_clients
from biasbreaker_plugins.demo.driver import (
    ResultsLog,
    ThreadOutcome,
    compiled,
    plain_json,
    run_threads,
)
from biasbreaker_plugins.demo.hiring import BIASED_AGENT, Posting, jobs, make_postings
from biasbreaker_plugins.demo.interrupts import (
    Interrupted,
    end_worker,
    run_in,
    sigint_blocked,
    stop_workers,
    worker_init,
    worker_stop,
)
from biasbreaker_plugins.demo.phases import (
    RunConfig,
    calibrate_from_traces,
    concatenate,
    deliberate,
    phase_kernel,
    read_traces,
    recording,
)

QUICK_SIZES = (24, 20, 12)
"""``--quick``: postings, control runs, fresh control runs."""

CHUNK = 4
"""Postings per task handed to a worker process (and per call in one process)."""


@dataclass(frozen=True)
class Sizes:
    """How many postings each phase runs."""

    postings: int
    control_runs: int
    fresh_control_runs: int


@dataclass(frozen=True)
class PhaseSpec:
    """Everything a process needs to run postings of one phase (picklable).

    Args:
        name: ``calibration``, ``unguarded``, ``guarded`` or ``fresh-control``.
        config: The run's configuration.
        out: The output folder.
        guarded: Whether the graph is guarded (and traced).
        biased: Whether the biased agent gets its measured preference (fake only).
        extra: Settings of this phase on top of the run's (thresholds, window, router).
        fake_seed: Seed of the demo's fake agents, or ``None`` for the run's seed.
    """

    name: str
    config: RunConfig
    out: Path
    guarded: bool
    biased: bool
    extra: dict[str, Any] = field(default_factory=dict)
    fake_seed: int | None = None

    @property
    def traces(self) -> Path | None:
        """The phase's trace folder (guarded phases)."""
        return self.out / "traces" / self.name if self.guarded else None

    def key(self) -> str:
        """A stable identity of the phase, for the per-process cache."""
        return canonical_json(
            [self.name, str(self.config.config_file), str(self.config.cwd),
             dict(self.config.overrides), str(self.out), self.guarded, self.biased,
             self.extra, self.fake_seed]
        )  # fmt: skip


@dataclass
class Phase:
    """One phase's outcome.

    Args:
        name: The phase.
        records: One ``results.jsonl`` record per posting, in posting order.
        traces: The phase's traces (guarded phases), in posting order.
        llm_calls: LLM calls the phase made (agents, probe re-runs, interventions).
        seconds: Wall time (console only; never written to a trace or the report).
        usage: LLM calls and tokens per role (:data:`biasbreaker.usage.UsageJSON`).
    """

    name: str
    records: list[dict[str, Any]]
    traces: list[Trace] = field(default_factory=list)
    llm_calls: int = 0
    seconds: float = 0.0
    usage: UsageJSON = field(default_factory=dict)


@dataclass
class HiringResult:
    """Everything the report needs."""

    sizes: Sizes
    seed: int
    postings: dict[str, Posting]
    phases: dict[str, Phase]
    calibration: CalibrationReport
    control_file: str
    control_sha256: str
    agent_notes: tuple[str, ...]
    simulated: bool
    model: str
    settings: dict[str, Any]
    estimate: Any = None
    """The calls predicted before the run (``demo.estimate.Estimate``), set by the command
    that printed it, or ``None``."""


Chunk = tuple[list[dict[str, Any]], int, UsageJSON]
"""What a chunk of postings gave: its records, its LLM calls, and calls and tokens by role."""
Advance = Callable[[str, int], None]
"""Progress callback: ``(phase, finished postings)``."""
Plan = Callable[[Sequence[Path]], None]
"""Called with the files a phase is about to write (the ``--out`` marker lists them first)."""


class _Runner:
    """A phase's kernel and compiled graph in one process, and its own event loop."""

    def __init__(self, spec: PhaseSpec) -> None:
        from biasbreaker_plugins.demo.hiring_graph import build_hiring_graph
        from biasbreaker_plugins.langgraph import guard

        self.spec = spec
        self.kernel = phase_kernel(spec.config, traces=spec.traces, extra=spec.extra)
        clients = agent_clients(
            self.kernel,
            biased_agent=BIASED_AGENT if spec.biased else None,
            jobs=list(jobs()),
            fake_seed=spec.fake_seed,
        )
        demo = self.kernel.settings.demo
        builder = build_hiring_graph(clients, shortlist=demo.shortlist, prompts=demo.prompts)
        with deliberate():
            self.graph = guard(builder, self.kernel) if spec.guarded else builder
        self.loop = asyncio.new_event_loop()
        self.app = self.loop.run_until_complete(self._compile())

    async def _compile(self) -> Any:
        async with compiled(self.graph) as app:
            return app

    def run(self, postings: Sequence[Posting]) -> Chunk:
        """Run ``postings``: their records, LLM calls, and calls and tokens by role."""
        spec = self.spec
        before = self.kernel.counter.total
        used = self.kernel.counter.usage.to_json()
        by_id = {p.id: p for p in postings}
        records: list[dict[str, Any]] = []

        def trace_of(thread: str) -> str | None:
            if spec.traces is None:
                return None
            return (spec.traces / f"{thread}.jsonl").relative_to(spec.out).as_posix()

        def after(outcome: ThreadOutcome) -> None:
            records.append(_record(spec.name, by_id[outcome.thread], outcome))

        traces = getattr(getattr(self.graph, "guard", None), "traces", None)
        run_in(
            self.loop,
            run_threads(
                self.app,
                ((p.id, p.graph_input()) for p in postings),
                phase=spec.name,
                trace_of=trace_of,
                after=after,
                close_traces=None if traces is None else traces.close,
                root=spec.out,
            ),
        )
        spent = usage_since(self.kernel.counter.usage.to_json(), used)
        return records, self.kernel.counter.total - before, spent


def _record(phase: str, posting: Posting, outcome: ThreadOutcome) -> dict[str, Any]:
    """The ``results.jsonl`` record of one posting."""
    return {
        "phase": phase,
        "thread": outcome.thread,
        "job": posting.job,
        "groups": posting.group_of(),
        "status": outcome.status,
        "ranking": outcome.values.get("ranking"),
        "shortlist": outcome.values.get("shortlist") if outcome.status == "done" else None,
        "review": None if outcome.review is None else plain_json(outcome.review),
        "trace": outcome.trace,
        "trace_head": outcome.trace_head,
        "usage": outcome.usage or {},
    }


_RUNNERS: dict[str, _Runner] = {}


def close_runners() -> None:
    """Forget this process's phase runners and close their event loops."""
    for runner in _RUNNERS.values():
        runner.loop.close()
    _RUNNERS.clear()


def run_chunk(spec: PhaseSpec, postings: Sequence[Posting]) -> Chunk:
    """Run postings of one phase in this process (the task of a worker process).

    The phase's kernel and graph are built on the first chunk and kept for the next ones. In a
    worker process, SIGTERM cancels the chunk and ends the process once its files are closed.
    """
    try:
        key = spec.key()
        runner = _RUNNERS.get(key)
        if runner is None:
            runner = _RUNNERS[key] = _Runner(spec)
        return runner.run(postings)
    except Interrupted as exc:
        if worker_stop() is not None:
            end_worker(exc)
        raise


def workers_for(setting: int) -> int:
    """Processes to use: ``setting``, or for 0 one per CPU core, at most 4."""
    return setting if setting > 0 else max(1, min(4, os.cpu_count() or 1))


@contextmanager
def pool(workers: int) -> Iterator[Executor | None]:
    """A process pool of ``workers`` (spawned processes), or ``None`` for one process.

    Its workers ignore SIGINT and stop on SIGTERM (:func:`~.interrupts.worker_init`); when the
    block ends with an exception (an interruption included) they are stopped at once
    (:func:`~.interrupts.stop_workers`) instead of finishing their tasks.
    """
    if workers <= 1:
        yield None
        return
    executor = ProcessPoolExecutor(
        max_workers=workers, mp_context=get_context("spawn"), initializer=worker_init
    )
    try:
        yield executor
    except BaseException:
        stop_workers(executor)
        raise
    executor.shutdown(wait=True)


def _phase(
    spec: PhaseSpec,
    postings: Sequence[Posting],
    executor: Executor | None,
    log: ResultsLog,
    advance: Advance,
    plan: Plan | None = None,
) -> Phase:
    start = time.perf_counter()
    if plan is not None and spec.traces is not None:
        plan([spec.traces / f"{p.id}.jsonl" for p in postings])  # in the marker before written
    advance(spec.name, 0)
    chunks = [postings[i : i + CHUNK] for i in range(0, len(postings), CHUNK)]
    records: list[dict[str, Any]] = []
    calls = 0
    usage: UsageJSON = {}
    if executor is None:
        for chunk in chunks:
            done, n, spent = run_chunk(spec, chunk)
            calls += n
            usage = combine_usage(usage, spent)
            for record in done:
                log.write(record)
                records.append(record)
            advance(spec.name, len(done))
    else:
        with sigint_blocked():  # the workers start here: see sigint_blocked
            futures: list[Future[Chunk]] = [
                executor.submit(run_chunk, spec, chunk) for chunk in chunks
            ]
        for future in futures:  # results.jsonl in posting order, whatever finishes first
            done, n, spent = future.result()
            calls += n
            usage = combine_usage(usage, spent)
            for record in done:
                log.write(record)
                records.append(record)
            advance(spec.name, len(done))
    traces = read_traces(spec.traces, [p.id for p in postings]) if spec.traces else []
    return Phase(spec.name, records, traces, calls, time.perf_counter() - start, usage)


def run_hiring(
    config: RunConfig,
    out: Path,
    sizes: Sizes,
    seed: int,
    advance: Advance,
    *,
    workers: int = 1,
    plan: Plan | None = None,
) -> HiringResult:
    """Run the four phases and return what the report needs.

    Args:
        config: The run's configuration (the user's, with the demo's defaults where silent).
        out: The output folder (traces, ``results.jsonl``, control runs).
        sizes: Postings per phase.
        seed: The run's seed (postings, fakes, probes).
        advance: Progress callback.
        workers: Processes to run postings in (1: this process only).
        plan: Called with each guarded phase's trace files before the phase runs.

    Raises:
        ConfigError: Invalid configuration.
        ThresholdError: The control runs cannot be calibrated.
    """
    out.mkdir(parents=True, exist_ok=True)
    log = ResultsLog(out / "results.jsonl")
    phases: dict[str, Phase] = {}
    simulated = config.load().settings.llm.client == "fake"
    try:
        with pool(workers) as executor:
            control = make_postings("control", sizes.control_runs, seed)
            controls = PhaseSpec(
                "calibration", config, out, guarded=True, biased=False, extra=recording(config)
            )
            phases["calibration"] = _phase(controls, control, executor, log, advance, plan)
            kernel = phase_kernel(config, traces=None)
            report = calibrate_from_traces(phases["calibration"].traces, kernel)
            control_file = "control-runs.jsonl"
            sha = concatenate(phases["calibration"].traces, out / control_file)
            tau_enter, tau_exit, tau_warn = report.thresholds
            calibrated = {
                "breaker": {"tau_enter": tau_enter, "tau_exit": tau_exit, "tau_warn": tau_warn},
                "calibration": {"control": report.statistics.to_json(), "source_sha256": sha},
            }
            calibrated = _with_router(config, calibrated, tau_enter)

            postings = make_postings("posting", sizes.postings, seed)
            if simulated:
                blind = PhaseSpec("reference", config, out, guarded=False, biased=False)
                phases["reference"] = _phase(blind, postings, executor, log, advance, plan)
            plain = PhaseSpec("unguarded", config, out, guarded=False, biased=True)
            phases["unguarded"] = _phase(plain, postings, executor, log, advance, plan)
            guarded = PhaseSpec("guarded", config, out, guarded=True, biased=True, extra=calibrated)
            phases["guarded"] = _phase(guarded, postings, executor, log, advance, plan)
            fresh = make_postings("fresh", sizes.fresh_control_runs, seed)
            fresh_spec = PhaseSpec(
                "fresh-control", config, out, guarded=True, biased=False, extra=calibrated,
                fake_seed=seed + 1,
            )  # fmt: skip
            phases["fresh-control"] = _phase(fresh_spec, fresh, executor, log, advance, plan)
    finally:
        log.close()
        close_runners()
    final = phase_kernel(config, traces=None, extra=calibrated)
    notes = agent_clients(final, biased_agent=BIASED_AGENT, jobs=list(jobs())).notes
    return HiringResult(
        sizes=sizes,
        seed=seed,
        postings={p.id: p for p in [*control, *postings, *fresh]},
        phases=phases,
        calibration=report,
        control_file=control_file,
        control_sha256=sha,
        agent_notes=notes,
        simulated=final.selected("llm_client") == ["fake"],
        model=final.llm().model,
        settings=final.settings.model_dump(mode="json"),
    )


def _with_router(config: RunConfig, calibrated: dict[str, Any], tau_enter: float) -> dict[str, Any]:
    """The router's contamination threshold: tau_enter, where the user did not set one."""
    loaded = config.load()
    if loaded.settings.intervention.router != "heuristic":
        return calibrated
    if loaded.source_of("plugin.heuristic.node_threshold") != "default":
        return calibrated
    return {**calibrated, "plugin": {"heuristic": {"node_threshold": tau_enter}}}


__all__ = [
    "QUICK_SIZES",
    "HiringResult",
    "Phase",
    "PhaseSpec",
    "Sizes",
    "pool",
    "run_chunk",
    "run_hiring",
    "workers_for",
]
