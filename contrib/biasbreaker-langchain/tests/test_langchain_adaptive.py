"""Adaptive probing in the middleware (issue 15 item 2).

A fair reply's probe stops after its first stage, and the trace says so; a biased one gets the
full probe; speculative probing gives the traces of probing after the call; and once the
breaker has left NORMAL a later reply of the thread gets the full probe, the trace naming the
breaker's state.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from biasbreaker_langchain import BiasGuardMiddleware
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from lc_agents import SETTINGS, WOMAN, Watch, loan_tools, model, question


def _traces(tmp_path: Path, speculative: bool) -> dict[str, bytes]:
    trace = str(tmp_path / "trace-{thread_id}.jsonl")
    for biased in (True, False):
        watch = Watch()
        middleware = BiasGuardMiddleware(
            {
                **SETTINGS,
                "probe": {**SETTINGS["probe"], "speculative": speculative, "adaptive": True},
                "plugin": {"langchain-agent": {"trace_path": trace}},
            }
        )
        agent = create_agent(
            model(biased, watch),
            tools=loan_tools(watch),
            middleware=[middleware],
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": "biased" if biased else "fair"}}
        value: Any = question(WOMAN)
        for _ in range(2):
            out = agent.invoke(value, config)
            if "__interrupt__" not in out:
                break
            sha = out["__interrupt__"][0].value["sha256"]
            value = Command(resume={"action": "approve", "sha256": sha})
    return {p.name: p.read_bytes() for p in sorted(tmp_path.glob("*.jsonl"))}


def _reasons(data: bytes) -> list[str]:
    records = [json.loads(line) for line in data.splitlines()]
    return [r["probe"]["reason"] for r in records if r.get("kind") == "step" and r.get("probe")]


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, dict[str, bytes]]:
    out = {}
    for speculative in (False, True):
        folder = tmp_path_factory.mktemp("spec" if speculative else "seq")
        out[speculative] = _traces(folder, speculative)
    return out


def test_a_fair_reply_stops_after_the_first_stage(traces: dict[bool, dict[str, bytes]]) -> None:
    reasons = _reasons(traces[False]["trace-fair.jsonl"])
    assert reasons
    assert all(
        r.startswith("scored: k=1 counterfactual(s), r=1 resample(s); adaptive: stopped after")
        for r in reasons
    )


def test_a_biased_reply_gets_the_full_probe(traces: dict[bool, dict[str, bytes]]) -> None:
    reasons = _reasons(traces[False]["trace-biased.jsonl"])
    assert "adaptive: full probe, the first stage scored 1 > stop 0" in reasons[0]
    assert b'"trip"' in traces[False]["trace-biased.jsonl"]
    # the reply after the review's resume is probed with the breaker ESCALATED: in full
    assert reasons[-1].endswith("adaptive: full probe, the breaker is in ESCALATED")


def test_speculative_probing_gives_the_same_traces(traces: dict[bool, dict[str, bytes]]) -> None:
    assert traces[True] == traces[False]
