"""The kernel's safety invariants around aggregation, enforced whatever plugin aggregates.

Three things happen here, in this order, for every panel run:

1. :func:`anonymise` strips the skeptics' identities, attaches the context terms the trust
   formula needs (``R`` from the caller's track record, ``I`` from the step's attributes) and
   puts the verdicts in a canonical, content-derived order labelled ``v1..vn``; so an
   aggregator cannot reward a name or a position.
2. The selected aggregator runs on the anonymised verdicts.
3. :func:`check_panel_result` checks its result and raises :class:`AggregatorError` when it
   breaks a rule: every verdict is either kept (weight > 0) or pruned; a verdict may be pruned
   only for overconfidence (:func:`is_overconfident`: high certainty and no evidence), never
   for disagreeing with the majority; the decision must be one some kept verdict made.

Source:
    Phase 4 design (M4) R2 "the minority-suppression trap"; Choi, Zhu & Li (2025), "When
    Identity Skews Debate", arXiv 2510.07517 (anonymised responses remove identity bias);
    research note ``intervention-anchors.md`` §2.1 and §4.5 (a dissent floor).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from biasbreaker.errors import AggregatorError
from biasbreaker.intervention.types import (
    PRUNE_OVERCONFIDENCE,
    AnonymousVerdict,
    PanelResult,
    SkepticVerdict,
    TrackRecord,
)

DEFAULT_OVERCONFIDENCE = 0.9
"""Default certainty at or above which an evidence-free verdict counts as overconfident."""


def is_overconfident(
    # equivalent mutants: annotations are never evaluated (`from __future__ import annotations`)
    verdict: AnonymousVerdict | SkepticVerdict,  # pragma: no mutate
    threshold: float = DEFAULT_OVERCONFIDENCE,
) -> bool:
    """Whether a verdict is overconfident: certainty >= ``threshold`` and no evidence cited.

    This is the only ground on which a verdict may be pruned. It does not look at the other
    verdicts: agreeing or disagreeing with the majority changes nothing.

    Args:
        verdict: The verdict.
        threshold: Certainty bound in (0.5, 1].

    Returns:
        ``verdict.confidence >= threshold and not verdict.has_evidence``.

    Raises:
        ValueError: If ``threshold`` is outside (0.5, 1].
    """
    if not (0.5 < threshold <= 1.0):
        raise ValueError(f"overconfidence threshold={threshold!r} must be in (0.5, 1]")
    return verdict.confidence >= threshold and not verdict.has_evidence


# equivalent mutants: annotations are never evaluated (`from __future__ import annotations`)
def domain_match(attribute: str | None, attributes: Sequence[str]) -> float:  # pragma: no mutate
    """The trust formula's ``I``: does the verdict address an attribute the input involves?

    Args:
        attribute: The verdict's attribute, or ``None``.
        attributes: The attributes the step's input involves (may be empty: unknown).

    Returns:
        1.0 on a match (case-insensitive), 0.0 when both are known and differ, 0.5 otherwise.
    """
    if attribute is None or not attributes:
        return 0.5
    wanted = {a.strip().lower() for a in attributes}
    return 1.0 if attribute.strip().lower() in wanted else 0.0


def _content_key(v: AnonymousVerdict) -> str:
    return json.dumps(
        [
            v.decision,
            v.confidence,
            v.critique,
            v.revision,
            list(v.evidence),
            v.attribute,
            v.reliability,
            v.domain_match,
        ],
        # equivalent mutant: the list holds no object, so sorting keys changes nothing
        sort_keys=True,  # pragma: no mutate
        # equivalent mutant: escaped or not, the key is injective, so the order stays canonical
        # (independent of input order and names), which is all anonymise promises
        ensure_ascii=False,  # pragma: no mutate
    )


def anonymise(
    verdicts: Sequence[SkepticVerdict],
    *,
    # equivalent mutants: annotations are never evaluated (`from __future__ import annotations`)
    track_record: TrackRecord | None = None,  # pragma: no mutate
    attributes: Sequence[str] = (),
) -> tuple[AnonymousVerdict, ...]:
    """Strip identities and put verdicts in canonical (content) order, labelled ``v1..vn``.

    Args:
        verdicts: The valid verdicts, in any order.
        track_record: The caller's track record (``R`` per kind); ``None`` gives 0.5 to all.
        attributes: Attributes the step's input involves, for ``I``.

    Returns:
        The anonymous verdicts, sorted by their content; permuting ``verdicts`` or renaming
        kinds (with their track records) gives the same tuple.
    """
    record = track_record or TrackRecord()
    unlabelled = [
        AnonymousVerdict(
            label="v1",
            decision=v.decision,
            critique=v.critique,
            revision=v.revision,
            confidence=v.confidence,
            evidence=v.evidence,
            attribute=v.attribute,
            reliability=record.reliability(v.kind),
            domain_match=domain_match(v.attribute, attributes),
        )
        for v in verdicts
    ]
    ordered = sorted(unlabelled, key=_content_key)
    return tuple(v.model_copy(update={"label": f"v{n}"}) for n, v in enumerate(ordered, 1))


def check_panel_result(
    result: object,
    verdicts: Sequence[AnonymousVerdict],
    *,
    aggregator: str,
    overconfidence: float = DEFAULT_OVERCONFIDENCE,
) -> PanelResult:
    """Check an aggregator's result against the kernel's invariants.

    Args:
        result: What the aggregator returned.
        verdicts: The anonymous verdicts it was given.
        aggregator: Its name, for the error message.
        overconfidence: The certainty bound of :func:`is_overconfident`.

    Returns:
        ``result``, checked.

    Raises:
        AggregatorError: If ``result`` is not a :class:`PanelResult`; names a verdict it was not
            given; leaves a verdict neither kept nor pruned, or both; gives a kept verdict a
            weight that is not > 0; prunes a verdict for a reason other than overconfidence or
            one that is not overconfident (e.g. for dissent); or reaches a decision no kept
            verdict made.
    """
    where = f"aggregator {aggregator!r}"
    if not isinstance(result, PanelResult):
        raise AggregatorError(
            f"{where} returned {type(result).__name__}; it must return a PanelResult"
        )
    by_label = {v.label: v for v in verdicts}
    pruned_labels = [p.label for p in result.pruned]
    kept = set(result.weights)
    unknown = (kept | set(pruned_labels)) - set(by_label)
    if unknown:
        raise AggregatorError(f"{where} refers to verdicts it was not given: {sorted(unknown)}")
    if len(set(pruned_labels)) != len(pruned_labels):
        raise AggregatorError(f"{where} pruned a verdict twice: {sorted(pruned_labels)}")
    both = kept & set(pruned_labels)
    if both:
        raise AggregatorError(f"{where} both kept and pruned {sorted(both)}")
    missing = set(by_label) - kept - set(pruned_labels)
    if missing:
        raise AggregatorError(
            f"{where} dropped {sorted(missing)} silently: every verdict must be kept (with a "
            "weight > 0) or pruned with a reason"
        )
    for label in sorted(kept):
        weight = result.weights[label]
        if not (math.isfinite(weight) and weight > 0.0):
            raise AggregatorError(
                f"{where} gave kept verdict {label} weight {weight!r}; a kept verdict's weight "
                "must be > 0 (a weight of 0 is a prune, and pruning needs overconfidence)"
            )
    for pruned in result.pruned:
        verdict = by_label[pruned.label]
        if pruned.reason != PRUNE_OVERCONFIDENCE:
            raise AggregatorError(
                f"{where} pruned {pruned.label} for {pruned.reason!r}; the only allowed reason "
                f"is {PRUNE_OVERCONFIDENCE!r} (never dissent)"
            )
        if not is_overconfident(verdict, overconfidence):
            raise AggregatorError(
                f"{where} pruned {pruned.label} (decision {verdict.decision!r}, confidence "
                f"{verdict.confidence}, evidence {list(verdict.evidence)!r}) which is not "
                f"overconfident (needs confidence >= {overconfidence} and no evidence); "
                "a verdict may never be pruned for disagreeing with the majority"
            )
    if not kept:
        raise AggregatorError(f"{where} pruned every verdict; at least one must be kept")
    if result.decision not in {by_label[label].decision for label in kept}:
        raise AggregatorError(f"{where} decided {result.decision!r}, which no kept verdict decided")
    return result


__all__ = [
    "DEFAULT_OVERCONFIDENCE",
    "anonymise",
    "check_panel_result",
    "domain_match",
    "is_overconfident",
]
