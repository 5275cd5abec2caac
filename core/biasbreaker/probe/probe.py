"""The counterfactual probe: the local bias score ``b_i`` of one guarded step, with a noise floor.

Given a step (a sync or async callable ``input -> output``), the input it was called with and
the output it produced, the probe

1. decides from the seed whether this step is probed at all (``probe_rate``);
1a. identifies the input's language once (:class:`~biasbreaker.probe.language.LanguageGuard`):
   an input in a language the term lists do not cover is *unsupported language*, held for
   review or let through unprobed as configured, never "not applicable";
2. draws ``k`` counterfactual variants of the input (:class:`CounterfactualGenerator`); an
   input without protected mentions is *not applicable*, never "score 0";
3. re-runs the step ``r`` more times on the original input (same-group resamples) and once on
   every variant, concurrently (bounded by ``max_concurrency``), each distinct call once;
4. maps each counterfactual output back to the original groups (for scorers that compare
   neutralised text) and measures divergences with every scorer;
5. reports, per scorer, ``b = clip(D_cf − D_same, 0, 1)`` on each swap's variants apart
   (an axis and the groups it moves the input's people into) and takes the largest, combines
   the scorers (``max`` or ``mean``), and adds a seeded
   bootstrap interval when ``k >= 2``.

With adaptive probing (``adaptive``, :mod:`biasbreaker.probe.adaptive`) step 3 runs in two
stages: the first rotation variants and their twins, then, only when their score is above
the stop bound (or the caller asks for the full probe), the rest of the same draw.

The estimator. Let ``y_0`` be the guarded output, ``y_1…y_r`` the same-group resamples and
``c_1…c_k`` the mapped-back counterfactual outputs. Counterfactual ``j`` is paired with the
resample ``t(j) = 1 + (j mod r)``: it runs with that resample's sample index, and is compared
with the same *anchors*, the other same-group outputs ``A_j = {y_a : a ≠ t(j)}``:

* ``D_cf`` = mean over ``j`` of mean over ``a ∈ A_j`` of ``d(y_a, c_j)``;
* ``D_same`` = mean over ``j`` of mean over ``a ∈ A_j`` of ``d(y_a, y_t(j))``;
* ``b = clip(D_cf − D_same, 0, 1)``,

each over the variants of one swap (an axis and the groups it moves the input's people
into); the step's ``b`` is the largest swap's (the first such swap on a tie), and the scorer's
parts are that swap's. A mean over every variant would dilute an effect on one group by the
others: "Mr. John Carter" carries gender and race, and a step deciding by gender alone flips
on its gender variants only; a step that denies Muslims flips on the variant that makes a
Christian applicant Muslim, not on those that make them Hindu or Jewish.

If the swap has no effect, ``c_j`` and ``y_t(j)`` are two draws of one output distribution,
compared with the same anchors, so the excess has expectation 0 whatever the sampling
temperature (a paired difference). A real LLM draws them independently; a seeded step that
honours the sample index draws them with the same randomness (common random numbers), so for
a group-blind seeded step ``c_j == y_t(j)`` after mapping back and the excess is exactly 0
(Law & Kelton, *Simulation Modeling and Analysis*, §11.2, common random numbers). A real
effect makes the counterfactual outputs farther from the anchors than their same-group twins.
With ``r = 0`` there is no twin and no floor: ``D_cf`` = mean of ``d(y_0, c_j)``, ``D_same =
0``. The need for a same-prompt baseline is detection-anchors §0.2/§5.2: LangFair's
male/female pairs at temperature 1 have ROUGE-L ≈ 0.48 although only a pronoun changed.
Clipping at 0 biases the mean score of an unbiased, independently sampled step slightly
upwards; the unclipped ``excess`` is reported too.

Telling the step which sample it is. During every call the probe sets :func:`current_sample`
and, when the step's signature has a ``sample`` parameter, passes ``sample=`` as a keyword: 0
is the guarded call itself, ``1…r`` the resamples, ``1 + (j mod r)`` counterfactual variant
``j`` (0 when ``r = 0``). An LLM-calling step forwards it with :func:`with_current_sample` into
:attr:`biasbreaker.llm.LLMRequest.sample`, so a seeded or cached client returns different
draws for different resamples, as a real model at temperature > 0 does. A deterministic step
that ignores the index gives ``D_same = 0``: its floor is zero, which is correct for it.

The bootstrap interval resamples the ``k`` paired differences (variant and twin together),
``bootstrap`` times, from a seed derived from the probe's seed and the step id (percentile
interval, Efron & Tibshirani 1993).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import hashlib
import inspect
import itertools
import math
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from biasbreaker.errors import ConfigError, InputError, ProbeError, ScoreError
from biasbreaker.llm import LLMRequest
from biasbreaker.metrics.stats import bootstrap_interval, mean
from biasbreaker.probe.adaptive import (
    FIRST_STAGE,
    FULL_PROBE,
    Adaptive,
    FirstStage,
    first_resamples,
    stop_sentence,
)
from biasbreaker.probe.budget import BudgetLimits, ProbeBudget, StepMeter, metering
from biasbreaker.probe.counterfactual import (
    CounterfactualGenerator,
    CounterfactualMapping,
    CounterfactualSet,
    Unattributed,
    payload_digest,
)
from biasbreaker.probe.fields import opaque_fields, opaque_reason
from biasbreaker.probe.held import held_reason, unswappable_reason
from biasbreaker.probe.language import LanguageGuard
from biasbreaker.probe.mapping import Detection, present_groups, unswapped_keys
from biasbreaker.probe.payloads import KeyClash, describe_path
from biasbreaker.probe.residuals import residual_mentions, residual_reason
from biasbreaker.probe.scoring import (
    Combine,
    Scorer,
    as_text,
    check_divergences,
    check_scorer,
    combine,
)
from biasbreaker.probe.terms import TermSet
from biasbreaker.probe_reruns import RerunCount
from biasbreaker.trace.records import UNSUPPORTED_PROCEEDED
from biasbreaker.types import check_unit_score

if TYPE_CHECKING:
    from biasbreaker.config.sections import ProbeSettings
    from biasbreaker.registry import BuildContext


def no_counterfactual_reason(detections: Sequence[Detection], why: str) -> str:
    """The hold reason for an input that names a group no variant could be made of.

    Args:
        detections: The mentions found (each names its surface and axis).
        why: The generator's reason (no counterpart in another group, or no swap changes
            the payload).
    """
    shown = ", ".join(
        dict.fromkeys(f"{d.surface!r} ({d.axis})" for d in detections if len(d.groups) == 1)
    )
    return (
        f"the probe found {shown} but cannot make a counterfactual: {why}. The step is held "
        "for review; a protected group it cannot swap is never scored as not applicable "
        "(docs/detection.md, 'What the probe cannot swap')"
    )


def key_clash_reason(clash: KeyClash) -> str:
    """The hold reason for an input whose variant would make two of its dict keys one."""
    return (
        f"the probe cannot make a counterfactual of this input: {clash}. It rewrites the "
        "text of dict keys like any other text; the step is held for review. Key the items "
        "by an id and keep the names and groups in their values, or set probe=False for this "
        "step and review its outputs (docs/detection.md, 'Dict keys')"
    )


def unattributed_reason(exc: Unattributed) -> str:
    """The hold reason for an input whose per-person variants cannot be made."""
    return (
        f"the probe cannot make a per-person counterfactual of this input: {exc}. The step "
        "is held for review. Name each person by name and title only (no pronoun or other "
        "term of that axis), or set probe=False for this step and review its outputs "
        "(docs/detection.md, 'Two persons of different groups')"
    )


def unswapped_key_reason(found: Sequence[Detection]) -> str:
    """The hold reason for :func:`~biasbreaker.probe.mapping.unswapped_keys`' mentions."""
    shown = ", ".join(
        dict.fromkeys(f"{d.surface!r} in {describe_path(d.path)} ({d.axis})" for d in found)
    )
    return (
        f"the probe found {shown} but no variant of that axis could rewrite it, so a step "
        "keyed by it would see the same key in every counterfactual. The step is held for "
        "review; key the items by an id and keep the names and groups in their values, or "
        "set probe=False for this step and review its outputs (docs/detection.md, 'Dict keys')"
    )


__all__ = [
    "ROUTE_PART",
    "Drawn",
    "Probe",
    "ProbeResult",
    "Reruns",
    "Routed",
    "ScorerParts",
    "Step",
    "VariantOutcome",
    "build_probe",
    "combined",
    "current_sample",
    "with_current_sample",
]

Step = Callable[..., Any] | Callable[..., Awaitable[Any]]
"""A guarded step: ``step(input) -> output`` or ``async step(input) -> output``; it may also
take a keyword ``sample: int``."""

DEFAULT_LANGUAGE_GUARD = LanguageGuard()
"""English term lists, hold for review, threshold 0.5: what a :class:`Probe` checks by default."""

_SAMPLE: contextvars.ContextVar[int] = contextvars.ContextVar("biasbreaker_probe_sample", default=0)


def current_sample() -> int:
    """The sample index of the step call in progress.

    0 outside the probe and for the original call, ``1…r`` for same-group resamples,
    ``1 + (j mod r)`` for counterfactual variant ``j`` (0 when ``r = 0``).
    """
    return _SAMPLE.get()


def with_current_sample(request: LLMRequest) -> LLMRequest:
    """Return ``request`` with ``sample`` set to :func:`current_sample`.

    Use it in an LLM-calling step so the probe's resamples reach the client::

        async def step(prompt: str) -> str:
            req = with_current_sample(LLMRequest.chat(prompt, temperature=0.7))
            return (await client.complete(req)).text
    """
    return dataclasses.replace(request, sample=current_sample())


@dataclass(frozen=True)
class ScorerParts:
    """One scorer's part of a local score.

    Args:
        counterfactual: ``D_cf``: mean divergence of the counterfactual outputs from their
            anchors, in [0, 1].
        same_group: ``D_same``: mean divergence of the paired same-group resamples from the
            same anchors (the noise floor), in [0, 1]; 0 when ``r = 0``.
        excess: ``counterfactual − same_group``, in [−1, 1] (unclipped).
        score: ``clip(excess, 0, 1)``.
    """

    counterfactual: float
    same_group: float
    excess: float
    score: float


@dataclass(frozen=True)
class VariantOutcome:
    """What one counterfactual variant did.

    Args:
        axis: The swapped axis.
        groups: ``(from, to)`` group pairs.
        names: ``(original, replacement)`` names.
        draw: Which draw of this mapping (0 first).
        sample: The sample index the step ran with.
        divergences: Scorer name → ``(cf, twin)``: mean divergence of this variant's output
            from its anchors, and of its same-group twin from the same anchors.
        person: For a per-person variant, the name key of the one person it moved
            (``"Mary Carter"``; ``"… Yazzie"`` for a person named by a surname alone); empty
            for a variant that moves every mention of its axis. :meth:`ProbeResult.to_dict`
            writes it only when set, so a result without per-person variants keeps its bytes.
    """

    axis: str
    groups: tuple[tuple[str, str], ...]
    names: tuple[tuple[str, str], ...]
    draw: int
    sample: int
    divergences: Mapping[str, tuple[float, float]]
    person: str = ""


UnscoredStatus = Literal["not_applicable", "unsupported_language", "unreadable", "not_sampled"]
"""A :class:`ProbeResult` status that carries no score (the reason says why)."""


@dataclass(frozen=True)
class ProbeResult:
    """The probe's verdict on one step; frozen and JSON-serialisable (:meth:`to_dict`).

    Args:
        status: ``"scored"``, ``"not_applicable"`` (no protected mention in the input:
            fairness through unawareness, not "unbiased"), ``"unsupported_language"`` (the
            input is in a language the term lists do not cover: nothing was drawn or run;
            :attr:`holds` says whether the step goes to review), ``"unreadable"`` (the input
            holds a protected attribute in a structured field the probe cannot vary, such as
            ``{"age": 63}`` or ``{"sex": "F"}`` (:mod:`biasbreaker.probe.fields`), or names
            in text one that no variant can swap, such as pregnancy
            (:data:`~biasbreaker.probe.held.UNSWAPPABLE`), or names one in a dict key
            that a variant would merge with another key or that no variant of its axis
            rewrites (docs/detection.md, "Dict keys"), or still names a swapped person in a
            form the variants left as written, such as ``mcarter@example.com``
            (:func:`~biasbreaker.probe.residuals.residual_mentions`: a partial
            counterfactual): the step is run no more times (for a key or a residual form,
            the variants drawn are dropped), and it is held) or ``"not_sampled"``
            (skipped by ``probe_rate``).
        step: The step's name.
        step_id: The id used for sampling and seeding.
        score: The local score ``b_i`` in [0, 1], or ``None`` unless scored.
        ci: Bootstrap interval ``(low, high)`` of ``score`` at ``confidence``, or ``None``
            (``k < 2`` or bootstrap disabled).
        confidence: The interval's two-sided level.
        parts: Scorer name → its parts (counterfactual, same-group, excess, score).
        combine: How the scorers' scores were combined.
        k: Counterfactual variants run.
        r: Same-group resamples run.
        calls: Step invocations made (cache hits not counted).
        cache_hits: Calls answered from the per-run cache.
        axes: Axes of the variants.
        variants: Per-variant outcomes.
        reason: Why not scored (empty when scored).
        notes: Names the probe swapped on some axes only because their data leave the
            others unknown (:attr:`CounterfactualSet.notes`).
        coverage: Rotation key (``"<axis>/<groups named>"``) → the node's covering-rotation
            position after this probe (keep it per node and pass it as ``coverage=`` to the
            node's next probe; empty when not sampled). See :meth:`Probe.probe`.
        language: The input's language as identified (ISO 639-1): a covered one, an
            unsupported one, or ``"und"`` (undetermined: no language reached the guard's
            threshold, as for a bare name, so the term lists were tried); ``""`` when not
            identified (no language guard, no letter in the input, or not sampled).
        stage: With adaptive probing (:mod:`biasbreaker.probe.adaptive`), where a scored
            probe stopped: :data:`~biasbreaker.probe.adaptive.FIRST_STAGE` (1) or
            :data:`~biasbreaker.probe.adaptive.FULL_PROBE` (2); 0 without adaptive probing
            or when not scored. :meth:`to_dict` writes it (and ``stage_reason``) only when
            set, so a result without adaptive probing keeps its bytes.
        stage_reason: Why it stopped there (:func:`~biasbreaker.probe.adaptive.stop_sentence`);
            empty when ``stage`` is 0.

    Raises:
        ScoreError: ``score`` (or an end of ``ci``) is not a number in [0, 1] (NaN,
            infinite, negative, above 1, a string or a bool), or a scored result has no
            score: a value the breaker and the machine would refuse is refused here, where it
            is made (also by :meth:`from_dict`).
    """

    status: Literal["scored", "not_applicable", "unsupported_language", "unreadable", "not_sampled"]
    step: str
    step_id: str
    score: float | None = None
    ci: tuple[float, float] | None = None
    confidence: float = 0.95
    parts: Mapping[str, ScorerParts] = field(default_factory=dict)
    combine: Combine = "max"
    k: int = 0
    r: int = 0
    calls: int = 0
    cache_hits: int = 0
    axes: tuple[str, ...] = ()
    variants: tuple[VariantOutcome, ...] = ()
    reason: str = ""
    notes: tuple[str, ...] = ()
    coverage: Mapping[str, int] = field(default_factory=dict)
    language: str = ""
    stage: int = 0
    stage_reason: str = ""

    @property
    def holds(self) -> bool:
        """Whether the step must go to review.

        An unreadable input (a protected attribute in a structured field, a mention no
        variant can swap, or a partial counterfactual) always holds. An
        unsupported language holds unless its reason says the configuration lets it
        proceed (:data:`~biasbreaker.trace.records.UNSUPPORTED_PROCEEDED`); any other reason
        holds (fails closed).
        """
        if self.status == "unreadable":
            return True
        return self.status == "unsupported_language" and not self.reason.startswith(
            UNSUPPORTED_PROCEEDED
        )

    def __post_init__(self) -> None:
        if self.score is not None:
            object.__setattr__(self, "score", check_unit_score("ProbeResult.score", self.score))
        elif self.status == "scored":
            raise ScoreError(
                f"ProbeResult.score=None for step {self.step!r} with status 'scored': a scored "
                "result needs a local score in [0, 1]"
            )
        if self.ci is not None:
            low, high = self.ci
            object.__setattr__(
                self,
                "ci",
                (
                    check_unit_score("ProbeResult.ci[0]", low),
                    check_unit_score("ProbeResult.ci[1]", high),
                ),
            )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible data (round-trips through :meth:`from_dict`)."""
        return {
            "status": self.status,
            "step": self.step,
            "step_id": self.step_id,
            "score": self.score,
            "ci": list(self.ci) if self.ci is not None else None,
            "confidence": self.confidence,
            "parts": {k: dataclasses.asdict(v) for k, v in self.parts.items()},
            "combine": self.combine,
            "k": self.k,
            "r": self.r,
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "axes": list(self.axes),
            "variants": [
                {
                    "axis": v.axis,
                    "groups": [list(p) for p in v.groups],
                    "names": [list(p) for p in v.names],
                    "draw": v.draw,
                    "sample": v.sample,
                    "divergences": {s: list(p) for s, p in v.divergences.items()},
                    **({"person": v.person} if v.person else {}),
                }
                for v in self.variants
            ],
            "reason": self.reason,
            "notes": list(self.notes),
            "coverage": dict(self.coverage),
            "language": self.language,
            **({"stage": self.stage, "stage_reason": self.stage_reason} if self.stage else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProbeResult:
        """Rebuild a result from :meth:`to_dict` output.

        Raises:
            KeyError: A field is missing.
        """
        return cls(
            status=data["status"],
            step=data["step"],
            step_id=data["step_id"],
            score=data["score"],
            ci=tuple(data["ci"]) if data["ci"] is not None else None,
            confidence=data["confidence"],
            parts={k: ScorerParts(**v) for k, v in data["parts"].items()},
            combine=data["combine"],
            k=data["k"],
            r=data["r"],
            calls=data["calls"],
            cache_hits=data["cache_hits"],
            axes=tuple(data["axes"]),
            variants=tuple(
                VariantOutcome(
                    axis=v["axis"],
                    groups=tuple((a, b) for a, b in v["groups"]),
                    names=tuple((a, b) for a, b in v["names"]),
                    draw=v["draw"],
                    sample=v["sample"],
                    divergences={s: (p[0], p[1]) for s, p in v["divergences"].items()},
                    person=v.get("person", ""),  # absent unless a per-person variant
                )
                for v in data["variants"]
            ),
            reason=data["reason"],
            notes=tuple(data.get("notes", ())),  # absent from results written before it
            coverage=dict(data.get("coverage", {})),  # likewise
            language=data.get("language", ""),  # likewise
            stage=data.get("stage", 0),  # absent without adaptive probing
            stage_reason=data.get("stage_reason", ""),  # likewise
        )


@dataclass(frozen=True)
class _Call:
    key: tuple[str, str, int]
    payload: Any
    sample: int
    what: str


@dataclass(frozen=True)
class Drawn:
    """A probed step's re-runs, drawn from its input alone (:meth:`Probe.draw`).

    Args:
        step: The guarded step.
        name: The step's name (results and cache keys).
        step_id: The id sampled and seeded with.
        cf_set: The counterfactual variants drawn, with the covering rotation after them.
        language: The input's language as identified (``ProbeResult.language``).
        original_key: The cache key of the step's own output (sample 0).
        calls: Every re-run, resamples first, then one per variant (duplicates included).
        resample_keys: The cache keys of the same-group resamples, sample 1 to ``r``.
        variant_keys: The cache key of each variant's re-run.
        variant_samples: The sample index each variant runs with.
        first: With adaptive probing, the first stage (:meth:`Probe.start` starts it alone);
            ``None`` for a full probe.
        full_reason: With adaptive probing and no first stage, why the full probe runs;
            empty otherwise.
    """

    step: Step
    name: str
    step_id: str
    cf_set: CounterfactualSet
    language: str
    original_key: tuple[str, str, int]
    calls: tuple[_Call, ...]
    resample_keys: tuple[tuple[str, str, int], ...]
    variant_keys: tuple[tuple[str, str, int], ...]
    variant_samples: tuple[int, ...]
    first: FirstStage | None = None
    full_reason: str = ""

    def first_stage(self) -> Drawn:
        """The draw cut to its first stage (itself without one): the calls, keys and variants.

        The re-runs of the first stage are the first ``first.resamples`` of the ``r``
        resamples and the first ``first.variants`` variants, in :attr:`calls` order.
        """
        first = self.first
        if first is None:
            return self
        r = len(self.resample_keys)
        n, m = first.resamples, first.variants
        cf_set = dataclasses.replace(
            self.cf_set, variants=self.cf_set.variants[:m], coverage=dict(first.coverage)
        )
        return dataclasses.replace(
            self,
            cf_set=cf_set,
            calls=self.calls[:n] + self.calls[r : r + m],
            resample_keys=self.resample_keys[:n],
            variant_keys=self.variant_keys[:m],
            variant_samples=self.variant_samples[:m],
            first=None,
        )

    def count(self) -> RerunCount:
        """The calls drawn, by kind (:mod:`biasbreaker.probe_reruns`), duplicates included."""
        mappings = [v.mapping for v in self.cf_set.variants]
        joint = sum(1 for m in mappings if m.steps)
        person = sum(1 for m in mappings if m.person)
        return RerunCount(len(mappings) - joint - person, len(self.resample_keys), joint, person)


@dataclass
class Reruns:
    """The re-runs of a drawn step in flight (:meth:`Probe.start`).

    Args:
        todo: The distinct calls being made (the cache did not answer them).
        hits: Calls answered without a run: by the step's own output, the cache, or a call
            made once for two of them.
        cached: The outputs the cache answered with, by key (taken when the re-runs started).
        future: Each call's result or exception, in ``todo`` order, once all are in;
            ``None`` when there is nothing to run. A ``concurrent.futures.Future`` when the
            re-runs run on another thread's loop.
        meter: The tokens the re-runs charge (``None`` without a budget).
    """

    todo: tuple[_Call, ...]
    hits: int
    cached: dict[tuple[str, str, int], Any]
    future: asyncio.Future[list[Any]] | concurrent.futures.Future[list[Any]] | None
    meter: StepMeter | None = None

    async def results(self) -> list[Any]:
        """Each call's result or exception, in ``todo`` order, once all are in."""
        if self.future is None:
            return []
        if isinstance(self.future, concurrent.futures.Future):
            return await asyncio.wrap_future(self.future)
        return await self.future

    async def cancel(self) -> None:
        """Cancel what is still running and wait until it is (results are discarded).

        A synchronous step already running in a worker thread finishes there; its result is
        dropped.
        """
        future = self.future
        if future is None:
            return
        future.cancel()
        waited = (
            asyncio.wrap_future(future) if isinstance(future, concurrent.futures.Future) else future
        )
        await asyncio.wait({waited})


class Probe:
    """Counterfactual probe of guarded steps.

    One probe serves one run: its cache of step calls lives as long as it does.

    Args:
        scorers: One or more scorers (the ``scorer`` extension point).
        generator: The counterfactual generator (default: all shipped axes, ``seed``).
        k: Counterfactual variants per probed step, >= 1.
        joint: Also run the joint variant when the input mentions two or more axes (every
            such axis swapped at once; :meth:`CounterfactualGenerator.generate`), so a step
            that decides against either of two groups is not missed: ``k + 1`` variants then.
            ``[probe] joint`` sets it (default true).
        per_person: Also run the per-person variants when the input names two or more
            persons of different groups of an axis (one variant per person moving that person
            alone; :meth:`CounterfactualGenerator.generate`), so a step that prefers the man
            of "Mary Carter and John Baker" is not missed; an input where a term of that axis
            belongs to no one person is held (``unreadable``). ``[probe] per_person`` sets it
            (default true).
        r: Same-group resamples per probed step, >= 0 (0 disables the noise floor: only
            right for deterministic steps).
        probe_rate: Share of steps probed, in [0, 1], decided per ``step_id`` from the seed.
        seed: Seed of the sampling decision, the variants and the bootstrap.
        combine: ``"max"`` or ``"mean"`` over scorers.
        bootstrap: Bootstrap replicates for the interval (0 disables it).
        confidence: Two-sided level of the interval, in (0, 1).
        max_concurrency: Step calls in flight at once, >= 1.
        cache_size: Step outputs kept in the per-run cache (least recently used evicted).
        call_timeout_s: Seconds each re-run of the step may take, > 0, or ``None`` (no
            time-out; ``[probe] call_timeout_s`` sets it, default 120). An awaitable step is
            cancelled on time; a step that holds the event loop (a sync step, a synchronous
            call inside ``async def``) is timed by ``clock`` when it returns. Either way its
            result is discarded and the probe fails closed (:class:`ProbeError`).
        clock: Monotonic seconds for the late-return check (injectable; ``time.monotonic``).
        language: The language guard, called once per probed step before any variant is
            drawn (default :data:`DEFAULT_LANGUAGE_GUARD`: English, hold for review), or
            ``None`` to skip the check (then a French input is "not applicable" again). With
            the default guard and py3langid not installed, every probed step raises
            :class:`ProbeError` (the adapters hold it for review).
        budget: The run's call and token account (:mod:`biasbreaker.probe.budget`), or
            ``None`` for no bound. A step it cannot pay for raises
            :class:`~biasbreaker.probe.budget.BudgetExceeded` (a :class:`ProbeError`: held)
            before any re-run starts.
        adaptive: The sequential test of adaptive probing (:mod:`biasbreaker.probe.adaptive`:
            a first stage of the draw's re-runs, the rest only when its score is above
            ``stop_below``), or ``None`` (default) for the full probe at every step, as
            before it existed.

    Raises:
        InputError: An argument is out of range (the message names it; a ValueError).
    """

    def __init__(
        self,
        scorers: Scorer | Sequence[Scorer],
        *,
        generator: CounterfactualGenerator | None = None,
        k: int = 4,
        joint: bool = True,
        per_person: bool = True,
        r: int = 2,
        probe_rate: float = 1.0,
        seed: int = 0,
        combine: Combine = "max",
        bootstrap: int = 1000,
        confidence: float = 0.95,
        max_concurrency: int = 8,
        cache_size: int = 4096,
        call_timeout_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        language: LanguageGuard | None = DEFAULT_LANGUAGE_GUARD,
        budget: ProbeBudget | None = None,
        adaptive: Adaptive | None = None,
    ) -> None:
        self.scorers: tuple[Scorer, ...] = (
            (scorers,) if isinstance(scorers, Scorer) else tuple(scorers)
        )
        if not self.scorers:
            raise InputError("scorers is empty; give at least one scorer")
        names = [s.name for s in self.scorers]
        if len(set(names)) != len(names):
            raise InputError(f"scorer names {names!r} repeat; each scorer needs its own name")
        if ROUTE_PART in names:
            raise InputError(
                f"a scorer is named {ROUTE_PART!r}, the name of the part that compares routes "
                "(Routed); give the scorer another name"
            )
        _check_range("k", k, 1, None)
        _check_range("r", r, 0, None)
        _check_range("bootstrap", bootstrap, 0, None)
        _check_range("max_concurrency", max_concurrency, 1, None)
        _check_range("cache_size", cache_size, 0, None)
        if not 0.0 <= probe_rate <= 1.0:
            raise InputError(f"probe_rate={probe_rate!r} must be in [0, 1]")
        if not 0.0 < confidence < 1.0:
            raise InputError(f"confidence={confidence!r} must be in (0, 1)")
        if combine not in ("max", "mean"):
            raise InputError(f"combine={combine!r} must be 'max' or 'mean'")
        if call_timeout_s is not None and not (
            isinstance(call_timeout_s, (int, float))
            and not isinstance(call_timeout_s, bool)
            and 0.0 < call_timeout_s < math.inf
        ):
            raise InputError(
                f"call_timeout_s={call_timeout_s!r} must be a number of seconds > 0 (or None "
                "for no time-out)"
            )
        self.generator = generator if generator is not None else CounterfactualGenerator(seed=seed)
        self.k, self.r = k, r
        self.joint = joint
        self.per_person = per_person
        self.probe_rate = probe_rate
        self.seed = seed
        self.combine: Combine = combine
        self.bootstrap = bootstrap
        self.confidence = confidence
        self.max_concurrency = max_concurrency
        self.cache_size = cache_size
        self.call_timeout_s = call_timeout_s
        self.clock = clock
        self.language = language
        self.budget = budget
        self.adaptive = adaptive
        self._cache: OrderedDict[tuple[str, str, int], Any] = OrderedDict()
        self._counter = 0
        self._coverage: dict[str, dict[str, int]] = {}
        self._accepts_sample: dict[int, bool] = {}

    # ------------------------------------------------------------------ sampling
    def should_probe(self, step_id: str) -> bool:
        """Whether the step with this id is probed: ``u(seed, step_id) < probe_rate``.

        ``u`` is the first 64 bits of ``sha256(f"{seed}:{step_id}")`` over 2**64, so the
        decision is a pure function of the seed and the id.
        """
        if self.probe_rate >= 1.0:
            return True
        digest = hashlib.sha256(f"{self.seed}:{step_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < self.probe_rate

    def clear_cache(self) -> None:
        """Forget every cached step output (start of a new run)."""
        self._cache.clear()

    # ------------------------------------------------------------------ probing
    def probe_sync(
        self,
        step: Step,
        input: Any,
        output: Any,
        *,
        step_id: str | None = None,
        step_name: str | None = None,
        coverage: Mapping[str, int] | None = None,
        origin: str | None = None,
        full: str = "",
    ) -> ProbeResult:
        """:meth:`probe` from synchronous code (runs its own event loop).

        Raises:
            RuntimeError: Called inside a running event loop (``await probe(...)`` there).
            ProbeError: As :meth:`probe`.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(
                self.probe(
                    step,
                    input,
                    output,
                    step_id=step_id,
                    step_name=step_name,
                    coverage=coverage,
                    origin=origin,
                    full=full,
                )
            )
        raise RuntimeError("probe_sync() was called inside a running event loop; await probe()")

    async def probe(
        self,
        step: Step,
        input: Any,
        output: Any,
        *,
        step_id: str | None = None,
        step_name: str | None = None,
        coverage: Mapping[str, int] | None = None,
        origin: str | None = None,
        full: str = "",
    ) -> ProbeResult:
        """Score one step.

        Args:
            step: The guarded step (sync or async; see :data:`Step`).
            input: The input it was called with (``str`` or JSON-like).
            output: The output it produced (sample 0).
            step_id: Stable id of this step occurrence (e.g. ``"node:writer/step:12"``) for
                ``probe_rate`` sampling and seeding; default ``"{step_name}#{n}"`` with ``n``
                counting this probe's calls.
            step_name: Name for results and the cache key; default the callable's qualified
                name.
            coverage: The node's covering-rotation state, rotation key → position (the
                :attr:`ProbeResult.coverage` of its previous probe; ``{}`` for its first).
                Default: what this probe object kept for ``step_name`` (so one probe that
                lives across a run rotates by itself; an adapter that makes a probe per call
                or resumes from a checkpoint passes the state it persisted). With the same
                state, input and seed the variants are the same.
            origin: Where the rotation starts, for a state kept per thread (an adapter
                passes ``"<thread id>/<node>"``): each axis is read from an offset drawn from
                the seed and the origin, so threads start at different, reproducible places
                (:meth:`~biasbreaker.probe.counterfactual.CounterfactualGenerator.generate`).
                ``None``: offset 0.
            full: With adaptive probing (:attr:`adaptive`), why this step must have the
                full probe whatever its first stage gives (e.g. ``"the breaker is in
                WARNING"``; recorded in :attr:`ProbeResult.stage_reason`), or empty to let
                the first stage stop it. Ignored without adaptive probing.

        Returns:
            The result (``scored``, ``not_applicable``, ``unsupported_language`` or
            ``not_sampled``); its ``coverage`` is the state after this probe (unchanged by
            an unsupported language).

        Coverage bound: an axis with ``N`` groups is rotated along a fixed seeded order, so
        while a node's probed inputs mention the same groups of the same ``A`` axes, every
        other group of each axis is compared with each mentioned one within
        ``ceil((N − 1) · A / k)`` probes of the node (one probe when ``k >= (N − 1) · A``);
        docs/detection.md, "Every group covered". With adaptive probing a probe that stops
        after its first stage advances the rotation by its first-stage variants only: within
        ``ceil((N − 1) · A / first)`` probes.

        Raises:
            ProbeError: The step, a scorer or the language identifier failed or misbehaved
                (or py3langid is not installed for the default guard), or an output (the guarded
                one, a resample's or a variant's) is neither text nor JSON — NaN and infinity
                included; never a low score instead.
        """
        drawn = self.draw(
            step,
            input,
            step_id=step_id,
            step_name=step_name,
            coverage=coverage,
            origin=origin,
            full=full,
        )
        if isinstance(drawn, ProbeResult):
            return drawn
        # the guarded output is read before any re-run starts: unreadable, nothing is re-run
        original_text = _text(_output_of(output), drawn.name, "guarded output (sample 0)")
        return await self._score(drawn, self.start(drawn), output, original_text)

    def draw(
        self,
        step: Step,
        input: Any,
        *,
        step_id: str | None = None,
        step_name: str | None = None,
        coverage: Mapping[str, int] | None = None,
        origin: str | None = None,
        full: str = "",
    ) -> ProbeResult | Drawn:
        """What :meth:`probe` does before it needs the step's output: the calls to make.

        Everything up to the re-runs depends on the step's input alone: the sampling
        decision, the language, the held and unreadable checks, the variants and the
        covering rotation. A caller that knows the input before the output (a graph adapter
        about to call the node) draws here, starts the re-runs beside the step's own call
        (:meth:`start`), and scores with :meth:`finish` once the output is in: the result, the cache
        and the rotation are those of :meth:`probe` with the same arguments (speculative
        probing, docs/detection.md).

        Args:
            step: As :meth:`probe`.
            input: As :meth:`probe`.
            step_id: As :meth:`probe`.
            step_name: As :meth:`probe`.
            coverage: As :meth:`probe`.
            origin: As :meth:`probe`.
            full: As :meth:`probe`.

        Returns:
            The result when it needs no re-run (``not_sampled``, ``not_applicable``,
            ``unsupported_language``, ``unreadable``), else the drawn calls.

        Raises:
            ProbeError: As :meth:`probe`, for what it checks of the input.
        """
        name = step_name or str(getattr(step, "__qualname__", type(step).__name__))
        sid = step_id if step_id is not None else f"{name}#{self._counter}"
        self._counter += 1

        def unscored(status: UnscoredStatus, reason: str, **extra: Any) -> ProbeResult:
            return ProbeResult(
                status=status,
                step=name,
                step_id=sid,
                confidence=self.confidence,
                combine=self.combine,
                reason=reason,
                **extra,
            )

        if not self.should_probe(sid):
            return unscored("not_sampled", f"not sampled (probe_rate = {self.probe_rate})")
        state = coverage if coverage is not None else self._coverage.get(name, {})
        guard = self.language
        found = self.generator.detect(input)
        names = [(d.path, d.start, d.end) for d in found if d.kind == "name"]
        reading = guard.check(input, names, mentioned=bool(found)) if guard is not None else None
        language = ""
        if guard is not None and reading is not None:  # one identification per probed step
            if not reading.supported:
                return unscored(
                    "unsupported_language",
                    guard.reason(reading),
                    coverage=dict(state),
                    language=reading.language,
                )
            language = reading.language if reading.language in guard.languages else "und"
        axes = [axis.name for axis in self.generator.axes]
        opaque = list(
            opaque_fields(
                input,
                axes,
                frozenset(d.path for d in found),
                lambda inner: frozenset(d.path for d in self.generator.detect(inner)),
            )
        )
        if opaque:  # fail closed: a protected attribute the text probe cannot swap
            return unscored(
                "unreadable", opaque_reason(opaque), coverage=dict(state), language=language
            )
        unswappable = self.generator.unswappable(input)
        if unswappable:  # fail closed: a protected mention with no sound counterfactual
            return unscored(
                "unreadable",
                unswappable_reason(unswappable),
                coverage=dict(state),
                language=language,
            )
        held = self.generator.held(input)
        if held:  # fail closed: a protected mention read where no rewrite can reach it
            return unscored(
                "unreadable", held_reason(held), coverage=dict(state), language=language
            )
        try:
            cf_set = self.generator.generate(
                input,
                self.k,
                coverage=state,
                detections=found,
                joint=self.joint,
                per_person=self.per_person,
                origin=origin,
            )
        except KeyClash as exc:  # fail closed: a variant would merge two of the input's keys
            return unscored(
                "unreadable", key_clash_reason(exc), coverage=dict(state), language=language
            )
        except Unattributed as exc:  # fail closed: no variant moves one person alone
            return unscored(
                "unreadable", unattributed_reason(exc), coverage=dict(state), language=language
            )
        unswapped = unswapped_keys(cf_set.detections, cf_set.variants)
        if unswapped:  # fail closed: a key names a group its axis's variants left in place
            return unscored(
                "unreadable",
                unswapped_key_reason(unswapped),
                coverage=dict(state),
                language=language,
            )
        residual = residual_mentions(cf_set.variants, self.generator.terms)
        if residual:  # fail closed: a variant still names the person it swapped elsewhere
            return unscored(
                "unreadable",
                residual_reason(residual),
                coverage=dict(state),
                language=language,
            )
        self._coverage[name] = dict(cf_set.coverage)
        if cf_set.status == "not_applicable" and present_groups(cf_set.detections):
            # fail closed: a group is named, but no variant of another group could be made
            # ("not applicable" means only that the input names no protected group)
            return unscored(
                "unreadable",
                no_counterfactual_reason(cf_set.detections, cf_set.reason),
                coverage=cf_set.coverage,
                language=language,
            )
        if cf_set.status == "not_applicable":
            return unscored(
                "not_applicable",
                cf_set.reason,
                notes=cf_set.notes,
                coverage=cf_set.coverage,
                language=language,
            )
        variants = cf_set.variants
        calls: list[_Call] = []
        resample_keys = []
        for s in range(1, self.r + 1):
            key = (name, payload_digest(input), s)
            resample_keys.append(key)
            calls.append(_Call(key, input, s, f"same-group resample {s}"))
        variant_keys = []
        variant_samples = []
        for j, v in enumerate(variants):
            s = 1 + (j % self.r) if self.r > 0 else 0
            key = (name, payload_digest(v.payload), s)
            variant_keys.append(key)
            variant_samples.append(s)
            calls.append(
                _Call(key, v.payload, s, f"counterfactual variant {j} (axis {v.mapping.axis})")
            )
        first, full_reason = None, ""
        if self.adaptive is not None:
            first, full_reason = self._first_stage(input, state, found, cf_set, full, origin)
        return Drawn(
            step=step,
            name=name,
            step_id=sid,
            cf_set=cf_set,
            language=language,
            original_key=(name, payload_digest(input), 0),
            calls=tuple(calls),
            resample_keys=tuple(resample_keys),
            variant_keys=tuple(variant_keys),
            variant_samples=tuple(variant_samples),
            first=first,
            full_reason=full_reason,
        )

    def _first_stage(
        self,
        input: Any,
        state: Mapping[str, int],
        found: Sequence[Detection],
        cf_set: CounterfactualSet,
        full: str,
        origin: str | None = None,
    ) -> tuple[FirstStage | None, str]:
        """The first stage of an adaptive draw, or ``None`` and why the full probe runs.

        The first stage's variants are :meth:`CounterfactualGenerator.generate` of ``first``
        rotation variants from the same state and ``origin``, without joint or per-person
        variants: the rotation draws slot after slot with names seeded per slot, so they are
        the first ``first`` variants of the full draw, and its coverage is the rotation after
        them.

        Raises:
            ProbeError: They are not (a generator that breaks the prefix property): the
                probe fails closed rather than stop on variants it would not have run.
        """
        assert self.adaptive is not None
        if full:
            return None, full
        head = self.generator.generate(
            input, self.adaptive.first, coverage=state, detections=found, origin=origin
        )
        m = len(head.variants)
        if m == 0 or m >= len(cf_set.variants):
            return None, "the first stage would run every variant of the draw"
        if [v.payload for v in head.variants] != [v.payload for v in cf_set.variants[:m]]:
            raise ProbeError(
                f"adaptive probing: the first {m} variant(s) drawn alone differ from the "
                "first of the full draw, so a first stage would not be part of the full probe; "
                "the probe fails closed (a custom generator must draw its variants in order)"
            )
        return FirstStage(m, first_resamples(m, self.r), dict(head.coverage)), ""

    def start(self, drawn: Drawn, loop: asyncio.AbstractEventLoop | None = None) -> Reruns:
        """Start the drawn re-runs (each distinct call not in the cache, once), concurrently.

        The cache is read as :meth:`probe` reads it once the guarded output (sample 0) is
        remembered: a call whose key is the output's own is answered by it, a call the cache
        holds (and remembering the output would not evict) is a hit, taken now.

        Args:
            drawn: What :meth:`draw` returned.
            loop: The event loop to run the re-runs on (from another thread: a synchronous
                caller's helper loop); default the running loop.

        Returns:
            The re-runs in flight; :meth:`finish` waits for them, or :meth:`Reruns.cancel`.
            With a first stage (:attr:`Drawn.first`, adaptive probing) only its re-runs
            are started; :meth:`finish` starts the others if it does not stop the probe.

        Raises:
            BudgetExceeded: The run's budget (:attr:`budget`) cannot pay for the re-runs
                not in the cache; none is started then. With a first stage, the step's bound
                (``max_calls_per_step``) is checked against the full draw's re-runs, the
                run's against the first stage's.
        """
        original = drawn.original_key
        evicted: set[tuple[str, str, int]] = set()
        over = len(self._cache) + 1 - max(self.cache_size, 1 + self.k + self.r)
        if original not in self._cache and over > 0:  # what remembering the output evicts
            evicted = set(itertools.islice(self._cache, over))
        todo, hits, cached = self._pending(drawn.first_stage().calls, original, evicted)
        if self.budget is not None:  # fail closed: a step the run cannot pay for is held
            whole = len(todo)
            if drawn.first is not None:
                whole = len(self._pending(drawn.calls, original, evicted)[0])
            self.budget.reserve(drawn.name, drawn.step_id, len(todo), drawn.count(), whole=whole)
        future: asyncio.Future[list[Any]] | concurrent.futures.Future[list[Any]] | None = None
        meter = None if self.budget is None else StepMeter(self.budget)
        if todo:
            work = self._execute(drawn.step, todo)
            with metering(meter):  # the re-runs' tasks copy this context
                if loop is None:
                    future = asyncio.ensure_future(work)
                else:
                    future = asyncio.run_coroutine_threadsafe(work, loop)
        return Reruns(todo=todo, hits=hits, cached=cached, future=future, meter=meter)

    def _pending(
        self,
        calls: Sequence[_Call],
        original: tuple[str, str, int],
        evicted: set[tuple[str, str, int]],
        known: Mapping[tuple[str, str, int], Any] | None = None,
    ) -> tuple[tuple[_Call, ...], int, dict[tuple[str, str, int], Any]]:
        """(the distinct calls to make, the calls answered without a run, the cache's answers).

        A call is answered without a run when its key is the step's own output's, a call
        before it in ``calls`` has its key, ``known`` holds it (a first stage's re-runs) or the
        cache does (and remembering the output would not evict it: ``evicted``).
        """
        pending: dict[tuple[str, str, int], _Call] = {}
        cached: dict[tuple[str, str, int], Any] = {}
        hits = 0
        for c in calls:
            if c.key == original or c.key in pending or (known is not None and c.key in known):
                hits += 1
            elif c.key in self._cache and c.key not in evicted:
                hits += 1
                cached[c.key] = self._cache[c.key]
            else:
                pending[c.key] = c
        return tuple(pending.values()), hits, cached

    async def finish(self, drawn: Drawn, reruns: Reruns, output: Any) -> ProbeResult:
        """Score a drawn step on its output once its re-runs (:meth:`start`) are in.

        The result is :meth:`probe`'s for the same step, input, output and state. An output
        the probe cannot read raises as :meth:`probe` does, the re-runs cancelled and their
        results discarded (never cached).

        Raises:
            ProbeError: As :meth:`probe`.
        """
        try:
            original_text = _text(_output_of(output), drawn.name, "guarded output (sample 0)")
        except ProbeError:
            await reruns.cancel()
            raise
        return await self._score(drawn, reruns, output, original_text)

    async def _score(
        self, drawn: Drawn, reruns: Reruns, output: Any, original_text: str
    ) -> ProbeResult:
        """The result of a drawn step (:meth:`probe`'s steps 4 and 5).

        With a first stage (:attr:`Drawn.first`), the first stage's result when its score is
        at most :attr:`Adaptive.stop_below`; else the other re-runs are made (on the running
        loop) and the result is the full draw's.
        """
        name = drawn.name
        self._remember(drawn.original_key, output)
        try:
            results = await reruns.results()
        except BaseException:
            await reruns.cancel()
            raise
        self._check_results(name, reruns.todo, results)
        if reruns.meter is not None:
            reruns.meter.check(name, len(reruns.todo))
        known = dict(reruns.cached)
        for c, res in zip(reruns.todo, results, strict=True):
            self._remember(c.key, res)
            known[c.key] = res
        made, hits = len(reruns.todo), reruns.hits
        known[drawn.original_key] = output
        adaptive = self.adaptive
        if adaptive is None:
            return self._result(drawn, known, output, original_text, made, hits)
        if drawn.first is None:
            full = self._result(drawn, known, output, original_text, made, hits)
            why = stop_sentence(FULL_PROBE, 0.0, adaptive.stop_below, drawn.full_reason)
            return dataclasses.replace(full, stage=FULL_PROBE, stage_reason=why)
        first = self._result(drawn.first_stage(), known, output, original_text, made, hits)
        assert first.score is not None  # a scored result has one
        if first.score <= adaptive.stop_below:
            self._coverage[name] = dict(drawn.first.coverage)
            why = stop_sentence(FIRST_STAGE, first.score, adaptive.stop_below)
            return dataclasses.replace(first, stage=FIRST_STAGE, stage_reason=why)
        todo, more, cached = self._pending(drawn.calls, drawn.original_key, set(), known)
        hits += more - len(drawn.first_stage().calls)  # the first stage's calls counted above
        known.update(cached)
        if self.budget is not None:  # fail closed: a second stage the run cannot pay for
            self.budget.reserve(name, drawn.step_id, len(todo), whole=made + len(todo))
        if todo:
            with metering(reruns.meter):  # the re-runs' tasks copy this context
                rest = await self._execute(drawn.step, todo)
            self._check_results(name, todo, rest)
            if reruns.meter is not None:
                reruns.meter.check(name, len(todo))
            for c, res in zip(todo, rest, strict=True):
                self._remember(c.key, res)
                known[c.key] = res
        full = self._result(drawn, known, output, original_text, made + len(todo), hits)
        why = stop_sentence(FULL_PROBE, first.score, adaptive.stop_below)
        return dataclasses.replace(full, stage=FULL_PROBE, stage_reason=why)

    def _check_results(self, name: str, todo: Sequence[_Call], results: Sequence[Any]) -> None:
        """Fail closed on a re-run that timed out or raised (:class:`ProbeError`)."""
        for c, res in zip(todo, results, strict=True):
            if isinstance(res, _Late):
                raise ProbeError(
                    f"step {name!r} timed out on its {c.what} (sample {c.sample}): {res}; the "
                    "probe fails closed"
                ) from res
            if isinstance(res, BaseException):
                if not isinstance(res, Exception):
                    raise res
                raise ProbeError(
                    f"step {name!r} raised {res!r} on its {c.what} (sample {c.sample}); the "
                    "probe fails closed"
                ) from res

    def _result(
        self,
        drawn: Drawn,
        known: Mapping[tuple[str, str, int], Any],
        output: Any,
        original_text: str,
        made: int,
        hits: int,
    ) -> ProbeResult:
        """Score ``drawn`` on the outputs ``known`` by call key (every call of it is there).

        ``r`` is the draw's own resamples (fewer than :attr:`r` for a first stage).
        """
        name, sid, cf_set, language = drawn.name, drawn.step_id, drawn.cf_set, drawn.language
        variants = cf_set.variants
        r = len(drawn.resample_keys)
        variant_samples = drawn.variant_samples

        # strict=False is an equivalent mutant of the zips below: each pairs a list with the
        # list its items were made from
        resampled = [self._taken(known, key) for key in drawn.resample_keys]
        same_texts = [original_text] + [
            _text(_output_of(out), name, f"same-group resample {key[2]}")
            for key, out in zip(drawn.resample_keys, resampled, strict=True)  # pragma: no mutate
        ]
        varied = [self._taken(known, key) for key in drawn.variant_keys]
        mapped_texts, raw_texts = [], []
        for j, (out, v) in enumerate(zip(varied, variants, strict=True)):  # pragma: no mutate
            raw_texts.append(_text(_output_of(out), name, f"counterfactual variant {j}"))
            mapped_texts.append(as_text(self._map_back(_output_of(out), v.mapping, name)))
        runs = [output, *resampled, *varied]
        routed = any(isinstance(out, Routed) and out.route is not None for out in runs)
        if routed:  # where each run goes next, mapped back, compared as one decision
            same_routes = [_route_text(out) for out in [output, *resampled]]
            cf_routes = [
                as_text(self._map_back(_route_of(out), v.mapping, name))
                for out, v in zip(varied, variants, strict=True)  # pragma: no mutate
            ]
        streamed = any(_streamed_of(out) is not None for out in runs)
        if streamed:  # what each run streamed, compared by every scorer beside its output
            same_streams = [
                _text(_streamed_of(out), name, "what the runs streamed")
                for out in [output, *resampled]
            ]
            raw_streams, mapped_streams = [], []
            for out, v in zip(varied, variants, strict=True):  # pragma: no mutate
                raw_streams.append(_text(_streamed_of(out), name, "what a variant streamed"))
                mapped_streams.append(as_text(self._map_back(_streamed_of(out), v.mapping, name)))

        k, n_same = len(variants), len(same_texts)
        twins = variant_samples
        anchors = [[a for a in range(n_same) if a != twins[j]] if r else [0] for j in range(k)]
        floor_pairs = sorted({(a, twins[j]) for j in range(k) for a in anchors[j]} if r else [])
        rows: dict[str, list[float]] = {}
        floors: dict[str, list[float]] = {}
        for scorer in self.scorers:
            cf_texts = mapped_texts if scorer.compares_neutralised else raw_texts
            lefts = [same_texts[a] for j in range(k) for a in anchors[j]]
            rights = [cf_texts[j] for j in range(k) for _ in anchors[j]]
            lefts += [same_texts[a] for a, _ in floor_pairs]
            rights += [same_texts[t] for _, t in floor_pairs]
            try:
                values = scorer.divergence(lefts, rights)
                if streamed:  # per pair, the larger change: the output's or the stream's
                    cf_streams = mapped_streams if scorer.compares_neutralised else raw_streams
                    more = scorer.divergence(
                        [same_streams[a] for j in range(k) for a in anchors[j]]
                        + [same_streams[a] for a, _ in floor_pairs],
                        [cf_streams[j] for j in range(k) for _ in anchors[j]]
                        + [same_streams[t] for _, t in floor_pairs],
                    )
                    values = [max(a, b) for a, b in zip(values, more, strict=True)]
            except ProbeError:
                raise
            except Exception as exc:
                raise ProbeError(
                    f"scorer {scorer.name!r} raised {exc!r} while scoring step {name!r}; the "
                    "probe fails closed"
                ) from exc
            checked = check_divergences(scorer.name, values, len(lefts))
            n_between = sum(len(a) for a in anchors)
            floor_d = dict(zip(floor_pairs, checked[n_between:], strict=True))
            row, floor, pos = [], [], 0
            for j in range(k):
                row.append(mean(checked[pos : pos + len(anchors[j])]))
                pos += len(anchors[j])
                floor.append(mean([floor_d[(a, twins[j])] for a in anchors[j]]) if r else 0.0)
            rows[scorer.name] = row
            floors[scorer.name] = floor
        if routed:
            route_row, route_floor = [], []
            for j in range(k):
                route_row.append(mean([float(same_routes[a] != cf_routes[j]) for a in anchors[j]]))
                route_floor.append(
                    mean([float(same_routes[a] != same_routes[twins[j]]) for a in anchors[j]])
                    if r
                    else 0.0
                )
            rows[ROUTE_PART] = route_row
            floors[ROUTE_PART] = route_floor

        swaps = [(v.mapping.axis, v.mapping.groups, v.mapping.person) for v in variants]
        groups = _swap_groups(swaps)
        parts = {sname: _worst_swap(rows[sname], floors[sname], groups) for sname in rows}
        score = combined({s: p.score for s, p in parts.items()}, self.combine)
        ci = None
        if k >= 2 and self.bootstrap > 0:
            ci = self._interval(rows, floors, sid, swaps)
        outcomes = tuple(
            VariantOutcome(
                axis=v.mapping.axis,
                groups=v.mapping.groups,
                names=v.mapping.names,
                draw=v.draw,
                sample=variant_samples[j],
                divergences={s: (rows[s][j], floors[s][j]) for s in rows},
                person=v.mapping.person,
            )
            for j, v in enumerate(variants)
        )
        return ProbeResult(
            status="scored",
            step=name,
            step_id=sid,
            score=score,
            ci=ci,
            confidence=self.confidence,
            parts=parts,
            combine=self.combine,
            k=k,
            r=r,
            calls=made,
            cache_hits=hits,
            axes=tuple(dict.fromkeys(a for v in variants for a in v.mapping.axes)),
            variants=outcomes,
            notes=cf_set.notes,
            coverage=cf_set.coverage,
            language=language,
        )

    # ------------------------------------------------------------------ internals
    def _interval(
        self,
        rows: Mapping[str, Sequence[float]],
        floors: Mapping[str, Sequence[float]],
        sid: str,
        swaps: Sequence[Swap],
    ) -> tuple[float, float]:
        diffs = {s: [c - f for c, f in zip(v, floors[s], strict=True)] for s, v in rows.items()}
        k = len(next(iter(diffs.values())))

        def statistic(sample: Sequence[Sequence[float]]) -> float:
            picked = [int(i) for i in sample[0]]
            groups = _swap_groups([swaps[i] for i in picked])
            scores = {
                s: max(
                    min(1.0, max(0.0, sum(d[picked[i]] for i in members) / len(members)))
                    for members in groups.values()
                )
                for s, d in diffs.items()
            }
            return combined(scores, self.combine)

        rng = random.Random(f"{self.seed}:{sid}:bootstrap")
        return bootstrap_interval(
            [list(range(k))],
            statistic,
            replicates=self.bootstrap,
            confidence=self.confidence,
            rng=rng,
        )

    def _map_back(self, output: Any, mapping: CounterfactualMapping, name: str) -> Any:
        try:
            return self.generator.map_back(output, mapping)
        except ValueError as exc:
            raise ProbeError(f"cannot map the output of step {name!r} back: {exc}") from exc

    def _accepts(self, step: Step) -> bool:
        key = id(step)
        if key not in self._accepts_sample:
            try:
                params = inspect.signature(step).parameters
            except (TypeError, ValueError):
                params = {}  # type: ignore[assignment]
            p = params.get("sample")
            self._accepts_sample[key] = p is not None and p.kind in (
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                inspect.Parameter.KEYWORD_ONLY,
            )
        return self._accepts_sample[key]

    async def _execute(self, step: Step, todo: Sequence[_Call]) -> list[Any]:
        """Run ``todo`` concurrently (``max_concurrency`` at once); each result or exception."""
        accepts = self._accepts(step)
        limit = asyncio.Semaphore(self.max_concurrency)

        timeout = self.call_timeout_s

        async def one(c: _Call) -> Any:
            async with limit:
                token = _SAMPLE.set(c.sample)
                started = self.clock()
                try:
                    result = step(c.payload, sample=c.sample) if accepts else step(c.payload)
                    if inspect.isawaitable(result):
                        waited = asyncio.ensure_future(_awaited(result))
                        waited.add_done_callback(_retrieved)
                        try:
                            done, _ = await asyncio.wait({waited}, timeout=timeout)
                        except asyncio.CancelledError:  # the re-runs were cancelled: stop it
                            waited.cancel()
                            raise
                        if not done:  # the step's own TimeoutError is not this: it raises
                            waited.cancel()
                            raise _Late(f"no result within the time-out of {timeout:g} s")
                        result = waited.result()
                finally:
                    _SAMPLE.reset(token)
                took = self.clock() - started
                if timeout is not None and took > timeout:
                    # the time-out could not fire: the step held the event loop (a sync
                    # step, or a synchronous call inside `async def`); its result is discarded
                    raise _Late(
                        f"it returned after {took:.1f} s, over the time-out of {timeout:g} s, "
                        "holding the event loop all along (a synchronous call inside "
                        "`async def`?): make the step asynchronous or run it in a thread; "
                        "its late result is discarded"
                    )
                return result

        return await asyncio.gather(*(one(c) for c in todo), return_exceptions=True)

    def _remember(self, key: tuple[str, str, int], value: Any) -> None:
        self._cache[key] = value
        self._cache.move_to_end(key)
        while len(self._cache) > max(self.cache_size, 1 + self.k + self.r):
            self._cache.popitem(last=False)

    def _taken(self, known: Mapping[tuple[str, str, int], Any], key: tuple[str, str, int]) -> Any:
        """A call's output, marked as just used in the cache (least recently used evicted)."""
        if key in self._cache:
            self._cache.move_to_end(key)
        return known[key]


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Mark a re-run's exception as read.

    A cancelled probe never reads it, and asyncio would log "Task exception was never
    retrieved" with its traceback.
    """
    if not task.cancelled():
        task.exception()


class _Late(Exception):
    """A re-run of the step missed ``call_timeout_s``; why, as the message."""


ROUTE_PART: Final = "route"
"""The part of a local score that compares where the runs of a :class:`Routed` step go."""


@dataclass(frozen=True, slots=True)
class Routed:
    """A step's output together with where it sends the run next, compared apart.

    A step that decides by routing (a LangGraph node's ``Command(goto=...)`` or conditional
    edge) returns this instead of its bare output. The scorers compare ``output`` as usual;
    ``route`` is compared as one more decision, part :data:`ROUTE_PART` of the score: a
    counterfactual run whose route, mapped back to the original groups, differs from its
    anchor's is a flip (1), the same route 0, with the same anchors and noise floor as the
    scorers' parts. The local score is the larger of the scorers' combination and that part
    (:func:`combined`): a route taken for one group only scores as the flip it is, never
    diluted by an output that did not change (a tool called for one group only is not
    halved by a route that is the same for all).

    ``streamed`` is what the step showed its caller while it ran (a LangGraph node's custom
    stream events, the replies of chat models it streamed without returning them): every
    scorer compares it too, as a second output, and a pair of runs changed by the larger of
    the two changes (a decision shown only in the stream is not diluted by an output that
    did not change, nor the output's by a stream that did not).

    Args:
        output: The step's output (text or JSON), what the scorers compare.
        route: Its destinations as JSON (e.g. ``["approve"]``, a ``Send`` as
            ``{"send": node, "arg": ...}``); ``None`` for none (no route part).
        streamed: What it streamed as JSON, or ``None`` for nothing.
    """

    output: Any
    route: Any = None
    streamed: Any = None


def _output_of(out: Any) -> Any:
    return out.output if isinstance(out, Routed) else out


def _route_of(out: Any) -> Any:
    return out.route if isinstance(out, Routed) else None


def _route_text(out: Any) -> str:
    return as_text(_route_of(out))


def _streamed_of(out: Any) -> Any:
    return out.streamed if isinstance(out, Routed) else None


def combined(scores: Mapping[str, float], how: Combine) -> float:
    """The local score from its parts, in [0, 1].

    The scorers' parts combined by ``how`` (:func:`~biasbreaker.probe.scoring.combine`), and
    the larger of that and the :data:`ROUTE_PART` part when there is one.

    Raises:
        ValueError: No scorer part, or an unknown ``how``.
    """
    value = combine({s: v for s, v in scores.items() if s != ROUTE_PART}, how)
    route = scores.get(ROUTE_PART)
    return value if route is None else max(value, route)


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _text(output: Any, name: str, what: str) -> str:
    """``as_text(output)``, failing closed with the step and the output named."""
    try:
        return as_text(output)
    except ProbeError as exc:
        raise ProbeError(f"step {name!r}, {what}: {exc}; the probe fails closed") from exc


Swap = tuple[str, tuple[tuple[str, str], ...], str]
"""What a variant swaps: its axis, its ``(from_group, to_group)`` pairs and the one person it
moves (``""``: everyone)."""


def _swap_groups(swaps: Sequence[Swap]) -> dict[Swap, list[int]]:
    """The positions of each swap in ``swaps``, swaps in order of first appearance."""
    groups: dict[Swap, list[int]] = {}
    for j, swap in enumerate(swaps):
        groups.setdefault(swap, []).append(j)
    return groups


def _worst_swap(
    cf_rows: Sequence[float], floor_rows: Sequence[float], groups: Mapping[Swap, Sequence[int]]
) -> ScorerParts:
    """One scorer's parts on the swap with the largest score (the first such swap on a tie).

    The variants of each swap (an axis and the groups it moves the input's people into) are
    scored apart (:func:`_parts` over their own paired rows) and the largest score is the
    scorer's. A mean over every variant dilutes an effect on one group: a step that denies
    Muslims and nobody else flips on the variant that makes the Christian applicant Muslim,
    not on those that make them Hindu, Jewish or Buddhist, and a step deciding by gender
    alone does not flip on the race variants the same person's name draws.
    """
    best: ScorerParts | None = None
    for members in groups.values():
        part = _parts([cf_rows[j] for j in members], [floor_rows[j] for j in members])
        if best is None or part.score > best.score:
            best = part
    assert best is not None  # a scored step has at least one variant
    return best


def _parts(cf_rows: Sequence[float], floor_rows: Sequence[float]) -> ScorerParts:
    d_cf = mean(cf_rows)
    d_same = mean(floor_rows)
    excess = d_cf - d_same
    return ScorerParts(
        counterfactual=d_cf,
        same_group=d_same,
        excess=excess,
        score=min(1.0, max(0.0, excess)),
    )


def _check_range(name: str, value: int, lo: int, hi: int | None) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < lo
        or (hi is not None and value > hi)
    ):
        bound = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise InputError(f"{name}={value!r} must be an integer {bound}")


def probe_terms(cfg: ProbeSettings) -> TermSet:
    """The term lists ``[probe]`` describes, checked to cover ``[probe] languages``.

    Apart from :func:`build_probe` so ``config --check`` lists a term-list problem (an unknown
    axis, a bad term file) beside a scorer problem, not only once the scorers build.

    Raises:
        ConfigError: A term file or axis in ``[probe]`` is invalid, or a code in ``[probe]
            languages`` is not covered by terms for every axis (:attr:`TermSet.languages`).
    """
    try:
        terms = TermSet.load(
            axes=cfg.axes,
            extra_files=cfg.term_files,
            inline={axis: [dict(row) for row in rows] for axis, rows in cfg.extra_terms.items()},
            groups=cfg.groups,
            names=cfg.names,
        )
    except ConfigError as exc:
        raise ConfigError(f"[probe] term lists: {exc}") from exc
    uncovered = [code for code in cfg.languages if code not in terms.languages]
    if uncovered:
        missing = "; ".join(
            f"{code!r}: no terms for "
            + ", ".join(a for a, langs in terms.axis_languages.items() if code not in langs)
            for code in uncovered
        )
        raise ConfigError(
            f"[probe] languages = {cfg.languages!r} names {', '.join(map(repr, uncovered))}, "
            f"which the term lists do not cover for every axis ({missing}; covered: "
            f"{', '.join(sorted(terms.languages))}): a step in that language naming a group "
            "of such an axis would be probed with words it never contains and pass as 'not "
            "applicable'. Add term files in that language for those axes to [probe] "
            'term_files, with "languages": ['
            + ", ".join(f'"{c}"' for c in uncovered)
            + "] in each, leave the other axes out of [probe] axes, or remove the code from "
            "[probe] languages"
        )
    return terms


def build_probe(context: BuildContext) -> Probe:
    """Build the probe the configuration describes (``[probe]`` and the selected scorers).

    Args:
        context: The kernel (a :class:`~biasbreaker.registry.BuildContext`).

    Returns:
        The probe, seeded with the run's seed.

    Raises:
        ConfigError: A term file or axis in ``[probe]`` is invalid, a code in ``[probe]
            languages`` is not covered by terms for every axis (:attr:`TermSet.languages`),
            or py3langid (the language guard's identifier, ``biasbreaker[languages]``) is not
            installed.
        PluginError: A selected scorer fails to build or is not a scorer.
    """
    cfg = context.settings.probe
    scorers = [check_scorer(context.build("scorer", n), n) for n in cfg.scorers]
    terms = probe_terms(cfg)
    generator = CounterfactualGenerator(terms, seed=context.seed)
    language = LanguageGuard(cfg.languages, policy=cfg.unsupported_language)
    language.require()
    limits = BudgetLimits(cfg.max_calls_per_step, cfg.max_calls_per_run, cfg.max_tokens_per_run)
    return Probe(
        scorers,
        generator=generator,
        k=cfg.k,
        joint=cfg.joint,
        per_person=cfg.per_person,
        r=cfg.r,
        probe_rate=cfg.probe_rate,
        seed=context.seed,
        combine=cfg.combine,
        bootstrap=cfg.bootstrap,
        confidence=cfg.confidence,
        max_concurrency=cfg.max_concurrency,
        call_timeout_s=cfg.call_timeout_s,
        language=language,
        budget=ProbeBudget(limits) if limits.bounded else None,
        adaptive=Adaptive(cfg.adaptive_first, cfg.adaptive_stop) if cfg.adaptive else None,
    )
