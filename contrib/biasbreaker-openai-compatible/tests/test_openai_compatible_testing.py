"""The reusable test server: routes, the client backend, and the command line."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from biasbreaker_openai_compatible.client import OpenAICompatibleClient
from biasbreaker_openai_compatible.plugin import OpenAICompatibleOptions
from biasbreaker_openai_compatible.testing import (
    ChatCall,
    ChatServer,
    ClientBackend,
    request_from_call,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from biasbreaker.llm import ChatMessage, LLMRequest, LLMResponse, complete_sync

# each example is a real HTTP round trip; HYPOTHESIS_PROFILE=thorough runs a few thousand
ROUNDTRIPS = settings(
    max_examples=3000 if os.environ.get("HYPOTHESIS_PROFILE") == "thorough" else 40,
    deadline=None,
)


def test_models_route_and_unknown_routes(openai_server: ChatServer) -> None:
    models = httpx.get(f"{openai_server.base_url}/models")
    assert models.json()["data"][0]["id"] == "biasbreaker-test"
    missing = httpx.post(f"{openai_server.base_url}/completions", json={})
    assert (
        missing.status_code == 404 and "/v1/chat/completions" in missing.json()["error"]["message"]
    )
    bad = httpx.post(f"{openai_server.base_url}/chat/completions", content=b"not json")
    assert bad.status_code == 400


def test_a_failing_reply_function_is_a_500(openai_server: ChatServer) -> None:
    def broken(call: ChatCall) -> None:
        raise KeyError("boom")

    openai_server.reply = broken  # type: ignore[assignment]
    resp = httpx.post(f"{openai_server.base_url}/chat/completions", json={"messages": []})
    assert resp.status_code == 500 and "KeyError" in resp.json()["error"]["message"]


def test_request_from_call_maps_the_protocol_to_llm_request() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    body = {
        "model": "m",
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
        "temperature": 0.5,
        "seed": 4,
        "max_tokens": 9,
        "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}},
    }
    req = request_from_call(ChatCall(0, "POST", "/v1/chat/completions", {}, b"", body))
    assert [(m.role, m.content) for m in req.messages] == [("system", "s"), ("user", "u")]
    assert (req.temperature, req.seed, req.max_tokens, req.response_schema) == (0.5, 4, 9, schema)
    body["response_format"] = {"type": "json_object"}
    assert request_from_call(ChatCall(0, "POST", "/", {}, b"", body)).response_schema == {
        "type": "object"
    }
    with pytest.raises(ValueError, match="chat role"):
        request_from_call(
            ChatCall(0, "POST", "/", {}, b"", {"messages": [{"role": "tool", "content": "x"}]})
        )


class Upper:
    """A deterministic LLMClient: upper-cases the last user message."""

    model = "upper-1"

    def __init__(self) -> None:
        self.requests: list[LLMRequest] = []
        self.closed = False

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        return LLMResponse(request.messages[-1].content.upper(), self.model, "stop", 3, 1)

    async def aclose(self) -> None:
        self.closed = True


@pytest.fixture
def upper_server() -> Iterator[tuple[ChatServer, Upper]]:
    upper = Upper()
    backend = ClientBackend(upper)
    with ChatServer(backend) as server:
        yield server, upper
    backend.close()
    assert upper.closed


async def test_client_backend_serves_an_llm_client_over_http(
    upper_server: tuple[ChatServer, Upper],
) -> None:
    server, upper = upper_server
    opts = OpenAICompatibleOptions(base_url=server.base_url, model="upper-1")
    client = OpenAICompatibleClient(opts, default_seed=7, environ={})
    reply = await client.complete(LLMRequest.chat("make me loud", sample=1))
    await client.aclose()
    assert (reply.text, reply.model, reply.prompt_tokens, reply.completion_tokens) == (
        "MAKE ME LOUD",
        "upper-1",
        3,
        1,
    )
    (seen,) = upper.requests
    assert seen.seed == 8 and seen.messages[-1].content == "make me loud"


def _serve(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "biasbreaker_openai_compatible.testing", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )


def test_command_line_serves_the_echo_backend(tmp_path: Path) -> None:
    proc = _serve("--backend", "echo", cwd=tmp_path)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("serving echo on http://127.0.0.1:"), line
        base_url = line.rsplit(" ", 1)[1]
        resp = httpx.post(
            f"{base_url}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert resp.json()["choices"][0]["message"]["content"] == "echo: hi"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_command_line_rejects_an_unknown_backend_listing_installed_clients(tmp_path: Path) -> None:
    proc = _serve("--backend", "no-such-client", cwd=tmp_path)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "'no-such-client'" in err and "openai-compatible (biasbreaker-openai-compatible" in err


UPPER_PLUGIN = """
from biasbreaker.hookspecs import hookimpl
from biasbreaker.llm import LLMResponse

class Upper:
    model = "upper-1"
    async def complete(self, request):
        return LLMResponse(request.messages[-1].content.upper(), self.model)
    async def aclose(self):
        pass

@hookimpl
def llm_client(register):
    register("upper", lambda options, context: Upper(), summary="upper-cases")
"""


def test_command_line_serves_any_installed_llm_client(tmp_path: Path) -> None:
    site = tmp_path / "site"
    from biasbreaker.testing import write_fake_dist

    write_fake_dist(
        site,
        "bb-upper",
        entry_points={"upper": "bb_upper_llm"},
        modules={"bb_upper_llm": UPPER_PLUGIN},
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "biasbreaker_openai_compatible.testing",
            "--port",
            "0",
            "--backend",
            "upper",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip().rsplit(" ", 1)[1]
        resp = httpx.post(
            f"{base_url}/chat/completions", json={"messages": [{"role": "user", "content": "hey"}]}
        )
        assert resp.json()["choices"][0]["message"]["content"] == "HEY"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


class Recorder(Upper):
    """Records requests and answers with JSON when a schema is asked for."""

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        text = '{"ok": true}' if request.response_schema is not None else "fine"
        return LLMResponse(text, self.model)


roles = st.sampled_from(["system", "user", "assistant"])
requests = st.builds(
    LLMRequest,
    messages=st.lists(
        st.builds(ChatMessage, roles, st.text(max_size=40)), min_size=1, max_size=4
    ).map(tuple),
    temperature=st.floats(0, 2, allow_nan=False),
    seed=st.none() | st.integers(0, 2**31 - 1),
    max_tokens=st.none() | st.integers(1, 4096),
    response_schema=st.none()
    | st.just({"type": "object", "properties": {"ok": {"type": "boolean"}}}),
    purpose=st.sampled_from(["agent", "skeptic", "diagnoser", "editor", "other"]),
    sample=st.integers(0, 50),
)


def test_forwarded_requests_arrive_unchanged_at_the_backend() -> None:
    recorder = Recorder()
    backend = ClientBackend(recorder)
    with ChatServer(backend) as server:
        # max_tokens=None: no default token cap, so an uncapped request arrives uncapped
        opts = OpenAICompatibleOptions(
            base_url=server.base_url, model="upper-1", forward_request_fields=True, max_tokens=None
        )
        client = OpenAICompatibleClient(opts, default_seed=99, environ={})

        @ROUNDTRIPS
        @given(requests)
        def roundtrip(request: LLMRequest) -> None:
            complete_sync(client, request)
            seen = recorder.requests[-1]
            assert seen == request
            assert seen.response_schema == request.response_schema

        roundtrip()
        asyncio.run(client.aclose())
    backend.close()


def test_without_forwarding_the_server_sees_the_protocol_fields_only(
    upper_server: tuple[ChatServer, Upper],
) -> None:
    server, upper = upper_server
    client = OpenAICompatibleClient(
        OpenAICompatibleOptions(base_url=server.base_url, model="m"), environ={}
    )
    complete_sync(client, LLMRequest.chat("x", purpose="editor", sample=3, seed=10))
    asyncio.run(client.aclose())
    seen = upper.requests[-1]
    assert (seen.purpose, seen.sample, seen.seed) == ("agent", 0, 13)
    assert "biasbreaker" not in server.chat_calls[-1].body
