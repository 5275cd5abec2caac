"""A guarded node calling ``langchain-openai``'s ``ChatOpenAI`` over HTTP, and message semantics.

The model is the seeded fake (**simulated**) served by the OpenAI-compatible test server in
``contrib/biasbreaker-openai-compatible``; ``ChatOpenAI`` is the real LangChain class, speaking
the real HTTP protocol. Then ``add_messages`` semantics through a hold: a held output's ids and
``RemoveMessage`` are what is promoted after a review, and a repair keeps the message's id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langchain_openai")
pytest.importorskip("biasbreaker_openai_compatible")

from biasbreaker_openai_compatible import testing
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command
from langgraph_apps import APPLICANT, SETTINGS, question

from biasbreaker.breaker import freeze
from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.types import InterventionResult
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard, guard_state
from biasbreaker_plugins.llm_fake import FakeLLM, FakeLLMOptions


def served(biased: bool) -> Any:
    weights = {"man": 20.0, "woman": 0.05} if biased else {}
    # over HTTP the probe's sample index does not reach the fake (every draw is sample 0), so
    # the planted preference is at its strongest shift, which decides this prompt at sample 0
    options = FakeLLMOptions(bias=1.0 if biased else 0.0, weights=weights, score_shift=0.5)
    fake = FakeLLM(options, seed=0)
    return testing.ChatServer(testing.ClientBackend(fake))


def assessor_graph(llm: ChatOpenAI, seen: list[list[Any]]) -> StateGraph:
    def assess(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    def reply(state: MessagesState) -> dict[str, Any]:
        seen.append(list(state["messages"]))
        return {
            "messages": [AIMessage(f"We have decided: {state['messages'][-1].content}", id="r")]
        }

    builder = StateGraph(MessagesState)
    builder.add_node("assess", assess)
    builder.add_node("reply", reply)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", "reply")
    builder.add_edge("reply", END)
    return builder


@pytest.mark.parametrize("biased", [True, False])
def test_chat_openai_against_the_served_fake_is_guarded(tmp_path: Path, biased: bool) -> None:
    trace = str(tmp_path / "{thread_id}.jsonl")
    settings = {**SETTINGS, "plugin": {"langgraph": {"trace_path": trace}}}
    with served(biased) as server:
        llm = ChatOpenAI(
            model="biasbreaker-test", base_url=server.base_url, api_key="not-a-key", max_retries=0
        )
        seen: list[list[Any]] = []
        kernel = Kernel.load(cwd=tmp_path, overrides=settings)
        graph = guard(assessor_graph(llm, seen), kernel, nodes=["assess"], hook=noop_hook).compile(
            checkpointer=InMemorySaver()
        )
        out = graph.invoke(question(), {"configurable": {"thread_id": "oa"}}, durability="sync")
        prompts = [c.last_user_message for c in server.chat_calls]
    assert len(prompts) > 1 and any("Ms. Mary" not in p for p in prompts)  # probed over HTTP
    if biased:
        assert seen == []  # the reply node never ran, nor saw the held message
        held = out["__interrupt__"][0].value["held"]["messages"][0]
        assert held == {
            "type": "ai",
            "content": "Decision: no",
            "finish_reason": "stop",
        }  # no id: ids are not compared
    else:
        assert len(seen) == 1 and isinstance(seen[0][-1], AIMessage)
        assert out["messages"][-1].content.startswith("We have decided: Decision:")
    assert verify_trace(tmp_path / "oa.jsonl").holds


# ------------------------------------------------------------------ add_messages through a hold


def rewriting_graph(seen: list[list[Any]]) -> StateGraph:
    def assess(state: MessagesState) -> dict[str, Any]:
        text = str(state["messages"][0].content)
        verdict = "Decision: no" if "Ms." in text else "Decision: yes"
        # replace the draft (by id) and drop the scratch message, as agents do
        return {"messages": [RemoveMessage(id="scratch"), AIMessage(verdict, id="draft")]}

    def reply(state: MessagesState) -> dict[str, Any]:
        seen.append([(type(m).__name__, m.id, m.content) for m in state["messages"]])
        return {}

    builder = StateGraph(MessagesState)
    builder.add_node("assess", assess)
    builder.add_node("reply", reply)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", "reply")
    builder.add_edge("reply", END)
    return builder


def given() -> dict[str, Any]:
    return {
        "messages": [
            HumanMessage(APPLICANT, id="q"),
            AIMessage("scratch notes", id="scratch"),
            AIMessage("draft", id="draft"),
        ]
    }


def test_an_approved_message_output_keeps_its_ids_and_its_removals(tmp_path: Path) -> None:
    seen: list[list[Any]] = []
    kernel = Kernel.load(cwd=tmp_path, overrides=SETTINGS)
    graph = guard(rewriting_graph(seen), kernel, nodes=["assess"], hook=noop_hook).compile(
        checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "ids"}}
    out = graph.invoke(given(), config, durability="sync")
    assert seen == [] and [m.id for m in out["messages"]] == ["q", "scratch", "draft"]
    approve = {"action": "approve", "sha256": out["__interrupt__"][0].value["sha256"]}
    graph.invoke(Command(resume=approve), config, durability="sync")
    assert seen == [[("HumanMessage", "q", APPLICANT), ("AIMessage", "draft", "Decision: no")]]


def test_a_repaired_message_output_replaces_the_message_it_was_written_for(tmp_path: Path) -> None:
    def neutral(context: Any) -> InterventionResult:
        view = context.frozen_payload.thaw()
        view["messages"][1]["content"] = "Decision: refer to a second reader"
        return InterventionResult(
            repaired=freeze(view), converged=True, strategy="skeptics", recheck_score=0.0
        )

    seen: list[list[Any]] = []
    kernel = Kernel.load(cwd=tmp_path, overrides=SETTINGS)
    graph = guard(rewriting_graph(seen), kernel, nodes=["assess"], hook=neutral).compile(
        checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "repair"}}
    graph.invoke(given(), config, durability="sync")
    assert seen == [
        [
            ("HumanMessage", "q", APPLICANT),
            ("AIMessage", "draft", "Decision: refer to a second reader"),
        ]
    ]
    frozen = guard_state(graph, config)["bb_frozen"]["assess@1"]
    assert frozen["status"] == "repaired"
    assert frozen["repaired"]["messages"][0] == {"type": "remove", "id": "scratch"}
