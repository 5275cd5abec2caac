"""No BIASBREAKER_* variable from the developer's shell reaches a test."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _no_biasbreaker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in list(os.environ):
        if var.upper().startswith("BIASBREAKER_"):
            monkeypatch.delenv(var)
