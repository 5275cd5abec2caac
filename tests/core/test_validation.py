"""Validation everywhere: `config` warns of what `--check` fails on; `Kernel.validate()` as `run`."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from biasbreaker.cli import app
from biasbreaker.errors import ConfigError
from biasbreaker.kernel import Kernel

FAKE = '[llm]\nclient = "fake"\n'
BAD = FAKE + '[intervention]\naggregator = "trsut"\n\n[plugin.trsut]\nx = 1\n'
PROBLEMS = ("aggregator 'trsut'", "[plugin.trsut] (biasbreaker.toml) configures no installed")


def test_config_warns_of_every_problem_check_fails_on(isolated_config: Path) -> None:
    (isolated_config / "biasbreaker.toml").write_text(BAD)
    shown = CliRunner().invoke(app, ["config"])
    assert shown.exit_code == 0, shown.output
    assert "intervention.aggregator" in shown.stdout  # the table is still printed
    warnings = [line for line in shown.stderr.splitlines() if line.startswith("warning: ")]
    checked = CliRunner().invoke(app, ["config", "--check"])
    assert checked.exit_code == 1
    for problem in PROBLEMS:
        assert sum(problem in w for w in warnings) == 1, shown.stderr
        assert problem in " ".join(checked.stderr.split())
    assert len(warnings) == 2 and "error: 2 problems" in checked.stderr


def test_config_warns_that_no_client_is_set_by_default(isolated_config: Path) -> None:
    shown = CliRunner().invoke(app, ["config"])
    assert shown.exit_code == 0
    warnings = [line for line in shown.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "[llm] client is not set" in warnings[0]


def test_config_without_problems_warns_of_nothing(isolated_config: Path) -> None:
    (isolated_config / "biasbreaker.toml").write_text(FAKE)
    shown = CliRunner().invoke(app, ["config"])
    assert shown.exit_code == 0 and "warning:" not in shown.stderr


def test_validate_refuses_what_run_refuses(isolated_config: Path) -> None:
    (isolated_config / "biasbreaker.toml").write_text(FAKE + "[plugin.trsut]\nx = 1\n")
    kernel = Kernel.load(cwd=isolated_config)
    kernel.llm()  # building one implementation does not check the rest
    with pytest.raises(ConfigError, match=r"\[plugin.trsut\] \(biasbreaker.toml\) configures no"):
        kernel.validate()


def test_validate_leaves_what_was_built_before_open(isolated_config: Path) -> None:
    (isolated_config / "biasbreaker.toml").write_text(FAKE)
    kernel = Kernel.load(cwd=isolated_config)
    client = kernel.llm()
    kernel.validate()
    assert kernel.llm() is client  # still the same, not closed and rebuilt
