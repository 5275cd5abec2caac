"""``biasbreaker demo --scenario bbq``: the BBQ panel, unguarded and guarded.

Phases (deterministic given the seed): **calibration** — control runs of the panel on
``[demo] control_runs`` *disambiguated* items, recorded with the breaker at ``tau_enter = 1``;
**unguarded** and **guarded** — the panel on ``[demo] bbq_items`` items of both context
conditions; **fresh-control** — other disambiguated items, another fake seed, guarded with the
calibrated thresholds. Control runs are disambiguated items because there the context states
the answer and BBQ measures UnifiedQA's bias as nil (disambiguated bias score 0.0018 for
Religion and -0.0074 for Sexual orientation, ``docs/detection.md``): the same real model,
without the bias the guard is meant to catch.

Each item runs with ``[probe] groups`` restricted to its pair of groups (see
:mod:`biasbreaker_plugins.demo.bbq`), so the panel's graph is built once per pair. Importing
this module imports LangGraph.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.graph import END, START, StateGraph

from biasbreaker.calibration import CalibrationReport
from biasbreaker.llm import LLMRequest
from biasbreaker.probe import with_current_sample
from biasbreaker.types import canonical_json
from biasbreaker.usage import UsageJSON, combine_usage
from biasbreaker_plugins.demo.agents import AgentClients, agent_clients
from biasbreaker_plugins.demo.bbq import Case, make_cases, replayed_answer
from biasbreaker_plugins.demo.driver import (
    ResultsLog,
    ThreadOutcome,
    compiled,
    plain_json,
    run_threads,
)
from biasbreaker_plugins.demo.hiring_demo import Phase, Plan
from biasbreaker_plugins.demo.interrupts import run_in
from biasbreaker_plugins.demo.phases import (
    RunConfig,
    calibrate_from_traces,
    concatenate,
    deliberate,
    merge,
    phase_kernel,
    read_traces,
    recording,
)
from biasbreaker_plugins.langgraph import BiasState, guard

QUICK_SIZES = (24, 100, 100)
"""``--quick``: items, control runs, fresh control runs."""

LETTERS = "ABC"


@dataclass(frozen=True)
class BBQSizes:
    """Items per phase."""

    items: int
    control_runs: int
    fresh_control_runs: int


@dataclass
class BBQResult:
    """Everything the report needs."""

    sizes: BBQSizes
    seed: int
    cases: dict[str, Case]
    phases: dict[str, Phase]
    calibration: CalibrationReport
    control_file: str
    control_sha256: str
    simulated: bool
    model: str
    settings: dict[str, Any]


def _question(state: Mapping[str, Any]) -> str:
    options = "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(state["options"]))
    return f"{state['context']}\n{state['question']}\n{options}\nAnswer with one letter."


class PanelState(BiasState, total=False):
    """The panel's state: one BBQ question and the two answers."""

    context: str
    question: str
    options: list[str]
    answer: str
    second_opinion: str
    panel_answer: str


def build_bbq_graph(clients: AgentClients, category: str) -> Any:
    """The panel as a LangGraph ``StateGraph`` builder (not compiled, not guarded).

    ``unifiedqa`` replays the real recorded answer; ``second_opinion`` answers the question and
    ``moderator`` chooses the panel's answer with both answers in view, through the client.
    """

    async def ask(state: Mapping[str, Any], agent: str, prompt: str) -> str:
        request = LLMRequest.chat(prompt, temperature=0.0)
        reply = await clients.client(agent).complete(with_current_sample(request))
        return reply.text

    async def unifiedqa(state: PanelState) -> dict[str, Any]:
        return {"answer": replayed_answer(category, state)}

    async def second_opinion(state: PanelState) -> dict[str, Any]:
        return {"second_opinion": await ask(state, "second_opinion", _question(state))}

    async def moderator(state: PanelState) -> dict[str, Any]:
        prompt = (
            f"{_question(state)}\nThe panel's first answer: {state['answer']}. Its second "
            f"answer: {state['second_opinion']}."
        )
        return {"panel_answer": await ask(state, "moderator", prompt)}

    builder: Any = StateGraph(PanelState)
    builder.add_node("unifiedqa", unifiedqa)
    builder.add_node("second_opinion", second_opinion)
    builder.add_node("moderator", moderator)
    builder.add_edge(START, "unifiedqa")
    builder.add_edge("unifiedqa", "second_opinion")
    builder.add_edge("second_opinion", "moderator")
    builder.add_edge("moderator", END)
    return builder


Advance = Callable[[str, int], None]


def _record(phase: str, case: Case, outcome: ThreadOutcome) -> dict[str, Any]:
    return {
        "phase": phase,
        "thread": outcome.thread,
        "category": case.item.category,
        "example_id": case.item.example_id,
        "paired": case.paired,
        "status": outcome.status,
        "answer": outcome.values.get("answer") if outcome.status == "done" else None,
        "second_opinion": outcome.values.get("second_opinion"),
        "panel_answer": outcome.values.get("panel_answer"),
        "review": None if outcome.review is None else plain_json(outcome.review),
        "trace": outcome.trace,
        "trace_head": outcome.trace_head,
        "usage": outcome.usage or {},
    }


def _phase(
    name: str,
    config: RunConfig,
    out: Path,
    cases: Sequence[Case],
    *,
    guarded: bool,
    extra: Mapping[str, Any],
    log: ResultsLog,
    advance: Advance,
    fake_seed: int | None = None,
    plan: Plan | None = None,
) -> Phase:
    start = time.perf_counter()
    folder = out / "traces" / name
    if plan is not None and guarded:
        plan([folder / f"{c.id}.jsonl" for c in cases])  # in the marker before written
    advance(name, 0)
    by_pair: dict[tuple[str, str], list[Case]] = {}
    for case in cases:
        key = (case.item.category, canonical_json(case.probe_settings()))
        by_pair.setdefault(key, []).append(case)
    records: dict[str, dict[str, Any]] = {}
    calls = 0
    usage: UsageJSON = {}
    loop = asyncio.new_event_loop()
    try:
        for (category, _), group_cases in by_pair.items():
            probe = {"probe": group_cases[0].probe_settings()}
            kernel = phase_kernel(
                config, traces=folder if guarded else None, extra=merge(extra, probe)
            )
            clients = agent_clients(kernel, biased_agent=None, fake_seed=fake_seed)
            builder = build_bbq_graph(clients, category)
            with deliberate():
                graph = guard(builder, kernel) if guarded else builder
            by_id = {c.id: c for c in group_cases}

            def after(outcome: ThreadOutcome, by_id: Mapping[str, Case] = by_id) -> None:
                records[outcome.thread] = _record(name, by_id[outcome.thread], outcome)

            def trace_of(thread: str) -> str | None:
                return (folder / f"{thread}.jsonl").relative_to(out).as_posix() if guarded else None

            async def go(graph: Any = graph, group_cases: Sequence[Case] = group_cases) -> None:
                traces = getattr(getattr(graph, "guard", None), "traces", None)
                async with compiled(graph) as app:
                    await run_threads(
                        app,
                        ((c.id, c.graph_input()) for c in group_cases),
                        phase=name,
                        trace_of=trace_of,
                        after=after,
                        close_traces=None if traces is None else traces.close,
                        root=out,
                    )

            run_in(loop, go())
            calls += kernel.counter.total
            usage = combine_usage(usage, kernel.counter.usage.to_json())
            advance(name, len(group_cases))
    finally:
        loop.close()
    ordered = [records[c.id] for c in cases]
    for record in ordered:
        log.write(record)
    traces = read_traces(folder, [c.id for c in cases]) if guarded else []
    return Phase(name, ordered, traces, calls, time.perf_counter() - start, usage)


def run_bbq(
    config: RunConfig,
    out: Path,
    sizes: BBQSizes,
    seed: int,
    advance: Advance,
    *,
    plan: Plan | None = None,
) -> BBQResult:
    """Run the four phases of the bbq scenario.

    ``plan`` is called with each guarded phase's trace files before the phase runs.

    Raises:
        ConfigError: Invalid configuration.
        ThresholdError: The control runs cannot be calibrated.
    """
    out.mkdir(parents=True, exist_ok=True)
    log = ResultsLog(out / "results.jsonl")
    phases: dict[str, Phase] = {}
    try:
        control = make_cases(sizes.control_runs, seed + 1, condition="disambig")
        phases["calibration"] = _phase(
            "calibration", config, out, control, guarded=True,
            extra=recording(config), log=log, advance=advance, plan=plan,
        )  # fmt: skip
        kernel = phase_kernel(config, traces=None)
        report = calibrate_from_traces(phases["calibration"].traces, kernel)
        control_file = "control-runs.jsonl"
        sha = concatenate(phases["calibration"].traces, out / control_file)
        tau_enter, tau_exit, tau_warn = report.thresholds
        calibrated = {
            "breaker": {"tau_enter": tau_enter, "tau_exit": tau_exit, "tau_warn": tau_warn},
            "calibration": {"control": report.statistics.to_json(), "source_sha256": sha},
        }
        if config.load().source_of("plugin.heuristic.node_threshold") == "default":
            calibrated["plugin"] = {"heuristic": {"node_threshold": tau_enter}}
        cases = make_cases(sizes.items, seed)
        for name, guarded in (("unguarded", False), ("guarded", True)):
            phases[name] = _phase(
                name, config, out, cases, guarded=guarded, extra=calibrated,
                log=log, advance=advance, plan=plan,
            )  # fmt: skip
        fresh = make_cases(sizes.fresh_control_runs, seed + 2, condition="disambig")
        phases["fresh-control"] = _phase(
            "fresh-control", config, out, fresh, guarded=True, extra=calibrated,
            log=log, advance=advance, plan=plan, fake_seed=seed + 1,
        )  # fmt: skip
    finally:
        log.close()
    final = phase_kernel(config, traces=None, extra=calibrated)
    return BBQResult(
        sizes=sizes,
        seed=seed,
        cases={c.id: c for c in [*control, *cases, *fresh]},
        phases=phases,
        calibration=report,
        control_file=control_file,
        control_sha256=sha,
        simulated=final.selected("llm_client") == ["fake"],
        model=final.llm().model,
        settings=final.settings.model_dump(mode="json"),
    )


__all__ = ["QUICK_SIZES", "BBQResult", "BBQSizes", "build_bbq_graph", "run_bbq"]
