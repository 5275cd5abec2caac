"""The skeptic panel: >= 2 skeptics of distinct kinds, concurrently, then a checked aggregation.

A panel is built from the configuration (``[intervention] skeptics`` and ``aggregator``) or
from objects. It rejects a panel of fewer than two skeptics or two of one kind at build time
(``ConfigError``): one skeptic, or one skeptic wearing two names, is a single point of failure
(seed R1). A run reviews one payload: every skeptic's ``review`` runs concurrently
(``asyncio.gather``), each in a worker thread under its own time-out
(:func:`~biasbreaker.deadline.call_with_deadline`: it holds even for a skeptic whose client
blocks its event loop, and a late verdict is discarded); a skeptic that raises, times out,
returns an unparseable reply (after its one retry) or something that is not a verdict is a *failed*
skeptic, recorded with its reason. Fewer than two valid verdicts fail the panel closed: no
result, no repair (the control machine retries, then escalates). Otherwise the verdicts are
anonymised, aggregated by the selected aggregator, and the result is checked by
:func:`~biasbreaker.intervention.invariants.check_panel_result`.

Source:
    Phase 4 design (M4) R1 "skeptic panel: structure and SPOF", R2, R3.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from biasbreaker.deadline import DeadlineExceeded, call_with_deadline
from biasbreaker.errors import (
    AggregatorError,
    ConfigError,
    MalformedReplyError,
    PluginError,
)
from biasbreaker.intervention.invariants import (
    DEFAULT_OVERCONFIDENCE,
    anonymise,
    check_panel_result,
)
from biasbreaker.intervention.types import (
    AnonymousVerdict,
    PanelResult,
    PanelRun,
    ReviewRequest,
    SkepticFailure,
    SkepticVerdict,
    TrackRecord,
)
from biasbreaker.redaction import redact_text
from biasbreaker.registry import BuildContext

MIN_VALID_VERDICTS = 2
"""A panel with fewer valid verdicts than this fails closed."""


@runtime_checkable
class Skeptic(Protocol):
    """What a ``skeptic`` implementation provides."""

    @property
    def kind(self) -> str:
        """The skeptic's kind; panel members must be of distinct kinds."""
        ...

    async def review(self, request: ReviewRequest) -> SkepticVerdict:
        """Review ``request.payload`` and return a verdict.

        Raises:
            MalformedReplyError: The LLM's reply did not parse, even after one retry.
            Exception: Anything else; the panel records it as a failed skeptic.
        """
        ...


@runtime_checkable
class Aggregator(Protocol):
    """What an ``aggregator`` implementation provides."""

    def aggregate(self, verdicts: Sequence[AnonymousVerdict]) -> PanelResult:
        """Combine anonymised verdicts (canonical order, >= 2) into a panel result."""
        ...


@dataclass
class SkepticPanel:
    """A configured panel: skeptics, an aggregator and the kernel's checks.

    Args:
        skeptics: At least two skeptics of distinct kinds.
        aggregator: The aggregator.
        aggregator_name: Its name, for errors and the trail.
        timeout_s: Per-skeptic time-out in seconds (> 0), measured by the caller's event loop;
            each review runs in a worker thread on its own loop, so the time-out holds
            whatever the skeptic does (:func:`~biasbreaker.deadline.call_with_deadline`).
        overconfidence: The certainty bound of the pruning rule, in (0.5, 1].

    Raises:
        ConfigError: Fewer than two skeptics, two of one kind, an object that is not a skeptic
            or an aggregator, or a bad time-out.
    """

    skeptics: Sequence[Skeptic]
    aggregator: Aggregator
    aggregator_name: str = "aggregator"
    timeout_s: float = 30.0
    overconfidence: float = DEFAULT_OVERCONFIDENCE

    def __post_init__(self) -> None:
        self.skeptics = tuple(self.skeptics)
        for skeptic in self.skeptics:
            if not isinstance(skeptic, Skeptic):
                raise ConfigError(
                    f"{skeptic!r} is not a skeptic: it needs a `kind` and `async review(request)`"
                )
        kinds = [s.kind for s in self.skeptics]
        if len(kinds) < MIN_VALID_VERDICTS:
            raise ConfigError(
                f"a skeptic panel needs at least {MIN_VALID_VERDICTS} skeptics of distinct kinds "
                f"(got {kinds!r}); list two or more in [intervention] skeptics, e.g. "
                '["empirical-auditor", "devils-advocate", "diversity-champion"]'
            )
        if len(set(kinds)) != len(kinds):
            dupes = sorted({k for k in kinds if kinds.count(k) > 1})
            raise ConfigError(
                f"skeptic panel {kinds!r} has several skeptics of kind {dupes!r}; panel members "
                "must be of distinct kinds (one skeptic under two names is still one reviewer)"
            )
        if not isinstance(self.aggregator, Aggregator):
            raise ConfigError(f"{self.aggregator!r} is not an aggregator: it needs aggregate()")
        if not self.timeout_s > 0.0:
            raise ConfigError(f"skeptic timeout_s={self.timeout_s!r} must be > 0 seconds")

    @classmethod
    def from_context(cls, context: BuildContext) -> SkepticPanel:
        """Build the configured panel: ``[intervention] skeptics``, ``aggregator``, time-out.

        Args:
            context: The kernel.

        Returns:
            The panel.

        Raises:
            ConfigError: As for the constructor, naming the configuration keys.
            PluginError: A skeptic or the aggregator failed to build.
        """
        settings = context.settings.intervention
        skeptics = []
        for name in settings.skeptics:
            obj = context.build("skeptic", name)
            if not isinstance(obj, Skeptic):
                raise PluginError(
                    f"skeptic {name!r} built {type(obj).__name__}, which lacks `kind` or "
                    "`async review(request)`"
                )
            skeptics.append(obj)
        aggregator = context.build("aggregator", settings.aggregator)
        if not isinstance(aggregator, Aggregator):
            raise PluginError(
                f"aggregator {settings.aggregator!r} built {type(aggregator).__name__}, which "
                "lacks aggregate(verdicts)"
            )
        try:
            return cls(
                skeptics,
                aggregator,
                aggregator_name=settings.aggregator,
                timeout_s=settings.skeptic_timeout_s,
                overconfidence=settings.overconfidence,
            )
        except ConfigError as exc:
            raise ConfigError(f"[intervention] skeptics = {settings.skeptics!r}: {exc}") from exc

    async def _one(
        self, skeptic: Skeptic, request: ReviewRequest
    ) -> SkepticVerdict | SkepticFailure:
        kind = skeptic.kind
        try:
            verdict: object = await call_with_deadline(
                lambda: skeptic.review(request), self.timeout_s, what=f"skeptic {kind!r}"
            )
        except DeadlineExceeded as exc:  # its verdict, if it ever comes, is discarded
            return SkepticFailure(kind=kind, failure="timeout", reason=str(exc))
        except MalformedReplyError as exc:
            return SkepticFailure(kind=kind, failure="malformed", reason=_reason(exc))
        except Exception as exc:  # a skeptic must never take the panel down: record, fail closed
            return SkepticFailure(kind=kind, failure="error", reason=_reason(exc))
        if not isinstance(verdict, SkepticVerdict):
            return SkepticFailure(
                kind=kind,
                failure="invalid",
                reason=f"review() returned {type(verdict).__name__}, not a SkepticVerdict",
            )
        if verdict.kind != kind:
            verdict = verdict.model_copy(update={"kind": kind})
        return verdict

    async def run(
        self, request: ReviewRequest, *, track_record: TrackRecord | None = None
    ) -> PanelRun:
        """Review one payload with every skeptic concurrently and aggregate the verdicts.

        Args:
            request: What to review.
            track_record: The caller's track record (the trust formula's ``R``).

        Returns:
            The run: verdicts, failures, anonymised verdicts and the checked result, or
            ``closed_reason`` when fewer than two valid verdicts came back.

        Raises:
            AggregatorError: The aggregator raised or broke a kernel invariant.
        """
        outcomes = await asyncio.gather(*(self._one(s, request) for s in self.skeptics))
        verdicts = tuple(o for o in outcomes if isinstance(o, SkepticVerdict))
        failures = tuple(o for o in outcomes if isinstance(o, SkepticFailure))
        if len(verdicts) < MIN_VALID_VERDICTS:
            return PanelRun(
                verdicts=verdicts,
                failures=failures,
                closed_reason=(
                    f"{len(verdicts)} valid verdict(s) of {len(self.skeptics)}; the panel needs "
                    f"{MIN_VALID_VERDICTS} (failed: "
                    + ", ".join(f"{f.kind} {f.failure}" for f in failures)
                    + ")"
                ),
            )
        anonymous = anonymise(verdicts, track_record=track_record, attributes=request.attributes)
        try:
            raw = self.aggregator.aggregate(anonymous)
        except AggregatorError:
            raise
        except Exception as exc:
            raise AggregatorError(
                f"aggregator {self.aggregator_name!r} raised {_reason(exc)}"
            ) from exc
        result = check_panel_result(
            raw, anonymous, aggregator=self.aggregator_name, overconfidence=self.overconfidence
        )
        return PanelRun(verdicts=verdicts, failures=failures, anonymous=anonymous, result=result)


def _reason(exc: BaseException) -> str:
    text = redact_text(str(exc))  # it goes into the trace: never a key a server echoed
    return f"{type(exc).__name__}: {text}"[:4000] if text else type(exc).__name__


__all__ = ["MIN_VALID_VERDICTS", "Aggregator", "Skeptic", "SkepticPanel"]
