"""The `plugins` and `config` commands, run in-process through typer's test runner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from biasbreaker.cli import app

runner = CliRunner()

AGG = """
from biasbreaker.hookspecs import hookimpl

@hookimpl
def aggregator(register):
    register("{name}", lambda options, context: object(), summary="{name} aggregator")
"""


@pytest.fixture
def aggregators(fake_plugin_dist: Any) -> None:
    for name in ("mean", "median"):
        fake_plugin_dist(
            f"bb-agg-{name}",
            version="1.2",
            entry_points={f"agg-{name}": f"bb_cli_agg_{name}"},
            modules={f"bb_cli_agg_{name}": AGG.replace("{name}", name)},
        )


def test_plugins_lists_a_third_party_distribution(aggregators: None, isolated_config: Path) -> None:
    result = runner.invoke(app, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    mean = rows["agg-mean"]
    assert (mean["distribution"], mean["version"], mean["status"]) == (
        "bb-agg-mean",
        "1.2",
        "loaded",
    )
    assert mean["hooks"] == ["aggregator"]
    assert mean["implementations"] == [
        {"point": "aggregator", "name": "mean", "summary": "mean aggregator", "selected": False}
    ]
    table = runner.invoke(app, ["plugins", "--hook", "aggregator"])
    assert table.exit_code == 0
    assert "bb-agg-median" in table.stdout and "aggregator:median" in table.stdout


def test_plugins_marks_the_selected_implementation(
    aggregators: None, isolated_config: Path
) -> None:
    (isolated_config / "biasbreaker.toml").write_text('[intervention]\naggregator = "median"\n')
    rows = {r["name"]: r for r in json.loads(runner.invoke(app, ["plugins", "--json"]).stdout)}
    assert rows["agg-median"]["implementations"][0]["selected"] is True
    assert rows["agg-mean"]["implementations"][0]["selected"] is False


def test_plugins_reports_a_broken_plugin_and_strict_fails(
    fake_plugin_dist: Any, isolated_config: Path
) -> None:
    fake_plugin_dist(
        "bb-broken",
        version="0.1",
        entry_points={"broken": "bb_cli_broken"},
        modules={"bb_cli_broken": "raise ImportError('needs numpy 9')\n"},
    )
    result = runner.invoke(app, ["plugins", "--json"])
    assert result.exit_code == 0
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["broken"]["status"] == "failed"
    assert "needs numpy 9" in rows["broken"]["error"]
    assert "bb-broken 0.1" in result.stderr
    assert runner.invoke(app, ["plugins", "--strict"]).exit_code == 1


def test_config_shows_env_value_with_its_source(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIASBREAKER_BREAKER__TAU_ENTER", "0.9")
    result = runner.invoke(app, ["config", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["key"]: r for r in json.loads(result.stdout)}
    assert rows["breaker.tau_enter"] == {
        "key": "breaker.tau_enter",
        "value": 0.9,
        "source": "env BIASBREAKER_BREAKER__TAU_ENTER",
    }
    assert rows["breaker.tau_exit"]["source"] == "default"


def test_config_check_fails_for_an_uninstalled_aggregator(
    aggregators: None, isolated_config: Path
) -> None:
    (isolated_config / "biasbreaker.toml").write_text('[intervention]\naggregator = "trsut"\n')
    result = runner.invoke(app, ["config", "--check"])
    assert result.exit_code == 1
    assert (
        "aggregator 'trsut' (biasbreaker.toml: intervention.aggregator) is not available"
        in result.stderr
    )
    assert "mean (bb-agg-mean 1.2), median (bb-agg-median 1.2)" in result.stderr


def test_config_reports_a_toml_syntax_error(isolated_config: Path) -> None:
    bad = isolated_config / "custom.toml"
    bad.write_text("[breaker]\ntau_enter = \n")
    result = runner.invoke(app, ["config", "--config", str(bad)])
    assert result.exit_code == 1
    assert "invalid TOML" in result.stderr and "line 2" in result.stderr


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("biasbreaker ")


def test_a_plugin_adds_a_command_through_the_commands_group(fake_plugin_dist: Any) -> None:
    import typer

    from biasbreaker.cli import COMMAND_GROUP, load_plugin_commands

    fake_plugin_dist(
        "biasbreaker-hello",
        group=COMMAND_GROUP,
        entry_points={"hello": "bb_hello:register", "broken": "bb_hello:missing"},
        modules={
            "bb_hello": """
                def register(app):
                    @app.command("hello")
                    def hello(name: str = "world") -> None:
                        print(f"hello {name}")
                """
        },
    )
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Root."""

    failures = load_plugin_commands(app)
    assert len(failures) == 1 and "'broken'" in failures[0]  # left out, the others work
    result = CliRunner().invoke(app, ["hello", "--name", "plugins"])
    assert result.exit_code == 0 and result.output == "hello plugins\n"
