"""The chat-completions client over httpx (imported only when the client is built).

One :class:`OpenAICompatibleClient` talks to one endpoint and model. Each ``complete`` call is
one ``POST <base_url>/chat/completions``, retried (by tenacity) on HTTP 429, 5xx and transport
errors (time-outs only with ``retry_timeouts``: the server goes on generating an abandoned
reply) with exponential back-off and full jitter, waiting at least the server's
``Retry-After`` (seconds or an HTTP date); a 5xx that names the ``response_format`` sent is not
retried (llama-cpp-python's server answers 500 to one it does not take). Every attempt takes a
slot of the process's :class:`~biasbreaker_openai_compatible.limiter.SharedLimiter` for the
``base_url`` (``max_concurrency`` in flight, ``requests_per_second``), shared by every client
of the process; a back-off wait holds no slot. The API key is read once from the
environment variable named by ``api_key_env`` and is never put in a message, a log record or
a repr: it is registered with :func:`biasbreaker.redaction.register_secret`, and every text that
could carry it (server bodies, exception texts) goes through
:func:`~biasbreaker.redaction.redact_text`, which also finds it upper-cased, base64- or
URL-encoded, and any other credential-looking text a server echoes.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import os
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import tenacity
from pydantic import SecretStr

from biasbreaker.errors import LLMError, MalformedReplyError
from biasbreaker.llm import LLMRequest, LLMResponse, estimate_tokens
from biasbreaker.redaction import redact_text, register_secret
from biasbreaker.usage import charge_tokens
from biasbreaker_openai_compatible.limiter import SharedLimiter, shared_limiter
from biasbreaker_openai_compatible.plugin import NAME, OpenAICompatibleOptions

log = logging.getLogger("biasbreaker_openai_compatible")

Sleep = Callable[[float], Awaitable[None]]
"""``await sleep(seconds)``; ``asyncio.sleep`` by default, injectable for tests."""
Clock = Callable[[], float]
"""Wall-clock seconds since the epoch (``time.time``); only used for HTTP-date Retry-After."""

SEED_MODULUS = 2**31
"""Seeds sent are reduced modulo 2**31 (some servers reject larger values)."""
_SNIPPET = 300


@dataclass
class _LoopState:
    """The httpx client bound to one event loop."""

    loop: asyncio.AbstractEventLoop
    http: httpx.AsyncClient


class _Retryable(Exception):
    """One failed but retryable attempt: what went wrong, and the server's Retry-After."""

    def __init__(self, problem: str, retry_after: float | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.retry_after = retry_after


GRAMMAR_MAX_LENGTH = 256
"""Largest string-length bound (``maxLength``/``minLength``) sent to a grammar-building server."""


def grammar_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` as sent with ``json_mode = "json_object_schema"``: long length bounds dropped.

    llama-cpp-python's server turns the schema into a grammar that spells a ``maxLength`` out
    as that many repetitions: with the skeptics' ``maxLength: 20000`` its 0.3.36 server (with
    SmolLM2-135M, seen here) dropped the connection and died. A ``maxLength`` or ``minLength``
    above :data:`GRAMMAR_MAX_LENGTH` is left out of what is sent; the reply is still validated
    against the full schema by the caller (a reply that breaks a bound is malformed).

    Args:
        schema: A JSON schema (nested objects and lists are walked).

    Returns:
        A copy without the long bounds.
    """

    def walk(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {
                key: walk(item)
                for key, item in value.items()
                if not (
                    key in ("maxLength", "minLength")
                    and isinstance(item, int)
                    and item > GRAMMAR_MAX_LENGTH
                )
            }
        if isinstance(value, list):
            return [walk(item) for item in value]
        return value

    return dict(walk(schema))


class OpenAICompatibleClient:
    """An :class:`~biasbreaker.llm.LLMClient` for one OpenAI-compatible chat endpoint.

    Args:
        options: Validated options (``[plugin.openai-compatible]``).
        default_seed: Seed sent when a request carries none (the run's seed), or ``None``.
        environ: Where ``api_key_env`` is looked up; ``None`` means ``os.environ``.
        sleep: Awaited with the back-off delay in seconds between attempts (and with the
            wait for a ``requests_per_second`` turn).
        clock: Wall clock in epoch seconds, for ``Retry-After`` given as an HTTP date.
        rng: The source of the back-off jitter (default an unseeded ``random.Random``: the
            jitter is there to decorrelate clients; pass a seeded one for reproducible waits).
        limiter: The limiter every attempt takes a slot from (default the process's one for
            ``base_url``, :func:`~biasbreaker_openai_compatible.limiter.shared_limiter`).

    Raises:
        LLMError: ``api_key_env`` is set but the variable is missing or empty.
    """

    def __init__(
        self,
        options: OpenAICompatibleOptions,
        *,
        default_seed: int | None = None,
        environ: Mapping[str, str] | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.time,
        rng: random.Random | None = None,
        limiter: SharedLimiter | None = None,
    ) -> None:
        self.options = options
        self._default_seed = default_seed
        self._sleep = sleep
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self.limiter = limiter if limiter is not None else shared_limiter(options.base_url)
        self._key: SecretStr | None = None
        if options.api_key_env is not None:
            env = os.environ if environ is None else environ
            value = env.get(options.api_key_env, "")
            if not value.strip():
                raise LLMError(
                    f"{NAME}: the environment variable {options.api_key_env} (named by "
                    f"plugin.{NAME}.api_key_env) is not set or empty; export the API key for "
                    f"{options.endpoint} in it, or remove api_key_env for a server without "
                    "authentication"
                )
            self._key = SecretStr(value.strip())
            register_secret(value.strip())
        self._states: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        self._closed = False

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(endpoint={self.options.endpoint!r}, "
            f"model={self.options.model!r}, api_key_env={self.options.api_key_env!r})"
        )

    @property
    def model(self) -> str:
        """The model identifier requests go to."""
        return self.options.model

    @property
    def endpoint(self) -> str:
        """The chat-completions URL."""
        return self.options.endpoint

    def _redact(self, text: str) -> str:
        return redact_text(text)

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            for other in [lp for lp in self._states if lp.is_closed()]:
                # its connections died with their loop; nothing left to await
                del self._states[other]
            headers = {"Accept": "application/json"}
            if self._key is not None:
                headers["Authorization"] = f"Bearer {self._key.get_secret_value()}"
            http = httpx.AsyncClient(
                headers=headers,
                timeout=httpx.Timeout(self.options.timeout_s),
                limits=httpx.Limits(max_connections=self.options.max_concurrency),
            )
            state = _LoopState(loop, http)
            self._states[loop] = state
        return state

    def request_body(self, request: LLMRequest) -> dict[str, Any]:
        """The JSON body sent for ``request``.

        The temperature is the option's if set, else the request's. The seed is the request's
        (else the run's) plus ``request.sample``, modulo 2**31, so same-group resamples are
        distinct draws; none is sent with ``send_seed = false`` or when neither seed exists.
        A request with a ``response_schema`` gets ``response_format`` per ``json_mode``. With
        ``forward_request_fields``, a ``biasbreaker`` object carries the request's own
        ``purpose``, ``sample`` and ``seed`` (for biasbreaker's test server).

        Args:
            request: The request.

        Returns:
            The chat-completions request body as a JSON-serialisable dict.
        """
        opts = self.options
        body: dict[str, Any] = {
            "model": opts.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": opts.temperature
            if opts.temperature is not None
            else request.temperature,
        }
        max_tokens = request.max_tokens if request.max_tokens is not None else opts.max_tokens
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        base_seed = request.seed if request.seed is not None else self._default_seed
        if opts.send_seed and base_seed is not None:
            body["seed"] = (base_seed + request.sample) % SEED_MODULUS
        if opts.forward_request_fields:
            body["biasbreaker"] = {
                "purpose": request.purpose,
                "sample": request.sample,
                "seed": request.seed,
            }
        if request.response_schema is not None:
            if opts.json_mode == "json_schema":
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "biasbreaker_reply",
                        "schema": dict(request.response_schema),
                    },
                }
            elif opts.json_mode == "json_object":
                body["response_format"] = {"type": "json_object"}
            elif opts.json_mode == "json_object_schema":
                body["response_format"] = {
                    "type": "json_object",
                    "schema": grammar_schema(request.response_schema),
                }
        return body

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Send one chat-completion request, retrying transient failures.

        Args:
            request: The request.

        Returns:
            The reply text, model, finish reason and token counts reported by the server.

        Raises:
            LLMError: The client is closed; a non-retryable HTTP error (4xx other than 429,
                a 5xx naming ``response_format``); a time-out without ``retry_timeouts``;
                retries exhausted on 429/5xx/transport errors/time-outs; a reply that is not a
                chat completion. The message names the endpoint, model, HTTP status and
                attempt count, never the key.
            MalformedReplyError: A structured request whose reply is not JSON (an
                ``LLMError``; :func:`biasbreaker.intervention.review.ask_json` asks again once).
        """
        if self._closed:
            raise LLMError(f"{NAME}: client for {self.endpoint} is closed (aclose() was called)")
        state = self._state()
        body = self.request_body(request)
        attempts = self.options.max_retries + 1
        retrying = tenacity.AsyncRetrying(
            sleep=self._sleep,
            stop=tenacity.stop_after_attempt(attempts),
            wait=self._wait,
            retry=tenacity.retry_if_exception_type(_Retryable),
            before_sleep=self._log_retry,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    reply = await self._limited(state, body, request, attempt.retry_state)
                    charge_tokens(reply.total_tokens)  # the probe budget of a re-run
                    return reply
        except tenacity.RetryError as exc:
            last = exc.last_attempt
            problem = last.exception()
            raise LLMError(
                f"{NAME}: POST {self.endpoint} (model {self.model!r}) failed after "
                f"{last.attempt_number} attempt(s): {problem}"
            ) from None
        raise AssertionError("tenacity ended without a result or an error")  # pragma: no cover

    async def _limited(
        self,
        state: _LoopState,
        body: dict[str, Any],
        request: LLMRequest,
        retry_state: tenacity.RetryCallState,
    ) -> LLMResponse:
        """One attempt, holding a slot of the shared limiter while it is in flight."""
        opts = self.options
        await self.limiter.acquire(opts.max_concurrency, opts.requests_per_second, self._sleep)
        try:
            return await self._attempt(state, body, request, retry_state.attempt_number)
        finally:
            self.limiter.release()

    def _wait(self, retry_state: tenacity.RetryCallState) -> float:
        """Tenacity's wait before the next attempt: :meth:`_delay` of the failed one."""
        outcome = retry_state.outcome
        error = outcome.exception() if outcome is not None else None
        retry_after = error.retry_after if isinstance(error, _Retryable) else None
        return self._delay(retry_state.attempt_number, retry_after)

    def _log_retry(self, retry_state: tenacity.RetryCallState) -> None:
        outcome = retry_state.outcome
        problem = outcome.exception() if outcome is not None else None
        log.warning(
            "%s: POST %s (model %r) attempt %d/%d failed: %s; retrying in %.3g s",
            NAME,
            self.endpoint,
            self.model,
            retry_state.attempt_number,
            self.options.max_retries + 1,
            problem,
            retry_state.upcoming_sleep,
        )

    async def _attempt(
        self, state: _LoopState, body: dict[str, Any], request: LLMRequest, attempt: int
    ) -> LLMResponse:
        log.debug("%s: POST %s (model %r) attempt %d", NAME, self.endpoint, self.model, attempt)
        try:
            resp = await asyncio.wait_for(
                state.http.post(self.endpoint, json=body), timeout=self.options.timeout_s
            )
        except (httpx.TimeoutException, asyncio.TimeoutError) as exc:
            problem = f"time-out after {self.options.timeout_s:g} s ({type(exc).__name__})"
            if self.options.retry_timeouts:
                raise _Retryable(problem) from exc
            # the server is most likely still generating the abandoned reply: a retry would
            # queue a duplicate behind it
            raise LLMError(
                f"{NAME}: POST {self.endpoint} (model {self.model!r}) failed after {attempt} "
                f"attempt(s): {problem} (not retried: the server may still be generating it; "
                "raise timeout_s, or set retry_timeouts = true for a load-balanced API)"
            ) from exc
        except httpx.TransportError as exc:
            raise _Retryable(self._redact(f"transport error {type(exc).__name__}: {exc}")) from exc
        except httpx.HTTPError as exc:  # a reply httpx cannot decode, too many redirects
            raise LLMError(
                self._redact(
                    f"{NAME}: POST {self.endpoint} (model {self.model!r}) failed after {attempt} "
                    f"attempt(s): {type(exc).__name__}: {exc} (not retried)"
                )
            ) from exc
        status = resp.status_code
        if status >= 500 and "response_format" in body and "response_format" in resp.text:
            # llama-cpp-python's server answers 500 to a response_format it does not take:
            # the same request would fail the same way, so it is the 400 case
            raise LLMError(
                f"{NAME}: POST {self.endpoint} (model {self.model!r}) failed after {attempt} "
                f"attempt(s): {self._http_problem(resp)} (not retried){self._json_mode_hint()}"
            )
        if status == 429 or status >= 500:
            raise _Retryable(
                self._http_problem(resp), self._retry_after(resp.headers.get("Retry-After"))
            )
        if status >= 400:
            hint = ""
            if status in (401, 403):
                hint = (
                    f"; check the key in {self.options.api_key_env}"
                    if self.options.api_key_env
                    else "; the server wants a key: set api_key_env to the name of the "
                    "environment variable holding it"
                )
            elif status == 404:
                hint = "; check base_url (it should end with the API version, e.g. /v1) and model"
            elif status == 400 and "maximum context length" in resp.text.lower():
                # vLLM (and OpenAI) refuse a prompt plus max_tokens beyond the context with a
                # 400 naming it; the response_format is not the problem then
                hint = self._context_hint(body.get("max_tokens"))
            elif status == 400 and "response_format" in body:
                hint = self._json_mode_hint()
            raise LLMError(
                f"{NAME}: POST {self.endpoint} (model {self.model!r}) failed after {attempt} "
                f"attempt(s): {self._http_problem(resp)} (not retried){hint}"
            )
        return self._parse(resp, request, attempt)

    def _context_hint(self, max_tokens: object) -> str:
        """What to set when the prompt plus ``max_tokens`` exceed the model's context."""
        sent = "none sent" if max_tokens is None else f"sent: {max_tokens}"
        return (
            "; the prompt plus max_tokens exceed the model's context: lower "
            f"[plugin.openai-compatible] max_tokens ({sent}), or give the server a longer "
            "context (vLLM: --max-model-len)"
        )

    def _json_mode_hint(self) -> str:
        """What to set when the server refuses the ``response_format`` ``json_mode`` sends."""
        others = [
            m for m in ("json_object_schema", "json_object", "none") if m != self.options.json_mode
        ]
        return (
            f"; if the server does not support json_mode={self.options.json_mode!r}, set "
            f"json_mode to {' or '.join(repr(m) for m in others)} (llama-cpp-python's server: "
            "'json_object_schema')"
        )

    def _http_problem(self, resp: httpx.Response) -> str:
        # redacted before it is cut: a cut copy of a key would no longer be recognised
        text = self._redact(resp.text.strip().replace("\n", " "))
        if len(text) > _SNIPPET:
            text = text[:_SNIPPET] + "..."
        return self._redact(f"HTTP {resp.status_code} {resp.reason_phrase}: {text or '(empty)'}")

    def _retry_after(self, value: str | None) -> float | None:
        """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date)."""
        if value is None:
            return None
        value = value.strip()
        try:
            seconds = float(value)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                return None
            seconds = when.timestamp() - self._clock()
        if not math.isfinite(seconds):
            return None
        return max(0.0, seconds)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Back-off after failed attempt ``attempt`` (1-based), in seconds.

        Full jitter (Brooker, "Exponential Backoff And Jitter", AWS Architecture Blog, 2015):
        uniform in ``[0, min(backoff_max_s, backoff_base_s * 2**(attempt-1))]``; at least the
        server's ``Retry-After``; never above ``backoff_max_s``.
        """
        opts = self.options
        ceiling = min(opts.backoff_base_s * float(2 ** (attempt - 1)), opts.backoff_max_s)
        backoff = self._rng.uniform(0.0, ceiling)
        if retry_after is not None:
            backoff = max(backoff, retry_after)
        return min(backoff, opts.backoff_max_s)

    def _parse(self, resp: httpx.Response, request: LLMRequest, attempt: int) -> LLMResponse:
        where = f"{NAME}: POST {self.endpoint} (model {self.model!r}, attempt {attempt})"
        try:
            data = resp.json()
        except ValueError:
            raise LLMError(
                self._redact(
                    f"{where}: HTTP {resp.status_code} reply is not JSON: "
                    f"{self._redact(resp.text)[:_SNIPPET]!r}"
                )
            ) from None
        try:
            choice = data["choices"][0]
            message = choice["message"]
            content = message.get("content")
        except (KeyError, IndexError, TypeError, AttributeError):
            raise LLMError(
                self._redact(
                    f"{where}: reply is not a chat completion (no choices[0].message): "
                    f"{self._redact(json.dumps(data))[:_SNIPPET]}"
                )
            ) from None
        if not isinstance(content, str):
            refusal = message.get("refusal") if isinstance(message, dict) else None
            reason = f"the model refused: {refusal!r}" if refusal else "it has no text content"
            raise LLMError(self._redact(f"{where}: reply unusable, {reason}"))
        finish = str(choice.get("finish_reason") or "stop")
        if request.response_schema is not None:
            try:
                json.loads(content)
            except ValueError as exc:
                cut = " (cut off at max_tokens)" if finish == "length" else ""
                raise MalformedReplyError(
                    self._redact(
                        f"{where}: the request asked for JSON (json_mode="
                        f"{self.options.json_mode!r}) but the reply does not parse{cut}: {exc}; "
                        f"reply starts {self._redact(content)[:120]!r}"
                    )
                ) from None
        usage = data.get("usage")
        prompt = _count(usage.get("prompt_tokens")) if isinstance(usage, dict) else None
        completion = _count(usage.get("completion_tokens")) if isinstance(usage, dict) else None
        estimated = prompt is None or completion is None
        return LLMResponse(
            text=content,
            model=str(data.get("model") or self.model),
            finish_reason=finish,
            prompt_tokens=estimate_tokens(request.prompt) if prompt is None else prompt,
            completion_tokens=estimate_tokens(content) if completion is None else completion,
            usage_estimated=estimated,
        )

    async def aclose(self) -> None:
        """Close the HTTP connections of the running loop's client. Idempotent.

        Clients bound to loops running in other threads are closed there; those bound to
        loops already closed are dropped (their connections ended with their loop). After
        ``aclose`` every ``complete`` raises :class:`LLMError`.
        """
        self._closed = True
        states, self._states = self._states, {}
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop, state in states.items():
            if loop is current:
                await state.http.aclose()
            elif loop.is_running():
                # a loop in another thread: close its client there, without waiting
                asyncio.run_coroutine_threadsafe(state.http.aclose(), loop)


def _count(value: object) -> int | None:
    """A token count from ``usage``, or ``None`` when it is absent or not a count."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
