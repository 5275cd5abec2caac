"""Speculative probing: draw from the input, start the re-runs, score once the output is in.

``Probe.draw`` + ``Probe.start`` + ``Probe.finish`` must give what ``Probe.probe`` gives for
the same step, input and output (result, cache hits, rotation), whenever the step's own call
ends relative to its re-runs; and an output or a re-run that fails must fail as it does there.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

import pytest

from biasbreaker.errors import ProbeError
from biasbreaker.probe import CounterfactualGenerator, Probe, ProbeResult

GEN = CounterfactualGenerator(seed=3)
PROMPT = "He applied for the analyst job. Should we hire him?"
PROMPTS = [
    PROMPT,
    "Ms. Garcia, a Muslim nurse aged 64, asks for the night shift.",
    PROMPT,  # the same input again: the resamples come from the cache
    "Summarise the quarterly figures.",  # not applicable
    "Mr. John Carter and his wife ask for a loan.",
]


class ExactScorer:
    name = "exact"
    compares_neutralised = True

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        return [0.0 if a == b else 1.0 for a, b in zip(originals, counterfactuals, strict=True)]


async def step(prompt: str, sample: int = 0) -> str:
    """Biased by gender, noisy by sample, slow enough that the re-runs overlap."""
    await asyncio.sleep(0.001 * random.Random(f"{prompt}:{sample}").random())
    verdict = "hire" if " him" in prompt or prompt.startswith(("He ", "Mr.")) else "reject"
    return f"{verdict} ({sample % 2})"


def _probe(**kw: Any) -> Probe:
    return Probe(ExactScorer(), generator=GEN, k=4, r=2, bootstrap=50, seed=7, **kw)


async def _sequential(probe: Probe, prompts: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    for n, prompt in enumerate(prompts):
        result = await probe.probe(step, prompt, await step(prompt), step_id=f"s{n}")
        out.append(result.to_dict())
    return out


async def _speculative(probe: Probe, prompts: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    for n, prompt in enumerate(prompts):
        drawn = probe.draw(step, prompt, step_id=f"s{n}")
        if isinstance(drawn, ProbeResult):
            out.append(drawn.to_dict())
            continue
        reruns = probe.start(drawn)
        output = await step(prompt)  # the step's own call, beside its re-runs
        out.append((await probe.finish(drawn, reruns, output)).to_dict())
    return out


@pytest.mark.parametrize("cache_size", [4096, 0])
def test_speculative_results_equal_sequential_ones(cache_size: int) -> None:
    sequential = _probe(cache_size=cache_size)
    speculative = _probe(cache_size=cache_size)
    expected = asyncio.run(_sequential(sequential, PROMPTS))
    got = asyncio.run(_speculative(speculative, PROMPTS))
    assert got == expected
    assert [r["status"] for r in got] == [
        "scored",
        "scored",
        "scored",
        "not_applicable",
        "scored",
    ]
    assert got[2]["cache_hits"] > got[0]["cache_hits"] or cache_size == 0
    assert list(speculative._cache) == list(sequential._cache)  # same keys, same LRU order


def test_the_output_answers_a_call_with_its_own_key() -> None:
    """With r = 0 every call runs at sample 0: a variant equal to the input is the output."""
    probe = _probe()
    drawn = probe.draw(step, PROMPT, step_id="s")
    assert not isinstance(drawn, ProbeResult)
    doubled = type(drawn)(
        **{
            **drawn.__dict__,
            "calls": (*drawn.calls, type(drawn.calls[0])(drawn.original_key, PROMPT, 0, "own")),
        }
    )
    reruns = asyncio.run(_started(probe, doubled))
    assert drawn.original_key not in {c.key for c in reruns.todo}
    assert reruns.hits == 1 + len(drawn.calls) - len({c.key for c in drawn.calls})


async def _started(probe: Probe, drawn: Any) -> Any:
    reruns = probe.start(drawn)
    await reruns.cancel()
    return reruns


def test_an_unreadable_output_raises_as_sequential_and_cancels_the_reruns() -> None:
    started: list[int] = []
    finished: list[int] = []

    async def slow(prompt: str, sample: int = 0) -> str:
        started.append(sample)
        await asyncio.sleep(0.5)
        finished.append(sample)
        return "x"

    async def both() -> tuple[str, str]:
        bad = float("nan")
        with pytest.raises(ProbeError) as seq:
            await _probe().probe(slow, PROMPT, bad, step_id="s")
        assert started == []  # sequential: nothing re-run for an unreadable output
        probe = _probe()
        drawn = probe.draw(slow, PROMPT, step_id="s")
        assert not isinstance(drawn, ProbeResult)
        reruns = probe.start(drawn)
        await asyncio.sleep(0.01)
        with pytest.raises(ProbeError) as spec:
            await probe.finish(drawn, reruns, bad)
        assert probe._cache == {}  # nothing remembered
        return str(seq.value), str(spec.value)

    seq, spec = asyncio.run(both())
    assert seq == spec
    assert started and not finished


def test_a_failing_rerun_fails_closed_with_the_sequential_reason() -> None:
    async def flaky(prompt: str, sample: int = 0) -> str:
        if sample == 2:
            raise RuntimeError("backend down")
        return "hire"

    async def both() -> tuple[str, str]:
        with pytest.raises(ProbeError) as seq:
            await _probe().probe(flaky, PROMPT, "hire", step_id="s")
        probe = _probe()
        drawn = probe.draw(flaky, PROMPT, step_id="s")
        assert not isinstance(drawn, ProbeResult)
        reruns = probe.start(drawn)
        with pytest.raises(ProbeError) as spec:
            await probe.finish(drawn, reruns, "hire")
        return str(seq.value), str(spec.value)

    seq, spec = asyncio.run(both())
    assert seq == spec
    assert "backend down" in spec and "fails closed" in spec


def test_reruns_on_another_threads_loop() -> None:
    """A synchronous caller runs the re-runs on a helper loop and scores on its own."""
    import threading

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        expected = asyncio.run(_sequential(_probe(), [PROMPT]))[0]
        probe = _probe()

        async def score() -> dict[str, Any]:
            drawn = probe.draw(step, PROMPT, step_id="s0")
            assert not isinstance(drawn, ProbeResult)
            reruns = probe.start(drawn, loop)
            return (await probe.finish(drawn, reruns, await step(PROMPT))).to_dict()

        assert asyncio.run(score()) == expected
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_scanned_texts_are_kept_bounded_and_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    """The finder keeps the hits of recent texts (a probe scans its input once per variant)."""
    import biasbreaker.probe.mentions as mentions

    finder = CounterfactualGenerator(seed=3)._finder
    monkeypatch.setattr(mentions, "SCANNED", 3)
    fresh = mentions.MentionFinder(finder.terms, finder.axes)
    first = fresh.scan(PROMPT)
    first.clear()  # a caller's change never reaches the kept hits
    assert fresh.scan(PROMPT) == fresh._scan(PROMPT) != []
    assert fresh._scanned.cache_info().hits == 1
    for n in range(10):
        fresh.scan(f"{PROMPT} {n}")
    assert fresh._scanned.cache_info().currsize == 3
    kept = fresh._scanned.cache_info()
    assert fresh.scan("x" * (mentions.SCANNED_CHARS + 1)) == []
    assert fresh._scanned.cache_info() == kept  # a long text is scanned, never kept
