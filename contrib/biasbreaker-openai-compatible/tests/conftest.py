"""Fixtures: the package's own test server, and no BIASBREAKER_* variable from the shell."""

from __future__ import annotations

import os

import pytest
from biasbreaker_openai_compatible.testing import openai_server  # noqa: F401  (a fixture)


@pytest.fixture(autouse=True)
def _no_biasbreaker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in list(os.environ):
        if var.upper().startswith("BIASBREAKER_"):
            monkeypatch.delenv(var)
