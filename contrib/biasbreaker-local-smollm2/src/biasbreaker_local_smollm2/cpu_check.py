"""The CPU check: load the model and generate in a child process before this one does.

A llama.cpp build can use CPU instructions that the machine advertises but cannot execute
(seen: AMX on a VM, through llama.cpp's extra buffer types for weight repacking). The process
then dies with SIGILL, which no Python code in it can catch: the run ends with no reason, or,
in the demo's process pool, with ``BrokenProcessPool``. The child runs the same load and a
one-token generation first; if it dies, :func:`check_cpu` raises an :class:`LLMError` that
names the signal and the fixes instead. One check per model file and buffer setting per
process (about a second for SmolLM2-135M: a Python start, ``import llama_cpp``, the load).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path

from biasbreaker.errors import LLMError
from biasbreaker_local_smollm2.plugin import NAME

CHILD_CODE = """\
import sys
from biasbreaker_local_smollm2.client import load_llama
llama = load_llama(sys.argv[1], n_ctx=128, n_threads=int(sys.argv[2]),
                   extra_buffer_types=sys.argv[3] == "1")
llama.create_completion("Hi", max_tokens=1)
"""
"""What the child runs: :func:`~biasbreaker_local_smollm2.client.load_llama` as the client
calls it, then one token. Arguments: model path, threads, extra buffer types (``1``/``0``)."""

CHECK_TIMEOUT_S = 300.0
"""Seconds the child may take (a multi-GB model loads slowly from a cold disk)."""

_checked: set[tuple[str, bool]] = set()
_lock = threading.Lock()


def fixes(extra_buffer_types: bool) -> str:
    """What to change after an illegal instruction, for the current buffer setting."""
    steps = []
    if extra_buffer_types:
        steps.append(f"set extra_buffer_types = false under [plugin.{NAME}]")
    steps.append(
        "reinstall llama-cpp-python without native CPU tuning: CMAKE_ARGS='-DGGML_NATIVE=OFF "
        "-DGGML_CPU_ALL_VARIANTS=OFF' pip install --force-reinstall --no-cache-dir "
        "llama-cpp-python"
    )
    steps.append(f"or set cpu_check = false under [plugin.{NAME}] to skip this check")
    return "; ".join(steps)


def check_cpu(
    model_path: Path,
    *,
    n_threads: int,
    extra_buffer_types: bool,
    code: str = CHILD_CODE,
    timeout_s: float = CHECK_TIMEOUT_S,
) -> None:
    """Run the model once in a child process; raise if the child dies.

    Args:
        model_path: The GGUF file.
        n_threads: llama.cpp threads, as the client uses them.
        extra_buffer_types: llama.cpp's ``use_extra_bufts``, as the client loads the model.
        code: The child's program (tests replace it; the default is :data:`CHILD_CODE`).
        timeout_s: Seconds the child may take.

    Raises:
        LLMError: The child died from a signal (SIGILL named, with the fixes), exited with an
            error (its last output quoted), or took longer than ``timeout_s``.
    """
    key = (str(model_path), extra_buffer_types)
    with _lock:
        if key in _checked:
            return
        argv = [
            *(sys.executable, "-c", code, str(model_path), str(n_threads)),
            "1" if extra_buffer_types else "0",
        ]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise LLMError(
                f"{NAME}: the CPU check (loading {model_path.name} in a child process) took "
                f"longer than {timeout_s:g} s; set cpu_check = false under [plugin.{NAME}] "
                "to skip it"
            ) from None
        status = done.returncode
        if status < 0:
            sig = signal.Signals(-status)
            cause = (
                "an illegal instruction: this llama.cpp build uses CPU instructions the machine "
                "advertises but cannot run (seen: AMX on a VM)"
                if sig is signal.SIGILL
                else "a signal"
            )
            raise LLMError(
                f"{NAME}: running {model_path.name} killed a child process with {sig.name} "
                f"({cause}); this process would have died the same way; "
                f"{fixes(extra_buffer_types)}"
            )
        if status != 0:
            tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise LLMError(
                f"{NAME}: the CPU check (loading {model_path.name} in a child process) "
                f"exited {status}: {' | '.join(tail)}"
            )
        _checked.add(key)


__all__ = ["CHILD_CODE", "check_cpu", "fixes"]
