"""The entry-point module: registers the ``openai-compatible`` LLM client.

Loading this module is cheap: it imports pydantic and biasbreaker's hook marker, never httpx.
The client (and httpx with it) is imported inside the factory, only when the configuration
selects ``[llm] client = "openai-compatible"``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from biasbreaker.hookspecs import hookimpl

if TYPE_CHECKING:
    from biasbreaker.registry import BuildContext, Register
    from biasbreaker_openai_compatible.client import OpenAICompatibleClient

NAME = "openai-compatible"
"""The implementation name: ``[llm] client = "openai-compatible"``, options under
``[plugin.openai-compatible]``."""

DEFAULT_MAX_TOKENS = 1024
"""``max_tokens`` sent when neither the request nor ``[plugin.openai-compatible]`` sets one."""

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")
"""Upper-case environment variable names, at most 64 characters. The rule also catches an API
key pasted into ``api_key_env`` by mistake (keys are long and mixed- or lower-case)."""
_SECRET_KEYS = frozenset(
    {"api_key", "apikey", "key", "token", "api_token", "access_token", "secret", "password"}
)
_REDACTED = "<redacted: put the key in an environment variable and name it in api_key_env>"


class OpenAICompatibleOptions(BaseModel):
    """Options of the ``openai-compatible`` client, validated from ``[plugin.openai-compatible]``.

    Every field accepts strings (values from the environment arrive as strings). The API key
    itself is never an option: ``api_key_env`` names the environment variable that holds it.
    A key written into the table (``api_key = "..."``) is rejected with its value redacted.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(
        "http://127.0.0.1:11434/v1",
        description=(
            "Base URL of the OpenAI-compatible API, up to and including the version path "
            "(Ollama: http://127.0.0.1:11434/v1, vLLM: http://HOST:8000/v1, llama.cpp "
            "server: http://HOST:8080/v1); requests go to <base_url>/chat/completions."
        ),
    )
    model: str = Field(
        description="Model identifier sent with every request (e.g. 'llama3.2:1b' on Ollama).",
        min_length=1,
        max_length=256,
    )
    api_key_env: str | None = Field(
        None,
        description=(
            "Name of the environment variable holding the API key (e.g. 'OPENAI_API_KEY'), "
            "sent as 'Authorization: Bearer <key>'; unset for servers without authentication."
        ),
    )
    temperature: float | None = Field(
        None,
        ge=0.0,
        le=2.0,
        description=(
            "Sampling temperature sent in place of each request's own, in [0, 2]; unset sends "
            "the request's temperature (biasbreaker's default is 0, greedy)."
        ),
    )
    send_seed: bool = Field(
        True,
        description=(
            "Send a seed with every request: the request's seed, else the run's seed, plus "
            "the resample index (so same-group resamples are distinct draws)."
        ),
    )
    max_tokens: int | None = Field(
        DEFAULT_MAX_TOKENS,
        ge=1,
        le=1_000_000,
        description=(
            f"Token cap for requests that set none (default {DEFAULT_MAX_TOKENS}: a skeptic "
            "verdict or a rewritten step output is far shorter, and an unbounded generation "
            "can keep a one-slot server busy for minutes); null leaves it to the server."
        ),
    )
    timeout_s: float = Field(
        60.0,
        gt=0.0,
        le=3600.0,
        description="Time-out of one HTTP attempt, in seconds (connect, read, write, pool).",
    )
    max_retries: int = Field(
        3,
        ge=0,
        le=20,
        description=(
            "Retries after the first attempt on HTTP 429, 5xx and transport errors (and on "
            "time-outs with retry_timeouts)."
        ),
    )
    retry_timeouts: bool = Field(
        False,
        description=(
            "Retry an attempt that timed out. Off by default: the server usually goes on "
            "generating the abandoned reply, so a retry queues a duplicate behind it (on a "
            "one-slot llama.cpp server, the retry waits for the abandoned one); raise "
            "timeout_s instead, or turn this on for a load-balanced API."
        ),
    )
    backoff_base_s: float = Field(
        0.5,
        ge=0.0,
        le=60.0,
        description=(
            "Back-off before retry n (n = 1, 2, ...), with full jitter: a wait drawn uniformly "
            "from [0, min(backoff_max_s, backoff_base_s * 2**(n-1))] seconds, so the k + r "
            "probe calls that met one 429 do not retry in lock-step; at least the server's "
            "Retry-After when it sends one."
        ),
    )
    backoff_max_s: float = Field(
        30.0,
        ge=0.0,
        le=3600.0,
        description="Upper bound of one back-off wait in seconds, also for Retry-After.",
    )
    max_concurrency: int = Field(
        4,
        ge=1,
        le=1024,
        description=(
            "Requests in flight at once to this base_url, counted across every client of the "
            "process (nodes, probe re-runs, skeptics, MADERA); a request of this client waits "
            "while this many are in flight. Give the server as many slots (llama.cpp "
            "--parallel, vLLM --max-num-seqs, Ollama OLLAMA_NUM_PARALLEL; docs/llm-clients.md)."
        ),
    )
    requests_per_second: float = Field(
        0.0,
        ge=0.0,
        le=10_000.0,
        description=(
            "Requests started per second to this base_url, across every client of the "
            "process, spaced 1/requests_per_second apart by this client; 0 (default) sets no "
            "rate (only max_concurrency bounds the load). Retries count as requests."
        ),
    )
    json_mode: Literal["json_schema", "json_object", "json_object_schema", "none"] = Field(
        "json_schema",
        description=(
            "How requests with a response_schema ask for JSON: 'json_schema' sends "
            "response_format={type: json_schema, ...} (OpenAI, vLLM, Ollama, llama.cpp's "
            "llama-server), 'json_object' sends {type: json_object}, 'json_object_schema' "
            "sends {type: json_object, schema: ...} (llama-cpp-python's server, which "
            "rejects json_schema; the schema becomes its grammar), 'none' sends nothing; the "
            "reply must parse as JSON in every mode."
        ),
    )

    forward_request_fields: bool = Field(
        False,
        description=(
            "Add a non-standard 'biasbreaker' object (the request's purpose, sample and seed) "
            "to every body, so biasbreaker's test server can rebuild the exact request and "
            "its backend answers exactly as in-process. Real APIs may reject unknown fields "
            "(OpenAI does): leave it off for them."
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _redact_secrets(cls, data: Any) -> Any:
        """Replace values that may be keys, so no validation error can echo them.

        A secret-looking key (``api_key``, ``token``...) is never allowed; an ``api_key_env``
        that is not an environment variable name may be a pasted key.
        """
        if not isinstance(data, dict):
            return data
        cleaned: dict[Any, Any] = {}
        for key, value in data.items():
            if str(key).lower().replace("-", "_") in _SECRET_KEYS or (
                key == "api_key_env" and isinstance(value, str) and not _ENV_NAME.match(value)
            ):
                value = _REDACTED
            cleaned[key] = value
        return cleaned

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http:// or https:// URL such as http://127.0.0.1:11434/v1")
        if parts.path.rstrip("/").endswith("/chat/completions"):
            raise ValueError(
                "give the base URL without /chat/completions (e.g. http://127.0.0.1:11434/v1);"
                " the client appends it"
            )
        if parts.query or parts.fragment:
            raise ValueError("must not carry a query string or fragment")
        if "@" in parts.netloc:
            raise ValueError(
                "must not carry user info (user:password@ before the host): a key in the URL "
                "would be sent and logged with every request; export the key in an environment "
                "variable and name it in api_key_env"
            )
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _check_env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError(
                "must be the NAME of an environment variable (upper-case letters, digits and "
                "'_', at most 64 characters) such as OPENAI_API_KEY, not the key itself; "
                "export the key in that variable"
            )
        return value

    @model_validator(mode="after")
    def _check_backoff(self) -> OpenAICompatibleOptions:
        if self.backoff_max_s < self.backoff_base_s:
            raise ValueError(
                f"backoff_max_s={self.backoff_max_s} is below backoff_base_s="
                f"{self.backoff_base_s}; raise backoff_max_s or lower backoff_base_s"
            )
        return self

    @property
    def endpoint(self) -> str:
        """The chat-completions URL: ``<base_url>/chat/completions``."""
        return f"{self.base_url}/chat/completions"


def make_client(options: OpenAICompatibleOptions, context: BuildContext) -> OpenAICompatibleClient:
    """Build the client (the factory the kernel calls when the client is selected).

    Args:
        options: Validated ``[plugin.openai-compatible]`` options.
        context: The kernel; its ``seed`` is sent when a request carries none.

    Returns:
        The client. It opens no connection until the first request.

    Raises:
        LLMError: ``api_key_env`` names a variable that is not set (or is empty).
    """
    from biasbreaker_openai_compatible.client import OpenAICompatibleClient

    return OpenAICompatibleClient(options, default_seed=context.seed)


@hookimpl
def llm_client(register: Register[Any]) -> None:
    """Register the ``openai-compatible`` client."""
    register(
        NAME,
        make_client,
        options=OpenAICompatibleOptions,
        summary="chat completions from any OpenAI-compatible endpoint (Ollama, vLLM, "
        "llama.cpp server, hosted APIs) over httpx",
    )
