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
  exercises the real HTTP path end to end.

The server is a test double: it speaks the parts of the protocol biasbreaker uses (messages,
temperature, seed, max_tokens, response_format), not the whole OpenAI API.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
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


@dataclass(frozen=True)
class Reply:
    """What the server sends back for one call.

    Args:
        status: HTTP status code.
        body: Response body bytes.
        headers: Extra response headers as ``(name, value)`` pairs.
        content_type: The ``Content-Type`` header.
        delay_s: Seconds to wait before answering (to exceed a client's time-out), >= 0.
    """

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"
    delay_s: float = 0.0

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
    ) -> Reply:
        """A successful chat completion whose single choice has ``text`` as its content."""
        return cls.json(
            completion_body(
                text,
                model=model,
                finish_reason=finish_reason,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
            ),
            delay_s=delay_s,
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
) -> dict[str, Any]:
    """A chat-completion response body in the OpenAI format.

    Args:
        text: The assistant message content.
        model: The ``model`` field.
        finish_reason: ``"stop"``, ``"length"``...
        prompt_tokens: ``usage.prompt_tokens``.
        completion_tokens: ``usage.completion_tokens``.

    Returns:
        The body as a dict.
    """
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


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
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)
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
    args = parser.parse_args(argv)

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
