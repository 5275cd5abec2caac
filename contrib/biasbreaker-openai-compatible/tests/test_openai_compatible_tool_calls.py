"""The test server's tool calls and streamed (SSE) replies, read off the wire with httpx.

The shapes are the chat-completions API's: ``message.tool_calls`` with ``finish_reason:
"tool_calls"``; a stream of ``chat.completion.chunk`` objects whose ``delta.tool_calls``
fragments (``index``, then ``id``/``type``/``function.name``, then ``function.arguments``
pieces) join back into the message, ended by ``data: [DONE]``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from biasbreaker_openai_compatible.testing import (
    ChatCall,
    ChatServer,
    DecisionTools,
    Reply,
    ToolCall,
    completion_body,
    stream_chunks,
)

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("approve_loan", "deny_loan")
]


def men_only(call: ChatCall) -> Reply:
    """A planted bias: approves Mr. applicants, denies everyone else."""
    return Reply.completion("Decision: yes" if "Mr." in call.last_user_message else "Decision: no")


def body(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


def events(resp: httpx.Response) -> list[Any]:
    """The ``data:`` payloads of an SSE response, parsed (``[DONE]`` kept as the string)."""
    out: list[Any] = []
    for block in resp.text.split("\n\n"):
        if block.strip():
            assert block.startswith("data: "), block
            data = block[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def joined(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The message and finish reason a client rebuilds from the chunks' deltas."""
    message: dict[str, Any] = {"content": None, "tool_calls": []}
    finish = None
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            if delta.get("role"):
                message["role"] = delta["role"]
            if delta.get("content") is not None:
                message["content"] = (message["content"] or "") + delta["content"]
            for piece in delta.get("tool_calls") or []:
                calls = message["tool_calls"]
                if piece["index"] == len(calls):
                    calls.append(
                        {"id": None, "type": None, "function": {"name": "", "arguments": ""}}
                    )
                call = calls[piece["index"]]
                call["id"] = piece.get("id") or call["id"]
                call["type"] = piece.get("type") or call["type"]
                function = piece.get("function") or {}
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] += function.get("arguments") or ""
            finish = choice["finish_reason"] or finish
    if not message["tool_calls"]:
        del message["tool_calls"]
    return {"message": message, "finish_reason": finish}


@pytest.fixture
def tool_server() -> Any:
    with ChatServer(DecisionTools(men_only, {"yes": "approve_loan", "no": "deny_loan"})) as server:
        yield server


def test_a_decision_becomes_an_openai_tool_call(tool_server: ChatServer) -> None:
    url = f"{tool_server.base_url}/chat/completions"
    man = httpx.post(url, json=body("Mr. John Carter asks for a loan.", tools=TOOLS)).json()
    woman = httpx.post(url, json=body("Ms. Mary Carter asks for a loan.", tools=TOOLS)).json()
    (choice,) = man["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"] == {
        "name": "approve_loan",
        "arguments": json.dumps({"reason": "Decision: yes"}),
    }
    assert woman["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "deny_loan"
    again = httpx.post(url, json=body("Mr. John Carter asks for a loan.", tools=TOOLS)).json()
    assert again == man  # deterministic, the call id too


def test_no_tool_call_without_the_tool_in_the_request(tool_server: ChatServer) -> None:
    url = f"{tool_server.base_url}/chat/completions"
    plain = httpx.post(url, json=body("Mr. John Carter asks for a loan.")).json()
    assert plain["choices"][0]["message"] == {"role": "assistant", "content": "Decision: yes"}
    assert plain["choices"][0]["finish_reason"] == "stop"
    only_deny = httpx.post(url, json=body("Mr. John Carter", tools=TOOLS[1:])).json()
    assert "tool_calls" not in only_deny["choices"][0]["message"]
    none = httpx.post(url, json=body("Mr. John Carter", tools=TOOLS, tool_choice="none")).json()
    assert none["choices"][0]["message"]["content"] == "Decision: yes"


def test_a_tool_result_closes_the_turn_without_asking_the_inner_backend() -> None:
    asked: list[ChatCall] = []

    def inner(call: ChatCall) -> Reply:
        asked.append(call)
        return men_only(call)

    with ChatServer(DecisionTools(inner, {"yes": "approve_loan"})) as server:
        call = ToolCall("approve_loan", '{"reason": "Decision: yes"}', "call_1")
        messages = [
            {"role": "user", "content": "Mr. John Carter"},
            {"role": "assistant", "content": None, "tool_calls": [call.wire()]},
            {"role": "tool", "tool_call_id": "call_1", "content": "approved"},
        ]
        resp = httpx.post(
            f"{server.base_url}/chat/completions",
            json={"model": "m", "messages": messages, "tools": TOOLS},
        ).json()
    assert asked == []
    assert resp["choices"][0]["message"]["content"] == "Done: the tool returned approved."
    assert resp["choices"][0]["finish_reason"] == "stop"


def test_a_streamed_tool_call_is_sent_as_delta_fragments_in_chunked_events(
    tool_server: ChatServer,
) -> None:
    url = f"{tool_server.base_url}/chat/completions"
    request = body("Mr. John Carter asks for a loan.", tools=TOOLS)
    whole = httpx.post(url, json=request).json()
    resp = httpx.post(url, json={**request, "stream": True})
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "text/event-stream"
    assert resp.headers["transfer-encoding"] == "chunked" and "content-length" not in resp.headers
    data = events(resp)
    assert data[-1] == "[DONE]"
    chunks = data[:-1]
    assert all(c["object"] == "chat.completion.chunk" and "usage" not in c for c in chunks)
    first, header, *pieces, last = chunks
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": None}
    (named,) = header["choices"][0]["delta"]["tool_calls"]
    assert named == {
        "index": 0,
        "id": whole["choices"][0]["message"]["tool_calls"][0]["id"],
        "type": "function",
        "function": {"name": "approve_loan", "arguments": ""},
    }
    assert len(pieces) > 1  # the arguments arrive in fragments
    for piece in pieces:
        (fragment,) = piece["choices"][0]["delta"]["tool_calls"]
        assert set(fragment) == {"index", "function"} and set(fragment["function"]) == {"arguments"}
    assert last["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "tool_calls",
    }
    assert joined(chunks) == {
        "message": whole["choices"][0]["message"],
        "finish_reason": "tool_calls",
    }


def test_a_streamed_text_reply_with_usage(openai_server: ChatServer) -> None:
    url = f"{openai_server.base_url}/chat/completions"
    openai_server.reply = lambda call: Reply.completion(
        "a few plain words", prompt_tokens=5, completion_tokens=4
    )
    request = body("hi", stream=True, stream_options={"include_usage": True})
    data = events(httpx.post(url, json=request))
    assert data[-1] == "[DONE]"
    *chunks, usage = data[:-1]
    assert all(c["usage"] is None for c in chunks)
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] == 9
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:-1]] == [
        "a ",
        "few ",
        "plain ",
        "words",
    ]
    assert joined(chunks) == {
        "message": {"role": "assistant", "content": "a few plain words"},
        "finish_reason": "stop",
    }


def test_streaming_leaves_errors_and_unstreamed_requests_as_they_were(
    openai_server: ChatServer,
) -> None:
    url = f"{openai_server.base_url}/chat/completions"
    plain = httpx.post(url, json=body("hi"))
    assert plain.headers["content-type"] == "application/json"
    assert plain.json() == completion_body("echo: hi", model="m")
    openai_server.reply = lambda call: Reply.error(429, "slow down", retry_after="1")
    limited = httpx.post(url, json=body("hi", stream=True))
    assert limited.status_code == 429 and limited.headers["retry-after"] == "1"
    assert limited.json()["error"]["message"] == "slow down"
    openai_server.reply = lambda call: Reply.raw_text("{not json")
    assert httpx.post(url, json=body("hi", stream=True)).text == "{not json"
    openai_server.reply = lambda call: Reply.sse([{"error": {"message": "cut"}}], done=False)
    assert events(httpx.post(url, json=body("hi", stream=True))) == [{"error": {"message": "cut"}}]


def test_stream_chunks_rejects_a_body_without_a_message() -> None:
    with pytest.raises(ValueError, match="choices"):
        stream_chunks({"choices": []})
    with pytest.raises(ValueError, match="fragment"):
        stream_chunks(completion_body("x"), fragment=0)


def test_command_line_answers_decisions_with_tool_calls(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "biasbreaker_openai_compatible.testing",
            "--port",
            "0",
            "--backend",
            "echo",
            "--tool-for",
            "echo=deny_loan",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip().rsplit(" ", 1)[1]
        # the echo backend answers "echo: Decision: echo", whose decision word is "echo"
        resp = httpx.post(f"{base_url}/chat/completions", json=body("Decision: echo", tools=TOOLS))
        (call,) = resp.json()["choices"][0]["message"]["tool_calls"]
        assert call["function"]["name"] == "deny_loan"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    bad = subprocess.run(
        [sys.executable, "-m", "biasbreaker_openai_compatible.testing", "--tool-for", "yes"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert bad.returncode == 2 and "expected WORD=TOOL" in bad.stderr
