"""The re-runs one probed step makes, by kind: counted the same at configuration and at run time.

A probed step re-runs its node once per call the probe draws (:meth:`biasbreaker.probe.Probe.draw`):

* ``k`` one-axis counterfactual variants (fewer when the input's axes offer fewer distinct
  swaps);
* ``r`` same-group resamples;
* one *joint* variant (``[probe] joint``) when the input names two or more axes;
* one *per-person* variant (``[probe] per_person``) per person and per-person permutation
  when the input names persons of different groups of an axis (two persons of a two-group
  axis such as gender: two).

:class:`RerunCount` adds them up. ``[probe] max_calls_per_step`` is checked against that count
at run time (:meth:`biasbreaker.probe.budget.ProbeBudget.reserve`, the held step's message
naming each kind), and the configuration's advice when the bound is too low
(:func:`advice`) counts the same kinds for the inputs it gives as examples, so the two say
the same number for the same input. Duplicate calls and calls the probe's cache answers are
made once: a step may make fewer re-runs than its count, never more.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RerunCount:
    """The calls one probed step draws, by kind (each >= 0).

    Args:
        variants: One-axis counterfactual variants (``k``).
        resamples: Same-group resamples (``r``).
        joint: Joint variants (0 or 1).
        per_person: Per-person variants.
    """

    variants: int
    resamples: int
    joint: int = 0
    per_person: int = 0

    @property
    def total(self) -> int:
        """The re-runs, every kind together."""
        return self.variants + self.resamples + self.joint + self.per_person

    def describe(self) -> str:
        """``"4 counterfactual variants + 2 resamples + 1 joint + 2 per-person"`` (kinds > 0)."""
        parts = [f"{self.variants} counterfactual variants", f"{self.resamples} resamples"]
        if self.joint:
            parts.append(f"{self.joint} joint")
        if self.per_person:
            parts.append(f"{self.per_person} per-person")
        return " + ".join(parts)


def advice(name: str, k: int, r: int, *, joint: bool, per_person: bool) -> str:
    """What ``[probe] name`` must be at least, for the inputs a run sees, counted by kind.

    Args:
        name: ``"max_calls_per_step"`` or ``"max_calls_per_run"``.
        k: ``[probe] k``.
        r: ``[probe] r``.
        joint: ``[probe] joint``.
        per_person: ``[probe] per_person``.

    Returns:
        A clause: ``k + r`` for an input naming one axis, then (as configured) the count for
        an input naming two axes (the joint variant) and for one naming two persons of
        different genders by name (names tell a second axis too: the joint variant, and two
        per-person variants).
    """
    plain = RerunCount(k, r)
    text = f"set {name} to at least {plain.total} ({plain.describe()}: an input naming one axis)"
    if joint:
        two_axes = RerunCount(k, r, joint=1)
        text += (
            f"; {two_axes.total} for an input naming two axes, e.g. 'A Muslim man applied' "
            f"({two_axes.describe()})"
        )
    if per_person:
        persons = RerunCount(k, r, joint=1 if joint else 0, per_person=2)
        text += (
            f"; {persons.total} for one naming two persons of different genders by name, e.g. "
            f"'Mary Carter and John Baker applied' ({persons.describe()})"
        )
    return text


__all__ = ["RerunCount", "advice"]
