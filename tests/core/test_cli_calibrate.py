"""The `calibrate` command, in-process through typer's test runner."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from typer.testing import CliRunner

from biasbreaker.cli import app
from biasbreaker.config import load_settings

runner = CliRunner()


def write_control(path: Path, runs: int, *, seed: int = 1) -> None:
    rng = random.Random(seed)
    with path.open("w") as out:
        for run in range(runs):
            fast = slow = 0.05
            for _ in range(30):
                x = max(0.0, rng.gauss(0.05, 0.02))
                fast, slow = 0.5 * fast + 0.5 * x, 0.95 * slow + 0.05 * x
                out.write(json.dumps({"run": run, "fast": fast, "slow": slow}) + "\n")


def test_calibrate_prints_and_writes_a_marked_toml(isolated_config: Path) -> None:
    write_control(isolated_config / "control.jsonl", 120)
    result = runner.invoke(
        app,
        [
            "calibrate",
            "control.jsonl",
            "--target-false-halt-rate",
            "0.01",
            "--write-toml",
            "biasbreaker.toml",
            "--date",
            "2026-06-01",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "calibrated from 120 control runs (3600 steps)" in result.stdout
    assert "tau_enter = " in result.stdout and "starting point" in result.stdout
    settings = load_settings(cwd=isolated_config).settings
    digest = hashlib.sha256((isolated_config / "control.jsonl").read_bytes()).hexdigest()
    assert settings.calibration.source_sha256 == digest
    assert settings.calibration.calibrated_on is not None
    assert settings.calibration.calibrated_on.isoformat() == "2026-06-01"
    assert settings.calibration.control is not None
    assert settings.calibration.control.n_steps == 3600
    tau_enter = settings.breaker.tau_enter
    assert settings.breaker.tau_exit == 0.7 * tau_enter
    assert f"tau_enter = {tau_enter!r}" in result.stdout


def test_calibrate_json_and_default_target(isolated_config: Path) -> None:
    write_control(isolated_config / "control.jsonl", 40)
    result = runner.invoke(app, ["calibrate", "control.jsonl", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["target_false_halt_rate"] == 0.05  # [calibration] default
    assert data["n_runs"] == 40 and data["written_to"] is None
    assert data["empirical_false_halt_rate"] <= 0.05


def test_too_few_runs_says_how_many_are_needed(isolated_config: Path) -> None:
    write_control(isolated_config / "control.jsonl", 20)
    result = runner.invoke(app, ["calibrate", "control.jsonl", "--target-false-halt-rate", "0.01"])
    assert result.exit_code == 1
    assert "20 control runs are too few" in result.stderr
    assert "at least 99 runs" in result.stderr


def test_bad_inputs_exit_1_with_a_clear_error(isolated_config: Path) -> None:
    (isolated_config / "bad.jsonl").write_text('{"fast": 0.1, "slow": 0.1}\n')
    result = runner.invoke(app, ["calibrate", "bad.jsonl"])
    assert result.exit_code == 1
    assert "bad.jsonl:1: a step without a run" in result.stderr
    write_control(isolated_config / "control.jsonl", 40)
    result = runner.invoke(app, ["calibrate", "control.jsonl", "--date", "June"])
    assert result.exit_code == 1
    assert "--date 'June' is not a date" in result.stderr
