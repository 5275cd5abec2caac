"""``biasbreaker run``: guard the user's own ``StateGraph`` over a JSON Lines file of inputs.

``--graph MODULE:FACTORY`` names a function that returns a LangGraph ``StateGraph`` *builder*
(before ``compile()``) whose state derives from ``BiasState``. The factory is called with no
argument, or, if it has a parameter named ``llm``, with the configured LLM client
(``[llm] client``), so the graph's agents can use the same client as the intervention.
``--inputs FILE.jsonl`` holds one JSON object per line: the input state of one run (one
LangGraph thread, ``input-<line>``). :func:`prepare_run` checks the configuration, the graph
and every input line before anything is written, so a bad argument leaves ``--out`` as it was.
Runs go one after another, in file order; each finished run is appended to ``results.jsonl`` at
once (with the full review request of a run paused for human review), so an error while input N
runs leaves every earlier run's trace and record complete and readable.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasbreaker.errors import BiasbreakerError, ConfigError, InputError
from biasbreaker_plugins.demo.agents import DemoKernel
from biasbreaker_plugins.demo.driver import (
    ResultsLog,
    ThreadOutcome,
    compiled,
    plain_json,
    run_threads,
)
from biasbreaker_plugins.demo.phases import RunConfig, phase_kernel


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


def build_user_graph(factory: Callable[..., Any], spec: str, kernel: DemoKernel) -> Any:
    """Call the factory and check that it returned a ``StateGraph`` builder.

    Raises:
        ConfigError: The factory raised, or returned something else than a ``StateGraph``
            builder (a compiled graph gets its own message).
    """
    from langgraph.graph import StateGraph

    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    try:
        graph = factory(llm=kernel.llm()) if "llm" in params else factory()
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


def read_inputs(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, input state)`` per non-blank line, every line checked before any runs.

    Raises:
        InputError: The file cannot be read, holds no input (empty or blank lines only), or a
            line is not a JSON object (file and line named).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            f"--inputs {path}: cannot read it: {exc}. Give a JSON Lines file, one input state "
            "(a JSON object) per line"
        ) from exc
    states = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{path}:{number}: not valid JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise InputError(
                f"{path}:{number}: expected a JSON object (the graph's input state), got "
                f"{type(value).__name__}"
            )
        states.append((number, value))
    if not states:
        raise InputError(
            f"--inputs {path}: the file holds no input; write one input state (a JSON object) "
            'per line, e.g. {"question": "..."}'
        )
    return states


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
        inputs: ``(line number, input state)`` per input, in file order.
        out: The output folder.
        checkpoint: The SQLite checkpoint file to create, or ``None`` (in memory).
    """

    spec: str
    kernel: DemoKernel
    guarded: Any
    inputs: list[tuple[int, dict[str, Any]]]
    out: Path
    checkpoint: Path | None = None


def prepare_run(
    config: RunConfig, spec: str, inputs: Path, out: Path, checkpoint: Path | None = None
) -> PreparedRun:
    """Check everything a run needs (configuration, graph, inputs) without writing anything.

    Args:
        config: The run's configuration.
        spec: ``--graph MODULE:FACTORY``.
        inputs: The JSON Lines inputs file.
        out: The output folder.
        checkpoint: ``--checkpoint``: a SQLite file that must not exist yet (its threads would
            otherwise be continued, not started), or ``None``.

    Raises:
        ConfigError: Bad configuration, bad ``--graph``, a graph the adapter cannot guard, or
            a bad ``--checkpoint`` (see :func:`check_checkpoint`).
        InputError: The inputs file is unreadable, empty, or has a malformed line.
    """
    from biasbreaker_plugins.langgraph import guard

    if checkpoint is not None:
        check_checkpoint(checkpoint)
    factory = load_factory(spec, cwd=config.cwd)
    kernel = phase_kernel(config, traces=out / "traces")
    builder = build_user_graph(factory, spec, kernel)
    guarded = guard(builder, kernel)
    states = read_inputs(inputs)
    return PreparedRun(spec, kernel, guarded, states, out, checkpoint)


@dataclass
class RunResult:
    """What a ``biasbreaker run`` did.

    Args:
        outcomes: One per input run, in file order.
        llm_calls: Calls through the configured client (agents given ``llm``, interventions).
        seconds: Wall time (console only).
        settings: The effective configuration (JSON).
        failure: The error that stopped the run early, or ``None``.
    """

    outcomes: list[ThreadOutcome]
    llm_calls: int
    seconds: float
    settings: dict[str, Any]
    failure: str | None = None


async def run_user_graph(prepared: PreparedRun, advance: Callable[[int], None]) -> RunResult:
    """Run the prepared graph once per input, in file order.

    A biasbreaker error while an input runs (e.g. a guarded node returning a ``Command`` the
    adapter does not support) stops the run: it is returned as ``failure`` (naming the input's
    line), and every earlier input's trace and ``results.jsonl`` record are complete.
    """
    start = time.perf_counter()
    out, kernel, guarded = prepared.out, prepared.kernel, prepared.guarded
    log = ResultsLog(out / "results.jsonl")
    outcomes: list[ThreadOutcome] = []
    lines: dict[str, int] = {}
    current: list[int] = []

    def after(outcome: ThreadOutcome) -> None:
        outcomes.append(outcome)
        log.write(
            {
                "thread": outcome.thread,
                "line": lines[outcome.thread],
                "status": outcome.status,
                "values": plain_json(outcome.values),
                "review": None if outcome.review is None else plain_json(outcome.review),
                "trace": outcome.trace,
                "trace_head": outcome.trace_head,
            }
        )
        advance(1)

    def items() -> Iterator[tuple[str, Mapping[str, Any]]]:
        for number, state in prepared.inputs:
            thread = f"input-{number:05d}"
            lines[thread] = number
            current[:] = [number]
            yield thread, state

    def trace_of(thread: str) -> str | None:
        path = out / "traces" / f"{thread}.jsonl"
        return path.relative_to(out).as_posix() if path.exists() else None

    failure = None
    try:
        async with compiled(guarded, prepared.checkpoint) as app:
            await run_threads(
                app,
                items(),
                phase="run",
                trace_of=trace_of,
                after=after,
                close_traces=guarded.guard.traces.close,
                root=out,
            )
    except BiasbreakerError as exc:
        failure = f"input line {current[0]}: {exc}" if current else str(exc)
    finally:
        log.close()
    return RunResult(
        outcomes,
        kernel.counter.total,
        time.perf_counter() - start,
        kernel.settings.model_dump(mode="json"),
        failure,
    )


__all__ = [
    "PreparedRun",
    "RunResult",
    "build_user_graph",
    "check_checkpoint",
    "load_factory",
    "prepare_run",
    "read_inputs",
    "run_user_graph",
]
