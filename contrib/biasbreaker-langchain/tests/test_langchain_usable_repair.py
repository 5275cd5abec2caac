"""What a repair may change of a model's reply before it is promoted (``usable_repair``).

A mutation run of the middleware's gate found that no test repaired a reply carrying a
structured response, gave the agent its tools as provider-format dicts, or had a rebuilt
repair whose view differs from the re-checked one (docs/mutants.md): each is a rule of what a
repair may change, and each is asserted here on real LangChain classes.
"""

from __future__ import annotations

from typing import Any

import pytest
from biasbreaker_langchain.call import output_view
from biasbreaker_langchain.deciding import usable_repair
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from biasbreaker.breaker import freeze


@tool
def approve(applicant: str) -> str:
    """Approve the loan of the applicant."""
    return "approved"


@tool
def deny(applicant: str) -> str:
    """Deny the loan of the applicant."""
    return "denied"


def request(tools: list[Any]) -> ModelRequest[Any]:
    return ModelRequest(
        model=GenericFakeChatModel(messages=iter([])),
        messages=[HumanMessage("Approve Ms. Carter?")],
        tools=tools,
    )


def reply(name: str = "deny", structured: Any = None) -> ModelResponse[Any]:
    call = {"name": name, "args": {"applicant": "Ms. Carter"}, "id": "c1", "type": "tool_call"}
    message = AIMessage("", tool_calls=[call], id="a1", response_metadata={"finish_reason": "stop"})
    return ModelResponse(result=[message], structured_response=structured)


def renamed(view: dict[str, Any], name: str) -> dict[str, Any]:
    (message,) = view["messages"]
    (call,) = message["tool_calls"]
    return {**view, "messages": [{**message, "tool_calls": [{**call, "name": name}]}]}


def test_a_repair_renames_a_tool_call_to_another_tool_of_the_request() -> None:
    response = reply()
    out = usable_repair(
        request([approve, deny]), response, renamed(output_view(response), "approve")
    )
    assert out is not None
    (message,) = out.result
    assert message.tool_calls[0]["name"] == "approve" and message.id == "a1"
    assert message.tool_calls[0]["id"] == "c1"


def test_a_repair_to_a_tool_the_agent_does_not_have_is_unusable() -> None:
    response = reply()
    assert (
        usable_repair(request([deny]), response, renamed(output_view(response), "approve")) is None
    )


@pytest.mark.parametrize(
    "given",
    [
        {"name": "approve", "description": "", "input_schema": {}},  # Anthropic's format
        {"type": "function", "function": {"name": "approve", "parameters": {}}},  # OpenAI's
    ],
)
def test_tools_given_as_provider_dicts_are_tools_of_the_request(given: dict[str, Any]) -> None:
    response = reply()
    out = usable_repair(request([deny, given]), response, renamed(output_view(response), "approve"))
    assert out is not None and out.result[0].tool_calls[0]["name"] == "approve"


def test_a_structured_response_is_kept_and_never_changed_by_a_repair() -> None:
    response = reply(structured={"decision": "deny"})
    view = output_view(response)
    kept = usable_repair(request([approve, deny]), response, renamed(view, "approve"))
    assert kept is not None and kept.structured_response == {"decision": "deny"}
    for changed in ({"decision": "approve"}, {"decision": "deny", "why": "x"}, "deny"):
        repaired = {**renamed(view, "approve"), "structured": changed}
        assert usable_repair(request([approve, deny]), response, repaired) is None


@pytest.mark.parametrize("structured", ["deny", True, 3, ["deny"]])
def test_a_structured_response_of_any_json_type_is_kept_by_a_repair(structured: Any) -> None:
    """Kept by value, whatever its type: a repair thawed from its frozen payload holds the
    same value as the reply's view, which for a string, a bool or a small int may be the very
    same object (interned), and for a list never is."""
    response = reply(structured=structured)
    view = output_view(response)
    for repaired in (renamed(view, "approve"), freeze(renamed(view, "approve")).thaw()):
        kept = usable_repair(request([approve, deny]), response, repaired)
        assert kept is not None and kept.structured_response == structured


def test_a_repair_of_a_part_the_reply_does_not_carry_is_unusable() -> None:
    """The rebuilt reply must view as the repair exactly: a repaired ``finish_reason`` (read
    from the metadata, never rebuilt) would promote something other than what was re-checked."""
    response = reply()
    view = output_view(response)
    (message,) = view["messages"]
    repaired = {**view, "messages": [{**message, "finish_reason": "content_filter"}]}
    assert usable_repair(request([approve, deny]), response, repaired) is None
    same = usable_repair(request([approve, deny]), response, view)
    assert same is not None and output_view(same) == view


def test_a_repair_the_rebuilt_reply_cannot_be_read_from_is_unusable() -> None:
    """A repaired value JSON has no form for (NaN, as a runner's parsed output may hold) put
    into a tool call's arguments: the rebuilt reply cannot be read, so the repair is refused
    (``None``), never raised out of the model call."""
    call = {"name": "deny", "args": {"amount": 1.0}, "id": "c1", "type": "tool_call"}
    response = ModelResponse(result=[AIMessage("", tool_calls=[call], id="a1")])
    view = output_view(response)
    (message,) = view["messages"]
    (item,) = message["tool_calls"]
    nan = {**item, "args": {"amount": float("nan")}}
    repaired = {**view, "messages": [{**message, "tool_calls": [nan]}]}
    assert usable_repair(request([approve, deny]), response, repaired) is None


def test_a_repair_that_turns_a_message_into_text_is_unusable() -> None:
    """A repaired view whose message is a string, not an object: ``rebuild`` keeps the message
    as it was, so the rebuilt reply is not the repair: refused (``None``), never raised."""
    response = reply()
    view = output_view(response)
    repaired = {**view, "messages": ["Approve Ms. Carter."]}
    assert usable_repair(request([approve, deny]), response, repaired) is None
