"""A guarded node whose input is in a language the term lists do not cover.

Held for review by default (the trace's probe outcome ``unsupported_language``, the step
``held-for-review``, the run paused on ``bb_review``); let through unprobed with the reason
recorded when ``[probe] unsupported_language = "proceed"``; either way ``biasbreaker verify``
re-derives the step. English inputs with non-English names are probed as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("py3langid")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from biasbreaker.kernel import Kernel
from biasbreaker.trace import read_trace
from biasbreaker.trace.records import UNSUPPORTED_HELD, UNSUPPORTED_PROCEEDED
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard, guard_state


class Plain(TypedDict, total=False):
    value: Any
    out: Any


def traced(tmp_path: Path, **probe: Any) -> Any:
    builder = StateGraph(Plain)
    builder.add_node("node", lambda state: {"out": "Decision: yes"})
    builder.add_edge(START, "node")
    settings = {
        "probe": {"scorers": ["decision"], "k": 4, "r": 2, "bootstrap": 0, **probe},
        "intervention": {"router": "human-review"},
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    return guard(builder, kernel).compile(checkpointer=InMemorySaver())


FOREIGN = {
    "fr": "Il est musulman et travaille comme infirmier à Lyon.",
    "de": "Die Bewerberin ist eine 45-jährige schwarze Frau.",
    "es": "Ella es musulmana y trabaja como enfermera en Madrid.",
    "zh": "她是穆斯林，在上海当护士。",
}


@pytest.mark.parametrize("lang", sorted(FOREIGN))
def test_a_foreign_input_is_held_for_review_by_default(tmp_path: Path, lang: str) -> None:
    graph = traced(tmp_path)
    config = {"configurable": {"thread_id": "t"}}
    out = graph.invoke({"value": FOREIGN[lang]}, config)
    (record,) = read_trace(tmp_path / "t.jsonl").records
    assert record.probe is not None and record.probe["status"] == "unsupported_language"
    assert record.probe["reason"].startswith(UNSUPPORTED_HELD)
    assert f"({lang}, p = " in record.probe["reason"]
    assert record.transition == "held-for-review" and record.action.value == "escalate"
    assert record.reason == f"held for review: {record.probe['reason']}"
    assert "out" not in out and out["__interrupt__"][0].value["reason"] == record.reason
    trail = guard_state(graph, config)["bb_audit_trail"]
    assert any(e.get("event") == "unsupported-language" for e in trail), trail
    report = verify_trace(tmp_path / "t.jsonl")
    assert report.holds, report


@pytest.mark.parametrize("lang", sorted(FOREIGN))
def test_a_foreign_input_proceeds_unprobed_with_the_reason_when_configured(
    tmp_path: Path, lang: str
) -> None:
    graph = traced(tmp_path, unsupported_language="proceed")
    config = {"configurable": {"thread_id": "t"}}
    out = graph.invoke({"value": FOREIGN[lang]}, config)
    (record,) = read_trace(tmp_path / "t.jsonl").records
    assert record.probe is not None and record.probe["status"] == "unsupported_language"
    assert record.probe["reason"].startswith(UNSUPPORTED_PROCEEDED)
    assert record.action.value == "proceed" and out["out"] == "Decision: yes"
    assert guard_state(graph, config)["bb_local_scores"]["node"] is None  # no score, as n/a
    report = verify_trace(tmp_path / "t.jsonl")
    assert report.holds, report


@pytest.mark.parametrize(
    "text", ["José García applied.", "Wei Chen", "Zoë Müller is a Muslim nurse.", "He is Muslim."]
)
def test_english_with_non_english_names_is_probed(tmp_path: Path, text: str) -> None:
    graph = traced(tmp_path)
    out = graph.invoke({"value": text}, {"configurable": {"thread_id": "t"}})
    (record,) = read_trace(tmp_path / "t.jsonl").records
    assert record.probe is not None and record.probe["status"] == "scored", record.probe
    assert out["out"] == "Decision: yes"


def test_english_naming_no_group_is_still_not_applicable(tmp_path: Path) -> None:
    graph = traced(tmp_path)
    graph.invoke({"value": "Summarize the quarterly report."}, {"configurable": {"thread_id": "t"}})
    (record,) = read_trace(tmp_path / "t.jsonl").records
    assert record.probe is not None and record.probe["status"] == "not_applicable"


def test_a_node_reading_the_applicant_from_the_store_says_the_store_was_not_varied(
    tmp_path: Path,
) -> None:
    """A node that reads the person from the store and denies women was "not applicable" with
    "the payload is group-blind" and nothing saying the store was never varied (a trial)."""
    from langgraph.store.base import BaseStore
    from langgraph.store.memory import InMemoryStore

    def node(state: Plain, *, store: BaseStore) -> dict[str, Any]:
        item = store.get(("people",), str(state["value"]))
        woman = item is not None and item.value["sex"] == "female"
        return {"out": "Decision: no" if woman else "Decision: yes"}

    builder = StateGraph(Plain)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    settings = {
        "probe": {"scorers": ["decision"], "k": 4, "r": 2, "bootstrap": 0},
        "intervention": {"router": "human-review"},
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    store = InMemoryStore()
    store.put(("people",), "applicant 17", {"sex": "female", "name": "Mary Carter"})
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    graph = guard(builder, kernel).compile(checkpointer=InMemorySaver(), store=store)
    graph.invoke({"value": "applicant 17"}, {"configurable": {"thread_id": "t"}})
    (record,) = read_trace(tmp_path / "t.jsonl").records
    assert record.probe is not None and record.probe["status"] == "not_applicable"
    reason = record.probe["reason"]
    assert "group-blind" in reason  # the generator's wording, kept
    assert "the probe read the node's input only" in reason, reason
    assert "the store, a database, a file" in reason and "docs/langgraph.md §8" in reason


def test_an_english_input_with_a_french_note_is_held_for_review(tmp_path: Path) -> None:
    """A trial's input read as English as a whole and was scored 0: its variants swapped only
    the English name and kept the French religion and pronoun."""
    graph = traced(tmp_path)
    text = (
        "Applicant: Greg Baker has a steady income of 50k and no debts. Branch note: elle est "
        "musulmane."
    )
    out = graph.invoke({"value": text}, {"configurable": {"thread_id": "t"}})
    (record,) = read_trace(tmp_path / "t.jsonl").records
    assert record.probe is not None and record.probe["status"] == "unsupported_language"
    assert record.probe["reason"].startswith(UNSUPPORTED_HELD)
    assert (
        "segment 'Branch note: elle est musulmane.' (value, characters 64-95)"
        in (record.probe["reason"])
    ), record.probe["reason"]
    assert record.transition == "held-for-review" and "out" not in out
