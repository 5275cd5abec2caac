"""The same `biasbreaker demo` against a real endpoint configured in TOML.

An OpenAI-compatible server (the contrib distribution's test server, serving biasbreaker's
seeded fake over HTTP) is started by the test on 127.0.0.1; the demo is pointed at it with
`[llm] client = "openai-compatible"` in a TOML file and runs unchanged: every agent and every
skeptic call goes over HTTP.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("langgraph")
pytest.importorskip("matplotlib")
testing = pytest.importorskip("biasbreaker_openai_compatible.testing")

from biasbreaker.cli import app  # noqa: E402

pytestmark = pytest.mark.langgraph


def test_the_demo_runs_unchanged_against_an_openai_compatible_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    backend_toml = tmp_path / "backend.toml"
    # the served model: the seeded fake, with the sampling noise any real model has
    backend_toml.write_text("seed = 5\n[plugin.fake]\nprompt_sensitivity = 0.05\n")
    backend = testing.client_backend("fake", str(backend_toml))
    with testing.ChatServer(backend, model="biasbreaker-fake") as server:
        config = tmp_path / "endpoint.toml"
        config.write_text(
            '[llm]\nclient = "openai-compatible"\n\n'
            "[plugin.openai-compatible]\n"
            f'base_url = "{server.base_url}"\n'
            'model = "biasbreaker-fake"\n'
            "forward_request_fields = true\n"
            "max_concurrency = 16\n"
            "\n[demo]\nworkers = 2\n"
        )
        result = CliRunner().invoke(app, ["demo", "--quick", "--config", str(config), "--out", "o"])
        calls = len(server.chat_calls)
    backend.close()
    assert result.exit_code == 0, result.output
    assert "LLM: biasbreaker-fake" in result.output and "RLB-v1: HOLDS" in result.output
    report = (tmp_path / "o" / "report.md").read_text()
    assert "**LLM: `biasbreaker-fake`.**" in report
    assert "Every agent calls the configured client 'openai-compatible'" in report
    rows = [
        line.split("|")[1:-1]
        for line in report.splitlines()
        if line.startswith(("| calibration |", "| guarded |", "| fresh-control |"))
    ]
    in_table = sum(int(row[4]) for row in rows[:3])
    assert calls > in_table > 0  # every counted call went over HTTP (plus the unguarded run)
    purposes = {c.body.get("biasbreaker", {}).get("purpose") for c in server.chat_calls}
    assert "agent" in purposes
    results = [json.loads(x) for x in (tmp_path / "o" / "results.jsonl").read_text().splitlines()]
    assert {r["phase"] for r in results} == {"calibration", "unguarded", "guarded", "fresh-control"}
