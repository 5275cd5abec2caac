"""Fixtures: no BIASBREAKER_* variable from the shell; the agents' helpers importable."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # lc_agents.py, this package's own test helpers


@pytest.fixture(autouse=True)
def _no_biasbreaker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in list(os.environ):
        if var.upper().startswith("BIASBREAKER_"):
            monkeypatch.delenv(var)
