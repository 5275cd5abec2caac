"""The LLM client contract's request/response types."""

from __future__ import annotations

import asyncio

import pytest

from biasbreaker.llm import (
    ChatMessage,
    LLMClient,
    LLMRequest,
    LLMResponse,
    complete_sync,
    estimate_tokens,
)


def test_request_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match="messages is empty"):
        LLMRequest(messages=())
    with pytest.raises(ValueError, match=r"temperature=-0.1 must be >= 0"):
        LLMRequest.chat("x", temperature=-0.1)
    with pytest.raises(ValueError, match="max_tokens=0"):
        LLMRequest.chat("x", max_tokens=0)
    with pytest.raises(ValueError, match="role='robot'"):
        ChatMessage("robot", "x")  # type: ignore[arg-type]


def test_cache_key_covers_every_field() -> None:
    base = LLMRequest.chat("hello", system="be terse", seed=3)
    assert base.cache_key() == LLMRequest.chat("hello", system="be terse", seed=3).cache_key()
    variants = [
        LLMRequest.chat("hello!", system="be terse", seed=3),
        LLMRequest.chat("hello", system="be brief", seed=3),
        LLMRequest.chat("hello", system="be terse", seed=4),
        LLMRequest.chat("hello", system="be terse", seed=3, sample=1),
        LLMRequest.chat("hello", system="be terse", seed=3, temperature=0.7),
        LLMRequest.chat("hello", system="be terse", seed=3, purpose="skeptic"),
        LLMRequest.chat("hello", system="be terse", seed=3, response_schema={"type": "object"}),
    ]
    keys = {v.cache_key() for v in variants}
    assert len(keys) == len(variants)
    assert base.cache_key() not in keys
    assert base.prompt == "system: be terse\nuser: hello"


class Upper:
    model = "upper"

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return LLMResponse(request.messages[-1].content.upper(), self.model)

    async def aclose(self) -> None:
        return None


def test_complete_sync_outside_and_inside_a_loop() -> None:
    client = Upper()
    assert isinstance(client, LLMClient)
    assert complete_sync(client, LLMRequest.chat("abc")).text == "ABC"

    async def inside() -> None:
        with pytest.raises(RuntimeError, match="inside a running event loop"):
            complete_sync(client, LLMRequest.chat("abc"))

    asyncio.run(inside())


def test_estimate_tokens_rounds_a_quarter_of_the_characters_up() -> None:
    assert [estimate_tokens(t) for t in ("", "a", "abcd", "abcde", "x" * 400)] == [0, 1, 1, 2, 100]


def test_a_response_says_whether_its_usage_was_estimated() -> None:
    reported = LLMResponse("ok", "m", prompt_tokens=12, completion_tokens=5)
    assert reported.usage_estimated is False and reported.total_tokens == 17
    counted = LLMResponse("ok", "m", prompt_tokens=3, completion_tokens=1, usage_estimated=True)
    assert counted.usage_estimated is True and counted.total_tokens == 4
