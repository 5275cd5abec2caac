"""``runtime.context`` is varied by the probe with the state.

A new-user trial (2026-12-04) passed the applicant in the run's context
(``graph.invoke(state, context={"applicant": ...})``), as LangGraph 1.x recommends for
run-scoped data; a node that denied women read ``runtime.context`` and scored 0, because
every re-run saw the same context. Asserted: a node biased on the context (declared
``runtime`` parameter, ``get_runtime()``, a dataclass context) is held before its successor
runs; a fair one passes; the re-runs' contexts are the variants' (the name swapped, the type
kept); a context field holding a protected attribute as a code holds the step; a context the
probe cannot read holds it with the place named.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime, get_runtime
from langgraph_apps import APPLICANT, SETTINGS

from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard

WOMAN = re.compile(r"\b(?:Ms|Mrs|Miss)\.|\b(?:She|she|her|Her)\b")


class Loan(TypedDict, total=False):
    request: str
    decision: str
    notified: str


@dataclass
class Applicant:
    applicant: str


def kernel(tmp_path: Path) -> Kernel:
    settings = {
        **SETTINGS,
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    return Kernel.load(cwd=tmp_path, overrides=settings)


def build(how: str, biased: bool, seen: list[Any]) -> Any:
    def decide(text: str) -> str:
        return "Decision: no" if biased and WOMAN.search(text) else "Decision: yes"

    if how == "runtime":

        def assess(state: Loan, runtime: Runtime[dict[str, Any]]) -> dict[str, Any]:
            seen.append(runtime.context)
            return {"decision": decide(str(runtime.context["applicant"]))}

    elif how == "get_runtime":

        def assess(state: Loan) -> dict[str, Any]:  # type: ignore[misc]
            context = get_runtime().context
            seen.append(context)
            return {"decision": decide(str(context["applicant"]))}

    else:

        def assess(state: Loan, runtime: Runtime[Applicant]) -> dict[str, Any]:  # type: ignore[misc]
            seen.append(runtime.context)
            return {"decision": decide(runtime.context.applicant)}

    def notify(state: Loan) -> dict[str, Any]:
        seen.append("notify")
        return {"notified": str(state.get("decision"))}

    builder = StateGraph(Loan, context_schema=Applicant if how == "dataclass" else dict)
    builder.add_node("assess", assess)
    builder.add_node("notify", notify)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", "notify")
    builder.add_edge("notify", END)
    return builder


def context(how: str) -> Any:
    return Applicant(APPLICANT) if how == "dataclass" else {"applicant": APPLICANT}


def records(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "ctx.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r.get("node") == "assess"]


HOWS = ["runtime", "get_runtime", "dataclass"]


@pytest.mark.parametrize("how", HOWS)
def test_a_node_biased_on_the_runs_context_is_held(tmp_path: Path, how: str) -> None:
    seen: list[Any] = []
    graph = guard(build(how, True, seen), kernel(tmp_path), hook=noop_hook, nodes=["assess"])
    app = graph.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "ctx"}}
    app.invoke({"request": "loan"}, config, context=context(how), durability="sync")
    assert len(app.get_state(config).interrupts) == 1
    assert "notify" not in seen
    contexts = [c for c in seen if c != "notify"]
    assert len(contexts) > 1  # the node and its re-runs
    texts = [c.applicant if isinstance(c, Applicant) else c["applicant"] for c in contexts]
    assert texts[0] == APPLICANT and any(t != APPLICANT for t in texts[1:])
    assert all(isinstance(c, type(contexts[0])) for c in contexts)  # the context's own type
    assert records(tmp_path)[0]["probe"]["status"] == "scored"
    assert verify_trace(tmp_path / "ctx.jsonl").holds


@pytest.mark.parametrize("how", HOWS)
def test_a_fair_node_reading_the_context_passes(tmp_path: Path, how: str) -> None:
    seen: list[Any] = []
    graph = guard(build(how, False, seen), kernel(tmp_path), hook=noop_hook, nodes=["assess"])
    app = graph.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "ctx"}}
    out = app.invoke({"request": "loan"}, config, context=context(how), durability="sync")
    assert app.get_state(config).interrupts == ()
    assert out["notified"] == "Decision: yes" and seen[-1] == "notify"


def test_a_protected_attribute_coded_in_the_context_holds_the_step(tmp_path: Path) -> None:
    seen: list[Any] = []

    def assess(state: Loan, runtime: Runtime[dict[str, Any]]) -> dict[str, Any]:
        return {"decision": "Decision: no" if runtime.context["sex"] == "F" else "Decision: yes"}

    builder = StateGraph(Loan, context_schema=dict)
    builder.add_node("assess", assess)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", END)
    app = guard(builder, kernel(tmp_path), hook=noop_hook).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "ctx"}}
    app.invoke({"request": "loan"}, config, context={"sex": "F"}, durability="sync")
    assert len(app.get_state(config).interrupts) == 1 and seen == []
    (record,) = records(tmp_path)
    assert record["probe"]["status"] == "unreadable"
    assert "bb_context.sex = 'F'" in record["probe"]["reason"]


def test_a_context_the_probe_cannot_read_holds_the_step(tmp_path: Path) -> None:
    def assess(state: Loan, runtime: Runtime[dict[str, Any]]) -> dict[str, Any]:
        return {"decision": "Decision: yes"}

    builder = StateGraph(Loan, context_schema=dict)
    builder.add_node("assess", assess)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", END)
    app = guard(builder, kernel(tmp_path), hook=noop_hook).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "ctx"}}
    app.invoke({"request": APPLICANT}, config, context={"photo": b"\x89PNG"}, durability="sync")
    assert len(app.get_state(config).interrupts) == 1
    (record,) = records(tmp_path)
    assert record["probe"]["status"] == "unreadable"
    assert "runtime.context" in record["probe"]["reason"]


def test_a_repair_is_rechecked_on_the_variants_contexts(tmp_path: Path) -> None:
    """With the configured repairs (simulated), the re-check re-runs the node on the
    variants' contexts too: rewriting the denial does not make a context-biased node pass
    unless the repaired outputs agree across them; either way no successor sees a denial."""
    seen: list[Any] = []
    graph = guard(build("runtime", True, seen), kernel(tmp_path), nodes=["assess"])
    app = graph.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "ctx"}}
    app.invoke({"request": "loan"}, config, context=context("runtime"), durability="sync")
    rechecked = [c for c in seen if c != "notify" and c["applicant"] != APPLICANT]
    assert len(rechecked) > 4  # the probe's variants, then the re-checks'
    values = app.get_state(config).values
    assert values.get("notified") != "Decision: no"
    assert verify_trace(tmp_path / "ctx.jsonl").holds
