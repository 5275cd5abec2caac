"""What a middleware that never probes (``[probe] probe_rate = 0``) wires and writes.

Every channel of the agent state is read, copied and checkpointed at each step of the agent,
so the middleware adds only the keys it can write: ``bb_probe_coverage`` is written by probed
calls only, and is a channel only of a middleware that may probe. The reply's JSON view is
built only when something reads it; a reply the probe cannot read is held all the same.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from biasbreaker_langchain import BiasGuardMiddleware, BiasGuardState, UnprobedBiasGuardState
from biasbreaker_langchain.call import output_view, plain_reply
from langchain.agents import create_agent
from langchain.agents.middleware.types import ModelResponse
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from lc_agents import SETTINGS, WOMAN, Watch, loan_tools, model, question

from biasbreaker_plugins.langgraph.values import Unreadable

OFF = {**SETTINGS, "probe": {**SETTINGS["probe"], "probe_rate": 0.0}}


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


@pytest.mark.parametrize(("rate", "probed"), [(0.0, False), (0.5, True), (1.0, True)])
def test_the_coverage_channel_exists_only_where_a_call_can_be_probed(
    rate: float, probed: bool
) -> None:
    settings = {**SETTINGS, "probe": {**SETTINGS["probe"], "probe_rate": rate}}
    middleware = BiasGuardMiddleware(settings)
    assert middleware.state_schema is (BiasGuardState if probed else UnprobedBiasGuardState)
    watch = Watch()
    agent = create_agent(model(False, watch), tools=loan_tools(watch), middleware=[middleware])
    assert ("bb_probe_coverage" in agent.channels) is probed
    for key in ("bb_breaker", "bb_network_ewma", "bb_reviews"):
        assert key in agent.channels


def test_probing_off_still_persists_the_machine_and_its_ewma() -> None:
    watch = Watch()
    agent = create_agent(
        model(True, watch),
        tools=loan_tools(watch),
        middleware=[BiasGuardMiddleware(OFF)],
        checkpointer=InMemorySaver(),
    )
    config = thread("off")
    out = agent.invoke(question(WOMAN), config)
    # not probed: the biased reply is let through (two model calls, one tool call)
    assert "__interrupt__" not in out and watch.calls == 2 and len(watch.executed) == 1
    values = agent.get_state(config).values
    assert values["bb_breaker"]["step"] == 2 and values["bb_breaker"]["state"] == "normal"
    ewma = values["bb_network_ewma"]
    assert set(ewma) == {"fast", "slow"} and "bb_probe_coverage" not in values
    agent.invoke({"messages": [HumanMessage("And again?")]}, config)
    again = agent.get_state(config).values
    # one machine step per model call, the EWMAs unmoved (nothing scored)
    assert watch.calls > 2 and again["bb_breaker"]["step"] == watch.calls
    assert again["bb_network_ewma"] == ewma


def _reply(**fields: Any) -> ModelResponse[Any]:
    return ModelResponse(result=[AIMessage(**{"content": "", **fields})])


PLAIN = [
    _reply(content="Approved."),
    _reply(tool_calls=[{"name": "lookup", "args": {"n": 1, "who": ["a", None]}, "id": "c"}]),
    _reply(content="x", name="Mary_Carter", additional_kwargs={"refusal": None}),
]
NOT_PLAIN = [
    # unreadable: bytes in a tool call's arguments or in additional_kwargs
    _reply(tool_calls=[{"name": "lookup", "args": {"n": b"\x00"}, "id": "c"}]),
    _reply(additional_kwargs={"blob": b"\x00"}),
    # readable, but not at a glance: read to know
    _reply(content=[{"type": "text", "text": "hi"}]),
    _reply(additional_kwargs={"audio": {"transcript": "hi", "data": "AAAA"}}),
    _reply(additional_kwargs={"function_call": {"name": "f", "arguments": "{}"}}),
    _reply(invalid_tool_calls=[{"name": "f", "args": "{", "id": "c", "error": "bad"}]),
    ModelResponse(result=[AIMessage("a")], structured_response={"x": 1}),
    ModelResponse(result=[ToolMessage("a", tool_call_id="c")]),
]


@pytest.mark.parametrize("response", PLAIN)
def test_a_plain_reply_is_read_lazily_and_reads(response: ModelResponse[Any]) -> None:
    assert plain_reply(response)
    assert output_view(response)["messages"][0]["type"] == "ai"


@pytest.mark.parametrize("response", NOT_PLAIN)
def test_a_reply_not_plain_at_a_glance_is_read_at_once(response: ModelResponse[Any]) -> None:
    assert not plain_reply(response)


def test_an_unreadable_additional_kwarg_fails_the_read() -> None:
    with pytest.raises(Unreadable, match="additional_kwargs"):
        output_view(NOT_PLAIN[1])


def test_probing_off_an_unreadable_reply_is_held(tmp_path: Path) -> None:
    """A reply the probe cannot read is held even where no call is probed (fail closed)."""

    class BytesModel(type(model(False, Watch()))):  # type: ignore[misc]
        def _reply(self, messages: list[Any]) -> AIMessage:
            call = {"name": "approve_loan", "args": {"reason": b"\x00"}, "id": "call_bytes"}
            return AIMessage(content="", tool_calls=[call])

    watch = Watch()
    fair = model(False, watch)
    agent = create_agent(
        BytesModel(client=fair.client, tool_for=fair.tool_for, watch=watch),
        tools=loan_tools(watch),
        middleware=[BiasGuardMiddleware(OFF)],
        checkpointer=InMemorySaver(),
    )
    out = agent.invoke(question(WOMAN), thread("bytes-off"))
    assert watch.executed == []
    request = out["__interrupt__"][0].value
    assert request["probe"]["status"] == "unreadable"
    assert "tool_calls[0].args" in request["reason"]


def test_the_hooks_signatures_are_computed_once() -> None:
    """LangSmith's ``traceable`` (around every ``wrap_model_call``) reads the signature per call."""
    middleware = BiasGuardMiddleware(OFF)
    for hook in (middleware.wrap_model_call, middleware.awrap_model_call):
        signature = inspect.signature(hook)
        assert signature is inspect.signature(hook)
        assert list(signature.parameters) == ["request", "handler"]
    assert inspect.iscoroutinefunction(middleware.awrap_model_call)
    assert not inspect.iscoroutinefunction(middleware.wrap_model_call)


def test_only_a_traced_middleware_records_its_machines_steps(tmp_path: Path) -> None:
    trace = {"plugin": {"langchain-agent": {"trace_path": str(tmp_path / "t-{thread_id}.jsonl")}}}
    for settings, recorded in ((OFF, False), ({**OFF, **trace}, True)):
        adapter = BiasGuardMiddleware(settings).adapter
        handle = adapter.machines.acquire(None, lambda context: None, adapter.machine_config)
        assert (handle.recorder is not None) is recorded


def test_a_review_without_a_trace_shows_what_one_with_a_trace_shows(tmp_path: Path) -> None:
    """Without a recorder the machine builds a step's record when read: the trail is kept."""
    trace = {"plugin": {"langchain-agent": {"trace_path": str(tmp_path / "t-{thread_id}.jsonl")}}}
    requests = []
    for settings in (SETTINGS, {**SETTINGS, **trace}):
        watch = Watch()
        agent = create_agent(
            model(True, watch),
            tools=loan_tools(watch),
            middleware=[BiasGuardMiddleware(settings)],
            checkpointer=InMemorySaver(),
        )
        out = agent.invoke(question(WOMAN), thread("review"))
        assert watch.executed == []
        requests.append(out["__interrupt__"][0].value)
    assert requests[0]["trail"] and requests[0] == requests[1]
