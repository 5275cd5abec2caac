"""The probe budget through BiasGuardMiddleware: a model call the run cannot pay for is held.

``[probe] max_calls_per_run = 12`` with k = 4, r = 2 (6 re-runs a model call): the thread's first
loan question (two model calls: the tool call, then the closing reply) spends the run's budget;
its second question is held for review unprobed (``probe failed:
BudgetExceeded: ...`` in the review request and the trace), its tool call never runs. Another
thread has a budget of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from biasbreaker_langchain import BiasGuardMiddleware
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from lc_agents import SETTINGS, WOMAN, Watch, loan_tools, model, question

SECOND = (
    "Loan application from Mr. David Lee. He earns 90k a year. Should we approve? Decide yes or no."
)


def build(watch: Watch, tmp_path: Path) -> Any:
    trace = str(tmp_path / "trace-{thread_id}.jsonl")
    probe = {**SETTINGS["probe"], "max_calls_per_run": 12}
    middleware = BiasGuardMiddleware(
        {**SETTINGS, "probe": probe, "plugin": {"langchain-agent": {"trace_path": trace}}}
    )
    return create_agent(
        model(False, watch),
        tools=loan_tools(watch),
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


def test_the_call_past_the_run_budget_is_held_and_its_tool_never_runs(tmp_path: Path) -> None:
    watch = Watch()
    agent = build(watch, tmp_path)
    config = {"configurable": {"thread_id": "t"}}
    first = agent.invoke(question(WOMAN), config)
    assert "__interrupt__" not in first and len(watch.executed) == 1
    calls_before = watch.calls
    second = agent.invoke(question(SECOND), config)
    request = second["__interrupt__"][0].value
    assert request["probe"]["status"] == "failed"
    reason = request["probe"]["reason"]
    assert reason.startswith("probe failed: BudgetExceeded: ")
    assert "spent 12 of its [probe] max_calls_per_run = 12" in reason
    assert watch.calls == calls_before + 1  # asked once, never re-issued
    assert len(watch.executed) == 1  # the held reply's tool call did not run
    assert reason in (tmp_path / "trace-t.jsonl").read_text()

    other = agent.invoke(question(SECOND), {"configurable": {"thread_id": "u"}})
    assert "__interrupt__" not in other


class Reporting(BaseChatModel):
    """A real chat model that answers "Decision: yes" and reports 10 tokens a reply."""

    @property
    def _llm_type(self) -> str:
        return "reporting"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        usage = {"input_tokens": 9, "output_tokens": 1, "total_tokens": 10}
        reply = AIMessage(content="Decision: yes", usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def test_the_models_reported_tokens_count_against_the_run(tmp_path: Path) -> None:
    """One model call's 6 re-issues report 60 tokens: at max_tokens_per_run = 60 the next
    question is held."""
    probe = {**SETTINGS["probe"], "max_tokens_per_run": 60}
    middleware = BiasGuardMiddleware({**SETTINGS, "probe": probe})
    agent = create_agent(Reporting(), middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    assert "__interrupt__" not in agent.invoke(question(WOMAN), config)
    request = agent.invoke(question(SECOND), config)["__interrupt__"][0].value
    assert request["probe"]["status"] == "failed"
    assert (
        "have used 60 tokens, reaching [probe] max_tokens_per_run = 60"
        in (request["probe"]["reason"])
    )
