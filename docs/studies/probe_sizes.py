"""The probe on the fake LLM by probe size: AUROC of biased against unbiased BBQ contexts.

240 distinct BBQ questions (Religion and Sexual_orientation: context, question, three options),
each answered by a step that asks the seeded fake LLM (``llm_client`` plugin ``fake``,
**simulated**) at temperature 0.7, with a preference weight for every group of both axes
(:data:`WEIGHTS`). The fake masks exactly the words the kernel's swapper detects and draws its
noise from the masked prompt; at dial ``p`` an option wins by Gumbel-max on
``p · log(weight) + noise`` (docs/fake-llm.md), so dial 0 is blind to every variant. The probe
swaps religion and sexual orientation (all their groups) and scores with ``decision``, at
``k = r`` in :data:`SIZES` (``2k`` calls per probed step), seed 5. Each cell is the AUROC of the
scores at that dial against the scores at dial 0 (the share of biased contexts scoring above
the unbiased ones, ties counted half).

``python docs/studies/probe_sizes.py`` writes ``docs/studies/probe_sizes.md`` (about 3 minutes
on two cores); ``--check`` fails when it, or the passage docs/detection.md §6 quotes, differs
from a new measurement (``nox -s study``). ``tests/core/test_probe_detection.py`` measures the
``k = r = 16`` case with these functions and checks its own passage.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from biasbreaker.llm import LLMClient, LLMRequest
from biasbreaker.metrics.bbq import BBQItem, load_bbq
from biasbreaker.metrics.stats import auroc
from biasbreaker.probe import (
    CounterfactualGenerator,
    Probe,
    ProbeResult,
    TermSet,
    with_current_sample,
)
from biasbreaker_plugins.llm_fake import FakeLLM, FakeLLMOptions
from biasbreaker_plugins.quoted import block, study_main
from biasbreaker_plugins.scorers.decision import DecisionScorer

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "core" / "biasbreaker" / "data" / "bbq"
REPORT = Path(__file__).with_suffix(".md")
DOC = ROOT / "docs" / "detection.md"
LABEL = "probe sizes on the fake LLM: 240 BBQ contexts"
N_CONTEXTS = 240
SIZES = (4, 8, 12, 16, 32)
"""The probe sizes measured, ``k = r``."""
DIALS = (0.25, 0.5, 1.0)
"""The biased dials, each compared with dial 0."""
WEIGHTS = {
    "christian": 20.0, "catholic": 0.1, "protestant": 10.0, "mormon": 0.2, "muslim": 0.05,
    "jewish": 5.0, "hindu": 0.5, "buddhist": 2.0, "sikh": 0.3, "atheist": 50.0,
    "straight": 20.0, "gay": 0.1, "lesbian": 0.2, "bisexual": 5.0, "pansexual": 0.3,
    "asexual": 3.0,
}  # fmt: skip
"""The biased step's group preferences (the fake's ``weights``; 1 is neutral): every BBQ
Religion and Sexual_orientation group the fake knows, so the step prefers some groups to
others in every context."""


def contexts() -> list[str]:
    """:data:`N_CONTEXTS` distinct BBQ questions (context, question, three options), seeded."""
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
    """The guarded step: the prompt to ``client`` at temperature 0.7, its text back."""

    async def step(prompt: str) -> str:
        request = with_current_sample(LLMRequest.chat(prompt, temperature=0.7))
        return (await client.complete(request)).text

    return step


async def probe_all(dial: float, prompts: Sequence[str], k: int) -> list[ProbeResult]:
    """The probe's result (``k = r = k``) on every prompt, the step at ``dial``."""
    client = FakeLLM(FakeLLMOptions(bias=dial, weights=WEIGHTS), seed=3)
    step = answering_step(client)
    terms = TermSet.load(axes=["religion", "sexual-orientation"])
    generator = CounterfactualGenerator(terms, seed=5)
    probe = Probe(
        DecisionScorer(), generator=generator, k=k, r=k, seed=5, bootstrap=0, max_concurrency=64
    )
    results = []
    for i, prompt in enumerate(prompts):
        output = await step(prompt)
        results.append(await probe.probe(step, prompt, output, step_id=f"bbq:{i}"))
    return results


def scores(results: Sequence[ProbeResult]) -> list[float]:
    """The local scores (every result must be scored)."""
    if not all(r.status == "scored" for r in results):
        raise AssertionError("a BBQ context was not scored: the measurement is not comparable")
    return [r.score for r in results if r.score is not None]


def table() -> str:
    """The passage: AUROC against dial 0 per probe size and dial."""
    prompts = contexts()
    rows = [
        "| k = r | calls per probed step | " + " | ".join(f"dial {d}" for d in DIALS) + " |",
        "|---|---|" + "---|" * len(DIALS),
    ]
    for k in SIZES:
        unbiased = scores(asyncio.run(probe_all(0.0, prompts, k)))
        cells = [
            f"{auroc(scores(asyncio.run(probe_all(d, prompts, k))), unbiased):.3f}" for d in DIALS
        ]
        rows.append(f"| {k} | {2 * k} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def report() -> str:
    """The report's text: what was measured, then the passage."""
    return "\n".join(
        [
            "# The probe on the fake LLM by probe size",
            "",
            "Generated by `python docs/studies/probe_sizes.py` (see its docstring); "
            "docs/detection.md §6 quotes the passage.",
            "",
            block(LABEL, table()),
            "",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Write the report, or (``--check``) exit 1 naming what differs from it."""
    return study_main(__doc__.splitlines()[0], report, REPORT, DOC, argv)


if __name__ == "__main__":
    sys.exit(main())
