"""Advice on valid settings that let outputs through unchecked (``biasbreaker.config.advice``)."""

from __future__ import annotations

from typing import Any

import pytest

from biasbreaker.config import Settings
from biasbreaker.config.advice import advice
from biasbreaker.config.sections import PROBE_OFF


def said(**sections: Any) -> str:
    return " | ".join(advice(Settings.model_validate(sections)))


def test_the_defaults_get_no_advice() -> None:
    assert advice(Settings.model_validate({})) == ()


@pytest.mark.parametrize(
    ("rate", "expected"),
    [(0.0, PROBE_OFF), (0.01, "about 99 % of guarded steps are not probed"), (1.0, "")],
)
def test_sampled_probing_says_what_share_goes_unprobed(rate: float, expected: str) -> None:
    text = said(probe={"probe_rate": rate})
    assert (expected in text) if expected else text == ""
    if rate:
        assert "no guarded step is probed" not in text


def test_adaptive_options_without_adaptive_have_no_effect() -> None:
    assert "adaptive_first is set but adaptive = false" in said(probe={"adaptive_first": 2})
    both = said(probe={"adaptive_first": 2, "adaptive_stop": 0.05})
    assert "adaptive_first and adaptive_stop are set but adaptive = false" in both
    assert said(probe={"adaptive": True, "adaptive_first": 2, "k": 4}) == ""


def test_a_breaker_that_can_hardly_trip_is_named() -> None:
    assert "tau_enter = 1: only a score of exactly 1 trips" in said(breaker={"tau_enter": 1.0})
    assert said(breaker={"tau_enter": 0.99}) == ""
    text = said(breaker={"node_trip": False})
    assert "node_trip = false: only fast B_net trips" in text and "(0.3)" in text


def test_proceeding_on_unsupported_languages_is_named() -> None:
    text = said(probe={"unsupported_language": "proceed"})
    assert 'unsupported_language = "proceed"' in text and "(en)" in text


def test_per_person_off_and_stream_first_on_are_named() -> None:
    """Trial 12 #11: both passed `config --check` silently."""
    assert "per_person = false" in said(probe={"per_person": False})
    text = said(plugin={"langgraph": {"stream_first": True}})
    assert "stream_first = true" in text and "shown before it is held" in text
    assert said(plugin={"langgraph": {"stream_first": False}}) == ""
