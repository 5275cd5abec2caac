"""A guarded node that reads a protected attribute from a structured field is held for review.

The probe rewrites text; a node denying on ``{"age": 63}`` or ``{"sex": "F"}`` was recorded as
"not applicable" (group-blind) and its denial went downstream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from biasbreaker.kernel import Kernel
from biasbreaker.trace import read_trace
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard


class Form(TypedDict, total=False):
    name: str
    age: int
    sex: str
    decision: str


@pytest.mark.parametrize(("field", "value"), [("age", 63), ("sex", "F")])
def test_a_protected_attribute_in_a_structured_field_is_held_not_waved_through(
    tmp_path: Path, field: str, value: Any
) -> None:
    """A node denying on ``{"age": 63}`` went downstream as "not applicable" (group-blind)."""
    seen: list[Any] = []
    builder = StateGraph(Form)
    builder.add_node("decide", lambda s: {"decision": "DENY" if s.get(field) == value else "OK"})
    builder.add_node("down", lambda s: seen.append(s.get("decision")) or {})
    builder.add_edge(START, "decide")
    builder.add_edge("decide", "down")
    settings = {
        "probe": {"scorers": ["decision"], "k": 4, "r": 2, "bootstrap": 0},
        "intervention": {"router": "human-review"},
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    graph = guard(builder, kernel, nodes=["decide"]).compile(checkpointer=InMemorySaver())
    out = graph.invoke({"name": "Applicant 17", field: value}, {"configurable": {"thread_id": "t"}})
    assert seen == [] and "__interrupt__" in out and out.get("decision") is None
    (record,) = read_trace(tmp_path / "t.jsonl").records
    assert record.probe is not None and record.probe["status"] == "unreadable"
    assert f"{field} = {value!r}" in record.probe["reason"]
    assert verify_trace(tmp_path / "t.jsonl").holds
