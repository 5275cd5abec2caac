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


def test_a_held_field_step_streams_none_of_its_custom_events_or_its_update(
    tmp_path: Path,
) -> None:
    """A node that streams its decision (``get_stream_writer``) and denies on a date of birth."""
    from langgraph.config import get_stream_writer

    class Nested(TypedDict, total=False):
        form: dict[str, Any]
        decision: str

    def decide(state: Nested) -> dict[str, Any]:
        born = state["form"]["applicant"]["date_of_birth"]
        verdict = "DENY-BORN-1961" if born.startswith("1961") else "OK"
        get_stream_writer()({"token": verdict})
        return {"decision": verdict}

    seen: list[Any] = []
    builder = StateGraph(Nested)
    builder.add_node("decide", decide)
    builder.add_node("down", lambda s: seen.append(s.get("decision")) or {})
    builder.add_edge(START, "decide")
    builder.add_edge("decide", "down")
    settings = {
        "probe": {"scorers": ["decision"], "k": 2, "r": 1, "bootstrap": 0},
        "intervention": {"router": "human-review"},
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    graph = guard(builder, Kernel.load(cwd=tmp_path, overrides=settings)).compile(
        checkpointer=InMemorySaver()
    )
    chunks = list(
        graph.stream(
            {"form": {"applicant": {"date_of_birth": "1961-04-02"}}},
            {"configurable": {"thread_id": "t"}},
            stream_mode=["custom", "values", "updates"],
            subgraphs=True,
        )
    )
    assert chunks and seen == []
    for _, mode, data in chunks:
        if isinstance(data, dict):  # the review request carries the output to the reviewer
            data = {k: v for k, v in data.items() if k != "__interrupt__"}
        assert "DENY-BORN-1961" not in repr(data), (mode, data)
    (record,) = read_trace(tmp_path / "t.jsonl").records
    assert record.probe is not None and record.probe["status"] == "unreadable"
    assert "form.applicant.date_of_birth" in record.probe["reason"]
    assert verify_trace(tmp_path / "t.jsonl").holds
