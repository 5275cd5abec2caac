"""Nested graphs: a compiled subgraph guarded as one step; a guarded subgraph resumed elsewhere.

A guarded subgraph keeps its own breaker over its own nodes, in its own checkpoint namespace
(docs/langgraph.md, "Subgraphs"). Its review interrupt pauses the parent; a fresh process with
freshly built graphs resumes it — the subgraph continues from its review node, it does not
start again (LangGraph's "subgraph restarts instead of resuming" class of bug).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph_apps import APPLICANT, SETTINGS, Watch, model

from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.trace import read_trace
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard, guard_state


class Desk(TypedDict, total=False):
    application: str
    decision: str
    letter: str


def screening(biased: bool, watch: Watch) -> StateGraph:
    llm = model(biased, watch)

    def screen(state: Desk) -> dict[str, Any]:
        return {"decision": str(llm.invoke(state["application"]).content)}

    def note(state: Desk) -> dict[str, Any]:
        return {"decision": state["decision"] + " (screened)"}

    builder = StateGraph(Desk)
    builder.add_node("screen", screen)
    builder.add_node("note", note)
    builder.add_edge(START, "screen")
    builder.add_edge("screen", "note")
    builder.add_edge("note", END)
    return builder


def parent(sub: Any, letters: list[str]) -> StateGraph:
    def write(state: Desk) -> dict[str, Any]:
        letters.append(state["decision"])
        return {"letter": f"Dear applicant: {state['decision']}"}

    builder = StateGraph(Desk)
    builder.add_node("screening", sub)
    builder.add_node("write", write)
    builder.add_edge(START, "screening")
    builder.add_edge("screening", "write")
    builder.add_edge("write", END)
    return builder


@pytest.mark.parametrize("biased", [True, False])
def test_a_compiled_subgraph_is_guarded_as_one_step(tmp_path: Path, biased: bool) -> None:
    watch, letters = Watch(), []
    plain = (
        parent(screening(biased, Watch()).compile(), [])
        .compile()
        .invoke({"application": APPLICANT})
    )
    kernel = Kernel.load(cwd=tmp_path, overrides=SETTINGS)
    graph = guard(
        parent(screening(biased, watch).compile(), letters),
        kernel,
        nodes=["screening"],
        hook=noop_hook,
    ).compile(checkpointer=InMemorySaver())
    out = graph.invoke({"application": APPLICANT}, {"configurable": {"thread_id": "one"}})
    assert watch.variants(APPLICANT)  # the whole subgraph was re-run on counterfactual applicants
    if biased:
        assert letters == [] and "letter" not in out
        request = out["__interrupt__"][0].value
        assert request["node"] == "screening"  # a subgraph node returns its whole output state
        assert request["held"] == {"application": APPLICANT, "decision": "Decision: no (screened)"}
    else:
        assert out == plain and letters == [plain["decision"]]
        scores = guard_state(graph, {"configurable": {"thread_id": "one"}})["bb_local_scores"]
        assert scores["screening"] == 0.0


SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.verify import verify_trace
from biasbreaker.trace import read_trace
from biasbreaker_plugins.langgraph import guard
from langgraph_apps import APPLICANT, SETTINGS, Watch
import langgraph_apps
from test_langgraph_nested import parent, screening

calls = {calls!r}
original = langgraph_apps.WatchedModel._reply

def counted(self, messages):
    with open(calls, "a") as f:
        f.write("call\\n")
    return original(self, messages)

langgraph_apps.WatchedModel._reply = counted
settings = {{**SETTINGS, "plugin": {{"langgraph": {{"trace_path": {trace!r}}}}}}}
kernel = Kernel.load(cwd={cwd!r}, overrides=settings)
letters = []
child = guard(screening(True, Watch()), kernel, hook=noop_hook).compile()
config = {{"configurable": {{"thread_id": "nested"}}}}
with SqliteSaver.from_conn_string({db!r}) as saver:
    app = guard(parent(child, letters), kernel, nodes=[], hook=noop_hook).compile(checkpointer=saver)
    if sys.argv[1] == "first":
        out = app.invoke({{"application": APPLICANT}}, config, durability="sync")
    elif sys.argv[1] == "second":
        edit = {{"action": "edit", "update": {{"decision": "Decision: refer"}}}}
        out = app.invoke(Command(resume=edit), config, durability="sync")
    else:
        held = app.get_state(config, subgraphs=True)
        (sha,) = [i.value["sha256"] for t in held.tasks if t.state for i in t.state.interrupts]
        approve = {{"action": "approve", "sha256": sha}}
        out = app.invoke(Command(resume=approve), config, durability="sync")
    state = app.get_state(config, subgraphs=True)
    pending = [i.value["node"] for t in state.tasks if t.state for i in t.state.interrupts]
print(json.dumps({{"letter": out.get("letter"), "letters": letters, "pending": pending}}))
"""


def test_a_review_inside_a_guarded_subgraph_resumes_from_a_new_process(tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    script = SCRIPT.format(
        tests=str(Path(__file__).parent),
        calls=str(calls),
        trace=str(tmp_path / "{thread_id}.jsonl"),
        cwd=str(tmp_path),
        db=str(tmp_path / "runs.sqlite"),
    )

    def run(phase: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(script), phase],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))

    first = run("first")
    assert first == {"letter": None, "letters": [], "pending": ["screen"]}
    made = calls.read_text().count("call")
    assert made > 1  # the screener's own call and the probe's re-runs (each distinct one once)
    second = run("second")  # a new process, new graphs, the same SQLite file
    assert calls.read_text().count("call") == made  # resumed at the review: screen did not re-run
    # ESCALATED is terminal in the subgraph's own breaker: its next output waits for review too
    assert second == {"letter": None, "letters": [], "pending": ["note"]}
    third = run("third")
    assert calls.read_text().count("call") == made
    assert third["letter"] == "Dear applicant: Decision: refer (screened)"
    assert third["letters"] == ["Decision: refer (screened)"] and third["pending"] == []
    # the subgraph's breaker wrote its own trace, continued across the three processes
    (trace,) = tmp_path.glob("nested.screening-*.jsonl")
    assert verify_trace(trace).holds and len(read_trace(trace).records) > 2
