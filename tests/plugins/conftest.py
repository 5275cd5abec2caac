"""Shared data for the scorer tests: LangFair's real counterfactual responses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="session")
def langfair_gender() -> dict[str, Any]:
    """LangFair's AutoEval output: 75 real male/female response pairs and its metrics."""
    doc = json.loads((DATA / "langfair" / "autoeval_results_file.json").read_text("utf-8"))
    data = doc["counterfactual_responses"]["gender"]["data"]
    return {
        "male": data["male_response"],
        "female": data["female_response"],
        "published": doc["counterfactual_metrics"],
    }


@pytest.fixture(scope="session")
def langfair_race() -> dict[str, Any]:
    """LangFair's 3 white/hispanic pairs and its reference values (tests/data/counterfactual)."""
    pairs = json.loads((DATA / "langfair" / "counterfactual_data_file.json").read_text("utf-8"))
    ref = json.loads((DATA / "langfair" / "counterfactual_results_file.json").read_text("utf-8"))
    return {"text1": pairs["text1"], "text2": pairs["text2"], "reference": ref}
