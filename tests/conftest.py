"""Shared test configuration: hypothesis profiles and isolation from the caller's environment."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("default", max_examples=100, deadline=None)
settings.register_profile(
    "thorough",
    max_examples=3000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True)
def _no_biasbreaker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No BIASBREAKER_* variable of the developer's shell reaches a test."""
    for var in list(os.environ):
        if var.upper().startswith("BIASBREAKER_"):
            monkeypatch.delenv(var)
