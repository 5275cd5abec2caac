"""The LLM client contract: what every ``llm_client`` plugin implements.

biasbreaker never imports a vendor SDK. Every LLM-backed part (the guarded agents in the demo,
skeptics, the MADERA diagnoser and editor) receives an object satisfying :class:`LLMClient`,
chosen by name with ``[llm] client = "..."`` in the configuration. The seeded fake client
(``fake``) makes tests and studies deterministic; contrib distributions provide real clients.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant"]
"""Chat roles, as in the OpenAI chat-completions protocol."""

Purpose = Literal["agent", "skeptic", "diagnoser", "editor", "other"]
"""What a request is for; clients may log it, the fake client uses it to shape its reply."""


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One chat message.

    Args:
        role: ``"system"``, ``"user"`` or ``"assistant"``.
        content: The message text (UTF-8, any length).
    """

    role: Role
    content: str

    def __post_init__(self) -> None:
        if self.role not in ("system", "user", "assistant"):
            raise ValueError(
                f"ChatMessage.role={self.role!r} is not a chat role; use 'system', 'user' "
                "or 'assistant'"
            )
        if not isinstance(self.content, str):
            raise TypeError(f"ChatMessage.content must be str, got {type(self.content).__name__}")


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """A chat-completion request.

    Args:
        messages: The conversation, oldest first; at least one message.
        temperature: Sampling temperature, >= 0. 0 asks for greedy decoding.
        seed: Sampling seed, or ``None``. Clients that support seeds must pass it on.
        max_tokens: Upper bound on generated tokens, or ``None`` for the client's default.
        response_schema: A JSON Schema the reply must satisfy (structured output), or ``None``
            for free text. Clients with a JSON mode use it; others must still return text that
            parses as JSON matching the schema, or raise :class:`~biasbreaker.errors.LLMError`.
        purpose: What the request is for (see :data:`Purpose`).
        sample: Index of a resample of the same prompt (0 for the first). Same-group resamples
            in the probe differ only in this field, so a deterministic client can return
            different samples of one prompt, the way a real model at temperature > 0 does.

    Raises:
        ValueError: On an empty conversation, a negative temperature, ``max_tokens < 1`` or a
            negative ``sample``.
    """

    messages: tuple[ChatMessage, ...]
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int | None = None
    response_schema: Mapping[str, Any] | None = field(default=None, hash=False, compare=False)
    purpose: Purpose = "agent"
    sample: int = 0

    def __post_init__(self) -> None:
        if not self.messages:
            raise ValueError("LLMRequest.messages is empty; pass at least one ChatMessage")
        if not self.temperature >= 0.0:
            raise ValueError(
                f"LLMRequest.temperature={self.temperature!r} must be >= 0 (0 = greedy)"
            )
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"LLMRequest.max_tokens={self.max_tokens!r} must be >= 1 or None")
        if self.sample < 0:
            raise ValueError(f"LLMRequest.sample={self.sample!r} must be >= 0")

    @classmethod
    def chat(
        cls,
        user: str,
        *,
        system: str | None = None,
        **kwargs: Any,
    ) -> LLMRequest:
        """Build a request from a user message and an optional system message.

        Args:
            user: The user message.
            system: The system message, or ``None``.
            **kwargs: Any other :class:`LLMRequest` field.

        Returns:
            The request.
        """
        msgs: list[ChatMessage] = []
        if system is not None:
            msgs.append(ChatMessage("system", system))
        msgs.append(ChatMessage("user", user))
        return cls(messages=tuple(msgs), **kwargs)

    @property
    def prompt(self) -> str:
        """The concatenated message contents, one per line as ``role: content``."""
        return "\n".join(f"{m.role}: {m.content}" for m in self.messages)

    def cache_key(self) -> str:
        """A sha256 hex digest of every field, for caching identical calls within a run."""
        payload = {
            "messages": [[m.role, m.content] for m in self.messages],
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "response_schema": self.response_schema,
            "purpose": self.purpose,
            "sample": self.sample,
        }
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """A chat-completion reply.

    Args:
        text: The generated text (for structured requests, the JSON document as text).
        model: The model identifier that produced it.
        finish_reason: ``"stop"``, ``"length"`` or the server's own value.
        prompt_tokens: Tokens in the prompt: the endpoint's ``usage.prompt_tokens`` where it
            reports one, else counted by the client (:func:`estimate_tokens`) with
            ``usage_estimated`` set, else 0 (a client that neither knows nor counts).
        completion_tokens: Tokens generated, likewise (``usage.completion_tokens``).
        usage_estimated: Whether the two counts were estimated by the client rather than
            reported by the endpoint (reports add them up apart, marked "estimated").
    """

    text: str
    model: str
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_estimated: bool = False

    @property
    def total_tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens


CHARS_PER_TOKEN = 4
"""The rule of thumb :func:`estimate_tokens` uses: about four characters of English per token
(OpenAI's tokenizer guide); a BPE tokenizer's count on other text can differ by half or more."""


def estimate_tokens(text: str) -> int:
    """An estimate of the tokens in ``text``: ``ceil(len(text) / 4)``, 0 for empty text.

    For endpoints that report no ``usage``; replies counted this way carry
    ``LLMResponse.usage_estimated = True``.
    """
    return -(-len(text) // CHARS_PER_TOKEN)


@runtime_checkable
class LLMClient(Protocol):
    """What an ``llm_client`` implementation provides.

    ``complete`` is a coroutine so callers can run many requests concurrently; a client bounds
    its own concurrency. It raises :class:`~biasbreaker.errors.LLMError` (or a subclass) for
    every failure it can name: transport errors, time-outs, HTTP errors, malformed replies.
    """

    @property
    def model(self) -> str:
        """The model identifier requests go to."""
        ...

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer one request.

        Args:
            request: The request.

        Returns:
            The reply.

        Raises:
            LLMError: On any failure the client can name.
        """
        ...

    async def aclose(self) -> None:
        """Release connections, model handles and other resources. Idempotent."""
        ...


class ThreadedClient:
    """An :class:`LLMClient` around a client whose ``complete`` is synchronous.

    Each call runs in a worker thread (:func:`asyncio.to_thread`), so a synchronous client never
    blocks the event loop: time-outs around it hold, and a reply that comes after its caller
    gave up is discarded. :meth:`biasbreaker.kernel.Kernel.llm` wraps such a client itself.

    Args:
        inner: An object with ``model``, a synchronous ``complete(request)`` and optionally
            ``close()`` or ``aclose()``.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def model(self) -> str:
        """The inner client's model."""
        return str(self.inner.model)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer ``request`` in a worker thread."""
        reply = await asyncio.to_thread(self.inner.complete, request)
        if not isinstance(reply, LLMResponse):
            raise TypeError(f"{type(self.inner).__name__}.complete returned {reply!r}")
        return reply

    async def aclose(self) -> None:
        """Close the inner client (its ``aclose()`` or ``close()``, if it has one)."""
        aclose = getattr(self.inner, "aclose", None)
        if aclose is not None:
            result = aclose()
            if inspect.isawaitable(result):
                await result
            return
        close = getattr(self.inner, "close", None)
        if close is not None:
            await asyncio.to_thread(close)


def complete_sync(client: LLMClient, request: LLMRequest) -> LLMResponse:
    """Run ``client.complete(request)`` from synchronous code.

    Args:
        client: The client.
        request: The request.

    Returns:
        The reply.

    Raises:
        RuntimeError: When called from inside a running event loop (use ``await`` there).
        LLMError: As raised by the client.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(client.complete(request))
    raise RuntimeError(
        "complete_sync() was called inside a running event loop; "
        "use `await client.complete(request)` instead"
    )


def user_messages(messages: Sequence[ChatMessage]) -> str:
    """Join the contents of the user messages, in order, with blank lines."""
    return "\n\n".join(m.content for m in messages if m.role == "user")
