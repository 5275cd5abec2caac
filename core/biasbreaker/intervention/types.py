"""Intervention types (M4 WP1): verdicts, panel results, trust scores, MADERA records.

Every type is a frozen pydantic model with ``extra="forbid"``: it validates itself on
construction (confidence in [0, 1], the overconfidence term ``S`` clamped, labels and reasons
from closed sets) and round-trips through JSON (``model_dump(mode="json")`` /
``model_validate``; ``to_json`` / ``from_json`` are the same thing under the names the control
types use). Identity (the skeptic's kind) lives on :class:`SkepticVerdict`; what an aggregator
sees is the :class:`AnonymousVerdict`, stripped of it.

Source:
    Phase 4 design (M4), WP1 "Intervention types"; ``docs/intervention.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Decision = Literal["stands", "revise", "reject"]
"""A skeptic's (and the panel's) decision on a payload.

``stands``: the payload is fine as it is. ``revise``: it is biased and the revision fixes it.
``reject``: it is biased and cannot be salvaged by editing (a revision may still be offered).
"""

DECISIONS: tuple[Decision, ...] = ("reject", "revise", "stands")
"""The decisions in tie-break order: on a tied vote the earlier (more cautious) one wins, because
the breaker has already measured bias; a tie must not wave the payload through."""

FailureKind = Literal["timeout", "malformed", "error", "invalid"]
"""Why a skeptic produced no verdict: time-out, unparseable reply (after one retry), an
exception, or a result that is not a :class:`SkepticVerdict`."""

StopReason = Literal["converged", "budget", "no-evidence"]
"""Why the MADERA loop stopped: the score cleared ``tau_exit``; ``max_rewrites`` rounds ran;
the retriever found no counter-evidence (no evidence, no rewrite)."""

PRUNE_OVERCONFIDENCE = "overconfidence"
"""The only reason the kernel accepts for pruning a verdict."""

MAX_TEXT = 20_000
"""Upper bound on any free-text field, in characters (a runaway reply is malformed)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    def to_json(self) -> dict[str, Any]:
        """Return the value as plain JSON (``model_dump(mode="json")``)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Any:
        """Rebuild and validate a value from :meth:`to_json` output.

        Raises:
            pydantic.ValidationError: On a missing, unknown or out-of-range field.
        """
        return cls.model_validate(data)


def _finite(name: str, value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{name}={value!r} must be finite")
    return value


def clamp(value: float, low: float, high: float) -> float:
    """Clamp a finite ``value`` into ``[low, high]``.

    Args:
        value: A finite float.
        low: Lower bound.
        high: Upper bound, >= ``low``.

    Returns:
        ``min(high, max(low, value))``.

    Raises:
        ValueError: If ``value`` is NaN or infinite, or ``low > high``.
    """
    if low > high:
        raise ValueError(f"clamp bounds low={low!r} > high={high!r}")
    return min(high, max(low, _finite("value", value)))


class SkepticVerdict(_Frozen):
    """One skeptic's structured review of a payload.

    Args:
        kind: The skeptic's kind (e.g. ``"empirical-auditor"``): its identity, used for the
            track record and the trail, stripped before aggregation.
        decision: ``"stands"``, ``"revise"`` or ``"reject"``.
        critique: What the skeptic found, free text (at most :data:`MAX_TEXT` characters).
        revision: A proposed corrected payload (text; JSON text for structured payloads), or
            ``None``.
        confidence: Self-reported confidence in the decision, in [0, 1].
        evidence: Evidence the skeptic cites (short statements or corpus ids); empty means an
            evidence-free verdict.
        attribute: The demographic attribute the critique is about (``"gender"``, ``"race"``,
            ...), or ``None``.

    Raises:
        pydantic.ValidationError: On a confidence outside [0, 1], not finite or not a number
            (strict: the string ``"1.0"`` and booleans are refused), an unknown decision, or an
            over-long text.
    """

    kind: str = Field(min_length=1, max_length=200)
    decision: Decision
    critique: str = Field("", max_length=MAX_TEXT)
    revision: str | None = Field(None, max_length=MAX_TEXT)
    confidence: float = Field(ge=0.0, le=1.0, allow_inf_nan=False, strict=True)
    evidence: tuple[str, ...] = ()
    attribute: str | None = Field(None, max_length=200)

    @property
    def has_evidence(self) -> bool:
        """Whether the verdict cites any non-blank evidence."""
        return any(item.strip() for item in self.evidence)


class AnonymousVerdict(_Frozen):
    """A verdict as an aggregator sees it: no identity, a content-derived label.

    The panel strips the skeptic's kind, attaches the two context terms the trust formula
    needs (computed by the kernel, not the skeptic), sorts the verdicts by content and labels
    them ``v1..vn`` in that order, so an aggregator's result cannot depend on which skeptic said
    what or in which order they answered.

    Args:
        label: ``"v<n>"``, position in canonical (content) order, 1-based.
        decision: As :class:`SkepticVerdict`.
        critique: As :class:`SkepticVerdict`.
        revision: As :class:`SkepticVerdict`.
        confidence: As :class:`SkepticVerdict`, in [0, 1].
        evidence: As :class:`SkepticVerdict`.
        attribute: As :class:`SkepticVerdict`.
        reliability: ``R``: the skeptic kind's observed accuracy from the caller's
            :class:`TrackRecord`, in [0, 1] (0.5 with no history).
        domain_match: ``I``: 1 if the verdict's attribute is one the step's input involves,
            0 if it names another, 0.5 when either is unknown; in [0, 1].
    """

    label: str = Field(pattern=r"^v[1-9][0-9]*$")
    decision: Decision
    critique: str = Field("", max_length=MAX_TEXT)
    revision: str | None = Field(None, max_length=MAX_TEXT)
    confidence: float = Field(ge=0.0, le=1.0, allow_inf_nan=False, strict=True)
    evidence: tuple[str, ...] = ()
    attribute: str | None = None
    reliability: float = Field(0.5, ge=0.0, le=1.0, allow_inf_nan=False)
    domain_match: float = Field(0.5, ge=0.0, le=1.0, allow_inf_nan=False)

    @property
    def has_evidence(self) -> bool:
        """Whether the verdict cites any non-blank evidence."""
        return any(item.strip() for item in self.evidence)


class TrustScore(_Frozen):
    """The clamped trust ``T = (C + R + I) / S`` of one verdict.

    Build one with :meth:`compute`; ``s`` and ``value`` are derived and checked on validation,
    so a stored score cannot disagree with its terms.

    Args:
        c: Credibility: evidence presence, in [0, 1].
        r: Reliability: the kind's observed accuracy, in [0, 1].
        i: Intimacy, operationalised as domain match, in [0, 1].
        s_raw: The overconfidence term before clamping (any finite number; a calibration gap
            can be negative).
        s_min: The clamp's lower bound, in (0, 1]; it bounds ``value`` by ``3 / s_min``.
        s: ``clamp(s_raw, s_min, 1)`` (derived).
        value: ``(c + r + i) / s``, in [0, 3 / s_min] (derived).

    Raises:
        pydantic.ValidationError: On a term outside its range, a non-finite value, or a stored
            ``s``/``value`` that does not match the terms.

    Source:
        Maister, Green & Galford (2000), *The Trusted Advisor* (the trust equation);
        Sun et al. (2025), CortexDebate, arXiv 2507.03928 (trust-weighted debate and its
        "overconfidence dilemma"); ``docs/intervention.md`` for why ``S`` grows with
        overconfidence here.
    """

    c: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    r: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    i: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    s_raw: float = Field(allow_inf_nan=False)
    s_min: float = Field(gt=0.0, le=1.0, allow_inf_nan=False)
    s: float = Field(gt=0.0, le=1.0, allow_inf_nan=False)
    value: float = Field(ge=0.0, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        out = dict(data)
        try:
            s_raw = float(out["s_raw"])
            s_min = float(out["s_min"])
            total = float(out["c"]) + float(out["r"]) + float(out["i"])
        except (KeyError, TypeError, ValueError):
            return out  # field validation reports what is missing or malformed
        if not (math.isfinite(s_raw) and math.isfinite(s_min) and 0.0 < s_min <= 1.0):
            return out
        s = clamp(s_raw, s_min, 1.0)
        value = total / s
        for name, derived in (("s", s), ("value", value)):
            given = out.get(name)
            if given is not None and not math.isclose(
                float(given), derived, rel_tol=1e-9, abs_tol=1e-12
            ):
                raise ValueError(
                    f"TrustScore.{name}={given!r} does not match its terms (expected "
                    f"{derived!r}); build it with TrustScore.compute"
                )
            out[name] = derived
        return out

    @classmethod
    def compute(cls, *, c: float, r: float, i: float, s_raw: float, s_min: float) -> TrustScore:
        """Compute ``T = (c + r + i) / clamp(s_raw, s_min, 1)``.

        Args:
            c: Credibility in [0, 1].
            r: Reliability in [0, 1].
            i: Domain match in [0, 1].
            s_raw: Overconfidence term before clamping (finite).
            s_min: Clamp floor in (0, 1]; ``S -> 0`` is clamped here, so ``T <= 3 / s_min``.

        Returns:
            The validated score.

        Raises:
            pydantic.ValidationError: On out-of-range or non-finite terms.
        """
        return cls.model_validate({"c": c, "r": r, "i": i, "s_raw": s_raw, "s_min": s_min})


class PrunedVerdict(_Frozen):
    """A verdict an aggregator dropped, and why.

    Args:
        label: The anonymous verdict's label.
        reason: Must be ``"overconfidence"``; the kernel rejects any other reason.
        detail: Free-text detail (the numbers behind the decision).
    """

    label: str = Field(pattern=r"^v[1-9][0-9]*$")
    reason: str = Field(min_length=1, max_length=200)
    detail: str = Field("", max_length=2_000)


class PanelResult(_Frozen):
    """What an aggregator returns for one panel run.

    Args:
        decision: The panel's decision.
        corrected: The corrected payload (a kept verdict's revision or a synthesis), or ``None``.
            Always ``None`` when the decision is ``"stands"``.
        confidence: Aggregate confidence in [0, 1]: the weight share of the winning decision.
        weights: Label -> weight (> 0) of every kept verdict.
        pruned: The verdicts dropped, each with its reason.
        trust: Label -> :class:`TrustScore`, for aggregators that compute one (else empty).
        aggregator: The aggregator's name, for the trail.

    Raises:
        pydantic.ValidationError: On an out-of-range confidence, a negative or non-finite
            weight, or a corrected payload with a ``"stands"`` decision.
    """

    decision: Decision
    corrected: str | None = Field(None, max_length=MAX_TEXT)
    confidence: float = Field(ge=0.0, le=1.0, allow_inf_nan=False, strict=True)
    weights: dict[str, float] = Field(default_factory=dict)
    pruned: tuple[PrunedVerdict, ...] = ()
    trust: dict[str, TrustScore] = Field(default_factory=dict)
    aggregator: str = Field("", max_length=200)

    @field_validator("weights")
    @classmethod
    def _weights(cls, value: dict[str, float]) -> dict[str, float]:
        for label, weight in value.items():
            if not (math.isfinite(weight) and weight >= 0.0):
                raise ValueError(f"weight of {label!r} is {weight!r}; weights are finite, >= 0")
        return value

    @model_validator(mode="after")
    def _stands_has_no_correction(self) -> PanelResult:
        if self.decision == "stands" and self.corrected is not None:
            raise ValueError("a 'stands' decision carries no corrected payload")
        return self

    @property
    def kept(self) -> tuple[str, ...]:
        """Labels of the kept verdicts, sorted."""
        return tuple(sorted(self.weights))


class SkepticFailure(_Frozen):
    """A skeptic that produced no verdict.

    Args:
        kind: The skeptic's kind.
        failure: What went wrong (see :data:`FailureKind`).
        reason: ``"TypeName: message"`` of the error, or the time-out.
    """

    kind: str
    failure: FailureKind
    reason: str = Field(max_length=4_000)


class ReviewRequest(_Frozen):
    """What a skeptic reviews.

    Args:
        payload: The output under review, as text (canonical JSON for structured payloads).
            Untrusted: a skeptic delimits it and never follows instructions inside it.
        task: The guarded step's input (what the agent was asked), as text, or ``None``.
        node: The guarded node's name, or ``None``.
        attributes: Demographic attributes the step's input involves (from the probe's term
            lexicon), sorted; empty if unknown.
        seed: Seed for the skeptic's LLM requests.
    """

    payload: str = Field(max_length=200_000)
    task: str | None = Field(None, max_length=200_000)
    node: str | None = None
    attributes: tuple[str, ...] = ()
    seed: int = 0


class PanelRun(_Frozen):
    """Everything one panel run produced: the trail's raw material.

    Args:
        verdicts: The valid verdicts, with identities, in panel order.
        failures: The skeptics that failed, in panel order.
        anonymous: The anonymised verdicts handed to the aggregator, in canonical order.
        result: The aggregator's checked result, or ``None`` if the panel failed closed.
        closed_reason: Why the panel failed closed (fewer than 2 valid verdicts), or ``None``.
    """

    verdicts: tuple[SkepticVerdict, ...] = ()
    failures: tuple[SkepticFailure, ...] = ()
    anonymous: tuple[AnonymousVerdict, ...] = ()
    result: PanelResult | None = None
    closed_reason: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the panel produced a checked result."""
        return self.result is not None and self.closed_reason is None


class TrackRecord(_Frozen):
    """Observed accuracy per skeptic kind: the trust formula's ``R``, persisted by the caller.

    ``reliability(kind) = (correct + 1) / (total + 2)`` (Laplace's rule of succession), so a
    kind with no history gets 0.5 and one lucky call does not reach 1. Outcomes must come from
    a measured signal (a labelled item, or a repair whose re-check passed), never from
    agreement with the panel's majority: a record of agreement would reward conformity.

    Args:
        counts: Kind -> ``(correct, total)`` with ``0 <= correct <= total``.

    Raises:
        pydantic.ValidationError: On negative counts or ``correct > total``.
    """

    counts: dict[str, tuple[int, int]] = Field(default_factory=dict)

    @field_validator("counts")
    @classmethod
    def _counts(cls, value: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
        for kind, (correct, total) in value.items():
            if not 0 <= correct <= total:
                raise ValueError(
                    f"track record of {kind!r} is (correct={correct}, total={total}); "
                    "need 0 <= correct <= total"
                )
        return dict(sorted(value.items()))

    def reliability(self, kind: str) -> float:
        """Laplace-smoothed accuracy of ``kind`` in (0, 1); 0.5 with no history."""
        correct, total = self.counts.get(kind, (0, 0))
        return (correct + 1) / (total + 2)

    def observe(self, kind: str, correct: bool) -> TrackRecord:
        """Return a new record with one more outcome for ``kind``.

        Args:
            kind: The skeptic kind.
            correct: Whether its verdict matched the measured outcome.

        Returns:
            The updated record (this one is frozen).
        """
        counts = dict(self.counts)
        good, total = counts.get(kind, (0, 0))
        counts[kind] = (good + int(bool(correct)), total + 1)
        return TrackRecord(counts=counts)


class Diagnosis(_Frozen):
    """MADERA stage 1: where the payload's reasoning makes a biased jump.

    Args:
        span: The suspect passage, quoted from the payload ("" if none found).
        attribute: The demographic attribute involved, or ``None``.
        query: A search query for counter-evidence (non-empty).
        rationale: Why the span is suspect.
    """

    span: str = Field("", max_length=MAX_TEXT)
    attribute: str | None = Field(None, max_length=200)
    query: str = Field(min_length=1, max_length=2_000)
    rationale: str = Field("", max_length=MAX_TEXT)


class Evidence(_Frozen):
    """One counter-evidence item from a retriever's corpus.

    Args:
        id: The corpus record's id.
        text: The statement.
        source: Where it comes from (citation or URL), or ``None``.
        score: The retriever's relevance score (finite, >= 0; higher is more relevant).
    """

    id: str = Field(min_length=1, max_length=500)
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    source: str | None = Field(None, max_length=2_000)
    score: float = Field(0.0, ge=0.0, allow_inf_nan=False)


class RewriteAttempt(_Frozen):
    """One MADERA round: the rewrite and its measured score.

    Args:
        round: 1-based round number.
        diagnosis: The diagnosis of the text this round rewrote.
        evidence: Ids of the evidence the editor was given.
        text: The rewrite.
        score: Its measured bias score (finite, >= 0); lower is better.
    """

    round: int = Field(ge=1)
    diagnosis: Diagnosis
    evidence: tuple[str, ...]
    text: str = Field(max_length=MAX_TEXT)
    score: float = Field(ge=0.0, allow_inf_nan=False)


class MaderaResult(_Frozen):
    """The outcome of one diagnose -> retrieve -> rewrite loop.

    Args:
        original_score: The measured score of the payload before any rewrite, or ``None`` when
            the loop was not asked to measure it.
        attempts: Every rewrite, in order (at most ``max_rewrites``).
        best: The lowest-scoring attempt (the earliest on ties), or ``None`` if no rewrite was
            made. Not necessarily the last.
        converged: Whether ``best.score < tau_exit``.
        stop_reason: Why the loop stopped.

    Raises:
        pydantic.ValidationError: If ``converged`` is set without a best attempt.
    """

    original_score: float | None = Field(None, ge=0.0, allow_inf_nan=False)
    attempts: tuple[RewriteAttempt, ...] = ()
    best: RewriteAttempt | None = None
    converged: bool = False
    stop_reason: StopReason

    @model_validator(mode="after")
    def _consistent(self) -> MaderaResult:
        if self.converged and self.best is None:
            raise ValueError("a converged MADERA result needs a best attempt")
        if self.best is not None and self.best not in self.attempts:
            raise ValueError("MaderaResult.best must be one of its attempts")
        return self


__all__ = [
    "DECISIONS",
    "MAX_TEXT",
    "PRUNE_OVERCONFIDENCE",
    "AnonymousVerdict",
    "Decision",
    "Diagnosis",
    "Evidence",
    "FailureKind",
    "MaderaResult",
    "PanelResult",
    "PanelRun",
    "PrunedVerdict",
    "ReviewRequest",
    "RewriteAttempt",
    "SkepticFailure",
    "SkepticVerdict",
    "StopReason",
    "TrackRecord",
    "TrustScore",
    "clamp",
]
