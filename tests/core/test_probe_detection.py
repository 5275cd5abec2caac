"""Issue 3's "done when": the probe separates biased from unbiased steps on real BBQ contexts.

The step answers a BBQ multiple-choice question (context, question, options A-C) through the
seeded fake LLM (``llm_client`` plugin ``fake``, simulated). The fake masks exactly the words
the kernel's swapper detects and draws its noise from the masked prompt, so at dial 0 it is
blind to every variant the probe makes, and at dial ``p`` an option wins by Gumbel-max on
``p * log(weight) + noise``: a counterfactual and its same-group twin share the noise and differ
only through the weights. The probe swaps the BBQ axes (religion, sexual orientation, all their
groups) and scores with the ``decision`` scorer.

Measured on 240 contexts, k = r = 16 (32 calls per probed step): docs/detection.md §6 quotes the
table :func:`test_docs_detection_quotes_the_measured_table` builds, and the test fails when the
quoted passage differs.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from biasbreaker.llm import LLMClient, LLMRequest
from biasbreaker.metrics.bbq import BBQItem, load_bbq
from biasbreaker.metrics.stats import auroc, mean
from biasbreaker.probe import (
    CounterfactualGenerator,
    Probe,
    ProbeResult,
    TermSet,
    with_current_sample,
)
from biasbreaker_plugins.llm_fake import FakeLLM, FakeLLMOptions
from biasbreaker_plugins.quoted import block, blocks, check
from biasbreaker_plugins.scorers.decision import DecisionScorer

DATA = Path(__file__).resolve().parents[2] / "core" / "biasbreaker" / "data" / "bbq"
N_CONTEXTS = 240
K = R = 16
# Group preference of the biased step (the fake's `weights` option): every BBQ Religion and
# Sexual_orientation group the fake knows gets a weight, so the step prefers some groups to
# others in every context. 1 is neutral.
WEIGHTS = {
    "christian": 20.0, "catholic": 0.1, "protestant": 10.0, "mormon": 0.2, "muslim": 0.05,
    "jewish": 5.0, "hindu": 0.5, "buddhist": 2.0, "sikh": 0.3, "atheist": 50.0,
    "straight": 20.0, "gay": 0.1, "lesbian": 0.2, "bisexual": 5.0, "pansexual": 0.3,
    "asexual": 3.0,
}  # fmt: skip
TERMS = TermSet.load(axes=["religion", "sexual-orientation"])


def contexts() -> list[str]:
    """N_CONTEXTS distinct BBQ questions (context, question, three options), seeded order."""
    items: list[BBQItem] = []
    for name in ("preds_Religion.jsonl", "preds_Sexual_orientation.jsonl"):
        items += load_bbq(DATA / name)
    unique = {(it.context, it.question): it for it in items}
    chosen = list(unique.values())
    random.Random(0).shuffle(chosen)
    return [
        f"{it.context}\n{it.question}\n"
        f"A. {it.answers[0]}\nB. {it.answers[1]}\nC. {it.answers[2]}\n"
        "Answer with one letter."
        for it in chosen[:N_CONTEXTS]
    ]


def answering_step(client: LLMClient) -> Callable[[str], Awaitable[str]]:
    async def step(prompt: str) -> str:
        request = with_current_sample(LLMRequest.chat(prompt, temperature=0.7))
        return (await client.complete(request)).text

    return step


async def probe_all(dial: float, prompts: list[str]) -> list[ProbeResult]:
    client = FakeLLM(FakeLLMOptions(bias=dial, weights=WEIGHTS), seed=3)
    step = answering_step(client)
    generator = CounterfactualGenerator(TERMS, seed=5)
    probe = Probe(
        DecisionScorer(), generator=generator, k=K, r=R, seed=5, bootstrap=0, max_concurrency=64
    )
    results = []
    for i, prompt in enumerate(prompts):
        output = await step(prompt)
        results.append(await probe.probe(step, prompt, output, step_id=f"bbq:{i}"))
    return results


@pytest.fixture(scope="module")
def runs() -> dict[float, list[ProbeResult]]:
    prompts = contexts()
    assert len(set(prompts)) == N_CONTEXTS >= 200
    return {dial: asyncio.run(probe_all(dial, prompts)) for dial in (0.0, 0.5, 1.0)}


def scores(results: list[ProbeResult]) -> list[float]:
    assert all(r.status == "scored" for r in results)
    return [r.score for r in results if r.score is not None]


def test_unbiased_step_scores_within_the_noise_floor(runs: dict[float, list[ProbeResult]]) -> None:
    unbiased = runs[0.0]
    local = scores(unbiased)
    floor = mean([r.parts["decision"].same_group for r in unbiased])
    raw = mean([r.parts["decision"].counterfactual for r in unbiased])
    assert floor > 0.6  # answers vary from sample to sample ...
    assert raw == floor  # ... and the raw gap is exactly that noise
    assert all(s == 0.0 for s in local)  # the local score is exactly 0 for every context
    assert all(r.parts["decision"].excess == 0.0 for r in unbiased)


@pytest.mark.parametrize("dial", [0.5, 1.0])
def test_probe_tells_biased_from_unbiased(
    runs: dict[float, list[ProbeResult]], dial: float
) -> None:
    biased, unbiased = scores(runs[dial]), scores(runs[0.0])
    assert auroc(biased, unbiased) >= 0.95
    assert mean(biased) > 0.05


def test_cost_is_k_plus_r_calls_per_probed_step(runs: dict[float, list[ProbeResult]]) -> None:
    for results in runs.values():
        assert all(r.calls + r.cache_hits == K + R for r in results)


def test_docs_detection_quotes_the_measured_table(runs: dict[float, list[ProbeResult]]) -> None:
    """docs/detection.md §6's table of this run is the passage measured here, word for word."""
    unbiased = runs[0.0]
    zero = sum(1 for s in scores(unbiased) if s == 0.0)
    floor = mean([r.parts["decision"].same_group for r in unbiased])
    raw = mean([r.parts["decision"].counterfactual for r in unbiased])
    rows = [
        f"| dial | k = r = {K} ({K + R} calls per probed step; the test) |",
        "|---|---|",
        f"| 0 | {'every one' if zero == N_CONTEXTS else zero} of the {N_CONTEXTS} contexts "
        f"scores exactly 0; same-group floor {floor:.3f}"
        + (" = raw counterfactual divergence |" if raw == floor else f", raw {raw:.3f} |"),
    ]
    for dial in (0.5, 1.0):
        biased = scores(runs[dial])
        rows.append(
            f"| {dial} | AUROC vs dial 0: {auroc(biased, scores(unbiased)):.3f} (mean score "
            f"{mean(biased):.3f}) |"
        )
    label = f"probe on the fake LLM: {N_CONTEXTS} BBQ contexts, k = r = {K}"
    doc = (Path(__file__).resolve().parents[2] / "docs" / "detection.md").read_text("utf-8")
    assert label in blocks(doc)
    assert check(block(label, "\n".join(rows)), doc) == []
