"""The extension points: their names, and the configuration key that selects each.

A small module at the bottom of the kernel: the configuration (which key selects what) and
the registry (what is registered where) both import it, neither imports the other's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

PointName = Literal[
    "classify_route",
    "skeptic",
    "diagnoser",
    "retriever",
    "editor",
    "aggregator",
    "calibrator",
    "framework_adapter",
    "scorer",
    "llm_client",
    "trace_sink",
]
"""The names of the extension points; each is also the name of its hook."""


@dataclass(frozen=True)
class ExtensionPoint:
    """Static description of one extension point.

    Args:
        name: The extension point's name, equal to its hook's name.
        selected_by: The dotted configuration key that chooses implementations by name.
        multiple: Whether the key holds a list of names (several implementations run) or one.
        summary: One line for ``biasbreaker plugins`` and the docs.
    """

    name: PointName
    selected_by: str
    multiple: bool
    summary: str


EXTENSION_POINTS: tuple[ExtensionPoint, ...] = (
    ExtensionPoint(
        "classify_route",
        "intervention.router",
        False,
        "routes a halted step to 'skeptics', 'madera' or 'none'",
    ),
    ExtensionPoint("skeptic", "intervention.skeptics", True, "adversarial reviewers of a payload"),
    ExtensionPoint("diagnoser", "intervention.diagnoser", False, "MADERA: finds the biased step"),
    ExtensionPoint("retriever", "intervention.retriever", False, "MADERA: finds counter-evidence"),
    ExtensionPoint("editor", "intervention.editor", False, "MADERA: rewrites the payload"),
    ExtensionPoint("aggregator", "intervention.aggregator", False, "combines skeptic verdicts"),
    ExtensionPoint(
        "calibrator",
        "calibration.calibrator",
        False,
        "chooses thresholds from control runs",
    ),
    ExtensionPoint(
        "framework_adapter",
        "adapter.framework",
        False,
        "guards an agent framework's graph",
    ),
    ExtensionPoint(
        "scorer", "probe.scorers", True, "divergence of counterfactual outputs in [0, 1]"
    ),
    ExtensionPoint("llm_client", "llm.client", False, "chat-completion client"),
    ExtensionPoint(
        "trace_sink",
        "trace.sink",
        False,
        "where run-trace records are stored (files, a database)",
    ),
)
POINTS: Mapping[str, ExtensionPoint] = {p.name: p for p in EXTENSION_POINTS}


__all__ = ["EXTENSION_POINTS", "POINTS", "ExtensionPoint", "PointName"]
