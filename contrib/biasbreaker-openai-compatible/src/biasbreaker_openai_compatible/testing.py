"""A small OpenAI-compatible chat-completions server for tests and demos (on ``http.server``).

:class:`ChatServer` listens on 127.0.0.1 (an ephemeral port by default) in a background thread
and answers ``POST /v1/chat/completions`` with whatever its *reply function* returns, so a test
can script normal replies, 429s with ``Retry-After``, 500s, malformed JSON or slow replies. It
records every call (headers and parsed body) and the largest number of requests it had in
flight at once. ``GET /v1/models`` lists one model.

Use it:

* in code: ``with ChatServer(reply_fn) as server: ... server.base_url ...``;
* as a pytest fixture: ``from biasbreaker_openai_compatible.testing import openai_server`` in a
  ``conftest.py`` (or ``pytest_plugins = ["biasbreaker_openai_compatible.testing"]`` in the
  root one); the fixture yields a started server with the :func:`echo_reply` backend whose
  ``reply`` attribute a test may replace;
* from a shell: ``python -m biasbreaker_openai_compatible.testing --port 8099 --backend fake``
  serves any installed biasbreaker ``llm_client`` (here the seeded simulated ``fake`` client)
  over HTTP, or ``--backend echo``, so a biasbreaker run configured with
  ``[llm] client = "openai-compatible"`` and ``base_url = "http://127.0.0.1:8099/v1"``
  exercises the real HTTP path end to end; ``--tool-for yes=approve_loan --tool-for
  no=deny_loan`` makes its ``Decision: yes|no`` replies tool calls (:class:`DecisionTools`).

A request with ``"stream": true`` is answered with server-sent events (``text/event-stream``,
``chat.completion.chunk`` objects, then ``data: [DONE]``) whenever the backend's reply is a
successful chat completion: the same reply, cut into deltas (:func:`stream_chunks`), so every
backend streams. :class:`DecisionTools` makes a backend call the request's tools: a reply
``Decision: <word>`` becomes an OpenAI tool call (``message.tool_calls``, ``finish_reason:
"tool_calls"``; streamed as ``delta.tool_calls`` fragments), deterministically.

The server is a test double: it speaks the parts of the protocol biasbreaker and LangChain's
``ChatOpenAI`` use (messages, temperature, seed, max_tokens, response_format, tools, stream,
stream_options), not the whole OpenAI API.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast, get_args

from biasbreaker.llm import ChatMessage, LLMClient, LLMRequest, Purpose

log = logging.getLogger("biasbreaker_openai_compatible.testing")

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
DEFAULT_MODEL = "biasbreaker-test"
PURPOSES: tuple[str, ...] = get_args(Purpose)
"""The values of :data:`biasbreaker.llm.Purpose`."""


@dataclass(frozen=True)
class ChatCall:
    """One request the server received.

    Args:
        index: Arrival order, from 0.
        method: ``"POST"`` or ``"GET"``.
        path: The request path, e.g. ``/v1/chat/completions``.
        headers: Request headers, names lower-cased.
        raw: The request body bytes.
        body: The body parsed as JSON, or ``None`` if it does not parse.
    """

    index: int
    method: str
    path: str
    headers: Mapping[str, str]
    raw: bytes
    body: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The ``messages`` list of a chat request (empty if absent)."""
        if isinstance(self.body, dict) and isinstance(self.body.get("messages"), list):
            return list(self.body["messages"])
        return []

    @property
    def last_user_message(self) -> str:
        """The content of the last ``user`` message, or ``""``."""
        for msg in reversed(self.messages):
            if isinstance(msg, dict) and msg.get("role") == "user":
                return str(msg.get("content", ""))
        return ""

    @property
    def tool_names(self) -> list[str]:
        """The names of the functions in the request's ``tools`` list, in order (may be empty)."""
        tools = self.body.get("tools") if isinstance(self.body, dict) else None
        if not isinstance(tools, list):
            return []
        names = []
        for spec in tools:
            function = spec.get("function") if isinstance(spec, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                names.append(function["name"])
        return names

    @property
    def stream(self) -> bool:
        """Whether the request asks for a streamed reply (``"stream": true``)."""
        return isinstance(self.body, dict) and self.body.get("stream") is True

    @property
    def include_usage(self) -> bool:
        """Whether a streamed reply ends with a usage chunk (``stream_options.include_usage``)."""
        options = self.body.get("stream_options") if isinstance(self.body, dict) else None
        return isinstance(options, dict) and options.get("include_usage") is True


@dataclass(frozen=True)
class ToolCall:
    """One tool call of an assistant message, as the chat-completions API sends it.

    Args:
        name: The function's name.
        arguments: Its arguments as JSON text (as on the wire; a model may send text that does
            not parse, and so may a test).
        id: The call's id (``call_...``), echoed back by the client in the ``tool`` message.
    """

    name: str
    arguments: str
    id: str

    def wire(self) -> dict[str, Any]:
        """``{"id", "type": "function", "function": {"name", "arguments"}}``."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class Reply:
    """What the server sends back for one call.

    Args:
        status: HTTP status code.
        body: Response body bytes.
        headers: Extra response headers as ``(name, value)`` pairs.
        content_type: The ``Content-Type`` header.
        delay_s: Seconds to wait before answering (to exceed a client's time-out), >= 0.
        events: Server-sent events, each sent as its own HTTP chunk (``Transfer-Encoding:
            chunked``), in place of ``body``; empty for a plain reply. Build with :meth:`sse`.
    """

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"
    delay_s: float = 0.0
    events: tuple[bytes, ...] = ()

    @classmethod
    def json(
        cls,
        data: Any,
        *,
        status: int = 200,
        headers: Sequence[tuple[str, str]] = (),
        delay_s: float = 0.0,
    ) -> Reply:
        """A JSON reply with ``data`` serialised."""
        return cls(status, json.dumps(data).encode("utf-8"), tuple(headers), delay_s=delay_s)

    @classmethod
    def completion(
        cls,
        text: str,
        *,
        model: str = DEFAULT_MODEL,
        finish_reason: str = "stop",
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        delay_s: float = 0.0,
        tool_calls: Sequence[ToolCall] = (),
        id: str = "chatcmpl-test",
    ) -> Reply:
        """A successful chat completion whose single choice has ``text`` as its content.

        With ``tool_calls`` the message carries them (see :func:`completion_body`); pass
        ``finish_reason="tool_calls"`` then, as the API does.
        """
        return cls.json(
            completion_body(
                text,
                model=model,
                finish_reason=finish_reason,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                tool_calls=tool_calls,
                id=id,
            ),
            delay_s=delay_s,
        )

    @classmethod
    def sse(cls, events: Sequence[Any], *, done: bool = True, delay_s: float = 0.0) -> Reply:
        """A ``text/event-stream`` reply: one ``data:`` event per item, then ``data: [DONE]``.

        Args:
            events: The events' data: a dict (sent as JSON, e.g. a ``chat.completion.chunk``
                or an ``{"error": ...}`` object) or a string (sent as it is).
            done: End with ``data: [DONE]`` (leave it out to test a stream cut short).
            delay_s: Seconds to wait before answering.
        """
        items = [e if isinstance(e, str) else json.dumps(e) for e in events]
        if done:
            items.append("[DONE]")
        return cls(
            200,
            content_type="text/event-stream",
            headers=(("Cache-Control", "no-cache"),),
            delay_s=delay_s,
            events=tuple(f"data: {item}\n\n".encode() for item in items),
        )

    @classmethod
    def error(
        cls, status: int, message: str, *, retry_after: str | None = None, delay_s: float = 0.0
    ) -> Reply:
        """An OpenAI-style error reply (``{"error": {"message": ..., "code": status}}``)."""
        headers = (("Retry-After", retry_after),) if retry_after is not None else ()
        return cls.json(
            {"error": {"message": message, "type": "test_server_error", "code": status}},
            status=status,
            headers=headers,
            delay_s=delay_s,
        )

    @classmethod
    def raw_text(
        cls, body: str, *, status: int = 200, content_type: str = "application/json"
    ) -> Reply:
        """A reply with a literal body, e.g. malformed JSON."""
        return cls(status, body.encode("utf-8"), content_type=content_type)


ReplyFn = Callable[[ChatCall], Reply]
"""A backend: maps one received chat call to the reply to send."""


def completion_body(
    text: str,
    *,
    model: str = DEFAULT_MODEL,
    finish_reason: str = "stop",
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    tool_calls: Sequence[ToolCall] = (),
    id: str = "chatcmpl-test",
) -> dict[str, Any]:
    """A chat-completion response body in the OpenAI format.

    Args:
        text: The assistant message content.
        model: The ``model`` field.
        finish_reason: ``"stop"``, ``"length"``, ``"tool_calls"``...
        prompt_tokens: ``usage.prompt_tokens``.
        completion_tokens: ``usage.completion_tokens``.
        tool_calls: The message's ``tool_calls``; with any, an empty ``text`` is sent as
            ``"content": null``, as the API does.
        id: The completion's ``id``.

    Returns:
        The body as a dict.
    """
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["content"] = text or None
        message["tool_calls"] = [call.wire() for call in tool_calls]
    return {
        "id": id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


_PIECE = re.compile(r"\S+\s*|\s+")


def stream_chunks(
    body: Mapping[str, Any], *, include_usage: bool = False, fragment: int = 8
) -> list[dict[str, Any]]:
    """A chat-completion body cut into the ``chat.completion.chunk`` objects of a stream.

    The first choice is streamed as the API streams it: a first delta with ``"role":
    "assistant"`` (``"content": ""``; ``null`` when the message calls tools and has no text),
    the text word by word (``{"content": ...}``), then each tool call: a delta naming its
    ``index``, ``id``, ``type`` and ``function.name`` with ``"arguments": ""``, then its
    arguments in ``fragment``-character pieces (``{"index": i, "function": {"arguments":
    ...}}``); the last choice delta is ``{}`` with the ``finish_reason``. With
    ``include_usage`` every chunk has ``"usage": null`` and a last chunk with no choices
    carries the body's ``usage``. Joining the deltas gives the message back.

    Args:
        body: A chat-completion body (:func:`completion_body`'s shape).
        include_usage: Follow ``stream_options.include_usage``.
        fragment: The length of an arguments piece, >= 1.

    Returns:
        The chunks, in order (without the final ``[DONE]``).

    Raises:
        ValueError: ``body`` has no choice with a message, or ``fragment`` < 1.
    """
    if fragment < 1:
        raise ValueError(f"fragment={fragment} must be >= 1")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("the body has no 'choices' to stream")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise ValueError("the body's first choice has no 'message'")
    base = {
        "id": body.get("id", "chatcmpl-test"),
        "object": "chat.completion.chunk",
        "created": body.get("created", 0),
        "model": body.get("model", DEFAULT_MODEL),
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        out = {
            **base,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if include_usage:
            out["usage"] = None
        return out

    text = message.get("content") or ""
    calls = message.get("tool_calls") or []
    first: dict[str, Any] = {"role": "assistant", "content": None if calls and not text else ""}
    out = [chunk(first)]
    out += [chunk({"content": piece}) for piece in _PIECE.findall(text)]
    for i, call in enumerate(calls):
        function = call.get("function") or {}
        header = {
            "index": i,
            "id": call.get("id"),
            "type": call.get("type", "function"),
            "function": {"name": function.get("name"), "arguments": ""},
        }
        out.append(chunk({"tool_calls": [header]}))
        arguments = str(function.get("arguments") or "")
        for start in range(0, len(arguments), fragment):
            piece = arguments[start : start + fragment]
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    out.append(chunk({}, choice.get("finish_reason") or "stop"))
    if include_usage:
        out.append({**base, "choices": [], "usage": body.get("usage")})
    return out


def streamed(reply: Reply, call: ChatCall) -> Reply:
    """``reply`` as the answer to ``call``: server-sent events when the call asked to stream.

    A successful chat completion (status 200, a JSON ``chat.completion`` object) answering a
    call with ``"stream": true`` becomes :meth:`Reply.sse` of :func:`stream_chunks` (usage
    per ``stream_options``), with the reply's headers and delay. Anything else — the call did
    not ask to stream, an error status, a body that is not a completion, a reply that is
    already a stream — is returned unchanged (the API, too, answers a failed streamed request
    with a plain JSON error).
    """
    if not call.stream or reply.status != 200 or reply.events:
        return reply
    try:
        body = json.loads(reply.body)
    except ValueError:
        return reply
    if not isinstance(body, dict) or body.get("object") != "chat.completion":
        return reply
    try:
        chunks = stream_chunks(body, include_usage=call.include_usage)
    except ValueError:
        return reply
    sse = Reply.sse(chunks, delay_s=reply.delay_s)
    return Reply(
        sse.status,
        headers=(*sse.headers, *reply.headers),
        content_type=sse.content_type,
        delay_s=sse.delay_s,
        events=sse.events,
    )


class DecisionTools:
    r"""A backend that calls the request's tools when another backend's reply decides.

    It wraps a text backend (e.g. :class:`ClientBackend` over biasbreaker's seeded fake, which
    answers ``Decision: yes|no``) the way biasbreaker's ``FakeChatModel`` turns the fake's
    decisions into tool calls, so an agent over HTTP (LangChain's ``ChatOpenAI``) gets real
    OpenAI tool calls. For each chat call:

    * when its last message is a tool result (``"role": "tool"``) the turn is closed without
      asking ``inner``: a text completion ``after_tool.format(result=<that message's
      content>)``, so an agent's loop ends (``inner`` never sees a tool message:
      :func:`request_from_call` does not read one);
    * otherwise ``inner`` answers; when that is a successful completion whose content matches
      ``Decision:\s*(\w+)`` and ``tool_for`` maps the word (lower-cased) to a tool the
      request lists in ``tools`` (and ``tool_choice`` is not ``"none"``), the message is
      replaced by one tool call to it: arguments ``{"reason": <the content>}`` (JSON),
      id ``call_<12 hex digits of sha256(name:content)>``, ``"content": null``,
      ``finish_reason: "tool_calls"``. Every other reply is returned unchanged.

    The rule reads the request and ``inner``'s reply only, so a deterministic ``inner`` makes a
    deterministic tool-calling model; with ``"stream": true`` the server streams the tool call
    as ``delta.tool_calls`` fragments (:func:`stream_chunks`).

    Args:
        inner: The text backend.
        tool_for: Decision word -> tool name, e.g. ``{"yes": "approve_loan", "no":
            "deny_loan"}``.
        after_tool: The reply after a tool result; ``{result}`` is replaced by its content.
    """

    DECISION = re.compile(r"Decision:\s*(\w+)", re.IGNORECASE)

    def __init__(
        self,
        inner: ReplyFn,
        tool_for: Mapping[str, str],
        *,
        after_tool: str = "Done: the tool returned {result}.",
    ) -> None:
        self.inner = inner
        self.tool_for = {word.lower(): name for word, name in tool_for.items()}
        self.after_tool = after_tool

    def __call__(self, call: ChatCall) -> Reply:
        """Answer one call (see the class)."""
        messages = call.messages
        model = str(call.body.get("model") or DEFAULT_MODEL)
        if messages and isinstance(messages[-1], dict) and messages[-1].get("role") == "tool":
            result = messages[-1].get("content")
            if isinstance(result, list):  # content parts
                result = "".join(str(p.get("text", "")) for p in result if isinstance(p, dict))
            return Reply.completion(self.after_tool.format(result=result), model=model)
        reply = self.inner(call)
        if reply.status != 200 or reply.events or call.body.get("tool_choice") == "none":
            return reply
        try:
            body = json.loads(reply.body)
            message = body["choices"][0]["message"]
            text = message["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            return reply
        found = self.DECISION.search(text) if isinstance(text, str) else None
        name = self.tool_for.get(found.group(1).lower()) if found else None
        if name is None or name not in call.tool_names:
            return reply
        digest = hashlib.sha256(f"{name}:{text}".encode()).hexdigest()[:12]
        tool_call = ToolCall(name, json.dumps({"reason": text}), f"call_{digest}")
        usage = body.get("usage") or {}
        return Reply.completion(
            "",
            model=str(body.get("model") or model),
            finish_reason="tool_calls",
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            tool_calls=[tool_call],
            id=str(body.get("id") or "chatcmpl-test"),
            delay_s=reply.delay_s,
        )


def echo_reply(call: ChatCall) -> Reply:
    """The default backend: echo the last user message (as ``{"echo": ...}`` in JSON mode).

    Args:
        call: The received call.

    Returns:
        A completion whose text is ``"echo: <last user message>"``, or, when the request has a
        ``response_format``, the JSON document ``{"echo": "<last user message>"}``; 400 for a
        body without messages.
    """
    if not call.messages:
        return Reply.error(400, "the request body has no 'messages' list")
    text = call.last_user_message
    model = str(call.body.get("model") or DEFAULT_MODEL)
    if call.body.get("response_format"):
        return Reply.completion(json.dumps({"echo": text}), model=model)
    return Reply.completion(f"echo: {text}", model=model)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s - %s", self.address_string(), format % args)

    def _read_call(self) -> ChatCall:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        return self.server.owner._record(self.command, self.path, headers, raw, body)

    def _send(self, reply: Reply) -> None:
        if reply.delay_s > 0 and self.server.owner._stopping.wait(reply.delay_s):
            return
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            if reply.events:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            if not reply.events:
                self.wfile.write(reply.body)
                return
            for event in reply.events:  # one HTTP chunk per event, as a streaming API sends
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            log.debug("client went away before the reply was sent")

    def do_POST(self) -> None:
        owner = self.server.owner
        call = self._read_call()
        owner._enter()
        try:
            if self.path.rstrip("/") != CHAT_PATH:
                reply = Reply.error(404, f"no route for POST {self.path}; use {CHAT_PATH}")
            elif call.body is None or not isinstance(call.body, dict):
                reply = Reply.error(400, "the request body is not a JSON object")
            else:
                try:
                    reply = owner.reply(call)
                except Exception as exc:  # a broken backend is the server's 500, as in life
                    log.exception("reply function failed")
                    reply = Reply.error(500, f"backend failed: {exc!r}")
                reply = streamed(reply, call)
            self._send(reply)
        finally:
            owner._leave()

    def do_GET(self) -> None:
        owner = self.server.owner
        self._read_call()
        if self.path.rstrip("/") == MODELS_PATH:
            self._send(
                Reply.json(
                    {
                        "object": "list",
                        "data": [{"id": owner.model, "object": "model", "owned_by": "test"}],
                    }
                )
            )
        else:
            self._send(Reply.error(404, f"no route for GET {self.path}"))


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: ChatServer


class ChatServer:
    """An OpenAI-compatible chat-completions server in a background thread.

    Args:
        reply: The backend: called once per chat request (from the request's handler thread,
            so possibly concurrently) with the :class:`ChatCall`; returns the :class:`Reply`.
            Replace it at any time through the ``reply`` attribute.
        host: Address to listen on; the default is the loopback address.
        port: TCP port; 0 picks a free ephemeral port (read it back from :attr:`port`).
        model: The model id ``GET /v1/models`` reports.

    Attributes:
        reply: The current backend.
    """

    def __init__(
        self,
        reply: ReplyFn = echo_reply,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = DEFAULT_MODEL,
    ) -> None:
        self.reply = reply
        self.model = model
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._calls: list[ChatCall] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ChatServer:
        """Bind and start serving in a daemon thread; returns ``self``.

        Raises:
            OSError: The address cannot be bound (e.g. the port is taken).
            RuntimeError: The server is already running.
        """
        if self._httpd is not None:
            raise RuntimeError("ChatServer is already running")
        self._stopping.clear()
        httpd = _HTTPServer((self._host, self._port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; delayed replies are abandoned. Idempotent."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound TCP port.

        Raises:
            RuntimeError: The server is not running.
        """
        if self._httpd is None:
            raise RuntimeError("ChatServer is not running; call start() first")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://<host>:<port>/v1``, the value for a client's ``base_url``."""
        return f"http://{self._host}:{self.port}/v1"

    @property
    def calls(self) -> list[ChatCall]:
        """Every request received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._calls)

    @property
    def chat_calls(self) -> list[ChatCall]:
        """The ``POST`` chat-completion requests received so far."""
        return [c for c in self.calls if c.method == "POST"]

    @property
    def max_in_flight(self) -> int:
        """The largest number of chat requests being answered at the same time."""
        with self._lock:
            return self._max_in_flight

    def _record(
        self, method: str, path: str, headers: Mapping[str, str], raw: bytes, body: Any
    ) -> ChatCall:
        with self._lock:
            call = ChatCall(len(self._calls), method, path, dict(headers), raw, body)
            self._calls.append(call)
        return call

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1


def request_from_call(call: ChatCall) -> LLMRequest:
    """Translate a chat-completions request body into a biasbreaker :class:`LLMRequest`.

    ``response_format`` ``json_schema`` becomes ``response_schema`` (the schema);
    ``json_object`` becomes its ``schema`` if it carries one (llama-cpp-python's form), else
    ``{"type": "object"}``. A non-standard ``biasbreaker`` object (sent
    by the client with ``forward_request_fields = true``) restores the request's own
    ``purpose``, ``sample`` and ``seed``; without it the body's ``seed`` is used, ``sample`` is
    0 and ``purpose`` is ``"agent"``.

    Args:
        call: The received call.

    Returns:
        The request.

    Raises:
        ValueError: The body is not a valid chat request (no messages, a bad role, a
            negative temperature...).
    """
    body = call.body
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise ValueError("the request body has no 'messages' list")
    messages = []
    for i, msg in enumerate(body["messages"]):
        if not isinstance(msg, dict) or not isinstance(msg.get("content"), str):
            raise ValueError(f"messages[{i}] must be an object with a string 'content'")
        role = msg.get("role")
        if role not in ("system", "user", "assistant"):
            raise ValueError(
                f"messages[{i}].role={role!r} is not a chat role; use 'system', 'user' or "
                "'assistant'"
            )
        messages.append(ChatMessage(role, msg["content"]))
    schema: Mapping[str, Any] | None = None
    fmt = body.get("response_format")
    if isinstance(fmt, dict):
        if fmt.get("type") == "json_schema":
            spec = fmt.get("json_schema")
            schema = spec.get("schema", {}) if isinstance(spec, dict) else {}
        elif fmt.get("type") == "json_object":
            given = fmt.get("schema")  # llama-cpp-python's json_object with a schema
            schema = given if isinstance(given, dict) else {"type": "object"}
    temperature = body.get("temperature", 0.0)
    seed, sample, purpose = body.get("seed"), 0, "agent"
    ext = body.get("biasbreaker")
    if isinstance(ext, dict):  # forwarded by the client's forward_request_fields option
        seed, sample, purpose = ext.get("seed"), ext.get("sample", 0), ext.get("purpose", "agent")
        if purpose not in PURPOSES:
            raise ValueError(f"biasbreaker.purpose={purpose!r} is not one of {PURPOSES}")
    return LLMRequest(
        messages=tuple(messages),
        temperature=float(temperature if temperature is not None else 0.0),
        seed=seed,
        max_tokens=body.get("max_tokens"),
        response_schema=schema,
        purpose=cast(Purpose, purpose),
        sample=sample,
    )


class ClientBackend:
    """A backend that answers with a biasbreaker :class:`~biasbreaker.llm.LLMClient`.

    Requests are translated with :func:`request_from_call` and run on one private event loop
    in a background thread (handler threads are synchronous). An invalid request is a 400; an
    ``LLMError`` from the client is a 502 carrying its message.

    Args:
        client: The client answering requests (e.g. biasbreaker's seeded ``fake``).
    """

    def __init__(self, client: LLMClient) -> None:
        self.client = client
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def __call__(self, call: ChatCall) -> Reply:
        """Answer one call with the client (blocks the handler thread until it replies)."""
        from biasbreaker.errors import LLMError

        try:
            request = request_from_call(call)
        except (ValueError, TypeError) as exc:
            return Reply.error(400, str(exc))
        future = asyncio.run_coroutine_threadsafe(self.client.complete(request), self._loop)
        try:
            resp = future.result()
        except LLMError as exc:
            return Reply.error(502, f"backend client failed: {exc}")
        return Reply.completion(
            resp.text,
            model=resp.model,
            finish_reason=resp.finish_reason,
            prompt_tokens=resp.prompt_tokens,
            completion_tokens=resp.completion_tokens,
        )

    def close(self) -> None:
        """Close the client and stop the private loop."""
        asyncio.run_coroutine_threadsafe(self.client.aclose(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()


def client_backend(name: str, config_file: str | None = None) -> ClientBackend:
    """Build the installed ``llm_client`` implementation ``name`` through the biasbreaker kernel.

    Args:
        name: The implementation name, e.g. ``"fake"`` (biasbreaker's seeded simulated client).
        config_file: A biasbreaker TOML file for its ``[plugin.<name>]`` options and ``seed``,
            or ``None`` for the usual search (``./biasbreaker.toml``, ``./pyproject.toml``).

    Returns:
        The backend.

    Raises:
        ConfigError: ``name`` is not an installed ``llm_client`` (the message lists those that
            are) or its options are invalid.
        PluginError: Its factory failed.
    """
    from biasbreaker.kernel import Kernel

    kernel = Kernel.load(config_file, overrides={"llm": {"client": name}})
    return ClientBackend(kernel.llm())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server from the command line until SIGINT or SIGTERM.

    Prints ``serving <backend> on http://HOST:PORT/v1`` (one line, flushed) once listening.

    Args:
        argv: Arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status.
    """
    parser = argparse.ArgumentParser(
        prog="python -m biasbreaker_openai_compatible.testing",
        description="Serve an OpenAI-compatible chat-completions endpoint for tests and demos.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="TCP port (default 0: any free one)")
    parser.add_argument(
        "--backend",
        default="echo",
        help="'echo' (repeat the last user message) or the name of an installed biasbreaker "
        "llm_client, e.g. 'fake' (seeded, simulated) (default: echo)",
    )
    parser.add_argument(
        "--config", default=None, help="biasbreaker TOML with the backend's [plugin.<name>]"
    )
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model id for GET /v1/models")
    parser.add_argument(
        "--tool-for",
        action="append",
        default=[],
        metavar="WORD=TOOL",
        help="answer a reply 'Decision: WORD' with a call to the request's tool TOOL "
        "(DecisionTools; repeat for each word, e.g. --tool-for yes=approve_loan)",
    )
    args = parser.parse_args(argv)
    tool_for: dict[str, str] = {}
    for item in args.tool_for:
        word, sep, tool = item.partition("=")
        if not sep or not word.strip() or not tool.strip():
            print(f"error: --tool-for {item!r}: expected WORD=TOOL", file=sys.stderr)
            return 2
        tool_for[word.strip()] = tool.strip()

    backend: ClientBackend | None = None
    if args.backend == "echo":
        reply: ReplyFn = echo_reply
    else:
        from biasbreaker.errors import BiasbreakerError

        try:
            backend = client_backend(args.backend, args.config)
        except BiasbreakerError as exc:
            print(f"error: --backend {args.backend!r}: {exc}", file=sys.stderr)
            return 2
        reply = backend
    if tool_for:
        reply = DecisionTools(reply, tool_for)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        with ChatServer(reply, host=args.host, port=args.port, model=args.model) as server:
            print(f"serving {args.backend} on {server.base_url}", flush=True)
            while not stop.wait(0.2):
                pass
    finally:
        if backend is not None:
            backend.close()
    return 0


def _fixture() -> Iterator[ChatServer]:
    """A started :class:`ChatServer` with the echo backend, stopped after the test."""
    with ChatServer() as server:
        yield server


try:
    import pytest
except ImportError:  # pragma: no cover - the server itself needs no pytest
    pass
else:
    openai_server = pytest.fixture(name="openai_server")(_fixture)


if __name__ == "__main__":
    sys.exit(main())
