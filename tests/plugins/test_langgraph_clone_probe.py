"""clone_probe copies every setting of the probe it clones (a missed one silently changes probing)."""

from __future__ import annotations

import inspect
from typing import Any

from biasbreaker.probe.adaptive import Adaptive
from biasbreaker.probe.counterfactual import CounterfactualGenerator
from biasbreaker.probe.probe import Probe
from biasbreaker_plugins.langgraph.probing import clone_probe
from biasbreaker_plugins.scorers.lexical import LexicalScorer

NOT_COPIED = {"self", "scorers", "budget"}
"""``scorers`` is passed positionally (compared below); each run gets its own ``budget``."""


def _clock() -> float:
    return 0.0


SETTINGS: dict[str, Any] = {  # each one other than the constructor's default
    "generator": CounterfactualGenerator(seed=11),
    "k": 3,
    "joint": False,
    "per_person": False,
    "r": 1,
    "probe_rate": 0.5,
    "seed": 7,
    "combine": "mean",
    "bootstrap": 50,
    "confidence": 0.9,
    "max_concurrency": 3,
    "cache_size": 99,
    "call_timeout_s": 9.0,
    "clock": _clock,
    "language": None,
    "adaptive": Adaptive(2, 0.1),
}


def test_every_constructor_setting_but_the_budget_is_copied() -> None:
    params = set(inspect.signature(Probe.__init__).parameters) - NOT_COPIED
    # a new Probe setting must be added here, and to clone_probe
    assert params == set(SETTINGS)
    base = Probe(LexicalScorer(), **SETTINGS)
    for name, value in SETTINGS.items():
        assert getattr(base, name) is value or getattr(base, name) == value, name
    clone = clone_probe(base)
    assert clone.scorers == base.scorers
    for name in SETTINGS:
        assert getattr(clone, name) == getattr(base, name), name
    assert clone_probe(base, 0.25).probe_rate == 0.25
