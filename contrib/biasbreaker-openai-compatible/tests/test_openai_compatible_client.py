"""The client against a real HTTP server on 127.0.0.1 (no mocking of httpx)."""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from biasbreaker_openai_compatible.client import OpenAICompatibleClient, grammar_schema
from biasbreaker_openai_compatible.plugin import DEFAULT_MAX_TOKENS, OpenAICompatibleOptions
from biasbreaker_openai_compatible.testing import ChatCall, ChatServer, Reply

from biasbreaker.errors import LLMError
from biasbreaker.llm import LLMRequest, complete_sync

KEY = "sk-proj-Zq8TestKeyThatMustNeverLeak0123456789"
SCHEMA = {"type": "object", "properties": {"stands": {"type": "boolean"}}, "required": ["stands"]}


class Sleeps:
    """An injectable back-off sleep that records the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def make_client(
    server: ChatServer,
    sleeps: Sleeps | None = None,
    *,
    environ: dict[str, str] | None = None,
    clock: Callable[[], float] | None = None,
    default_seed: int | None = None,
    rng: random.Random | None = None,
    **options: Any,
) -> OpenAICompatibleClient:
    opts = OpenAICompatibleOptions.model_validate(
        {"base_url": server.base_url, "model": "tiny", **options}
    )
    kwargs: dict[str, Any] = {"default_seed": default_seed, "environ": environ or {}}
    if sleeps is not None:
        kwargs["sleep"] = sleeps
    if clock is not None:
        kwargs["clock"] = clock
    if rng is not None:
        kwargs["rng"] = rng
    return OpenAICompatibleClient(opts, **kwargs)


def jittered(seed: int, ceilings: list[float]) -> list[float]:
    """The full-jitter waits a ``random.Random(seed)`` draws under ``ceilings``."""
    rng = random.Random(seed)
    return [rng.uniform(0.0, c) for c in ceilings]


def scripted(*replies: Reply) -> Callable[[ChatCall], Reply]:
    """Reply with ``replies`` in order; the last one repeats."""
    lock = threading.Lock()
    queue = list(replies)

    def reply(call: ChatCall) -> Reply:
        with lock:
            return queue.pop(0) if len(queue) > 1 else queue[0]

    return reply


async def test_a_normal_reply_is_parsed(openai_server: ChatServer) -> None:
    openai_server.reply = lambda call: Reply.completion(
        "The candidate is qualified.", model="tiny-2024", prompt_tokens=12, completion_tokens=5
    )
    client = make_client(openai_server)
    reply = await client.complete(
        LLMRequest.chat("Assess.", system="Be fair.", max_tokens=40, seed=3)
    )
    await client.aclose()
    assert (reply.text, reply.model, reply.finish_reason) == (
        "The candidate is qualified.",
        "tiny-2024",
        "stop",
    )
    assert (reply.prompt_tokens, reply.completion_tokens) == (12, 5)
    assert reply.usage_estimated is False
    (call,) = openai_server.chat_calls
    assert call.path == "/v1/chat/completions"
    assert call.body == {
        "model": "tiny",
        "messages": [
            {"role": "system", "content": "Be fair."},
            {"role": "user", "content": "Assess."},
        ],
        "temperature": 0.0,
        "max_tokens": 40,
        "seed": 3,
    }
    assert "authorization" not in call.headers


async def test_seed_temperature_and_max_tokens_follow_options_and_request(
    openai_server: ChatServer,
) -> None:
    client = make_client(openai_server, default_seed=100, temperature=0.7, max_tokens=64)
    await client.complete(LLMRequest.chat("a"))
    await client.complete(LLMRequest.chat("a", sample=2))
    await client.complete(LLMRequest.chat("a", seed=5, sample=1, max_tokens=8))
    await client.aclose()
    bodies = [c.body for c in openai_server.chat_calls]
    assert [(b["seed"], b["temperature"], b["max_tokens"]) for b in bodies] == [
        (100, 0.7, 64),
        (102, 0.7, 64),  # a resample is a distinct draw
        (6, 0.7, 8),
    ]
    quiet = make_client(openai_server, default_seed=100, send_seed=False)
    await quiet.complete(LLMRequest.chat("a", seed=9))
    await quiet.aclose()
    assert "seed" not in openai_server.chat_calls[-1].body


async def test_a_request_without_a_token_cap_gets_the_default_one_unless_nulled(
    openai_server: ChatServer,
) -> None:
    """An uncapped generation can hold a one-slot server for minutes: 1024 unless null."""
    capped = make_client(openai_server)
    await capped.complete(LLMRequest.chat("a"))
    await capped.aclose()
    assert openai_server.chat_calls[-1].body["max_tokens"] == DEFAULT_MAX_TOKENS == 1024
    uncapped = make_client(openai_server, max_tokens=None)
    await uncapped.complete(LLMRequest.chat("a"))
    await uncapped.aclose()
    assert "max_tokens" not in openai_server.chat_calls[-1].body


async def test_429_then_success_waits_retry_after(openai_server: ChatServer) -> None:
    openai_server.reply = scripted(
        Reply.error(429, "slow down", retry_after="2"), Reply.completion("ok")
    )
    sleeps = Sleeps()
    client = make_client(openai_server, sleeps, backoff_base_s=0.25)
    reply = await client.complete(LLMRequest.chat("x"))
    await client.aclose()
    assert reply.text == "ok"
    assert len(openai_server.chat_calls) == 2
    assert sleeps.delays == [2.0]


async def test_retry_after_as_http_date_uses_the_injected_clock(openai_server: ChatServer) -> None:
    now = 1_700_000_000.0
    when = email.utils.formatdate(now + 7, usegmt=True)
    openai_server.reply = scripted(
        Reply.error(429, "later", retry_after=when), Reply.completion("ok")
    )
    sleeps = Sleeps()
    client = make_client(openai_server, sleeps, clock=lambda: now, backoff_base_s=0.1)
    assert (await client.complete(LLMRequest.chat("x"))).text == "ok"
    await client.aclose()
    assert sleeps.delays == [7.0]


async def test_retry_after_is_capped_by_backoff_max(openai_server: ChatServer) -> None:
    openai_server.reply = scripted(
        Reply.error(503, "busy", retry_after="600"), Reply.completion("ok")
    )
    sleeps = Sleeps()
    client = make_client(openai_server, sleeps, backoff_max_s=3)
    assert (await client.complete(LLMRequest.chat("x"))).text == "ok"
    await client.aclose()
    assert sleeps.delays == [3.0]


async def test_repeated_500s_exhaust_retries_with_exponential_backoff(
    openai_server: ChatServer,
) -> None:
    openai_server.reply = lambda call: Reply.error(500, "model crashed")
    sleeps = Sleeps()
    client = make_client(
        openai_server,
        sleeps,
        max_retries=3,
        backoff_base_s=0.5,
        backoff_max_s=1.5,
        rng=random.Random(7),
    )
    with pytest.raises(LLMError) as info:
        await client.complete(LLMRequest.chat("x"))
    await client.aclose()
    message = str(info.value)
    assert len(openai_server.chat_calls) == 4
    # full jitter: uniform under base * 2**(n-1), capped at backoff_max_s (0.5, 1.0, 1.5)
    assert sleeps.delays == jittered(7, [0.5, 1.0, 1.5])
    assert "HTTP 500" in message and "model crashed" in message
    assert f"POST {openai_server.base_url}/chat/completions" in message
    assert "model 'tiny'" in message and "after 4 attempt(s)" in message


async def test_a_400_is_not_retried_and_hints_at_json_mode(openai_server: ChatServer) -> None:
    openai_server.reply = lambda call: Reply.error(400, "response_format json_schema unsupported")
    sleeps = Sleeps()
    client = make_client(openai_server, sleeps)
    with pytest.raises(
        LLMError,
        match=r"HTTP 400 .*not retried.*set json_mode to 'json_object_schema' or 'json_object' "
        r"or 'none'",
    ):
        await client.complete(LLMRequest.chat("x", response_schema=SCHEMA))
    await client.aclose()
    assert len(openai_server.chat_calls) == 1 and sleeps.delays == []


VLLM_CONTEXT_400 = (
    "This model's maximum context length is 2048 tokens. However, you requested 1024 output "
    "tokens and your prompt contains at least 1100 input tokens, for a total of at least 2124 "
    "tokens. Please reduce the length of the input prompt or the number of requested output "
    "tokens."
)
"""vLLM's documented refusal (HTTP 400) of a prompt plus ``max_tokens`` beyond
``--max-model-len``, in the wording of its recent releases (not seen here: no vLLM server)."""


async def test_a_400_for_the_context_length_names_max_tokens_not_json_mode(
    openai_server: ChatServer,
) -> None:
    openai_server.reply = lambda call: Reply.error(400, VLLM_CONTEXT_400)
    sleeps = Sleeps()
    client = make_client(openai_server, sleeps)
    with pytest.raises(LLMError) as caught:
        await client.complete(LLMRequest.chat("x", response_schema=SCHEMA, max_tokens=1024))
    await client.aclose()
    message = str(caught.value)
    assert "not retried" in message and "lower [plugin.openai-compatible] max_tokens" in message
    assert "(sent: 1024)" in message and "--max-model-len" in message
    assert "json_mode" not in message  # the schema was not what the server refused
    assert len(openai_server.chat_calls) == 1 and sleeps.delays == []


LLAMA_CPP_500 = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
    "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
    "'ctx': {'expected': \"'text' or 'json_object'\"}}"
)
"""The error message llama-cpp-python 0.3.36's server answered with HTTP 500 to ``json_schema``
(seen here, against its OpenAI-compatible server with SmolLM2-135M)."""


async def test_a_500_naming_response_format_is_not_retried_and_hints_at_json_mode(
    openai_server: ChatServer,
) -> None:
    openai_server.reply = lambda call: Reply.error(500, LLAMA_CPP_500)
    sleeps = Sleeps()
    client = make_client(openai_server, sleeps)
    with pytest.raises(
        LLMError, match=r"HTTP 500 .*not retried.*llama-cpp-python's server: 'json_object_schema'"
    ):
        await client.complete(LLMRequest.chat("x", response_schema=SCHEMA))
    # the same 500 to a request that sent no response_format is an ordinary 5xx: retried
    with pytest.raises(LLMError, match=r"after 4 attempt\(s\): HTTP 500"):
        await client.complete(LLMRequest.chat("x"))
    await client.aclose()
    assert len(openai_server.chat_calls) == 1 + 4 and len(sleeps.delays) == 3


async def test_malformed_json_reply_is_an_error(openai_server: ChatServer) -> None:
    openai_server.reply = lambda call: Reply.raw_text('{"choices": [ {"message": ')
    client = make_client(openai_server, Sleeps())
    with pytest.raises(LLMError, match="reply is not JSON"):
        await client.complete(LLMRequest.chat("x"))
    openai_server.reply = lambda call: Reply.json({"object": "chat.completion", "choices": []})
    with pytest.raises(LLMError, match=r"not a chat completion \(no choices\[0\]\.message\)"):
        await client.complete(LLMRequest.chat("x"))
    openai_server.reply = lambda call: Reply.json(
        {"choices": [{"message": {"role": "assistant", "content": None, "refusal": "no"}}]}
    )
    with pytest.raises(LLMError, match="the model refused: 'no'"):
        await client.complete(LLMRequest.chat("x"))
    await client.aclose()
    assert len(openai_server.chat_calls) == 3  # none of these is retried


async def test_an_undecodable_reply_is_an_error_not_a_crash(openai_server: ChatServer) -> None:
    body = b'{"choices": []}'  # claimed gzip, sent plain
    openai_server.reply = lambda call: Reply(200, body, (("Content-Encoding", "gzip"),))
    client = make_client(openai_server, Sleeps())
    with pytest.raises(LLMError, match=r"after 1 attempt\(s\): DecodingError: .*\(not retried\)"):
        await client.complete(LLMRequest.chat("x"))
    await client.aclose()


async def test_a_slow_reply_past_the_time_out_is_not_retried_into_the_servers_queue(
    openai_server: ChatServer,
) -> None:
    """The server goes on generating an abandoned reply: a retry would queue behind it."""
    openai_server.reply = lambda call: Reply.completion("too late", delay_s=5.0)
    sleeps = Sleeps()
    client = make_client(openai_server, sleeps, timeout_s=0.2, max_retries=3)
    with pytest.raises(
        LLMError, match=r"after 1 attempt\(s\): time-out after 0.2 s .*not retried.*retry_timeouts"
    ):
        await client.complete(LLMRequest.chat("x"))
    await client.aclose()
    assert len(openai_server.chat_calls) == 1
    assert sleeps.delays == []


async def test_with_retry_timeouts_a_slow_reply_is_retried_then_fails(
    openai_server: ChatServer,
) -> None:
    openai_server.reply = lambda call: Reply.completion("too late", delay_s=5.0)
    sleeps = Sleeps()
    client = make_client(
        openai_server,
        sleeps,
        timeout_s=0.2,
        max_retries=1,
        retry_timeouts=True,
        rng=random.Random(3),
    )
    with pytest.raises(LLMError, match=r"after 2 attempt\(s\): time-out after 0.2 s"):
        await client.complete(LLMRequest.chat("x"))
    await client.aclose()
    assert len(openai_server.chat_calls) == 2
    assert sleeps.delays == jittered(3, [0.5])


async def test_a_slow_first_reply_then_a_fast_one_succeeds(openai_server: ChatServer) -> None:
    openai_server.reply = scripted(Reply.completion("late", delay_s=5.0), Reply.completion("fast"))
    client = make_client(openai_server, Sleeps(), timeout_s=0.2, retry_timeouts=True)
    assert (await client.complete(LLMRequest.chat("x"))).text == "fast"
    await client.aclose()


async def test_connection_refused_is_a_transport_error() -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    opts = OpenAICompatibleOptions(
        base_url=f"http://127.0.0.1:{port}/v1", model="tiny", max_retries=2
    )
    sleeps = Sleeps()
    client = OpenAICompatibleClient(opts, sleep=sleeps, environ={}, rng=random.Random(5))
    with pytest.raises(LLMError, match=r"after 3 attempt\(s\): transport error ConnectError"):
        await client.complete(LLMRequest.chat("x"))
    await client.aclose()
    assert sleeps.delays == jittered(5, [0.5, 1.0])


async def test_the_key_is_sent_as_bearer_token_from_the_named_variable(
    openai_server: ChatServer,
) -> None:
    client = make_client(openai_server, environ={"MY_LLM_KEY": KEY}, api_key_env="MY_LLM_KEY")
    await client.complete(LLMRequest.chat("x"))
    await client.aclose()
    assert openai_server.chat_calls[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(client) and KEY not in str(vars(client))


def test_a_missing_key_variable_is_an_error_naming_it(openai_server: ChatServer) -> None:
    with pytest.raises(LLMError, match="environment variable MY_LLM_KEY .* is not set or empty"):
        make_client(openai_server, environ={"MY_LLM_KEY": "  "}, api_key_env="MY_LLM_KEY")


async def test_the_key_never_appears_in_errors_or_logs(
    openai_server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    def leaky(call: ChatCall) -> Reply:  # a server that echoes the credentials it got
        auth = call.headers.get("authorization", "")
        status = 401 if call.body["messages"][0]["content"] == "auth" else 503
        return Reply.error(status, f"bad credentials {auth}", retry_after="1")

    openai_server.reply = leaky
    caplog.set_level(logging.DEBUG)
    client = make_client(
        openai_server,
        Sleeps(),
        environ={"MY_LLM_KEY": KEY},
        api_key_env="MY_LLM_KEY",
        max_retries=2,
    )
    errors = []
    for prompt in ("auth", "busy"):
        with pytest.raises(LLMError) as info:
            await client.complete(LLMRequest.chat(prompt))
        errors.append(info.value)
    await client.aclose()
    assert "HTTP 401" in str(errors[0]) and "check the key in MY_LLM_KEY" in str(errors[0])
    assert "HTTP 503" in str(errors[1]) and "after 3 attempt(s)" in str(errors[1])
    assert all("Bearer <redacted>" in str(e) for e in errors)
    assert len(openai_server.chat_calls) == 4
    assert caplog.records, "retries should have been logged"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "retrying" in logged
    for text in [*map(str, errors), *map(repr, errors), logged]:
        assert KEY not in text


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (
            "json_schema",
            {"type": "json_schema", "json_schema": {"name": "biasbreaker_reply", "schema": SCHEMA}},
        ),
        ("json_object", {"type": "json_object"}),
        ("json_object_schema", {"type": "json_object", "schema": SCHEMA}),
        ("none", None),
    ],
)
async def test_json_mode_request_body(
    openai_server: ChatServer, mode: str, expected: dict[str, Any] | None
) -> None:
    client = make_client(openai_server, json_mode=mode)
    if expected is None:  # no JSON mode: the echo backend answers free text, which is refused
        with pytest.raises(LLMError, match="json_mode='none'"):
            await client.complete(LLMRequest.chat("review", response_schema=SCHEMA))
    else:  # the echo backend answers JSON when asked for JSON
        reply = await client.complete(LLMRequest.chat("review", response_schema=SCHEMA))
        assert json.loads(reply.text) == {"echo": "review"}
    plain = await client.complete(LLMRequest.chat("free text"))
    await client.aclose()
    structured, free = (c.body for c in openai_server.chat_calls)
    assert structured.get("response_format") == expected
    assert "response_format" not in free
    assert plain.text == "echo: free text"


async def test_a_structured_reply_that_does_not_parse_is_an_error(
    openai_server: ChatServer,
) -> None:
    openai_server.reply = lambda call: Reply.completion('{"stands": tru', finish_reason="length")
    client = make_client(openai_server)
    with pytest.raises(
        LLMError,
        match=r"asked for JSON \(json_mode='json_schema'\) but the reply does not parse \(cut off at max_tokens\)",
    ):
        await client.complete(LLMRequest.chat("review", response_schema=SCHEMA))
    # the same text is fine for a free-text request
    assert (await client.complete(LLMRequest.chat("x"))).finish_reason == "length"
    await client.aclose()


async def test_concurrency_limit_is_respected(openai_server: ChatServer) -> None:
    openai_server.reply = lambda call: Reply.completion(call.last_user_message, delay_s=0.15)
    client = make_client(openai_server, max_concurrency=3)
    replies = await asyncio.gather(*(client.complete(LLMRequest.chat(f"q{i}")) for i in range(10)))
    await client.aclose()
    assert [r.text for r in replies] == [f"q{i}" for i in range(10)]
    assert openai_server.max_in_flight == 3


def test_complete_sync_works_across_event_loops(openai_server: ChatServer) -> None:
    client = make_client(openai_server)
    first = complete_sync(client, LLMRequest.chat("one"))
    second = complete_sync(client, LLMRequest.chat("two"))  # a new loop: a new connection pool
    assert (first.text, second.text) == ("echo: one", "echo: two")
    asyncio.run(client.aclose())


async def test_aclose_is_idempotent_and_final(openai_server: ChatServer) -> None:
    client = make_client(openai_server)
    await client.complete(LLMRequest.chat("x"))
    await client.aclose()
    await client.aclose()
    with pytest.raises(LLMError, match="is closed"):
        await client.complete(LLMRequest.chat("x"))


def test_json_object_schema_leaves_out_length_bounds_that_explode_a_grammar() -> None:
    """llama-cpp-python's server died on the skeptics' maxLength 20000 (seen here, 0.3.36)."""
    schema = {
        "type": "object",
        "properties": {
            "critique": {"type": "string", "maxLength": 20000, "minLength": 1},
            "revision": {"anyOf": [{"type": "string", "maxLength": 257}, {"type": "null"}]},
            "attribute": {"type": "string", "maxLength": 256},
            "evidence": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
        },
    }
    assert grammar_schema(schema) == {
        "type": "object",
        "properties": {
            "critique": {"type": "string", "minLength": 1},
            "revision": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "attribute": {"type": "string", "maxLength": 256},
            "evidence": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
        },
    }
    assert schema["properties"]["critique"]["maxLength"] == 20000  # the caller's is untouched


async def test_full_jitter_spreads_the_retries_of_concurrent_calls_within_their_bounds(
    openai_server: ChatServer,
) -> None:
    # the k + r calls of one probed step meet one 429 each: their waits must differ (no
    # lock-step retry) and stay within [0, min(backoff_max_s, backoff_base_s * 2**(n-1))]
    seen: set[str] = set()
    lock = threading.Lock()

    def reply(call: ChatCall) -> Reply:
        with lock:
            first = call.last_user_message not in seen
            seen.add(call.last_user_message)
        return Reply.error(429, "busy") if first else Reply.completion("ok")

    openai_server.reply = reply
    sleeps = Sleeps()
    client = make_client(
        openai_server, sleeps, backoff_base_s=2.0, backoff_max_s=30.0, rng=random.Random(11)
    )
    replies = await asyncio.gather(*(client.complete(LLMRequest.chat(f"q{i}")) for i in range(6)))
    await client.aclose()
    assert [r.text for r in replies] == ["ok"] * 6
    assert len(sleeps.delays) == 6
    assert all(0.0 <= d <= 2.0 for d in sleeps.delays)
    assert len(set(sleeps.delays)) == 6
    assert sorted(sleeps.delays) == sorted(jittered(11, [2.0] * 6))


async def test_retry_after_is_a_floor_under_the_jitter(openai_server: ChatServer) -> None:
    # a jittered wait below Retry-After waits Retry-After; one above it keeps its own length
    openai_server.reply = scripted(
        Reply.error(503, "busy", retry_after="1"),
        Reply.error(503, "busy", retry_after="1"),
        Reply.error(503, "busy", retry_after="1"),
        Reply.completion("ok"),
    )
    sleeps = Sleeps()
    client = make_client(
        openai_server, sleeps, backoff_base_s=4.0, backoff_max_s=30.0, rng=random.Random(2)
    )
    assert (await client.complete(LLMRequest.chat("x"))).text == "ok"
    await client.aclose()
    expected = [max(1.0, d) for d in jittered(2, [4.0, 8.0, 16.0])]
    assert sleeps.delays == expected
    assert min(sleeps.delays) >= 1.0


async def test_clients_of_one_endpoint_share_the_in_flight_limit(
    openai_server: ChatServer,
) -> None:
    # two clients (as a node and a skeptic would have), on two event loops in two threads:
    # together never more than max_concurrency requests in flight at the server
    openai_server.reply = lambda call: Reply.completion(call.last_user_message, delay_s=0.1)
    clients = [make_client(openai_server, max_concurrency=2) for _ in range(2)]
    assert clients[0].limiter is clients[1].limiter

    def run(client: OpenAICompatibleClient, tag: str) -> list[str]:
        async def many() -> list[str]:
            replies = await asyncio.gather(
                *(client.complete(LLMRequest.chat(f"{tag}{i}")) for i in range(5))
            )
            return [r.text for r in replies]

        return asyncio.run(many())

    results: dict[str, list[str]] = {}
    threads = [
        threading.Thread(target=lambda c=c, t=t: results.__setitem__(t, run(c, t)))
        for c, t in zip(clients, ["a", "b"], strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for client in clients:
        await client.aclose()
    assert results == {"a": [f"a{i}" for i in range(5)], "b": [f"b{i}" for i in range(5)]}
    assert openai_server.max_in_flight == 2
    assert clients[0].limiter.in_flight == 0


async def test_requests_per_second_spaces_the_starts(openai_server: ChatServer) -> None:
    openai_server.reply = lambda call: Reply.completion("ok")
    client = make_client(openai_server, max_concurrency=8, requests_per_second=20.0)
    started = time.monotonic()
    await asyncio.gather(*(client.complete(LLMRequest.chat(f"q{i}")) for i in range(6)))
    took = time.monotonic() - started
    await client.aclose()
    # six starts 1/20 s apart: the last one starts 0.25 s after the first
    assert took >= 0.25 - 0.01


async def test_a_reply_without_usage_is_counted_and_marked_estimated(
    openai_server: ChatServer,
) -> None:
    body = {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "model": "tiny",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Yes, hire."}}],
    }
    openai_server.reply = lambda call: Reply.json(body)
    client = make_client(openai_server)
    request = LLMRequest.chat("Should we hire Ms. Lee?", system="Be fair.")
    reply = await client.complete(request)
    await client.aclose()
    assert reply.usage_estimated is True
    # ceil(len / 4) of the prompt as biasbreaker renders it, and of the reply's text
    assert reply.prompt_tokens == -(-len(request.prompt) // 4) > 0
    assert reply.completion_tokens == 3  # "Yes, hire." is 10 characters


async def test_the_tokens_of_a_reply_are_charged_to_the_probe_budget_in_progress(
    openai_server: ChatServer,
) -> None:
    from biasbreaker.probe.budget import BudgetLimits, ProbeBudget, metering

    openai_server.reply = lambda call: Reply.completion("ok", prompt_tokens=12, completion_tokens=5)
    client = make_client(openai_server)
    budget = ProbeBudget(BudgetLimits(max_tokens_per_run=100))
    await client.complete(LLMRequest.chat("outside the probe"))
    with metering(budget):
        await client.complete(LLMRequest.chat("a probe re-run"))
    await client.aclose()
    assert budget.tokens == 17
