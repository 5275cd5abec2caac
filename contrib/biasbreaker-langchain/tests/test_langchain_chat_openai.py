"""A guarded ``create_agent`` agent over ``langchain-openai``'s ``ChatOpenAI``, over HTTP.

The model is the seeded fake (**simulated**) served by biasbreaker-openai-compatible's test
server; ``ChatOpenAI`` is the real LangChain class speaking the real protocol. The server
answers in text (it returns no tool calls), so the decision the probe compares is the text
``Decision: yes|no``; the tools are bound and must never run for a held reply. The same server
calling the tools over HTTP (``DecisionTools``) is in ``test_langchain_chat_openai_tools.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_openai")
pytest.importorskip("biasbreaker_openai_compatible")

from biasbreaker_langchain import WITHHELD, BiasGuardMiddleware
from biasbreaker_openai_compatible import testing
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from lc_agents import SETTINGS, WOMAN, Watch, loan_tools, question

from biasbreaker.verify import verify_trace
from biasbreaker_plugins.llm_fake import FakeLLM, FakeLLMOptions


def served(biased: bool) -> Any:
    weights = {"man": 20.0, "woman": 0.05} if biased else {}
    # over HTTP the probe's sample index does not reach the fake (every draw is sample 0), so
    # the planted preference is at its strongest shift, which decides this prompt at sample 0
    options = FakeLLMOptions(bias=1.0 if biased else 0.0, weights=weights, score_shift=0.5)
    return testing.ChatServer(testing.ClientBackend(FakeLLM(options, seed=0)))


@pytest.mark.parametrize("biased", [True, False])
def test_chat_openai_agent_is_guarded(tmp_path: Path, biased: bool) -> None:
    trace = str(tmp_path / "{thread_id}.jsonl")
    settings = {**SETTINGS, "plugin": {"langchain-agent": {"trace_path": trace}}}
    watch = Watch()
    middleware = BiasGuardMiddleware(settings)
    with served(biased) as server:
        llm = ChatOpenAI(
            model="biasbreaker-test", base_url=server.base_url, api_key="not-a-key", max_retries=0
        )
        agent = create_agent(
            llm, tools=loan_tools(watch), middleware=[middleware], checkpointer=InMemorySaver()
        )
        out = agent.invoke(question(WOMAN), {"configurable": {"thread_id": "oa"}})
        prompts = [c.last_user_message for c in server.chat_calls]
    assert len(prompts) > 1 and any("Ms. Mary" not in p for p in prompts)  # probed over HTTP
    assert watch.executed == []
    if biased:
        assert [type(m).__name__ for m in out["messages"]] == ["HumanMessage"]
        held = out["__interrupt__"][0].value["reply"]["messages"][0]
        assert held == {"type": "ai", "content": "Decision: no", "finish_reason": "stop"}
    else:
        assert "__interrupt__" not in out
        last = out["messages"][-1]
        assert isinstance(last, AIMessage) and str(last.content).startswith("Decision:")
    assert verify_trace(tmp_path / "oa.jsonl").holds


@pytest.mark.parametrize("biased", [True, False])
def test_chat_openai_agent_without_tools_is_guarded_and_resumed_without_a_new_request(
    tmp_path: Path, biased: bool
) -> None:
    """No tools bound: the text reply is the decision; a review resumes with no HTTP call."""
    trace = str(tmp_path / "{thread_id}.jsonl")
    settings = {**SETTINGS, "plugin": {"langchain-agent": {"trace_path": trace}}}
    config = {"configurable": {"thread_id": "no-tools"}}
    with served(biased) as server:
        llm = ChatOpenAI(
            model="biasbreaker-test", base_url=server.base_url, api_key="not-a-key", max_retries=0
        )
        agent = create_agent(
            llm, middleware=[BiasGuardMiddleware(settings)], checkpointer=InMemorySaver()
        )
        out = agent.invoke(question(WOMAN), config)
        requests = len(server.chat_calls)
        assert requests > 1 and any(
            "Ms. Mary" not in c.last_user_message for c in server.chat_calls
        )
        if biased:
            request = out["__interrupt__"][0].value
            assert request["state"] == "escalated"
            assert request["reply"]["messages"] == [
                {"type": "ai", "content": "Decision: no", "finish_reason": "stop"}
            ]
            assert [type(m).__name__ for m in out["messages"]] == ["HumanMessage"]
            answer = {"action": "reject", "sha256": request["sha256"]}
            out = agent.invoke(Command(resume=answer), config)
            assert len(server.chat_calls) == requests  # the held reply, not a new request
            assert out["messages"][-1].content == WITHHELD.format(reason=request["reason"])
        else:
            assert "__interrupt__" not in out
            assert [type(m).__name__ for m in out["messages"]] == ["HumanMessage", "AIMessage"]
            assert str(out["messages"][-1].content).startswith("Decision:")
    assert verify_trace(tmp_path / "no-tools.jsonl").holds
