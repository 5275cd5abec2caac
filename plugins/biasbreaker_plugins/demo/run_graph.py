"""``biasbreaker run``: guard the user's own ``StateGraph`` over a JSON Lines file of inputs.

``--graph MODULE:FACTORY`` names a function that returns a LangGraph ``StateGraph`` *builder*
(before ``compile()``) whose state derives from ``BiasState``. The factory is called with no
argument, or, if it has a parameter named ``llm``, with the configured LLM client
(``[llm] client``), so the graph's agents can use the same client as the intervention.
``--inputs FILE.jsonl`` holds one JSON object per line: the input state of one run (one
LangGraph thread, ``input-<line>``). Runs go one after another, in file order; each finished run
is appended to ``results.jsonl`` at once, so an error on line N leaves every earlier run's trace
and record complete and readable.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasbreaker.errors import ConfigError, InputError
from biasbreaker_plugins.demo.agents import DemoKernel
from biasbreaker_plugins.demo.driver import ResultsLog, ThreadOutcome, compiled, run_threads
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


def read_inputs(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, input state)`` per non-blank line, read lazily.

    Raises:
        InputError: At the first line that is not a JSON object (file and line named), or if
            the file cannot be read. Lines before it have been yielded already.
    """
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--inputs {path}: cannot read it: {exc}") from exc
    with handle:
        for number, line in enumerate(handle, start=1):
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
            yield number, value


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


async def run_user_graph(
    config: RunConfig,
    spec: str,
    inputs: Path,
    out: Path,
    advance: Callable[[int], None],
) -> RunResult:
    """Guard the factory's graph and run it once per input line.

    Raises:
        ConfigError: Bad ``--graph`` or a graph the adapter cannot guard.
        InputError: A malformed input line (earlier runs are complete in ``out``).
    """
    from biasbreaker_plugins.langgraph import guard

    start = time.perf_counter()
    factory = load_factory(spec, cwd=config.cwd)
    kernel = phase_kernel(config, traces=out / "traces")
    builder = build_user_graph(factory, spec, kernel)
    guarded = guard(builder, kernel)
    log = ResultsLog(out / "results.jsonl")
    outcomes: list[ThreadOutcome] = []
    lines: dict[str, int] = {}

    def after(outcome: ThreadOutcome) -> None:
        outcomes.append(outcome)
        log.write(
            {
                "thread": outcome.thread,
                "line": lines[outcome.thread],
                "status": outcome.status,
                "values": _plain(outcome.values),
                "review": None
                if outcome.review is None
                else {k: outcome.review.get(k) for k in ("node", "reason", "breaker_state")},
                "trace": outcome.trace,
            }
        )
        advance(1)

    def items() -> Iterator[tuple[str, Mapping[str, Any]]]:
        for number, state in read_inputs(inputs):
            thread = f"input-{number:05d}"
            lines[thread] = number
            yield thread, state

    def trace_of(thread: str) -> str | None:
        path = out / "traces" / f"{thread}.jsonl"
        return path.relative_to(out).as_posix() if path.exists() else None

    failure = None
    try:
        async with compiled(guarded) as app:
            await run_threads(
                app,
                items(),
                phase="run",
                trace_of=trace_of,
                after=after,
                close_traces=guarded.guard.traces.close,
            )
    except InputError as exc:
        failure = str(exc)
    finally:
        log.close()
    return RunResult(
        outcomes,
        kernel.counter.total,
        time.perf_counter() - start,
        kernel.settings.model_dump(mode="json"),
        failure,
    )


def _plain(values: Mapping[str, Any]) -> Any:
    """``values`` as plain JSON (anything else as its ``repr``)."""
    try:
        return json.loads(json.dumps(dict(values), default=repr))
    except (TypeError, ValueError):
        return repr(values)


__all__ = ["RunResult", "build_user_graph", "load_factory", "read_inputs", "run_user_graph"]
