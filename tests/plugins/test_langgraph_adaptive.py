"""Adaptive probing through the LangGraph guard (issue 15 item 2).

Off (the default, or ``adaptive = false``), the traces are the bytes they were; on, a clean
step's node is re-run exactly the first stage's times, the trace's probe reason says where each
probe stopped and why, a step after the breaker left NORMAL gets the full probe, speculative
probing gives the traces of probing after the call, and ``verify`` accepts every trace.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph_apps import APPLICANT, SETTINGS, Watch, model
from typing_extensions import TypedDict

from biasbreaker.kernel import Kernel
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard
from biasbreaker_plugins.langgraph.probing import full_probe_reason, in_rerun

FAIR = APPLICANT.replace("Ms. Mary", "Mr. John").replace("She ", "He ")


class Case(TypedDict, total=False):
    application: str
    decision: str


def kernel(tmp_path: Path, **probe: Any) -> Kernel:
    return Kernel.load(
        cwd=tmp_path,
        overrides={
            **SETTINGS,
            "probe": {**SETTINGS["probe"], **probe},
            "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
        },
    )


def graph(biased: bool, reruns: list[int]) -> StateGraph:
    """``decide`` (the fake model, biased for men or not); ``reruns`` counts its re-runs."""
    llm = model(biased, Watch())

    def decide(state: Case) -> dict[str, Any]:
        if in_rerun():
            reruns.append(1)
        return {"decision": str(llm.invoke(state["application"]).content)}

    builder = StateGraph(Case)
    builder.add_node("decide", decide)
    builder.add_edge(START, "decide")
    builder.add_edge("decide", END)
    return builder


def run(tmp_path: Path, biased: bool, steps: int, **probe: Any) -> tuple[bytes, int]:
    """``steps`` invocations of one thread: its trace's bytes and the node's re-runs."""
    tmp_path.mkdir(exist_ok=True)
    reruns: list[int] = []
    app = guard(graph(biased, reruns), kernel(tmp_path, **probe)).compile(
        checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t"}}
    for _ in range(steps):
        app.invoke({"application": APPLICANT if biased else FAIR}, config)
    return (tmp_path / "t.jsonl").read_bytes(), len(reruns)


def probes(trace: bytes) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in trace.splitlines()]
    return [r for r in records if r.get("kind") == "step" and r.get("probe")]


@pytest.mark.parametrize("biased", [False, True], ids=["fair", "biased"])
def test_off_the_traces_are_those_of_a_guard_without_the_setting(
    tmp_path: Path, biased: bool
) -> None:
    unset, _ = run(tmp_path / "unset", biased, 3)
    off, _ = run(tmp_path / "off", biased, 3, adaptive=False, adaptive_first=3)
    assert off == unset
    assert b"adaptive" not in unset


def test_a_clean_step_reruns_the_node_for_the_first_stage_only(tmp_path: Path) -> None:
    trace, reruns = run(tmp_path, False, 1, adaptive=True)
    (step,) = probes(trace)
    assert step["probe"]["reason"] == (
        "scored: k=1 counterfactual(s), r=1 resample(s); adaptive: stopped after the first "
        "stage, its score 0 <= stop 0"
    )
    assert reruns == 2  # one variant, its twin resample; the full probe makes k + r = 6
    _, full = run(tmp_path / "full", False, 1)
    assert full == 6
    assert verify_trace(tmp_path / "t.jsonl").holds


def test_a_biased_step_gets_the_full_probe_and_the_breaker_keeps_it_full(tmp_path: Path) -> None:
    trace, _ = run(tmp_path, True, 4, adaptive=True)
    steps = probes(trace)
    reasons = [s["probe"]["reason"] for s in steps]
    assert "adaptive: full probe, the first stage scored" in reasons[0]
    assert reasons[0].startswith("scored: k=4 counterfactual(s), r=2 resample(s)")
    # the first invocation trips and escalates (its repairs fail); each later one is probed
    # while the breaker is not NORMAL: the full probe, whatever a first stage would give
    assert sum(r.endswith("the first stage scored 1 > stop 0") for r in reasons) == 5
    assert (
        reasons[5:]
        == [
            "scored: k=4 counterfactual(s), r=2 resample(s); adaptive: full probe, the breaker "
            "is in ESCALATED"
        ]
        * 3
    )
    assert verify_trace(tmp_path / "t.jsonl").holds


@pytest.mark.parametrize("biased", [False, True], ids=["fair", "biased"])
def test_speculative_probing_gives_the_traces_of_probing_after_the_call(
    tmp_path: Path, biased: bool
) -> None:
    after, _ = run(tmp_path / "after", biased, 3, adaptive=True, speculative=False)
    beside, _ = run(tmp_path / "beside", biased, 3, adaptive=True, speculative=True)
    assert beside == after


def test_the_full_probe_reason_reads_the_machine_state() -> None:
    assert full_probe_reason(None) == ""
    assert full_probe_reason({"state": "normal"}) == ""
    assert full_probe_reason({"state": "warning"}) == "the breaker is in WARNING"
    assert full_probe_reason({"state": "recovery"}) == "the breaker is in RECOVERY"


def test_the_guards_recheck_probe_is_the_full_probe(tmp_path: Path) -> None:
    from biasbreaker.probe.probe import build_probe
    from biasbreaker_plugins.langgraph.probing import FreshProbes

    calls: list[int] = []

    def step(text: str, sample: int = 0) -> str:
        calls.append(sample)
        return "approve"

    base = build_probe(kernel(tmp_path, adaptive=True))
    result = asyncio.run(FreshProbes(base).probe(step, APPLICANT, "approve", step_id="recheck"))
    assert result.stage_reason == "adaptive: full probe, a repair's re-check"
    assert (result.k, result.r) == (4, 2)
    assert len(calls) == 6
