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
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from biasbreaker.metrics.stats import auroc, mean
from biasbreaker.probe import ProbeResult
from biasbreaker_plugins.quoted import block, blocks, check


def _study() -> ModuleType:
    """docs/studies/probe_sizes.py, whose functions build the contexts, the step and the probe."""
    path = Path(__file__).resolve().parents[2] / "docs" / "studies" / "probe_sizes.py"
    spec = importlib.util.spec_from_file_location("probe_sizes", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


STUDY = _study()
N_CONTEXTS = STUDY.N_CONTEXTS
K = R = 16


@pytest.fixture(scope="module")
def runs() -> dict[float, list[ProbeResult]]:
    prompts = STUDY.contexts()
    assert len(set(prompts)) == N_CONTEXTS >= 200
    return {dial: asyncio.run(STUDY.probe_all(dial, prompts, K)) for dial in (0.0, 0.5, 1.0)}


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
