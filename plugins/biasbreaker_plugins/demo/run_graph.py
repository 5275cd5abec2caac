"""``biasbreaker run``: guard the user's own ``StateGraph`` over a JSON Lines file of inputs.

``--graph MODULE:FACTORY`` names a function that returns a LangGraph ``StateGraph`` *builder*
(before ``compile()``) with any state schema ``guard()`` takes (``MessagesState`` too: the
guard adds its own ``bb_`` keys, so it need not derive from ``BiasState``). The factory is
called with no argument, or, if it has a parameter named ``llm``, with the configured LLM client
(``[llm] client``), so the graph's agents can use the same client as the intervention.
``--inputs FILE.jsonl`` holds one JSON object per line: the input state of one run (one
LangGraph thread, ``input-<line>``). :func:`prepare_run` checks the configuration, the graph
and the inputs file before anything is written, so a bad argument leaves ``--out`` as it was.
Runs go one after another, in file order, or ``concurrency`` at a time with the same bytes written
(:func:`run_user_graph`); each finished run is appended to ``results.jsonl`` in file order, at
once (with the full review request of a run paused for human review).

Failures are per input: a line that is not a JSON object, or an exception raised while its run
executes (a node that raises, an LLM call that fails, a state key the graph does not have), is
that input's outcome (status ``failed`` with the error's class, message, node and the input's
line, the traceback in ``run.log``), and the next input runs; ``fail_fast`` stops at the first.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from biasbreaker.errors import ConfigError, InputError
from biasbreaker.trace.signing import signer_from_environment
from biasbreaker_plugins.demo.agents import DemoKernel
from biasbreaker_plugins.demo.checkpoints import PostgresCheckpoint, check_postgres_checkpoint
from biasbreaker_plugins.demo.driver import (
    ResultsLog,
    ThreadOutcome,
    compiled,
    failure_of,
    plain_json,
    run_threads,
    sealed_head,
)
from biasbreaker_plugins.demo.phases import (
    RECORD_ONLY,
    RunConfig,
    concatenate,
    deliberate,
    merge,
    phase_kernel,
    read_traces,
    recording,
)

RUN_FILES = (
    "results.jsonl",
    "results.jsonl.seal",
    "report.md",
    "figures/bnet.png",
    "run.log",
)
"""The files of ``run`` besides its traces (``traces/input-<line>.jsonl``), in ``--out``."""

CONTROL_FILE = "control-runs.jsonl"
"""``run --control``: every trace of the run, one after another, in input order (what
``biasbreaker calibrate`` reads; the same runs, and sha256, as the ``traces/`` folder)."""

CONTROL_SETTINGS: dict[str, Any] = {"breaker": dict(RECORD_ONLY), "calibration": {"control": None}}
"""The settings a control recording runs with, over the user's: the breaker observing only
(:data:`~biasbreaker_plugins.demo.phases.RECORD_ONLY`, ``tau_enter = 1``: it intervenes only if a
trip statistic reaches 1, the top of the scale) and no calibration window, so the recorded
B_net is what the graph as it is produces, and recordings made before and after a calibration
share one configuration. With ``[probe] adaptive = true`` a recording also probes in full
(:func:`~biasbreaker_plugins.demo.phases.recording`), so the thresholds it calibrates are the
full probe's."""


def load_factory(spec: str, *, cwd: Path) -> Callable[..., Any]:
    """The function ``MODULE:FACTORY`` names (the current directory is importable).

    Raises:
        ConfigError: The spec is malformed, the module cannot be imported, or it has no such
            callable; the message names the module and the attribute.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(
            f"--graph {spec!r} is not MODULE:FACTORY; e.g. --graph my_pipeline:build_graph"
        )
    if str(cwd) not in sys.path:
        sys.path.insert(0, str(cwd))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(
            f"--graph {spec!r}: cannot import module {module_name!r}: {type(exc).__name__}: "
            f"{exc}. Is it on the Python path (the current directory is)?"
        ) from exc
    factory = module
    for part in attr.split("."):
        if not hasattr(factory, part):
            raise ConfigError(f"--graph {spec!r}: module {module_name!r} has no attribute {attr!r}")
        factory = getattr(factory, part)
    if not callable(factory):
        raise ConfigError(
            f"--graph {spec!r}: {attr!r} is a {type(factory).__name__}, not a function that "
            "returns a StateGraph"
        )
    return factory


def takes_llm(factory: Callable[..., Any]) -> bool:
    """Whether the factory has a parameter named ``llm`` (it is then given the client)."""
    try:
        return "llm" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False


LLMRole = dict[str, str]
"""``{"client": <[llm] client>, "model": <the client's model>}``."""


def llm_roles(kernel: DemoKernel, *, graph: bool) -> dict[str, LLMRole | None]:
    """Which client and model each LLM-using role of a run uses (``None``: the role has none).

    Args:
        kernel: The run's kernel.
        graph: Whether the graph factory is given the client (it takes ``llm``).

    Returns:
        ``{"graph": …, "skeptics": …, "madera": …}``: the graph's agents (only when the factory
        takes ``llm``), the skeptic panel and MADERA (only when the router can route to them,
        :meth:`~biasbreaker.kernel.Kernel.repair_routes`), each ``{"client", "model"}`` or
        ``None``.

    Raises:
        ConfigError: A role needs an LLM and ``[llm] client`` is unset (the choices named).
    """
    routes = kernel.repair_routes()
    used = {"graph": graph, "skeptics": "skeptics" in routes, "madera": "madera" in routes}
    roles: dict[str, LLMRole | None] = {}
    for role, uses in used.items():
        if not uses:
            roles[role] = None
            continue
        client = kernel.llm()
        roles[role] = {"client": kernel.selected("llm_client")[0], "model": client.model}
    return roles


def describe_roles(roles: dict[str, LLMRole | None]) -> str:
    """One line naming each role's client and model, e.g. for the console and ``report.md``.

    The seeded fake is named as what it is (simulated, not a language model).
    """
    parts = []
    for role, used in roles.items():
        if used is None:
            parts.append(f"{role}: no LLM")
            continue
        fake = used["client"] == "fake"
        simulated = " (seeded simulated fake, not a language model)" if fake else ""
        parts.append(f"{role}: {used['client']} / {used['model']}{simulated}")
    return "; ".join(parts)


def build_user_graph(factory: Callable[..., Any], spec: str, kernel: DemoKernel) -> Any:
    """Call the factory and check that it returned a ``StateGraph`` builder.

    Raises:
        ConfigError: The factory raised, or returned something else than a ``StateGraph``
            builder (a compiled graph gets its own message).
    """
    from langgraph.graph import StateGraph

    llm = kernel.llm() if takes_llm(factory) else None  # unset client: the choices, named
    try:
        graph = factory() if llm is None else factory(llm=llm)
    except Exception as exc:
        raise ConfigError(
            f"--graph {spec!r}: the factory raised {type(exc).__name__}: {exc}"
        ) from exc
    if isinstance(graph, StateGraph):
        return graph
    if hasattr(graph, "get_graph") and hasattr(graph, "invoke"):
        raise ConfigError(
            f"--graph {spec!r} returned a compiled graph ({type(graph).__name__}); return the "
            "StateGraph builder (before .compile()) so biasbreaker can guard it"
        )
    raise ConfigError(
        f"--graph {spec!r} returned {type(graph).__name__}, not a langgraph StateGraph builder"
    )


@dataclass(frozen=True)
class InputLine:
    """One input of ``--inputs``: a state to run, or why the line cannot be one.

    Args:
        number: The line number (1-based).
        state: The input state (a JSON object), or ``None`` for a bad line.
        error: For a bad line: ``class``, ``message`` and ``node`` (``None``), as
            :func:`~biasbreaker_plugins.demo.driver.failure_of` gives them.
    """

    number: int
    state: dict[str, Any] | None
    error: dict[str, Any] | None = None

    @property
    def thread(self) -> str:
        """The LangGraph thread id of this input: ``input-<line, 5 digits>``."""
        return f"input-{self.number:05d}"


def read_inputs(path: Path) -> list[InputLine]:
    """One :class:`InputLine` per non-blank line; a malformed line is an input that failed.

    Raises:
        InputError: The file cannot be read or holds no input (empty, or blank lines only).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            f"--inputs {path}: cannot read it: {exc}. Give a JSON Lines file, one input state "
            "(a JSON object) per line"
        ) from exc
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            error = InputError(
                f"{path}:{number}: not valid JSON: {exc}: {_shown(line)}. Write the line as "
                'one JSON object, the input state, e.g. {"question": "..."}'
            )
            lines.append(InputLine(number, None, failure_of(error)))
            continue
        if not isinstance(value, dict):
            error = InputError(
                f"{path}:{number}: expected a JSON object (the graph's input state), got "
                f"{type(value).__name__} {_shown(line)}. Write the line as one JSON object "
                'keyed by the state\'s keys, e.g. {"question": "..."}'
            )
            lines.append(InputLine(number, None, failure_of(error)))
            continue
        lines.append(InputLine(number, value))
    if not lines:
        raise InputError(
            f"--inputs {path}: the file holds no input; write one input state (a JSON object) "
            'per line, e.g. {"question": "..."}'
        )
    return lines


def _shown(line: str, limit: int = 60) -> str:
    """A line of ``--inputs`` as an error message quotes it: stripped, cut to ``limit`` chars."""
    text = line.strip()
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def checked_inputs(path: Path, builder: Any) -> list[InputLine]:
    """``--inputs`` read and checked against the graph, as ``run`` and ``estimate`` read it.

    :func:`read_inputs`, then :func:`known_keys_only`: a line that is not JSON, not an object,
    or names a key the graph's input state lacks is an :class:`InputLine` with its error (the
    message names the line, the value and the fix).

    Raises:
        InputError: The file cannot be read or holds no input.
    """
    return known_keys_only(read_inputs(path), builder, path)


def known_keys_only(lines: list[InputLine], builder: Any, path: Path) -> list[InputLine]:
    """``lines`` with each input naming a key the graph's input state lacks made a failure.

    LangGraph drops such a key silently: an input whose ``"aplication"`` was misspelt ran with
    no application and reported ``done``. The keys are those of the builder's input schema
    (``StateGraph(State, input_schema=...)``, else the state); a builder whose schema keys
    cannot be read is not checked.
    """
    schemas = getattr(builder, "schemas", None)
    keys = (
        schemas.get(getattr(builder, "input_schema", None)) if isinstance(schemas, dict) else None
    )
    if not keys:
        return lines
    known = sorted(k for k in keys if not k.startswith("bb_"))  # the guard's keys are its own
    checked = []
    for line in lines:
        unknown = [k for k in (line.state or {}) if k not in keys]
        if not unknown:
            checked.append(line)
            continue
        error = InputError(
            f"{path}:{line.number}: key(s) {unknown} are not in the graph's input state "
            f"(its keys: {known}); LangGraph would drop them and run without them. Fix the "
            "key, or add it to the state"
        )
        checked.append(InputLine(line.number, None, failure_of(error)))
    return checked


def check_checkpoint(checkpoint: Path) -> None:
    """Check that ``--checkpoint`` names a new file in an existing, writable folder.

    Raises:
        ConfigError: The file exists already (its threads would be continued, not started),
            or its folder does not exist, is not a folder, or is not writable; the message
            names the path and what to do.
    """
    if checkpoint.exists() or checkpoint.is_symlink():
        raise ConfigError(
            f"--checkpoint {checkpoint}: the file exists; its threads input-<line> would be "
            "continued instead of started. Resume them from it (docs/demo.md §5), or give a "
            "new file, or delete it"
        )
    folder = checkpoint.parent
    if not folder.exists():
        raise ConfigError(
            f"--checkpoint {checkpoint}: folder {folder} does not exist; create it first, or "
            "give a new file in an existing folder"
        )
    if not folder.is_dir():
        raise ConfigError(
            f"--checkpoint {checkpoint}: {folder} is not a folder; give a new file in an "
            "existing folder"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(
            f"--checkpoint {checkpoint}: folder {folder} is not writable; give a new file in "
            "a folder you can write to"
        )


@dataclass(frozen=True)
class PreparedRun:
    """A ``biasbreaker run`` checked and ready: nothing has been written yet.

    Args:
        spec: The ``--graph`` spec.
        kernel: The run's kernel (traces into ``out/traces``).
        guarded: The guarded ``StateGraph`` builder.
        inputs: One per non-blank line of ``--inputs``, in file order.
        out: The output folder.
        checkpoint: The SQLite checkpoint file to create, a PostgreSQL database, or ``None``
            (in memory).
        roles: The client and model of each LLM-using role (:func:`llm_roles`).
        control: Whether this is a control recording (``run --control``,
            :data:`CONTROL_SETTINGS`).
    """

    spec: str
    kernel: DemoKernel
    guarded: Any
    inputs: list[InputLine]
    out: Path
    checkpoint: Path | PostgresCheckpoint | None = None
    roles: dict[str, LLMRole | None] = field(default_factory=dict)
    control: bool = False

    def planned(self) -> list[str]:
        """The files the run may write into ``out``, relative to it."""
        traces = [f"traces/{line.thread}.jsonl" for line in self.inputs]
        return [*RUN_FILES, *([CONTROL_FILE] if self.control else []), *traces]


def write_control_runs(prepared: PreparedRun) -> tuple[Path, str, int]:
    """Write :data:`CONTROL_FILE`: every trace the run wrote, in input order.

    Returns:
        The file, its sha256 and how many run traces it holds (an input that failed before
        its first guarded step has none).
    """
    traces = read_traces(prepared.out / "traces", [line.thread for line in prepared.inputs])
    path = prepared.out / CONTROL_FILE
    return path, concatenate(traces, path), len(traces)


def prepare_run(
    config: RunConfig,
    spec: str,
    inputs: Path,
    out: Path,
    checkpoint: Path | PostgresCheckpoint | None = None,
    *,
    control: bool = False,
) -> PreparedRun:
    """Check everything a run needs (configuration, graph, inputs) without writing anything.

    Args:
        config: The run's configuration.
        spec: ``--graph MODULE:FACTORY``.
        inputs: The JSON Lines inputs file.
        out: The output folder.
        checkpoint: ``--checkpoint``: a SQLite file that must not exist yet (its threads would
            otherwise be continued, not started), a PostgreSQL database that holds none of
            the run's threads yet (``checkpoints.check_postgres_checkpoint``), or ``None``.
        control: Record control runs (:data:`CONTROL_SETTINGS` over the configuration).

    Raises:
        ConfigError: Bad configuration (validated as :meth:`~biasbreaker.kernel.Kernel.validate`
            does: every selected implementation built), bad ``--graph``, a graph the adapter
            cannot guard, or a bad ``--checkpoint`` (see :func:`check_checkpoint`; for
            PostgreSQL also a database that cannot be reached or already holds a thread).
        InputError: The inputs file is unreadable or empty (a malformed line is an input
            that fails when the run gets to it), or ``BIASBREAKER_SIGNING_KEY_FILE`` names a
            key that cannot be loaded (or ``cryptography`` is not installed).
    """
    from biasbreaker_plugins.langgraph import guard

    if isinstance(checkpoint, Path):
        check_checkpoint(checkpoint)
    kernel = phase_kernel(
        config,
        traces=out / "traces",
        extra=merge(CONTROL_SETTINGS, recording(config)) if control else None,
    )
    kernel.validate()  # as `config --check`: everything a guarded run builds, built once
    signer_from_environment()  # a bad or unusable signing key: refused before --out is claimed
    factory = load_factory(spec, cwd=config.cwd)
    builder = build_user_graph(factory, spec, kernel)
    if control:
        with deliberate():  # CONTROL_SETTINGS record, never trip: tau_enter = 1
            guarded = guard(builder, kernel)
    else:
        guarded = guard(builder, kernel)
    roles = llm_roles(kernel, graph=takes_llm(factory))
    states = checked_inputs(inputs, builder)
    if isinstance(checkpoint, PostgresCheckpoint):
        check_postgres_checkpoint(checkpoint, [line.thread for line in states])
    return PreparedRun(spec, kernel, guarded, states, out, checkpoint, roles, control)


@dataclass
class RunResult:
    """What a ``biasbreaker run`` did.

    Args:
        outcomes: One per input that ran or failed, in file order.
        llm_calls: Calls through the configured client (agents given ``llm``, interventions).
        seconds: Wall time (console only).
        settings: The effective configuration (JSON).
        total: Inputs in the file.
        stopped: Why the run stopped before the last input (``--fail-fast``, a signal), or
            ``None``.
        roles: The client and model of each LLM-using role (:func:`llm_roles`).
        control: Whether the run recorded control runs (``run --control``).
        usage: LLM calls and tokens per role (:meth:`biasbreaker.usage.UsageTally.to_json`).
    """

    outcomes: list[ThreadOutcome]
    llm_calls: int
    seconds: float
    settings: dict[str, Any]
    total: int = 0
    stopped: str | None = None
    roles: dict[str, LLMRole | None] = field(default_factory=dict)
    control: bool = False
    usage: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def failed(self) -> list[ThreadOutcome]:
        """The inputs that failed, in file order."""
        return [o for o in self.outcomes if o.status == "failed"]


async def run_user_graph(
    prepared: PreparedRun,
    advance: Callable[[int], None],
    *,
    fail_fast: bool = False,
    errors: logging.Logger | None = None,
    done: list[ThreadOutcome] | None = None,
    concurrency: int = 1,
) -> RunResult:
    """Run the prepared graph once per input; a failure is that input's.

    With ``concurrency`` N > 1, N threads run at once in this event loop, and everything the
    run writes is what running them one after another writes, byte for byte: the records go
    to ``results.jsonl`` in input order (:func:`~biasbreaker_plugins.demo.driver.run_threads`),
    the randomness is keyed on each call's content and seed, never on a shared stream, and
    no state passes from thread to thread: each thread's probe rotation starts from its own
    origin, the seed, the thread id and the node
    (:func:`~biasbreaker_plugins.langgraph.probing.origin_of`). So the threads overlap
    entirely: their nodes' calls, their probes, the checkpoint writes. A line that is not a
    JSON object is a barrier (the inputs before it finish first).

    With the in-memory checkpointer (no ``--checkpoint``), a thread that ended (done or
    failed) has its checkpoints deleted as soon as it is recorded: nothing can resume it
    once the command ends, and the saver would otherwise keep every checkpoint of every
    input; a thread paused for review keeps them. Outcomes are kept without their values
    (those are in ``results.jsonl``), so memory does not grow with the number of inputs.

    Args:
        prepared: The checked run.
        advance: Called with 1 after each input (in input order).
        fail_fast: Stop after the first input that fails. With ``concurrency > 1`` the
            inputs already running then finish and are recorded (up to N - 1 then), and
            so are later ones that finished while it ran.
        errors: Where each failure's traceback is logged (``run.log``); ``None``: nowhere.
        done: A list the outcomes are appended to as they come (the caller reads it when the
            run is interrupted); ``None``: a new one.
        concurrency: Inputs run at once, >= 1.

    Returns:
        The outcomes, in input order, without their ``values``, ``review`` and ``exception``
        (written to ``results.jsonl`` and ``run.log``). A failed input's ``results.jsonl``
        record has ``status`` ``failed`` and ``error`` (``class``, ``message``, ``node``)
        with its ``line``.

    Raises:
        ConfigError: ``concurrency < 1``.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(
            f"--concurrency {concurrency!r}: must be a whole number >= 1 (how many inputs run "
            "at once); use --concurrency 1 to run them one after another"
        )
    start = time.perf_counter()
    out, kernel, guarded = prepared.out, prepared.kernel, prepared.guarded
    log = ResultsLog(out / "results.jsonl")
    outcomes: list[ThreadOutcome] = [] if done is None else done
    lines = {line.thread: line.number for line in prepared.inputs}
    stopped: list[str] = []

    def after(outcome: ThreadOutcome) -> None:
        record = {
            "thread": outcome.thread,
            "line": lines[outcome.thread],
            "status": outcome.status,
            "values": plain_json(outcome.values),
            "review": None if outcome.review is None else plain_json(outcome.review),
            "trace": outcome.trace,
            "trace_head": outcome.trace_head,
            "llm": prepared.roles,
            "usage": outcome.usage or {},
        }
        if outcome.error is not None:
            record["error"] = dict(outcome.error)
            if errors is not None:
                where = f" in node {outcome.error['node']!r}" if outcome.error["node"] else ""
                errors.error(
                    "input line %d (%s) failed%s: %s: %s",
                    lines[outcome.thread],
                    outcome.thread,
                    where,
                    outcome.error["class"],
                    outcome.error["message"],
                    exc_info=outcome.exception,
                )
        log.write(record)
        # kept small: the values are in results.jsonl, the traceback in run.log
        outcomes.append(replace(outcome, values={}, review=None, exception=None))
        advance(1)

    def trace_of(thread: str) -> str | None:
        path = out / "traces" / f"{thread}.jsonl"
        return path.relative_to(out).as_posix() if path.exists() else None

    async def forget(app: Any, outcome: ThreadOutcome) -> None:
        if prepared.checkpoint is None and outcome.status in ("done", "failed"):
            await app.checkpointer.adelete_thread(outcome.thread)

    async def run_lines(app: Any, chunk: list[InputLine]) -> bool:
        """Run consecutive good lines; False when fail-fast stopped them."""
        ran = await run_threads(
            app,
            ((line.thread, line.state or {}) for line in chunk),
            phase="run",
            trace_of=trace_of,
            after=after,
            close_traces=guarded.guard.traces.close,
            root=out,
            failures="record",
            fail_fast=fail_fast,
            concurrency=concurrency,
            finished=lambda outcome: forget(app, outcome),
        )
        return not (fail_fast and any(o.status == "failed" for o in ran))

    try:
        async with compiled(guarded, prepared.checkpoint) as app:
            pending: list[InputLine] = []
            for line in [*prepared.inputs, None]:
                if line is not None and line.error is None:
                    pending.append(line)
                    continue
                if pending and not await run_lines(app, pending):
                    stopped.append("--fail-fast: stopped at the first failed input")
                    break
                pending = []
                if line is None:
                    break
                after(ThreadOutcome("run", line.thread, "failed", {}, None, None, error=line.error))
                if fail_fast:
                    stopped.append("--fail-fast: stopped at the first failed input")
                    break
    except BaseException:
        # a signal (or a cancellation) stopped the input that was running: record it with its
        # trace, so results.jsonl lists every trace the run wrote (verify --manifest holds)
        ran = {o.thread for o in outcomes}
        for line in prepared.inputs:
            trace = trace_of(line.thread)
            if line.thread not in ran and trace is not None:
                head = sealed_head(out, trace)
                after(ThreadOutcome("run", line.thread, "interrupted", {}, None, trace, head))
        raise
    finally:
        log.close()
    return RunResult(
        outcomes,
        kernel.counter.total,
        time.perf_counter() - start,
        kernel.settings.model_dump(mode="json"),
        total=len(prepared.inputs),
        stopped=stopped[0] if stopped else None,
        roles=prepared.roles,
        control=prepared.control,
        usage=kernel.counter.usage.to_json(),
    )


__all__ = [
    "CONTROL_FILE",
    "CONTROL_SETTINGS",
    "RUN_FILES",
    "InputLine",
    "LLMRole",
    "PreparedRun",
    "RunResult",
    "build_user_graph",
    "check_checkpoint",
    "checked_inputs",
    "describe_roles",
    "llm_roles",
    "load_factory",
    "prepare_run",
    "read_inputs",
    "run_user_graph",
    "takes_llm",
    "write_control_runs",
]
