"""The caller's stream mode never moves a guarded step's score.

A LangChain chat model answers through ``_stream`` when a streaming handler is attached
(``stream_mode="messages"``) and through ``_generate`` otherwise; this one's two methods differ
by a trailing space. The probe's re-runs take the path the node's own call took, so the step
scores the same (and is held the same) under ``invoke``, ``stream`` in every mode and
``astream``. Before, a messages stream compared the node's streamed reply with re-runs that
went through ``_generate``: the same-group resamples differed from it, the noise floor rose,
and the biased step scored 0.5 instead of 1.0 and was let through at ``tau_enter = 0.6``
(a new user's finding).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic import Field

from biasbreaker_plugins.langgraph import guard, guard_state

TEXT = "Loan application from Ms. Mary Carter, 40k income. Decide."
HELD_TEXT = "Decision: DENY"


class TwoPaths(BaseChatModel):
    """Denies women; ``_stream`` answers word by word with a trailing space, ``_generate`` not."""

    calls: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "two-paths"

    def _reply(self, messages: list[BaseMessage]) -> str:
        text = " ".join(str(m.content) for m in messages)
        woman = any(w in text for w in ("Ms.", "Mary", "she", "her"))
        return f"{HELD_TEXT}. We cannot offer a loan." if woman else "Decision: APPROVE. Welcome."

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.calls.append("generate")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self._reply(messages)))])

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        self.calls.append("stream")
        for word in self._reply(messages).split(" "):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word + " "))
            if run_manager is not None:
                run_manager.on_llm_new_token(word + " ", chunk=chunk)
            yield chunk


def build(model: TwoPaths) -> Any:
    def assess(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node(assess)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", END)
    settings = {
        "intervention": {"router": "human-review"},
        "breaker": {"tau_enter": 0.6, "tau_exit": 0.4},
        "probe": {"bootstrap": 0},
    }
    return guard(builder, settings).compile(checkpointer=InMemorySaver())


def shown(chunks: list[Any]) -> str:
    """What the caller's chunks show, but the review request (``__interrupt__``: addressed to
    the reviewer, it carries the held reply; docs/langgraph.md §13)."""
    kept = []
    for chunk in chunks:
        payload = chunk[-1] if isinstance(chunk, tuple) else chunk
        if not (isinstance(payload, dict) and "__interrupt__" in payload):
            kept.append(chunk)
    return repr(kept)


MODES: list[Any] = [None, "updates", "messages", ["messages", "custom"], ["values", "messages"]]


@pytest.mark.parametrize("mode", MODES, ids=str)
def test_the_stream_mode_does_not_move_the_score(mode: Any) -> None:
    model = TwoPaths()
    graph = build(model)
    config = {"configurable": {"thread_id": "t"}}
    question = {"messages": [HumanMessage(TEXT)]}
    if mode is None:
        graph.invoke(question, config)
    else:
        chunks = list(graph.stream(question, config, stream_mode=mode))
        assert HELD_TEXT not in shown(chunks)
    assert guard_state(graph, config)["bb_local_scores"]["assess"] == 1.0
    assert graph.get_state(config).next  # held for review
    # the node's own call and its re-runs took one path
    assert len(set(model.calls)) == 1, model.calls


def test_async_messages_stream_scores_as_invoke() -> None:
    model = TwoPaths()
    graph = build(model)
    config = {"configurable": {"thread_id": "a"}}

    async def run() -> list[Any]:
        question = {"messages": [HumanMessage(TEXT)]}
        return [c async for c in graph.astream(question, config, stream_mode="messages")]

    chunks = asyncio.run(run())
    assert HELD_TEXT not in shown(chunks)
    assert guard_state(graph, config)["bb_local_scores"]["assess"] == 1.0
    assert set(model.calls) == {"stream"}, model.calls


@pytest.mark.parametrize("mode", [None, "messages"], ids=str)
def test_a_langchain_agents_re_issues_take_the_path_of_its_own_call(mode: Any) -> None:
    """The same through ``BiasGuardMiddleware`` (its re-issues are silenced the same way)."""
    middleware_module = pytest.importorskip("biasbreaker_langchain")
    agents = pytest.importorskip("langchain.agents")
    model = TwoPaths()
    settings = {
        "intervention": {"router": "human-review"},
        "breaker": {"tau_enter": 0.6, "tau_exit": 0.4},
        "probe": {"bootstrap": 0},
    }
    agent = agents.create_agent(
        model,
        middleware=[middleware_module.BiasGuardMiddleware(settings)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "m"}}
    question = {"messages": [HumanMessage(TEXT)]}
    if mode is None:
        out = agent.invoke(question, config)
        assert "__interrupt__" in out
    else:
        chunks = list(agent.stream(question, config, stream_mode=mode))
        assert HELD_TEXT not in shown(chunks)
        assert agent.get_state(config).next  # held for review
    assert len(set(model.calls)) == 1, model.calls
