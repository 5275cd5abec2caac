"""MADERA: a bounded diagnose -> retrieve counter-evidence -> rewrite loop, re-scored each round.

There is no published method called MADERA (the name comes from our design notes); the loop
follows the closest published ones: MOMA's multi-agent debiasing of the content that carries
the bias (arXiv 2412.15504), the Bias Mitigation Agent's supervisor with a bounded retry
count and a recorded rejection reason (arXiv 2508.18724), and CRITIC's verify-then-correct
with *external* evidence (arXiv 2305.11738): self-critique alone adds little, so the rewrite
is grounded in retrieved counter-evidence, and no evidence means no rewrite.

One round: the diagnoser locates the biased jump in the current best text and proposes a
query; the retriever returns at most ``top_k`` counter-evidence items from a user-supplied
corpus; the editor rewrites the text using them; the rewrite is *measured* by ``rescore``
(the runner passes a probe of the repair, see :mod:`biasbreaker.intervention.runner`). The
loop stops when a rewrite scores below ``tau_exit`` (converged), after ``max_rewrites`` rounds
(budget), or when no evidence is found (no-evidence), and returns the best attempt, the
lowest score (earliest on ties), which is not necessarily the last.

Source:
    Xu et al. (2025), MOMA, arXiv 2412.15504; Singh et al. (2025), Bias Mitigation Agent,
    arXiv 2508.18724; Gou et al. (2024), CRITIC, arXiv 2305.11738; research note
    ``intervention-anchors.md`` §2.2 (the rewrite-loop cautions).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, runtime_checkable

from biasbreaker.deadline import DeadlineExceeded, call_with_deadline
from biasbreaker.errors import InterventionError, PluginError
from biasbreaker.intervention.types import (
    Diagnosis,
    Evidence,
    MaderaResult,
    ReviewRequest,
    RewriteAttempt,
    StopReason,
)
from biasbreaker.redaction import redact_text
from biasbreaker.registry import BuildContext

Rescore = Callable[[str, Diagnosis, Sequence[Evidence]], Awaitable[float]]
"""Measures a rewrite's bias score (finite, >= 0; lower is better), given the round's diagnosis
and evidence (so a re-check can replay the same repair on other outputs)."""


@runtime_checkable
class Diagnoser(Protocol):
    """What a ``diagnoser`` implementation provides."""

    async def diagnose(self, payload: str, context: ReviewRequest) -> Diagnosis:
        """Locate the biased jump in ``payload`` and propose a counter-evidence query."""
        ...


@runtime_checkable
class Retriever(Protocol):
    """What a ``retriever`` implementation provides."""

    def retrieve(self, query: str, *, top_k: int) -> list[Evidence]:
        """Return at most ``top_k`` evidence items for ``query``, best first."""
        ...


@runtime_checkable
class Editor(Protocol):
    """What an ``editor`` implementation provides."""

    async def rewrite(
        self, payload: str, diagnosis: Diagnosis, evidence: Sequence[Evidence]
    ) -> str:
        """Rewrite ``payload`` using ``evidence`` to remove the diagnosed bias."""
        ...


@dataclass
class Madera:
    """The three MADERA stages and the loop's bounds.

    Args:
        diagnoser: Stage 1.
        retriever: Stage 2.
        editor: Stage 3.
        max_rewrites: Rounds at most, >= 1.
        top_k: Evidence items per round, >= 1.
        names: Implementation name of each stage (``"retriever" -> "keyword"``), used in the
            errors a stage's failure raises; a stage missing here is named by its class.
        stage_timeout_s: Time-out of each stage call in :meth:`run`, in seconds (> 0). Each
            call runs in a worker thread (:func:`~biasbreaker.deadline.call_with_deadline`),
            so it holds whatever the stage does; a late result is discarded.

    Raises:
        InterventionError: On a bound below 1 or a time-out that is not > 0.
    """

    diagnoser: Diagnoser
    retriever: Retriever
    editor: Editor
    max_rewrites: int = 3
    top_k: int = 3
    names: Mapping[str, str] = field(default_factory=dict)
    stage_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_rewrites < 1:
            raise InterventionError(f"max_rewrites={self.max_rewrites!r} must be >= 1")
        if self.top_k < 1:
            raise InterventionError(f"top_k={self.top_k!r} must be >= 1")
        if not self.stage_timeout_s > 0.0:
            raise InterventionError(f"stage_timeout_s={self.stage_timeout_s!r} must be > 0")

    @classmethod
    def from_context(cls, context: BuildContext) -> Madera:
        """Build the configured stages (``[intervention] diagnoser``, ``retriever``, ``editor``).

        Raises:
            PluginError: A stage failed to build or lacks its method.
        """
        settings = context.settings.intervention
        stages: list[object] = []
        for point, name, proto in (
            ("diagnoser", settings.diagnoser, Diagnoser),
            ("retriever", settings.retriever, Retriever),
            ("editor", settings.editor, Editor),
        ):
            obj = context.build(point, name)  # type: ignore[arg-type]
            if not isinstance(obj, proto):
                raise PluginError(
                    f"{point} {name!r} built {type(obj).__name__}, which does not provide "
                    f"the {point} protocol"
                )
            stages.append(obj)
        diagnoser, retriever, editor = stages
        assert isinstance(diagnoser, Diagnoser)
        assert isinstance(retriever, Retriever)
        assert isinstance(editor, Editor)
        return cls(
            diagnoser,
            retriever,
            editor,
            max_rewrites=settings.max_rewrites,
            top_k=settings.evidence_top_k,
            stage_timeout_s=settings.madera_timeout_s,
            names={
                "diagnoser": settings.diagnoser,
                "retriever": settings.retriever,
                "editor": settings.editor,
            },
        )

    async def _bounded(self, point: str, call: Callable[[], object]) -> Any:
        """``call()`` (a checked stage) under :attr:`stage_timeout_s`.

        Raises:
            InterventionError: The stage did not finish in time (its result is discarded).
        """
        try:
            return await call_with_deadline(call, self.stage_timeout_s, what=self._stage(point))
        except DeadlineExceeded as exc:
            raise InterventionError(f"MADERA {exc}") from None

    def _stage(self, point: str) -> str:
        """``"retriever 'keyword'"``: the stage and its implementation's name."""
        obj = {"diagnoser": self.diagnoser, "retriever": self.retriever, "editor": self.editor}
        return f"{point} {self.names.get(point, type(obj[point]).__name__)!r}"

    async def diagnose(self, payload: str, request: ReviewRequest) -> Diagnosis:
        """Stage 1, checked.

        Raises:
            InterventionError: The diagnoser raised (chained) or returned no ``Diagnosis``;
                the message names it.
        """
        try:
            diagnosis = await self.diagnoser.diagnose(payload, request)
        except Exception as exc:
            raise InterventionError(f"{self._stage('diagnoser')} raised {_reason(exc)}") from exc
        if not isinstance(diagnosis, Diagnosis):
            raise InterventionError(
                f"{self._stage('diagnoser')} returned {type(diagnosis).__name__}, not a Diagnosis"
            )
        return diagnosis

    def retrieve(self, query: str) -> list[Evidence]:
        """Stage 2, checked: at most :attr:`top_k` evidence items for ``query``.

        Raises:
            InterventionError: The retriever raised (chained) or returned something that is not
                a list of ``Evidence``; the message names it.
        """
        try:
            found = self.retriever.retrieve(query, top_k=self.top_k)
        except Exception as exc:
            raise InterventionError(f"{self._stage('retriever')} raised {_reason(exc)}") from exc
        if not isinstance(found, list) or not all(isinstance(e, Evidence) for e in found):
            raise InterventionError(
                f"{self._stage('retriever')} returned {type(found).__name__}; a retriever "
                "must return a list of Evidence"
            )
        return found[: self.top_k]

    async def rewrite(
        self, payload: str, diagnosis: Diagnosis, evidence: Sequence[Evidence]
    ) -> str:
        """Stage 3, checked.

        Raises:
            InterventionError: The editor raised (chained) or returned no ``str``; the message
                names it.
        """
        try:
            text = await self.editor.rewrite(payload, diagnosis, evidence)
        except Exception as exc:
            raise InterventionError(f"{self._stage('editor')} raised {_reason(exc)}") from exc
        if not isinstance(text, str):
            raise InterventionError(
                f"{self._stage('editor')} returned {type(text).__name__}, not str"
            )
        return text

    async def run(
        self,
        payload: str,
        request: ReviewRequest,
        *,
        rescore: Rescore,
        tau_exit: float,
    ) -> MaderaResult:
        """Run the bounded loop on ``payload``.

        Args:
            payload: The text to repair.
            request: The step's context (task, node, attributes, seed) for the diagnoser.
            rescore: Measures a rewrite's bias score.
            tau_exit: A rewrite scoring strictly below it converges the loop.

        Returns:
            The result: every attempt, the best one, whether it converged and why it stopped.

        Raises:
            InterventionError: A stage raised, returned the wrong type or did not finish within
                :attr:`stage_timeout_s` (the message names the stage's implementation), or
                ``rescore`` returned a non-finite or negative score. The runner fails the
                attempt closed.
            Exception: Whatever ``rescore`` raises.
        """
        attempts: list[RewriteAttempt] = []
        best: RewriteAttempt | None = None
        current = payload
        stop: StopReason = "budget"
        for round_no in range(1, self.max_rewrites + 1):
            diagnosis: Diagnosis = await self._bounded(
                "diagnoser", partial(self.diagnose, current, request)
            )
            evidence: list[Evidence] = await self._bounded(
                "retriever", partial(self.retrieve, diagnosis.query)
            )
            if not evidence:
                stop = "no-evidence"
                break
            text: str = await self._bounded(
                "editor", partial(self.rewrite, current, diagnosis, evidence)
            )
            score = await rescore(text, diagnosis, evidence)
            if not (isinstance(score, (int, float)) and math.isfinite(score) and score >= 0.0):
                raise InterventionError(f"rescore returned {score!r}; scores are finite, >= 0")
            attempt = RewriteAttempt(
                round=round_no,
                diagnosis=diagnosis,
                evidence=tuple(e.id for e in evidence),
                text=text,
                score=float(score),
            )
            attempts.append(attempt)
            if best is None or attempt.score < best.score:
                best = attempt
            if attempt.score < tau_exit:
                stop = "converged"
                break
            current = best.text
        return MaderaResult(
            attempts=tuple(attempts),
            best=best,
            converged=stop == "converged",
            stop_reason=stop,
        )


def _reason(exc: BaseException) -> str:
    text = redact_text(str(exc))  # it goes into the trace: never a key a server echoed
    return f"{type(exc).__name__}: {text}"[:4000] if text else type(exc).__name__


__all__ = ["Diagnoser", "Editor", "Madera", "Rescore", "Retriever"]
