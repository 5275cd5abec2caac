"""The probe budget through the LangGraph guard: a step the run cannot pay for is held.

A chain of two guarded nodes, each probed with k = 4, r = 2 and the joint variant (the input
names a gender and a race: 7 re-runs). With ``[probe] max_calls_per_run = 7`` the first node's probe spends the run's budget; the second node is held
for review unprobed, its reason in the trace (``probe failed: BudgetExceeded: ...``), and it is
never re-run. Another thread has its own budget.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("py3langid")

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult, LLMResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from biasbreaker.kernel import Kernel
from biasbreaker.probe.budget import UnmeteredWarning
from biasbreaker.trace import read_trace
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard, guard_state
from biasbreaker_plugins.langgraph.streaming import reported_tokens

APPLICANT = "Mr. John Carter applied for the analyst job. Should we hire him?"


class Chain(TypedDict, total=False):
    value: Any
    first: Any
    second: Any


def build(tmp_path: Path, runs: dict[str, int], **probe: Any) -> Any:
    def first(state: Chain) -> Chain:
        runs["first"] += 1
        return {"first": "Decision: yes"}

    def second(state: Chain) -> Chain:
        runs["second"] += 1
        return {"second": "Decision: yes"}

    builder = StateGraph(Chain)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    settings = {
        "probe": {
            "scorers": ["decision"],
            "k": 4,
            "r": 2,
            "bootstrap": 0,
            **probe,
        },
        "intervention": {"router": "human-review"},
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    return guard(builder, kernel).compile(checkpointer=InMemorySaver())


def test_the_step_past_the_run_budget_is_held_with_the_reason_in_the_trace(
    tmp_path: Path,
) -> None:
    runs = {"first": 0, "second": 0}
    graph = build(tmp_path, runs, max_calls_per_run=7)
    config = {"configurable": {"thread_id": "t"}}
    out = graph.invoke({"value": APPLICANT}, config)
    first, second = read_trace(tmp_path / "t.jsonl").records
    assert first.probe is not None and first.probe["status"] == "scored"
    assert second.probe is not None and second.probe["status"] == "failed"
    reason = second.probe["reason"]
    assert reason.startswith("probe failed: BudgetExceeded: step 'second'")
    assert "spent 7 of its [probe] max_calls_per_run = 7 probe re-runs" in reason
    assert second.transition == "held-for-review" and second.action.value == "escalate"
    assert reason in second.reason
    # the held output reaches neither the state nor the caller; the run waits for review
    assert "second" not in out and out["__interrupt__"][0].value["reason"] == second.reason
    assert runs == {"first": 1 + 7, "second": 1}  # the second node was never re-run
    trail = guard_state(graph, config)["bb_audit_trail"]
    assert any(e.get("event") == "probe-failed" for e in trail), trail
    assert verify_trace(tmp_path / "t.jsonl").holds

    # another thread is another run, with a budget of its own
    graph.invoke({"value": APPLICANT}, {"configurable": {"thread_id": "u"}})
    first_u = read_trace(tmp_path / "u.jsonl").records[0]
    assert first_u.probe is not None and first_u.probe["status"] == "scored"


def test_without_a_budget_both_steps_are_probed(tmp_path: Path) -> None:
    runs = {"first": 0, "second": 0}
    graph = build(tmp_path, runs)
    out = graph.invoke({"value": APPLICANT}, {"configurable": {"thread_id": "t"}})
    records = read_trace(tmp_path / "t.jsonl").records
    assert [r.probe["status"] for r in records if r.probe] == ["scored", "scored"]
    assert out["second"] == "Decision: yes"
    assert runs == {"first": 1 + 7, "second": 1 + 7}


class Reporting(BaseChatModel):
    """A real LangChain chat model answering "Decision: yes", reporting ``tokens`` per reply
    in ``usage_metadata`` (``None``: no usage reported, as a model without it)."""

    tokens: int | None = None

    @property
    def _llm_type(self) -> str:
        return "reporting"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        usage = None
        if self.tokens is not None:
            usage = {"input_tokens": self.tokens - 1, "output_tokens": 1}
            usage["total_tokens"] = self.tokens
        reply = AIMessage(content="Decision: yes", usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def chat_chain(tmp_path: Path, model: BaseChatModel, **probe: Any) -> Any:
    def ask(field: str) -> Any:
        def node(state: Chain) -> Chain:
            return {field: str(model.invoke(state["value"]).content)}

        node.__name__ = field
        return node

    builder = StateGraph(Chain)
    builder.add_node("first", ask("first"))
    builder.add_node("second", ask("second"))
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    settings = {
        "probe": {"scorers": ["decision"], "k": 4, "r": 2, "bootstrap": 0, **probe},
        "intervention": {"router": "human-review"},
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    return guard(builder, kernel).compile(checkpointer=InMemorySaver())


def test_a_chat_models_reported_tokens_count_against_the_run(tmp_path: Path) -> None:
    """The first step's 7 re-runs report 10 tokens each (70): the bound of 70 is reached."""
    graph = chat_chain(tmp_path, Reporting(tokens=10), max_tokens_per_run=70)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnmeteredWarning)
        graph.invoke({"value": APPLICANT}, {"configurable": {"thread_id": "t"}})
    first, second = read_trace(tmp_path / "t.jsonl").records
    assert first.probe is not None and first.probe["status"] == "scored"
    assert second.probe is not None and second.probe["status"] == "failed"
    assert "have used 70 tokens, reaching [probe] max_tokens_per_run = 70" in second.probe["reason"]


def test_a_bound_on_tokens_that_no_re_run_reports_is_warned_about(tmp_path: Path) -> None:
    graph = chat_chain(tmp_path, Reporting(tokens=None), max_tokens_per_run=70)
    with pytest.warns(UnmeteredWarning, match="cannot see the re-runs of step 'first'"):
        graph.invoke({"value": APPLICANT}, {"configurable": {"thread_id": "t"}})
    records = read_trace(tmp_path / "t.jsonl").records
    assert [r.probe["status"] for r in records if r.probe] == ["scored", "scored"]


def test_a_reply_reports_its_tokens_in_usage_metadata_or_llm_output() -> None:
    def result(usage: Any = None, llm_output: Any = None) -> LLMResult:
        reply = AIMessage(content="x", usage_metadata=usage)
        return LLMResult(generations=[[ChatGeneration(message=reply)]], llm_output=llm_output)

    both = {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}
    assert reported_tokens(result(both)) == 5
    assert reported_tokens(result(None, {"token_usage": {"total_tokens": 9}})) == 9
    assert reported_tokens(result(None, {"token_usage": {"total_tokens": True}})) == 0
    assert reported_tokens(result()) == 0
