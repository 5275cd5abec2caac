"""The probe: estimator, sample indices, caching, concurrency, sampling, fail-closed, results."""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections.abc import Sequence
from typing import Any

import pytest

from biasbreaker.errors import InputError, ProbeError, ScoreError
from biasbreaker.llm import LLMRequest
from biasbreaker.metrics.stats import mean
from biasbreaker.probe import (
    CounterfactualGenerator,
    Probe,
    ProbeResult,
    current_sample,
    with_current_sample,
)


class ExactScorer:
    """0 when the texts are equal, 1 otherwise (compares mapped-back text)."""

    name = "exact"
    compares_neutralised = True

    def __init__(self) -> None:
        self.calls = 0

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        self.calls += 1
        return [0.0 if a == b else 1.0 for a, b in zip(originals, counterfactuals, strict=True)]


class LengthScorer:
    """|len(a) - len(b)| / 100 on raw text: a scorer whose value the test can recompute."""

    name = "length"
    compares_neutralised = False

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        return [
            min(1.0, abs(len(a) - len(b)) / 100)
            for a, b in zip(originals, counterfactuals, strict=True)
        ]


GEN = CounterfactualGenerator(seed=3)
PROMPT = "He applied for the analyst job. Should we hire him?"


def hiring_step(prompt: str, sample: int = 0) -> str:
    """Deterministic and gender-biased: hires men, rejects women; ignores the sample."""
    return "Decision: hire" if " him" in prompt or prompt.startswith("He ") else "Decision: reject"


def test_biased_deterministic_step_scores_one() -> None:
    probe = Probe(ExactScorer(), generator=GEN, k=3, r=2, bootstrap=0)
    result = probe.probe_sync(hiring_step, PROMPT, hiring_step(PROMPT))
    assert result.status == "scored"
    assert result.score == 1.0
    parts = result.parts["exact"]
    assert (parts.counterfactual, parts.same_group, parts.excess) == (1.0, 0.0, 1.0)
    assert result.axes == ("gender",)


def test_no_protected_term_is_not_applicable_and_calls_nothing() -> None:
    calls: list[Any] = []

    def step(x: str) -> str:
        calls.append(x)
        return x

    probe = Probe(ExactScorer(), generator=GEN)
    result = probe.probe_sync(step, "Summarise the quarterly figures.", "Revenue rose.")
    assert result.status == "not_applicable"
    assert result.score is None
    assert result.calls == 0
    assert calls == []
    assert "fairness through unawareness" in result.reason


def test_sample_index_reaches_the_step_as_keyword_and_context_variable() -> None:
    seen: list[tuple[str, int, int]] = []

    def step(prompt: str, sample: int) -> str:
        seen.append((prompt, sample, current_sample()))
        return "ok"

    probe = Probe(ExactScorer(), generator=GEN, k=4, r=2, bootstrap=0)
    result = probe.probe_sync(step, PROMPT, "ok")
    assert all(s == ctx for _, s, ctx in seen)
    originals = sorted(s for p, s, _ in seen if p == PROMPT)
    variants = [s for p, s, _ in seen if p != PROMPT]
    assert originals == [1, 2]  # the resamples; sample 0 is the guarded call, not repeated
    assert sorted(variants) == [1, 2]  # 4 identical gender variants at 1, 2, 1, 2: 2 cached
    assert result.calls == 4
    assert result.cache_hits == 2
    assert [v.sample for v in result.variants] == [1, 2, 1, 2]
    assert current_sample() == 0


def test_with_current_sample_forwards_the_index() -> None:
    async def step(prompt: str) -> str:
        request = with_current_sample(LLMRequest.chat(prompt, temperature=0.7))
        return f"{request.sample}"

    probe = Probe(LengthScorer(), generator=GEN, k=2, r=3, bootstrap=0)
    result = probe.probe_sync(step, PROMPT, "0")
    assert result.calls == 5  # 3 resamples + 2 variants
    assert [v.sample for v in result.variants] == [1, 2]


def blind_step(prompt: str, sample: int) -> str:
    """Group-blind but random per sample: its choice ignores who the prompt is about."""
    masked = str(GEN.neutralise(prompt))
    return random.Random(f"{masked}:{sample}").choice(["hire", "reject", "interview"])


def test_group_blind_seeded_step_scores_exactly_zero_above_a_real_floor() -> None:
    probe = Probe(ExactScorer(), generator=GEN, k=6, r=4, bootstrap=0)
    scores, floors = [], []
    for i in range(20):
        prompt = f"{PROMPT} Reference {i}."
        result = probe.probe_sync(blind_step, prompt, blind_step(prompt, 0))
        assert result.parts["exact"].excess == 0.0
        scores.append(result.score)
        floors.append(result.parts["exact"].same_group)
    assert scores == [0.0] * 20
    assert mean(floors) > 0.3  # the resamples really differ: there is noise to subtract


def test_score_equals_the_estimator_computed_by_hand() -> None:
    outputs: dict[tuple[str, int], str] = {}

    def step(prompt: str, sample: int) -> str:
        text = "x" * (len(prompt) % 7 + 10 * sample + (5 if "She" in prompt else 0))
        outputs[(prompt, sample)] = text
        return text

    k, r = 3, 2
    probe = Probe(LengthScorer(), generator=GEN, k=k, r=r, bootstrap=0)
    y0 = step(PROMPT, 0)
    result = probe.probe_sync(step, PROMPT, y0)
    variants = GEN.generate(PROMPT, k).variants
    same = [y0] + [outputs[(PROMPT, s)] for s in range(1, r + 1)]

    def d(a: str, b: str) -> float:
        return min(1.0, abs(len(a) - len(b)) / 100)

    cf_rows, floor_rows = [], []
    for j, v in enumerate(variants):
        twin = 1 + j % r
        c = outputs[(str(v.payload), twin)]
        anchors = [a for a in range(r + 1) if a != twin]
        cf_rows.append(mean([d(same[a], c) for a in anchors]))
        floor_rows.append(mean([d(same[a], same[twin]) for a in anchors]))
    expected = mean(cf_rows) - mean(floor_rows)
    parts = result.parts["length"]
    assert parts.counterfactual == pytest.approx(mean(cf_rows))
    assert parts.same_group == pytest.approx(mean(floor_rows))
    assert parts.excess == pytest.approx(expected)
    assert result.score == pytest.approx(min(1.0, max(0.0, expected)))


def test_each_swap_is_scored_apart_and_the_largest_is_the_score() -> None:
    """A step deciding by gender alone, on a person whose name carries race too.

    "Mr. John Carter" draws gender and race variants; the step flips on the gender ones only,
    so the score is the gender variants' flip rate (1), not the rate over all variants.
    """
    prompt = "Loan application from Mr. John Carter; he earns 40k a year."

    def step(text: str, sample: int = 0) -> str:
        return "Decision: deny" if " she " in f" {text} " else "Decision: approve"

    generator = CounterfactualGenerator(seed=0)
    k = 4
    variants = generator.generate(prompt, k).variants
    axes = [v.mapping.axis for v in variants]
    assert set(axes) == {"gender", "race"}  # the premise: both axes are drawn
    probe = Probe(ExactScorer(), generator=generator, k=k, r=1, bootstrap=0)
    result = probe.probe_sync(step, prompt, step(prompt))
    flips = [step(str(v.payload)) != step(prompt) for v in variants]
    by_axis = {
        a: mean([float(f) for f, b in zip(flips, axes, strict=True) if b == a]) for a in axes
    }
    assert by_axis["gender"] == 1.0 and by_axis["race"] == 0.0
    assert mean([float(f) for f in flips]) < 0.5  # the mean over all variants would not trip
    assert result.score == 1.0
    parts = result.parts["exact"]
    assert (parts.counterfactual, parts.same_group) == (1.0, 0.0)


def test_r_zero_compares_with_the_guarded_output_only() -> None:
    probe = Probe(ExactScorer(), generator=GEN, k=2, r=0, bootstrap=0)
    result = probe.probe_sync(hiring_step, PROMPT, hiring_step(PROMPT))
    assert result.parts["exact"].same_group == 0.0
    assert result.score == 1.0
    assert [v.sample for v in result.variants] == [0, 0]


def independent_step_factory(seed: int) -> Any:
    """A real-LLM-like step: every call is a fresh draw (no common random numbers)."""
    rng = random.Random(seed)

    def step(prompt: str) -> str:
        return rng.choice(["hire", "reject", "interview"])

    return step


def test_noise_floor_removes_sampling_divergence_of_an_unbiased_independent_step() -> None:
    step = independent_step_factory(11)
    probe = Probe(ExactScorer(), generator=GEN, k=8, r=4, bootstrap=0)
    excess, naive, scores = [], [], []
    for i in range(300):
        prompt = f"{PROMPT} Case {i}."
        result = probe.probe_sync(step, prompt, step(prompt), step_id=f"case{i}")
        parts = result.parts["exact"]
        excess.append(parts.excess)
        naive.append(parts.counterfactual)
        assert result.score is not None
        scores.append(result.score)
    sd = math.sqrt(sum((e - mean(excess)) ** 2 for e in excess) / (len(excess) - 1))
    se = sd / math.sqrt(len(excess))
    # unbiased: the mean excess is within 3 standard errors of 0 ...
    assert abs(mean(excess)) < 3 * se
    # ... while the raw counterfactual divergence (what LangFair reports) is ~2/3
    assert mean(naive) > 0.6
    # clipping keeps the mean local score well below the raw divergence
    assert mean(scores) < 0.2 * mean(naive)


def test_calls_run_concurrently_within_the_bound() -> None:
    in_flight = 0
    peak = 0

    async def step(prompt: str, sample: int) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return f"{sample}"

    text = "Jamal Washington and his wife met a Muslim doctor from Mexico."
    probe = Probe(LengthScorer(), generator=GEN, k=8, r=4, max_concurrency=3, bootstrap=0)
    result = probe.probe_sync(step, text, "0")
    assert result.calls == 13  # r = 4 resamples, k = 8 variants and the joint variant
    assert peak == 3


def test_failing_step_fails_closed() -> None:
    def step(prompt: str) -> str:
        if "She" in prompt:
            raise TimeoutError("upstream timed out")
        return "fine"

    probe = Probe(ExactScorer(), generator=GEN, k=2, r=1, bootstrap=0)
    with pytest.raises(ProbeError, match="raised TimeoutError.*counterfactual variant 0") as info:
        probe.probe_sync(step, PROMPT, "fine")
    assert isinstance(info.value.__cause__, TimeoutError)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("where", ["guarded", "resample", "variant"])
def test_a_non_finite_number_in_any_output_fails_closed(bad: float, where: str) -> None:
    """NaN/inf is not JSON: it is refused like a set, never scored as the text ``NaN``."""

    def step(prompt: dict[str, Any], sample: int = 0) -> dict[str, Any]:
        poisoned = (where == "resample" and sample == 1 and "He " in prompt["text"]) or (
            where == "variant" and "She " in prompt["text"]
        )
        return {"decision": "hire", "confidence": bad if poisoned else 0.9}

    given = {"text": PROMPT}
    output = {"decision": "hire", "confidence": bad if where == "guarded" else 0.9}
    what = {
        "guarded": "guarded output",
        "resample": "same-group resample 1",
        "variant": "counterfactual variant 0",
    }[where]
    probe = Probe(ExactScorer(), generator=GEN, k=2, r=2, bootstrap=0)
    with pytest.raises(ProbeError, match=f"step 'step', {what}") as info:
        probe.probe_sync(step, given, output, step_name="step")
    message = str(info.value)
    assert "neither text nor JSON" in message and "fails closed" in message
    assert f"payload['confidence'] is {bad!r}" in message  # the path of the bad value


def test_a_non_json_output_names_the_bad_value() -> None:
    probe = Probe(ExactScorer(), generator=GEN, k=2, r=1, bootstrap=0)
    with pytest.raises(ProbeError, match=r"payload\['tags'\] has type set"):
        probe.probe_sync(lambda p: {"tags": {1}}, PROMPT, {"tags": {1}}, step_name="step")


class BadScorer:
    name = "bad"
    compares_neutralised = True

    def __init__(self, value: object) -> None:
        self.value = value

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> Any:
        if isinstance(self.value, Exception):
            raise self.value
        if self.value == "short":
            return [0.0]
        return [self.value] * len(originals)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (float("nan"), "finite and in \\[0, 1\\]"),
        (1.5, "finite and in \\[0, 1\\]"),
        (-0.1, "finite and in \\[0, 1\\]"),
        ("short", "returned 1 divergences"),
        ("x", "returned 'x'"),
        (RuntimeError("model missing"), "raised RuntimeError"),
    ],
)
def test_misbehaving_scorer_fails_closed(value: object, message: str) -> None:
    probe = Probe(BadScorer(value), generator=GEN, k=2, r=1, bootstrap=0)
    with pytest.raises(ProbeError, match=message):
        probe.probe_sync(hiring_step, PROMPT, hiring_step(PROMPT))


def test_probe_rate_is_a_seeded_function_of_the_step_id() -> None:
    a = Probe(ExactScorer(), generator=GEN, probe_rate=0.3, seed=1)
    b = Probe(ExactScorer(), generator=GEN, probe_rate=0.3, seed=1)
    c = Probe(ExactScorer(), generator=GEN, probe_rate=0.3, seed=2)
    ids = [f"node:writer/step:{i}" for i in range(2000)]
    picked = [i for i in ids if a.should_probe(i)]
    assert picked == [i for i in ids if b.should_probe(i)]
    assert picked != [i for i in ids if c.should_probe(i)]
    assert 0.27 < len(picked) / len(ids) < 0.33
    skipped = next(i for i in ids if not a.should_probe(i))
    result = a.probe_sync(hiring_step, PROMPT, "x", step_id=skipped)
    assert (result.status, result.calls, result.score) == ("not_sampled", 0, None)


def test_bootstrap_interval_is_seeded_and_brackets_the_score() -> None:
    text = "Jamal Washington met Emily and a Muslim doctor from Mexico; he thanked her."

    def step(prompt: str, sample: int) -> str:
        return "x" * (len(prompt) + 7 * sample)

    # two persons of different genders and pronouns of neither alone: with the per-person
    # variants on, the probe holds this input (test_probe_per_person.py); here the bootstrap
    results = [
        Probe(LengthScorer(), generator=GEN, k=8, r=2, seed=4, per_person=False).probe_sync(
            step, text, step(text, 0)
        )
        for _ in range(2)
    ]
    assert results[0].ci == results[1].ci
    ci = results[0].ci
    assert ci is not None
    assert results[0].score is not None
    assert ci[0] <= results[0].score <= ci[1]
    single = Probe(LengthScorer(), generator=GEN, k=1, r=2, joint=False)
    assert single.probe_sync(step, text, step(text, 0)).ci is None


def test_result_is_json_serialisable_and_round_trips() -> None:
    probe = Probe([ExactScorer(), LengthScorer()], generator=GEN, k=3, r=2, bootstrap=50)
    result = probe.probe_sync(hiring_step, PROMPT, hiring_step(PROMPT), step_id="s1")
    blob = json.dumps(result.to_dict(), sort_keys=True)
    again = ProbeResult.from_dict(json.loads(blob))
    assert again == result
    assert json.dumps(again.to_dict(), sort_keys=True) == blob


@pytest.mark.parametrize("bad", [7, 1.5, -0.1, math.nan, math.inf, "0.4", True, None])
def test_a_result_with_a_score_outside_the_unit_interval_is_refused(bad: object) -> None:
    probe = Probe(ExactScorer(), generator=GEN, k=2, r=1)
    data = probe.probe_sync(hiring_step, PROMPT, hiring_step(PROMPT), step_id="s1").to_dict()
    with pytest.raises(ScoreError, match="ProbeResult.score"):
        ProbeResult.from_dict({**data, "score": bad})
    with pytest.raises(ScoreError, match=r"ProbeResult.ci\[1\]"):
        ProbeResult.from_dict({**data, "score": 0.5, "ci": [0.1, 2]})
    assert ProbeResult.from_dict({**data, "score": 1}).score == 1.0


def test_several_scorers_combine_by_max_or_mean() -> None:
    for how, expected in (("max", 1.0), ("mean", 0.5)):
        probe = Probe(
            [ExactScorer(), LengthScorer()], generator=GEN, k=2, r=1, combine=how, bootstrap=0
        )

        def step(prompt: str) -> str:
            return "yes" if prompt.startswith("He") else "no!"  # same length, different text

        result = probe.probe_sync(step, PROMPT, step(PROMPT))
        assert result.parts["length"].score == 0.0
        assert result.parts["exact"].score == 1.0
        assert result.score == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 0}, "k=0"),
        ({"r": -1}, "r=-1"),
        ({"probe_rate": 1.5}, "probe_rate"),
        ({"confidence": 1.0}, "confidence"),
        ({"combine": "median"}, "combine"),
        ({"max_concurrency": 0}, "max_concurrency"),
    ],
)
def test_bad_arguments_are_named(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        Probe(ExactScorer(), generator=GEN, **kwargs)


def test_duplicate_scorer_names_are_rejected() -> None:
    with pytest.raises(InputError, match="repeat"):
        Probe([ExactScorer(), ExactScorer()], generator=GEN)


def test_probe_sync_refuses_a_running_loop() -> None:
    async def inside() -> None:
        Probe(ExactScorer(), generator=GEN).probe_sync(hiring_step, PROMPT, "x")

    with pytest.raises(RuntimeError, match="running event loop"):
        asyncio.run(inside())


def test_dict_payloads_and_outputs() -> None:
    def step(state: dict[str, Any]) -> dict[str, Any]:
        verdict = "hire" if "his" in state["note"] else "reject"
        return {"verdict": verdict, "note": state["note"]}

    state = {"note": "Review his file.", "round": 2}
    probe = Probe(ExactScorer(), generator=GEN, k=2, r=1, bootstrap=0)
    result = probe.probe_sync(step, state, step(state))
    assert result.score == 1.0


def test_a_group_named_without_a_possible_variant_is_held_not_not_applicable() -> None:
    # 'DOB 1/1/25' is an age (0, young) with no two-digit mirror: the generator makes no
    # variant; "not applicable" would let a step keyed on it through unscored
    probe = Probe(ExactScorer(), generator=GEN, k=3, r=1, bootstrap=0)
    result = asyncio.run(probe.probe(hiring_step, "DOB 1/1/25, applying for a loan.", "ok"))
    assert result.status == "unreadable"
    assert "'DOB 1/1/25' (age)" in result.reason and "no swap changes" in result.reason
    blind = asyncio.run(probe.probe(hiring_step, "The analyst job is open. Apply?", "ok"))
    assert blind.status == "not_applicable"  # no group named: still not applicable
