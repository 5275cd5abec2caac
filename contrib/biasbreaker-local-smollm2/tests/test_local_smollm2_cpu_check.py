"""The CPU check: a child process that dies with SIGILL fails the load with the cause named.

The children here are real processes that really die (``os.kill`` with SIGILL), so the check
is tested on what the parent sees, without a CPU that lacks an instruction.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

import pytest
from biasbreaker_local_smollm2 import client as client_module
from biasbreaker_local_smollm2 import cpu_check
from biasbreaker_local_smollm2.client import LocalSmolLM2Client
from biasbreaker_local_smollm2.cpu_check import check_cpu
from biasbreaker_local_smollm2.plugin import LocalSmolLM2Options

from biasbreaker.errors import LLMError
from biasbreaker.llm import LLMRequest

DIES = "import os, signal; os.kill(os.getpid(), signal.{})"
COUNTS = "import sys; open(sys.argv[1] + '.runs', 'a').write('x')"


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu_check, "_checked", set())


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF")
    return path


def test_a_child_killed_by_sigill_names_the_instruction_and_both_fixes(model: Path) -> None:
    with pytest.raises(LLMError) as caught:
        check_cpu(model, n_threads=1, extra_buffer_types=True, code=DIES.format("SIGILL"))
    message = str(caught.value)
    assert "SIGILL" in message and "illegal instruction" in message
    assert "extra_buffer_types = false" in message and "-DGGML_NATIVE=OFF" in message
    assert "cpu_check = false" in message


def test_with_extra_buffers_already_off_only_the_rebuild_is_suggested(model: Path) -> None:
    with pytest.raises(LLMError) as caught:
        check_cpu(model, n_threads=1, extra_buffer_types=False, code=DIES.format("SIGILL"))
    assert "extra_buffer_types" not in str(caught.value)
    assert "-DGGML_NATIVE=OFF" in str(caught.value)


def test_another_signal_is_named_without_the_illegal_instruction_story(model: Path) -> None:
    with pytest.raises(LLMError, match="SIGSEGV") as caught:
        check_cpu(model, n_threads=1, extra_buffer_types=True, code=DIES.format("SIGSEGV"))
    assert "illegal instruction" not in str(caught.value)


def test_a_child_that_fails_is_quoted(model: Path) -> None:
    code = (
        "import sys; sys.stderr.write('first\\nValueError: Failed to load model\\n'); sys.exit(1)"
    )
    with pytest.raises(LLMError, match=r"exited 1: first \| ValueError: Failed to load model"):
        check_cpu(model, n_threads=1, extra_buffer_types=True, code=code)


def test_a_child_that_hangs_is_stopped(model: Path) -> None:
    with pytest.raises(LLMError, match="longer than 0.5 s"):
        check_cpu(
            model, n_threads=1, extra_buffer_types=True, code="import time; time.sleep(30)",
            timeout_s=0.5,
        )  # fmt: skip


def test_a_passed_check_runs_once_per_model_and_buffer_setting(model: Path) -> None:
    runs = Path(f"{model}.runs")
    for extra in (True, True, False, True, False):
        check_cpu(model, n_threads=1, extra_buffer_types=extra, code=COUNTS)
    assert runs.read_text() == "xx"


def test_a_failed_check_is_not_remembered_as_passed(model: Path) -> None:
    for _ in range(2):
        with pytest.raises(LLMError, match="SIGILL"):
            check_cpu(model, n_threads=1, extra_buffer_types=True, code=DIES.format("SIGILL"))


def test_the_client_runs_the_check_before_loading_in_this_process(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded: list[str] = []
    monkeypatch.setattr(
        client_module, "check_cpu", functools.partial(check_cpu, code=DIES.format("SIGILL"))
    )
    monkeypatch.setattr(client_module, "load_llama", lambda *a, **k: loaded.append("x"))
    client = LocalSmolLM2Client(LocalSmolLM2Options(model_path=str(model)))
    with pytest.raises(LLMError, match="SIGILL"):
        asyncio.run(client.complete(LLMRequest.chat("Hi")))
    assert loaded == []  # this process never ran the model


def test_the_check_can_be_turned_off(model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        client_module, "check_cpu", functools.partial(check_cpu, code=DIES.format("SIGILL"))
    )

    def load(path: str, **options: object) -> None:
        raise ValueError(f"loaded {Path(path).name} with {sorted(options.items())}")

    monkeypatch.setattr(client_module, "load_llama", load)
    client = LocalSmolLM2Client(
        LocalSmolLM2Options(model_path=str(model), cpu_check=False, extra_buffer_types=False)
    )
    with pytest.raises(LLMError, match=r"loaded tiny.gguf .*'extra_buffer_types', False"):
        client.load()
