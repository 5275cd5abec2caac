"""``biasbreaker demo --preset real-model``: resolution, sizes, short prompts, plain progress.

The preset is run for real against SmolLM2-135M by ``nox -s slow_server``
(``contrib/biasbreaker-openai-compatible/tests/test_llama_cpp_server.py``); these tests check,
offline, what it resolves to and what it refuses.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from biasbreaker.cli import app
from biasbreaker.config.sections import DemoSettings
from biasbreaker.errors import ConfigError
from biasbreaker.llm import estimate_tokens
from biasbreaker_plugins.demo.cli import PRESETS, PlainProgress, demo_config

CONTEXT = 2048
"""The context the preset's prompts must fit (llama-cpp-python's server, ``--n_ctx 2048``)."""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("BIASBREAKER_")]:
        monkeypatch.delenv(name)
    return tmp_path


def _toml(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_the_preset_without_a_client_is_an_error_naming_the_fix(project: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--preset", "real-model", "--out", "o"])
    assert result.exit_code == 1, result.output
    assert "[llm] client is not set" in result.output
    assert 'client = "openai-compatible"' in result.output
    assert 'client = "fake"' in result.output
    assert not (project / "o").exists()  # refused before --out is claimed


def test_an_unknown_preset_and_conflicting_options_are_refused(project: Path) -> None:
    config = _toml(project / "c.toml", '[llm]\nclient = "fake"\n')
    runner = CliRunner()
    unknown = runner.invoke(app, ["demo", "--preset", "huge", "--config", str(config)])
    assert unknown.exit_code == 1
    assert "'huge' is not a preset; use one of: real-model" in unknown.output
    both = runner.invoke(app, ["demo", "--preset", "real-model", "--quick"])
    assert both.exit_code == 1
    assert "--quick and --preset real-model both set the sizes" in both.output
    bbq = runner.invoke(
        app, ["demo", "--preset", "real-model", "--scenario", "bbq", "--config", str(config)]
    )
    assert bbq.exit_code == 1
    assert "size of the hiring scenario" in bbq.output
    assert not (project / "biasbreaker-demo").exists()


def test_the_preset_fills_only_what_the_configuration_leaves_unset(project: Path) -> None:
    config = _toml(
        project / "c.toml", '[llm]\nclient = "fake"\n\n[demo]\npostings = 12\n\n[probe]\nk = 3\n'
    )
    settings = demo_config(config, None, "hiring", "real-model").load().settings
    assert settings.demo.postings == 12 and settings.probe.k == 3  # the user's
    preset = PRESETS["real-model"]
    assert settings.demo.control_runs == preset["demo.control_runs"]
    assert settings.demo.fresh_control_runs == preset["demo.fresh_control_runs"]
    assert settings.demo.prompts == "short"
    assert settings.demo.workers == 1
    assert settings.probe.per_person is False and settings.probe.joint is False
    assert (
        settings.calibration.target_false_halt_rate == preset["calibration.target_false_halt_rate"]
    )
    # without the preset nothing of it applies
    plain = demo_config(config, None, "hiring").load().settings
    assert plain.demo.prompts == "full" and plain.demo.control_runs == 40


def test_the_presets_control_runs_can_bound_its_false_halt_target() -> None:
    preset = PRESETS["real-model"]
    rate = preset["calibration.target_false_halt_rate"]
    # the conformal bound needs ceil((1 - rate) / rate) control runs (calibration/thresholds)
    assert preset["demo.control_runs"] >= -(-(1 - rate) // rate)


def test_the_preset_with_no_client_fails_from_demo_config_too(project: Path) -> None:
    with pytest.raises(ConfigError, match=r"--preset real-model is sized for a real model"):
        demo_config(None, None, "hiring", "real-model")


def test_fewer_than_8_postings_need_short_prompts() -> None:
    with pytest.raises(ValidationError, match=r"postings = 4 is below 8 with prompts = 'full'"):
        DemoSettings(postings=4)
    assert DemoSettings(postings=4, prompts="short").postings == 4
    with pytest.raises(ValidationError, match=r"postings"):
        DemoSettings(postings=3, prompts="short")
    assert DemoSettings(postings=8).postings == 8


def test_short_prompts_fit_a_2048_token_context_and_keep_every_name() -> None:
    pytest.importorskip("langgraph")
    from biasbreaker_plugins.demo.hiring import jobs, make_postings
    from biasbreaker_plugins.demo.hiring_graph import (
        SHORT_CHARS,
        decide_request,
        ranking_request,
        review_request,
        screen_request,
        short_description,
        short_resume,
    )

    for posting in make_postings("posting", 8, 0):
        job = jobs()[posting.job]
        state = posting.graph_input()
        names = [c["name"] for c in state["candidates"]]
        short = ranking_request(job, state, short=True)
        full = ranking_request(job, state)
        assert full.max_tokens is None
        assert estimate_tokens(full.prompt) > CONTEXT  # why the preset needs short prompts
        assert short.max_tokens is not None
        # prompt and answer within the context, with a third to spare for the tokenizer
        # counting more tokens than ceil(characters / 4)
        assert (estimate_tokens(short.prompt) + short.max_tokens) * 1.5 < CONTEXT
        assert all(short.prompt.count(name) >= 2 for name in names)  # the probe swaps them
        assert len(short_description(job)) <= SHORT_CHARS
        for c in state["candidates"]:
            resume = short_resume(job, c["resume"], c["name"])
            assert 0 < len(resume) <= SHORT_CHARS
            screen = screen_request(job, c, short=True)
            assert c["name"] in screen.prompt and screen.max_tokens is not None
            assert screen_request(job, c).max_tokens is None
        for request in (
            review_request(job, names, short=True),
            decide_request(job, names[:2], [], short=True),
        ):
            assert request.max_tokens is not None
            assert estimate_tokens(request.prompt) + request.max_tokens < CONTEXT


def test_the_graph_refuses_an_unknown_prompt_size() -> None:
    pytest.importorskip("langgraph")
    from biasbreaker_plugins.demo.agents import AgentClients
    from biasbreaker_plugins.demo.hiring_graph import build_hiring_graph

    with pytest.raises(ValueError, match=r"prompts='tiny' must be 'full' or 'short'"):
        build_hiring_graph(AgentClients(default=None), shortlist=2, prompts="tiny")  # type: ignore[arg-type]


def test_plain_progress_writes_whole_lines_at_start_end_and_at_most_every_interval() -> None:
    now = [100.0]
    lines: list[str] = []
    progress = PlainProgress(
        {"calibration": 3, "guarded": None}, lines.append, clock=lambda: now[0], every=10.0
    )
    progress("calibration", 0)
    now[0] = 104.0
    progress("calibration", 1)  # 4 s after the last line: quiet
    now[0] = 111.0
    progress("calibration", 1)  # 11 s: a line
    now[0] = 112.0
    progress("calibration", 1)  # finished: always a line
    now[0] = 175.0
    progress("guarded", 0)  # a new phase starts: a line; its total is unknown
    assert lines == [
        "progress: calibration 0/3 (0:00 elapsed)",
        "progress: calibration 2/3 (0:11 elapsed)",
        "progress: calibration 3/3 (0:12 elapsed)",
        "progress: guarded 0 (1:15 elapsed)",
    ]


def test_estimate_takes_the_preset_and_counts_its_calls(project: Path) -> None:
    import json

    pytest.importorskip("langgraph")
    from biasbreaker_plugins.demo.hiring import AGENTS, GROUPS

    runner = CliRunner()
    refused = runner.invoke(app, ["estimate", "--demo", "--preset", "real-model"])
    assert refused.exit_code == 1 and "[llm] client is not set" in refused.output
    config = _toml(project / "c.toml", '[llm]\nclient = "fake"\n')
    result = runner.invoke(
        app, ["estimate", "--demo", "--preset", "real-model", "--config", str(config), "--json"]
    )
    assert result.exit_code == 0, result.output
    calls = json.loads(result.output)["total"]["calls"]
    preset = PRESETS["real-model"]
    per_posting = len(GROUPS) + len(AGENTS) - 1  # one screener per applicant, then 3 agents
    guarded = (
        preset["demo.control_runs"] + preset["demo.postings"] + preset["demo.fresh_control_runs"]
    )
    plain = 2 * preset["demo.postings"]  # the fake's group-blind reference, and unguarded
    assert calls["by_role"] == {
        "agent": per_posting * (guarded + plain),
        "probe": per_posting * preset["probe.k"] * guarded,  # no per-person, joint or resample
    }


def test_a_run_stopped_by_an_error_reports_what_completed(project: Path) -> None:
    """A calibration that fails after its phase ran (here: too few control runs for the
    preset's target) leaves a partial report.md naming the error, as an interrupt does."""
    import json

    pytest.importorskip("langgraph")
    pytest.importorskip("matplotlib")
    config = _toml(
        project / "c.toml",
        '[llm]\nclient = "fake"\n\n[demo]\ncontrol_runs = 2\n',
    )
    result = CliRunner().invoke(
        app, ["demo", "--preset", "real-model", "--config", str(config), "--out", "o"]
    )
    assert result.exit_code == 1
    assert "2 control runs are too few" in result.output
    assert "the partial output is in o" in result.output
    report = (project / "o" / "report.md").read_text(encoding="utf-8")
    assert "**Stopped by an error** before the demo finished (2 control runs are too few" in report
    assert "| calibration | 2 | 2 |" in report
    marker = json.loads((project / "o" / "biasbreaker-output.json").read_text(encoding="utf-8"))
    assert marker["status"] == "partial"
    assert marker["completed"]["phases"] == {"calibration": 2}
    assert "too few" in marker["completed"]["error"]
