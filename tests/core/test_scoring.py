"""The scorer contract's kernel checks."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from biasbreaker.errors import PluginError, ProbeError
from biasbreaker.probe.scoring import as_text, check_divergences, check_scorer, combine


def test_check_divergences_accepts_valid_values() -> None:
    assert check_divergences("s", [0, 0.5, 1.0], 3) == [0.0, 0.5, 1.0]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ("0.5", "returned str"),
        ([0.1], "returned 1 divergences for 2 pairs"),
        ([0.1, math.inf], "pair 1"),
        ([True, 0.2], "returned True"),
        ([None, 0.2], "returned None"),
    ],
)
def test_check_divergences_rejects(values: object, message: str) -> None:
    with pytest.raises(ProbeError, match=message):
        check_divergences("s", values, 2)


def test_combine() -> None:
    assert combine({"a": 0.2, "b": 0.6}, "max") == 0.6
    assert combine({"a": 0.2, "b": 0.6}, "mean") == pytest.approx(0.4)
    with pytest.raises(ValueError, match="no scorer values"):
        combine({}, "max")


def test_as_text_is_canonical_json_for_states() -> None:
    assert as_text("plain") == "plain"
    assert as_text({"b": 1, "a": ["é", None]}) == '{"a": ["é", null], "b": 1}'
    with pytest.raises(ProbeError, match="neither text nor JSON"):
        as_text({"x": object()})
    with pytest.raises(ProbeError, match=r"payload\['x'\]\[1\] is nan: JSON has no NaN"):
        as_text({"x": [1.0, float("nan")]})
    with pytest.raises(ProbeError, match="is inf"):
        as_text(float("inf"))


def test_check_scorer_names_what_is_missing() -> None:
    class Good:
        name = "good"
        compares_neutralised = True

        def divergence(self, a: Sequence[str], b: Sequence[str]) -> list[float]:
            return [0.0] * len(a)

    assert check_scorer(Good(), "good").name == "good"

    class NoFlag:
        name = "half"

        def divergence(self, a: Sequence[str], b: Sequence[str]) -> list[float]:
            return []

    with pytest.raises(PluginError, match="without compares_neutralised"):
        check_scorer(NoFlag(), "half")
