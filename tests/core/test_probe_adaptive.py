"""Adaptive probing (issue 15 item 2): a first stage of the full draw, the rest when it is not clean.

What the tests pin down: a clean step makes exactly the first stage's calls; a step that is not
clean makes exactly the full probe's, the first stage being part of them, with the full probe's
result; a forced full probe is the full probe; the rotation advances by the variants run, and a
node biased against one group is still detected within ``ceil((N − 1) · A / first)`` probes;
without adaptive probing nothing changes (no field, the same result); bad settings are refused
with the field, the value and the fix.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from pathlib import Path
from typing import Any

import pytest

from biasbreaker.errors import ConfigError, InputError
from biasbreaker.kernel import Kernel
from biasbreaker.probe import CounterfactualGenerator, Probe, ProbeResult
from biasbreaker.probe.adaptive import FIRST_STAGE, FULL_PROBE, Adaptive, report_note
from biasbreaker.probe.budget import BudgetExceeded, BudgetLimits, ProbeBudget
from biasbreaker.probe.probe import build_probe
from biasbreaker.probe.scoring import Scorer

TEXT = "The applicant is a Christian teacher. Approve the raise?"
SEED = 7


class Exact(Scorer):
    """1 when two outputs differ, else 0 (a decision scorer without parsing)."""

    name = "exact"
    compares_neutralised = False

    def divergence(self, a: list[str], b: list[str]) -> list[float]:
        return [float(x != y) for x, y in zip(a, b, strict=True)]


class Counted:
    """A step that denies when its input names ``group`` (religion), counting its calls."""

    def __init__(self, group: str | None = None) -> None:
        self.group = group
        self.calls: list[tuple[str, int]] = []
        self.detector = CounterfactualGenerator(seed=SEED)

    def __call__(self, text: str, sample: int = 0) -> str:
        self.calls.append((text, sample))
        named = {d.groups[0] for d in self.detector.detect(text) if len(d.groups) == 1}
        return "deny" if self.group in named else "approve"


def probe(adaptive: Adaptive | None = None, **kw: Any) -> Probe:
    return Probe(Exact(), k=4, r=2, seed=SEED, bootstrap=0, language=None, adaptive=adaptive, **kw)


def run(p: Probe, step: Counted, text: str = TEXT, **kw: Any) -> ProbeResult:
    out = step(text)
    step.calls.clear()
    return p.probe_sync(step, text, out, step_name="node", **kw)


@pytest.mark.parametrize("origin", [None, "thread-1/node", "t9/node"])
def test_a_clean_step_makes_exactly_the_first_stage_calls(origin: str | None) -> None:
    # from any origin (a thread's, as the graph adapter passes): the first stage is the
    # full draw's prefix there too
    for first in (1, 2, 3):
        step = Counted()
        result = run(probe(Adaptive(first)), step, coverage={}, origin=origin)
        assert result.stage == FIRST_STAGE
        assert (result.k, result.r) == (first, min(2, first))
        # the first `first` variants and resamples 1..min(r, first), nothing else
        full = run(probe(), Counted(), coverage={}, origin=origin)
        assert [v.groups for v in result.variants] == [v.groups for v in full.variants[:first]]
        assert sorted(s for _, s in step.calls) == sorted(
            [1 + (j % 2) for j in range(first)] + list(range(1, min(2, first) + 1))
        )
        assert result.calls == len(step.calls) == first + min(2, first)
        assert result.stage_reason.startswith("adaptive: stopped after the first stage")


def test_a_step_that_flips_in_the_first_stage_gets_the_full_probe() -> None:
    full_p = probe()
    head = full_p.generator.generate(TEXT, 1, coverage={})
    target = head.variants[0].mapping.groups[0][1]  # the group the first variant moves into
    full_step, step = Counted(target), Counted(target)
    full = run(full_p, full_step)
    result = run(probe(Adaptive(1)), step)
    assert result.stage == FULL_PROBE
    assert "the first stage scored 1 > stop 0" in result.stage_reason
    # exactly the full probe's calls (the first stage's among them), and its result
    assert sorted(step.calls) == sorted(full_step.calls)
    assert (result.calls, result.cache_hits) == (full.calls, full.cache_hits)
    plain = {k: v for k, v in result.to_dict().items() if k not in ("stage", "stage_reason")}
    assert plain == full.to_dict()
    assert result.coverage == full.coverage


def test_a_forced_full_probe_is_the_full_probe_and_says_why() -> None:
    step, full_step = Counted(), Counted()
    result = run(probe(Adaptive(1)), step, full="the breaker is in WARNING")
    full = run(probe(), full_step)
    assert result.stage == FULL_PROBE
    assert result.stage_reason == "adaptive: full probe, the breaker is in WARNING"
    assert step.calls == full_step.calls
    plain = {k: v for k, v in result.to_dict().items() if k not in ("stage", "stage_reason")}
    assert plain == full.to_dict()


def test_without_adaptive_probing_the_result_has_no_stage_and_full_is_ignored() -> None:
    result = run(probe(), Counted(), full="the breaker is in WARNING")
    assert result.stage == 0
    assert "stage" not in result.to_dict()
    assert result.to_dict() == run(probe(), Counted()).to_dict()


def test_the_stage_round_trips_through_to_dict() -> None:
    result = run(probe(Adaptive(1)), Counted())
    data = result.to_dict()
    assert (data["stage"], data["stage_reason"]) == (FIRST_STAGE, result.stage_reason)
    assert ProbeResult.from_dict(data) == result


def test_a_stopped_probe_advances_the_rotation_by_its_first_stage_only() -> None:
    p = probe(Adaptive(1))
    seen = []
    coverage: dict[str, int] = {}
    for _ in range(9):  # religion: N = 10 groups, nine shifts
        result = run(p, Counted(), coverage=coverage)
        coverage = dict(result.coverage)
        seen.append(result.variants[0].groups[0][1])
    assert coverage == {"religion": 9, "religion/christian": 9}
    assert len(set(seen)) == 9  # every other group once, none skipped


@pytest.mark.parametrize("first", [1, 2])
def test_a_node_biased_against_one_group_is_detected_within_the_bound(first: int) -> None:
    groups = CounterfactualGenerator(seed=SEED).rotation_order("religion")
    bound = math.ceil((len(groups) - 1) * 1 / first)  # one axis named
    worst = 0
    for target in groups:
        if target == "christian":  # the input's own group: not a counterfactual
            continue
        p = probe(Adaptive(first))
        coverage: dict[str, int] = {}
        for n in range(1, bound + 1):
            result = run(p, Counted(target), coverage=coverage)
            coverage = dict(result.coverage)
            if result.score == 1.0:
                assert result.stage == FULL_PROBE  # the detecting probe is the full one
                worst = max(worst, n)
                break
        else:
            pytest.fail(f"a node against {target} was not detected within {bound} probes")
    assert worst == bound  # the bound is reached, not only respected


def test_the_step_bound_of_a_budget_is_checked_against_the_full_draw() -> None:
    budget = ProbeBudget(BudgetLimits(max_calls_per_step=3))
    step = Counted()
    with pytest.raises(BudgetExceeded, match="needs 6 re-runs"):
        run(probe(Adaptive(1), budget=budget), step)
    assert step.calls == []  # held before any re-run
    assert budget.calls == 0


def test_a_second_stage_is_charged_to_the_run_budget() -> None:
    p = probe(Adaptive(1), budget=ProbeBudget(BudgetLimits(max_calls_per_run=100)))
    head = p.generator.generate(TEXT, 1, coverage={})
    result = run(p, Counted(head.variants[0].mapping.groups[0][1]))
    assert p.budget is not None
    assert result.stage == FULL_PROBE
    assert p.budget.calls == result.calls == 6


def test_a_generator_whose_first_stage_is_not_the_full_draws_prefix_fails_closed() -> None:
    class Shuffled(CounterfactualGenerator):
        def generate(self, payload: Any, k: int, **kw: Any) -> Any:
            out = super().generate(payload, k, **kw)
            if k == 1:  # the first stage alone draws another variant than the full draw
                return (
                    super()
                    .generate(payload, 2, **kw)
                    .__class__(
                        out.status,
                        out.detections,
                        super().generate(payload, 2, **kw).variants[1:],
                        coverage=out.coverage,
                    )
                )
            return out

    p = Probe(
        Exact(), generator=Shuffled(seed=SEED), k=4, r=2, bootstrap=0, language=None,
        adaptive=Adaptive(1),
    )  # fmt: skip
    with pytest.raises(Exception, match="first stage would not be part of the full probe"):
        run(p, Counted())


@pytest.mark.parametrize(
    ("kw", "field"),
    [({"first": 0}, "adaptive first=0"), ({"stop_below": 1.0}, "adaptive stop_below=1.0")],
)
def test_bad_adaptive_arguments_are_refused(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError, match=field):
        Adaptive(**kw)


def test_a_first_stage_of_every_variant_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        Kernel.load(cwd=tmp_path, overrides={"probe": {"adaptive": True, "adaptive_first": 4}})
    text = str(err.value)
    assert "adaptive_first=4 is not below k=4" in text
    assert "set adaptive_first to at most 3" in text
    # off, the same value is harmless
    Kernel.load(cwd=tmp_path, overrides={"probe": {"adaptive": False, "adaptive_first": 4}})


def test_with_k_1_the_fix_is_to_raise_k_not_an_impossible_first_stage(tmp_path: Path) -> None:
    # a new user's finding: the advice was "at most 0", which is itself refused
    with pytest.raises(ConfigError) as err:
        Kernel.load(cwd=tmp_path, overrides={"probe": {"adaptive": True, "k": 1}})
    text = " ".join(str(err.value).split())
    assert "adaptive_first=1 is not below k=1" in text
    assert "raise k to 2 or more" in text and "at most 0" not in text


@pytest.mark.parametrize(("value", "field"), [(1.0, "adaptive_stop"), (0, "adaptive_first")])
def test_out_of_range_settings_name_the_field(tmp_path: Path, value: float, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        Kernel.load(cwd=tmp_path, overrides={"probe": {"adaptive": True, field: value}})


def test_the_configured_probe_is_adaptive_only_when_asked(tmp_path: Path) -> None:
    on = Kernel.load(
        cwd=tmp_path,
        overrides={"probe": {"adaptive": True, "adaptive_first": 2, "adaptive_stop": 0.05}},
    )
    assert build_probe(on).adaptive == Adaptive(2, 0.05)
    assert build_probe(Kernel.load(cwd=tmp_path)).adaptive is None


def test_the_report_says_when_adaptive_probing_is_on() -> None:
    assert report_note({"adaptive": False, "adaptive_first": 1, "adaptive_stop": 0.0}) == ""
    note = report_note({"adaptive": True, "adaptive_first": 2, "adaptive_stop": 0.05})
    assert "**Adaptive probing on**" in note
    assert "2 rotation variant(s)" in note
    assert "above 0.05" in note


def test_speculative_start_runs_the_first_stage_only() -> None:
    """``start`` (speculative probing) starts the first stage; ``finish`` the rest if needed."""
    p = probe(Adaptive(1))
    step = Counted()
    drawn = p.draw(step, TEXT, step_name="node")
    assert not isinstance(drawn, ProbeResult)

    async def go() -> tuple[int, ProbeResult]:
        reruns = p.start(drawn)
        started = len(reruns.todo)
        return started, await p.finish(drawn, reruns, step(TEXT))

    started, result = asyncio.run(go())
    assert started == 2
    assert result.stage == FIRST_STAGE


def test_a_repairs_recheck_is_the_full_probe() -> None:
    """The re-check measures a repair with every variant, never a first stage that stops."""
    from biasbreaker.breaker import freeze
    from biasbreaker.intervention.runner import ProbeRechecker
    from biasbreaker.types import BreakerState, InterventionContext, Thresholds

    calls: list[int] = []

    async def node(value: str, sample: int = 0) -> str:
        calls.append(sample)
        return "approve"

    async def repair(output: Any, task: Any = None) -> Any:
        return output

    context = InterventionContext(
        step=5,
        node="writer",
        state=BreakerState.NORMAL,
        fast=0.45,
        slow=0.2,
        mixing_ratio=0.9,
        thresholds=Thresholds(tau_enter=0.3, tau_exit=0.2, tau_warn=0.15, kappa=0.05),
        local_scores={"writer": 0.5},
        weights={"writer": 1.0},
        attempt=1,
        frozen_payload=freeze("approve"),
        seed=11,
        step_input=freeze(TEXT),
    )
    check = asyncio.run(
        ProbeRechecker(probe(Adaptive(1)), {"writer": node}).recheck(context, repair, "approve")
    )
    assert check.detail == "probe k=4 r=2, 6 step calls"  # the full probe, not k=1 r=1
    assert len(calls) == 6


def religion_prompt(group: str) -> str:
    """An input naming ``group`` of religion alone (a term row every group has a form in)."""
    axis = CounterfactualGenerator(seed=SEED).terms.axis("religion")
    for row in axis.rows:
        form = row.form(group)
        if form is not None and all(row.form(g) is not None for g in axis.groups):
            return f"The applicant is a {form} teacher. Approve the raise?"
    raise AssertionError(f"no term row of religion names {group!r}")


@pytest.mark.parametrize("first", [1, None])
def test_a_thread_cycling_six_religions_reaches_the_denied_group_within_the_bound(
    first: int | None,
) -> None:
    """The trial's thread: inputs name six religions in turn, the node denies Muslims only.

    With the rotation kept per axis, its shifts cycled with the inputs and some cycles never
    moved an input to "Muslim" (8 of the 84 six-group cycles in 90 probes at ``first = 1``).
    Kept per mentioned group, each group's ``N − 1`` shifts are walked by the probes naming
    it, so the first group of the cycle reaches "Muslim" within ``ceil((N − 1) / first)`` of
    its probes: probe ``6 · (bound − 1) + 1`` of the thread at the latest.
    """
    groups = CounterfactualGenerator(seed=SEED).terms.axis("religion").groups
    per_probe = first if first is not None else 4
    bound = math.ceil((len(groups) - 1) / per_probe)
    limit = 6 * (bound - 1) + 1
    others = [g for g in groups if g != "muslim"]
    for cycle in itertools.combinations(others, 6):
        p = probe(Adaptive(first) if first is not None else None)
        coverage: dict[str, int] = {}
        for n in range(1, limit + 1):
            result = run(
                p, Counted("muslim"), text=religion_prompt(cycle[(n - 1) % 6]), coverage=coverage
            )
            coverage = dict(result.coverage)
            if result.score == 1.0:
                break
        else:
            pytest.fail(f"the cycle {cycle} never reached 'muslim' within {limit} probes")
        assert set(coverage) <= {"religion"} | {f"religion/{g}" for g in cycle}
