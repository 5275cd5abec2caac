"""The scorer contract (the ``scorer`` extension point) and the kernel's checks on scorers.

A scorer measures how different two outputs of a step are. The probe calls it in batches:
``divergence(originals, counterfactuals)`` compares ``originals[i]`` with
``counterfactuals[i]`` for every ``i`` and returns one number per pair,

* in [0, 1]: 0 means "the same" for what the scorer measures, 1 "maximally different";
* finite (no NaN, no infinity);
* symmetric in intent: ``d(a, b)`` and ``d(b, a)`` describe the same difference (a scorer
  whose formula is asymmetric, like BLEU, symmetrises it);
* deterministic: the same pair gives the same value, whatever else is in the batch.

``compares_neutralised`` tells the probe which text to hand over for a counterfactual
output: ``True`` → the output *mapped back* to the original groups
(:meth:`~biasbreaker.probe.CounterfactualGenerator.map_back`, "his wife" in a female variant's
"her husband"), so the words swapped on purpose do not count as a difference; ``False`` → the
raw output (LangFair's choice for cosine and sentiment). The same-group resamples are never
mapped (they are already in the original groups).

A scorer may also implement :class:`ReportingScorer` to give dataset-level figures named as
their sources publish them (e.g. LangFair's "RougeL Similarity" or strict sentiment parity),
which ``biasbreaker score`` prints beside the mean divergence.

Implementations are registered through the ``scorer`` hook; the first-party ones are in
``biasbreaker_plugins.scorers`` (``lexical``, ``semantic``, ``sentiment``, ``decision``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from biasbreaker.errors import InputError, PluginError, ProbeError
from biasbreaker.types import FrozenPayload

__all__ = [
    "Combine",
    "ReportingScorer",
    "Scorer",
    "as_text",
    "check_divergences",
    "check_scorer",
    "combine",
]

Combine = Literal["max", "mean"]
"""How several scorers' local scores combine into one: the largest (fail-safe) or the mean."""


@runtime_checkable
class Scorer(Protocol):
    """What a ``scorer`` implementation provides.

    Attributes:
        name: The scorer's registry name (``"lexical"``), shown in results and tables.
        compares_neutralised: Whether counterfactual outputs are mapped back to the original
            groups before comparison (see the module docstring).
    """

    name: str
    compares_neutralised: bool

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        """Divergence of each pair, batched.

        Args:
            originals: Texts, shape (n,).
            counterfactuals: Texts to compare with, shape (n,), ``counterfactuals[i]`` paired
                with ``originals[i]``.

        Returns:
            ``n`` floats in [0, 1], 0 = identical, 1 = maximally different.

        Raises:
            Exception: Anything; the probe turns it into ``ProbeError`` and fails closed.
        """
        ...


@runtime_checkable
class ReportingScorer(Scorer, Protocol):
    """A scorer that also reports dataset-level figures."""

    def report(
        self, originals: Sequence[str], counterfactuals: Sequence[str]
    ) -> Mapping[str, float]:
        """Dataset-level figures over all pairs, named as their source publishes them.

        Args:
            originals: Texts, shape (n,).
            counterfactuals: Texts, shape (n,), paired with ``originals``.

        Returns:
            Figure name → value (e.g. ``{"RougeL Similarity": 0.476}``).
        """
        ...


def check_scorer(obj: object, name: str) -> Scorer:
    """Check that a built ``scorer`` implementation satisfies :class:`Scorer`.

    Args:
        obj: What the factory returned.
        name: The implementation's registry name, for the message.

    Returns:
        ``obj``, typed.

    Raises:
        PluginError: ``obj`` lacks ``name``, ``compares_neutralised`` or ``divergence``.
    """
    missing = [
        attr
        for attr, ok in (
            ("name", isinstance(getattr(obj, "name", None), str)),
            ("compares_neutralised", isinstance(getattr(obj, "compares_neutralised", None), bool)),
            ("divergence", callable(getattr(obj, "divergence", None))),
        )
        if not ok
    ]
    if missing:
        raise PluginError(
            f"scorer {name!r} built a {type(obj).__name__} without {', '.join(missing)}; a scorer "
            "needs name: str, compares_neutralised: bool and divergence(originals, "
            "counterfactuals) -> list[float] (biasbreaker.probe.scoring.Scorer)"
        )
    assert isinstance(obj, Scorer)
    return obj


def check_divergences(scorer: str, values: object, n: int) -> list[float]:
    """Validate what a scorer returned for ``n`` pairs.

    Args:
        scorer: The scorer's name, for the message.
        values: The returned object.
        n: The number of pairs asked for.

    Returns:
        The values as floats.

    Raises:
        ProbeError: Not a sequence of ``n`` finite numbers in [0, 1].
    """
    if not isinstance(values, Sequence) or isinstance(values, (str, bytes)):
        raise ProbeError(
            f"scorer {scorer!r} returned {type(values).__name__}, not a list of {n} floats; "
            "the probe fails closed"
        )
    if len(values) != n:
        raise ProbeError(
            f"scorer {scorer!r} returned {len(values)} divergences for {n} pairs; the probe "
            "fails closed"
        )
    out: list[float] = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ProbeError(
                f"scorer {scorer!r} returned {v!r} (a {type(v).__name__}) for pair {i}; "
                "divergences are floats in [0, 1]"
            )
        f = float(v)
        if not math.isfinite(f) or not 0.0 <= f <= 1.0:
            raise ProbeError(
                f"scorer {scorer!r} returned {f!r} for pair {i}; divergences must be finite and "
                "in [0, 1]. The probe fails closed."
            )
        out.append(f)
    return out


def combine(values: Mapping[str, float], how: Combine) -> float:
    """Combine per-scorer local scores.

    Args:
        values: Scorer name → local score in [0, 1], at least one.
        how: ``"max"`` (a step is as biased as its most sensitive scorer says; fail-safe) or
            ``"mean"``.

    Returns:
        The combined score in [0, 1].

    Raises:
        ValueError: No values, or an unknown ``how``.
    """
    if not values:
        raise ValueError("no scorer values to combine")
    if how == "max":
        return max(values.values())
    if how == "mean":
        return math.fsum(values.values()) / len(values)
    raise ValueError(f"combine={how!r} must be 'max' or 'mean'")


def as_text(output: Any) -> str:
    """The text a scorer sees for a step output.

    ``str`` as is; anything else as canonical JSON (sorted keys, no ASCII escaping), so a
    dict-valued LangGraph state compares field by field and two equal states give equal text.
    NaN and infinity are not JSON: an output holding one is refused like any other non-JSON
    value, so the probe fails closed on it instead of scoring the text ``NaN``.

    Raises:
        ProbeError: The output is neither text nor JSON; the message names the first value
            that is not (its path and type, or NaN/infinity).
    """
    if isinstance(output, str):
        return output
    try:
        return json.dumps(
            output, sort_keys=True, ensure_ascii=False, separators=(", ", ": "), allow_nan=False
        )
    except (TypeError, ValueError) as exc:
        raise ProbeError(
            f"step output of type {type(output).__name__} is neither text nor JSON "
            f"({_json_problem(output, exc)}); return str or JSON-like data (dict/list/str/"
            "finite number/bool/None) from guarded steps"
        ) from exc


def _json_problem(value: Any, exc: Exception) -> str:
    """What makes ``value`` not JSON: the path and type of its first bad value."""
    try:
        FrozenPayload.of(value)
    except InputError as problem:
        return str(problem)
    return str(exc)
