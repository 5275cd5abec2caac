"""Report types shared by the property verifiers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from biasbreaker.trace.lines import StepLineV1
from biasbreaker.types import JSONValue

MAX_KEPT_VIOLATIONS: Final = 100
"""Violations kept per property (all are counted)."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One place where a property fails.

    Args:
        step: The step index at which the property fails.
        message: What is wrong there, with the values involved.
    """

    step: int
    message: str

    def to_json(self) -> dict[str, JSONValue]:
        """Return the violation as plain JSON."""
        return {"step": self.step, "message": self.message}


@dataclass(frozen=True, slots=True)
class PropertyReport:
    """The verdict on one property over one trace.

    Args:
        name: The property's name (e.g. ``"anti-thrash"``).
        version: The property's version (e.g. ``"v1"``).
        checked: How many instances were checked (steps, episodes or transitions; the
            property's docstring says which).
        violation_count: How many instances failed.
        violations: The first :data:`MAX_KEPT_VIOLATIONS` failures, in step order.
        note: A remark (e.g. where the run escalated); empty if none.
        what: What was checked, in words (e.g. ``"2 episode(s)"``); empty: ``checked``.
        vacuous: Why the verdict is vacuous — nothing the property speaks about happened
            (e.g. ``"the breaker never tripped"``); empty when it was exercised.
    """

    name: str
    version: str
    checked: int
    violation_count: int
    violations: tuple[Violation, ...] = ()
    note: str = ""
    what: str = ""
    vacuous: str = ""

    @property
    def holds(self) -> bool:
        """Whether no instance failed."""
        return self.violation_count == 0

    def to_json(self) -> dict[str, JSONValue]:
        """Return the report as plain JSON."""
        return {
            "name": self.name,
            "version": self.version,
            "holds": self.holds,
            "checked": self.checked,
            "violation_count": self.violation_count,
            "violations": [v.to_json() for v in self.violations],
            "note": self.note,
            "what": self.what,
            "vacuous": self.vacuous,
        }


@dataclass
class ViolationLog:
    """Collects violations, keeping the first :data:`MAX_KEPT_VIOLATIONS`."""

    count: int = 0
    kept: list[Violation] = field(default_factory=list)

    def add(self, step: int, message: str) -> None:
        """Record one violation."""
        self.count += 1
        if len(self.kept) < MAX_KEPT_VIOLATIONS:
            self.kept.append(Violation(step, message))


class Verifier(Protocol):
    """A streaming property verifier: fed every record in order, then asked for a report."""

    def observe(self, records: Sequence[StepLineV1]) -> None:
        """Take the next records (in step order; a block at a time, for speed)."""
        ...

    def report(self) -> PropertyReport:
        """Return the verdict over the records observed so far."""
        ...


__all__ = ["MAX_KEPT_VIOLATIONS", "PropertyReport", "Verifier", "Violation", "ViolationLog"]
