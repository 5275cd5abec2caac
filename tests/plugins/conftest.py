"""Shared data for the scorer tests (LangFair's real counterfactual responses), and a fresh
PostgreSQL schema per test for the ``postgres`` tests."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
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


POSTGRES_URL = os.environ.get("BB_TEST_POSTGRES_URL", "postgresql://127.0.0.1:5432/test")
"""The PostgreSQL server the ``postgres`` tests use (CI and dev machines run one locally)."""


def in_schema(url: str, schema: str) -> str:
    """``url`` with ``search_path`` set to ``schema`` (libpq ``options``), so every table the
    savers create lands in that schema."""
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A connection URL to a fresh, empty schema of the test server, dropped afterwards.

    Skips, saying why, when the ``postgres`` extra is missing or no server is reachable.
    """
    psycopg = pytest.importorskip("psycopg", reason="needs the postgres extra (psycopg)")
    pytest.importorskip("langgraph.checkpoint.postgres", reason="needs the postgres extra")
    try:
        admin = psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL server reachable at {POSTGRES_URL} ({exc})".strip())
    schema = f"bb_test_{uuid.uuid4().hex[:12]}"
    with admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            yield in_schema(POSTGRES_URL, schema)
        finally:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
