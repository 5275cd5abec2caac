"""Score pre-computed response pairs: detection without an LLM ("bring your own responses").

LangFair users ask to score responses they already have (cvs-health/langfair#239). This
module reads original/counterfactual response pairs, optionally with a same-group resample
per pair, and reports per scorer the mean counterfactual divergence, the mean same-group
divergence (the noise floor, when resamples are given), their difference, a bootstrap
interval, and any dataset-level figures the scorer publishes (e.g. LangFair's similarities).

Input format (JSON Lines, UTF-8, one object per line; blank lines are skipped)::

    {"original": "He is a strong candidate.",            # required: the original output
     "counterfactual": "She is a good candidate.",       # required: the counterfactual output
     "resample": "He is a solid candidate.",             # optional: another sample, same input
     "id": "q17",                                        # optional: your identifier
     "axis": "gender",                                   # optional: the swapped axis ...
     "groups": [["male", "female"], ["female", "male"]]} # ... and the group mapping applied

Unknown keys are errors (a misspelt key would otherwise be ignored silently). Either every
line has ``resample`` or none does.

Neutralisation for scorers that compare neutralised text (``compares_neutralised``):
``map-back`` maps the counterfactual back with the line's ``axis``/``groups`` (grammar-aware);
``mask`` replaces protected terms in both texts by neutral words (LangFair's
``neutralize_tokens``); ``auto`` maps back when a line has ``groups`` and masks otherwise;
``none`` compares raw text.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from biasbreaker.errors import InputError, ProbeError
from biasbreaker.metrics.stats import bootstrap_interval, mean
from biasbreaker.probe.counterfactual import CounterfactualGenerator, CounterfactualMapping
from biasbreaker.probe.scoring import ReportingScorer, Scorer, check_divergences

__all__ = [
    "Neutralisation",
    "PairsReport",
    "ResponsePair",
    "ScorerSummary",
    "check_pairs",
    "read_pairs",
    "score_pairs",
]

Neutralisation = Literal["auto", "map-back", "mask", "none"]
_KEYS = frozenset({"original", "counterfactual", "resample", "id", "axis", "groups"})


@dataclass(frozen=True)
class ResponsePair:
    """One pre-computed pair.

    Args:
        original: The original output.
        counterfactual: The output for the counterfactual input.
        resample: Another output for the original input, or ``None``.
        id: The caller's identifier, or ``None``.
        axis: The swapped axis, or ``None``.
        groups: ``(from, to)`` group pairs of the swap, or ``()``.
        where: Where the pair was read, ``"FILE:LINE"`` (:func:`read_pairs`), for messages;
            not part of equality.
    """

    original: str
    counterfactual: str
    resample: str | None = None
    id: str | None = None
    axis: str | None = None
    groups: tuple[tuple[str, str], ...] = ()
    where: str = field(default="", compare=False)

    def label(self, index: int) -> str:
        """How messages name this pair: ``FILE:LINE``, else ``pair N`` (1-based), with its id."""
        name = self.where or f"pair {index + 1}"
        return f"{name} (id {self.id})" if self.id else name


def read_pairs(path: str | Path) -> list[ResponsePair]:
    """Read a pairs file (format in the module docstring).

    Args:
        path: The JSON Lines file.

    Returns:
        The pairs, in file order.

    Raises:
        InputError: The file cannot be read, a line is not a JSON object, a required field is
            missing or not text, a key is unknown, ``axis`` and ``groups`` are not given
            together, or only some lines have ``resample``. The message names file and line.
    """
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"{p}: cannot read the pairs file ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    pairs: list[ResponsePair] = []
    with_resample: list[int] = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{p}:{lineno}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); each line must be "
                'one object like {"original": "...", "counterfactual": "..."}'
            ) from exc
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(rec).__name__}")
        unknown = sorted(set(rec) - _KEYS)
        if unknown:
            raise InputError(
                f"{where}: unknown key(s) {unknown}; allowed: {', '.join(sorted(_KEYS))}"
            )
        for key in ("original", "counterfactual"):
            if key not in rec:
                raise InputError(
                    f"{where}: field {key!r} is missing; every line needs 'original' and "
                    "'counterfactual' (the two response texts)"
                )
            if not isinstance(rec[key], str):
                raise InputError(
                    f"{where}: field {key!r} = {json.dumps(rec[key])} must be a string (the "
                    "response text)"
                )
        resample = rec.get("resample")
        if resample is not None and not isinstance(resample, str):
            raise InputError(f"{where}: field 'resample' = {resample!r} must be a string or absent")
        if resample is not None:
            with_resample.append(lineno)
        axis, groups = rec.get("axis"), rec.get("groups")
        if (axis is None) != (groups is None):
            given, missing = ("axis", "groups") if groups is None else ("groups", "axis")
            raise InputError(
                f"{where}: {given!r} = {json.dumps(rec[given])} is given without {missing!r}; "
                'give \'axis\' and \'groups\' together (e.g. "axis": "gender", "groups": '
                '[["male", "female"]]), or neither to mask the axes'
            )
        parsed_groups: tuple[tuple[str, str], ...] = ()
        if groups is not None:
            if not isinstance(axis, str) or not (
                isinstance(groups, list)
                and groups
                and all(
                    isinstance(g, list) and len(g) == 2 and all(isinstance(x, str) for x in g)
                    for g in groups
                )
            ):
                raise InputError(
                    f"{where}: 'axis' must be a string and 'groups' a list of [from, to] group "
                    f'pairs such as [["male", "female"], ["female", "male"]]; got {groups!r}'
                )
            parsed_groups = tuple((g[0], g[1]) for g in groups)
        ident = rec.get("id")
        pairs.append(
            ResponsePair(
                original=rec["original"],
                counterfactual=rec["counterfactual"],
                resample=resample,
                id=None if ident is None else str(ident),
                axis=axis,
                groups=parsed_groups,
                where=where,
            )
        )
    if not pairs:
        raise InputError(f"{p}: no pairs (the file is empty)")
    if with_resample and len(with_resample) != len(pairs):
        raise InputError(
            f"{p}: {len(with_resample)} of {len(pairs)} lines have 'resample' (first at line "
            f"{with_resample[0]}); give a resample on every line or on none"
        )
    return pairs


@dataclass(frozen=True)
class ScorerSummary:
    """One scorer's figures over all pairs.

    Args:
        scorer: The scorer's name.
        counterfactual: Mean divergence original ↔ counterfactual, in [0, 1].
        counterfactual_ci: Bootstrap interval of that mean.
        same_group: Mean divergence original ↔ resample, or ``None`` without resamples.
        excess: ``counterfactual − same_group`` (unclipped), or ``None``.
        excess_ci: Bootstrap interval of the excess (pairs resampled jointly), or ``None``.
        reported: Dataset-level figures from :class:`ReportingScorer` (name → value).
    """

    scorer: str
    counterfactual: float
    counterfactual_ci: tuple[float, float] | None
    same_group: float | None
    excess: float | None
    excess_ci: tuple[float, float] | None
    reported: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PairsReport:
    """What :func:`score_pairs` returns (JSON via :meth:`to_dict`)."""

    n: int
    with_resamples: bool
    neutralisation: Neutralisation
    confidence: float
    scorers: tuple[ScorerSummary, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form."""
        return {
            "n": self.n,
            "with_resamples": self.with_resamples,
            "neutralisation": self.neutralisation,
            "confidence": self.confidence,
            "scorers": [
                {
                    "scorer": s.scorer,
                    "counterfactual": s.counterfactual,
                    "counterfactual_ci": list(s.counterfactual_ci) if s.counterfactual_ci else None,
                    "same_group": s.same_group,
                    "excess": s.excess,
                    "excess_ci": list(s.excess_ci) if s.excess_ci else None,
                    "reported": dict(s.reported),
                }
                for s in self.scorers
            ],
        }


def score_pairs(
    pairs: Sequence[ResponsePair],
    scorers: Sequence[Scorer],
    *,
    generator: CounterfactualGenerator | None = None,
    neutralisation: Neutralisation = "auto",
    mask_axes: Sequence[str] | None = None,
    mask_names: bool = True,
    bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> PairsReport:
    """Score pre-computed pairs with each scorer.

    Args:
        pairs: The pairs (e.g. from :func:`read_pairs`).
        scorers: The scorers.
        generator: Used for neutralisation (default: all shipped axes).
        neutralisation: See the module docstring.
        mask_axes: Axes masked in ``mask`` mode (default: the generator's).
        mask_names: Whether names are masked in ``mask`` mode.
        bootstrap: Bootstrap replicates (0: no intervals).
        confidence: Two-sided level of the intervals.
        seed: Seed of the bootstrap.

    Returns:
        The report.

    Raises:
        InputError: A pair's ``axis`` is not loaded in the generator's term lists, a group in
            its ``groups`` is not a group of that axis, a ``mask_axes`` entry is not loaded, or
            ``map-back`` mode meets a pair without ``groups``; messages name the pair's file and
            line and the allowed names.
        ProbeError: A scorer raised or returned bad values.
        ValueError: No pairs or no scorers.
    """
    if not pairs or not scorers:
        raise ValueError("score_pairs needs at least one pair and one scorer")
    gen = generator if generator is not None else CounterfactualGenerator()
    check_pairs(pairs, gen, mask_axes)
    with_resamples = pairs[0].resample is not None
    originals = [p.original for p in pairs]
    counterfactuals = [p.counterfactual for p in pairs]
    resamples = [p.resample or "" for p in pairs] if with_resamples else []
    neutral_orig, neutral_cf, neutral_res = _neutralised(
        pairs, gen, neutralisation, mask_axes, mask_names
    )
    summaries = []
    for i, scorer in enumerate(scorers):
        if scorer.compares_neutralised and neutralisation != "none":
            a, b, c = neutral_orig, neutral_cf, neutral_res
        else:
            a, b, c = originals, counterfactuals, resamples
        try:
            d_cf = check_divergences(scorer.name, scorer.divergence(a, b), len(a))
            d_same = check_divergences(scorer.name, scorer.divergence(a, c), len(a)) if c else None
            reported = dict(scorer.report(a, b)) if isinstance(scorer, ReportingScorer) else {}
        except ProbeError:
            raise
        except Exception as exc:
            raise ProbeError(f"scorer {scorer.name!r} raised {exc!r} while scoring pairs") from exc
        rng = random.Random(f"{seed}:pairs:{i}")
        cf_ci = ex_ci = None
        excess = None
        if bootstrap > 0:
            cf_ci = bootstrap_interval(
                [d_cf], lambda s: mean(s[0]), replicates=bootstrap, confidence=confidence, rng=rng
            )
        if d_same is not None:
            diffs = [x - y for x, y in zip(d_cf, d_same, strict=True)]
            excess = mean(diffs)
            if bootstrap > 0:
                ex_ci = bootstrap_interval(
                    [diffs],
                    lambda s: mean(s[0]),
                    replicates=bootstrap,
                    confidence=confidence,
                    rng=rng,
                )
        summaries.append(
            ScorerSummary(
                scorer=scorer.name,
                counterfactual=mean(d_cf),
                counterfactual_ci=cf_ci,
                same_group=mean(d_same) if d_same is not None else None,
                excess=excess,
                excess_ci=ex_ci,
                reported=reported,
            )
        )
    return PairsReport(
        n=len(pairs),
        with_resamples=with_resamples,
        neutralisation=neutralisation,
        confidence=confidence,
        scorers=tuple(summaries),
    )


def check_pairs(
    pairs: Sequence[ResponsePair],
    generator: CounterfactualGenerator,
    mask_axes: Sequence[str] | None = None,
) -> None:
    """Check every pair's ``axis`` and ``groups``, and ``mask_axes``, against the term lists.

    A misspelt group (``"femal"``) would otherwise map nothing back and score a swap as a
    difference; a misspelt mask axis would mask nothing.

    Args:
        pairs: The pairs.
        generator: The generator whose term lists (``generator.terms``) define the axes.
        mask_axes: Axes to mask, or ``None``.

    Raises:
        InputError: Naming the pair (file and line), the bad value and the allowed names.
    """
    axes = generator.terms.axis_names
    for name in mask_axes or ():
        if name not in axes:
            raise InputError(f"mask axis {name!r} is not loaded; loaded axes: {', '.join(axes)}")
    for i, pair in enumerate(pairs):
        if pair.axis is None:
            continue
        if pair.axis not in axes:
            raise InputError(
                f"{pair.label(i)}: axis {pair.axis!r} is not loaded; loaded axes: "
                f"{', '.join(axes)} (the [probe] axes of the configuration)"
            )
        groups = generator.terms.axis(pair.axis).groups
        for source, target in pair.groups:
            for group in (source, target):
                if group not in groups:
                    raise InputError(
                        f"{pair.label(i)}: groups {[list(g) for g in pair.groups]}: {group!r} is "
                        f"not a group of axis {pair.axis!r}; its groups: {', '.join(groups)}"
                    )


def _neutralised(
    pairs: Sequence[ResponsePair],
    gen: CounterfactualGenerator,
    mode: Neutralisation,
    mask_axes: Sequence[str] | None,
    mask_names: bool,
) -> tuple[list[str], list[str], list[str]]:
    orig, cf, res = [], [], []
    for i, p in enumerate(pairs):
        use_map = mode == "map-back" or (mode == "auto" and p.groups)
        if mode == "none":
            o, c, r = p.original, p.counterfactual, p.resample
        elif use_map:
            if not p.groups or p.axis is None:
                raise InputError(
                    f"{p.label(i)}: neutralisation 'map-back' needs 'axis' and 'groups' on "
                    "every line; add them or use 'mask'"
                )
            mapping = CounterfactualMapping(p.axis, p.groups)
            try:
                c = str(gen.map_back(p.counterfactual, mapping))
            except (KeyError, ValueError) as exc:
                groups = [list(g) for g in p.groups]
                raise InputError(f"{p.label(i)}: cannot map back with {groups}: {exc}") from exc
            o, r = p.original, p.resample
        else:
            o = str(gen.neutralise(p.original, axes=mask_axes, names=mask_names))
            c = str(gen.neutralise(p.counterfactual, axes=mask_axes, names=mask_names))
            r = (
                None
                if p.resample is None
                else str(gen.neutralise(p.resample, axes=mask_axes, names=mask_names))
            )
        orig.append(o)
        cf.append(c)
        if r is not None:
            res.append(r)
    return orig, cf, res
