"""The `verify` command, in-process through typer's test runner."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from biasbreaker.breaker import freeze
from biasbreaker.calibration import ControlStatistics
from biasbreaker.cli import app
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.trace import TraceWriter
from biasbreaker.types import InterventionContext, InterventionResult, Thresholds

runner = CliRunner()
CONFIG = MachineConfig(
    Thresholds(0.5, 0.35, 0.25, 0.05),
    cooldown_steps=2,
    control=ControlStatistics(0.1, 0.05, 100),
    max_history=3,
)


def repair(context: InterventionContext) -> InterventionResult:
    return InterventionResult(freeze("fixed"), True, "madera", (), 0.05)


def write(path: Path, fasts: list[float]) -> Path:
    with TraceWriter(path, CONFIG.trace_header()) as writer:
        machine = ControlMachine(CONFIG, hook=repair, recorder=writer)
        for fast in fasts:
            machine.step(fast, 0.0)
    return path


def test_a_recovering_run_holds(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", [0.1, 0.6, 0.4, 0.3, 0.1, 0.1, 0.1, 0.1, 0.1])
    result = runner.invoke(app, ["verify", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1].startswith(
        "RLB-v1: HOLDS (W=3, 9 cycles, 1 recovery transition(s), first at step 6, 0 violation(s)"
    )  # last outlier at step 3, W = 3
    assert "anti-thrash v2: HOLDS" in result.stdout
    assert "recovery-after-cooldown v1: HOLDS (1 checked" in result.stdout
    assert result.stdout.strip().endswith("all properties hold")


def test_a_run_that_never_recovers_holds_vacuously_and_says_so(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", [0.1] + [0.6] * 10)
    result = runner.invoke(app, ["verify", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1] == (
        "RLB-v1: HOLDS (W=3, 11 cycles, 0 recovery transition(s), 0 violation(s); ADR literal "
        "bound exceeded at 0); holds vacuously: no recovery transition (the window never went "
        "from dirty to clean)"
    )


def test_violations_exit_1_and_are_listed(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", [0.1, 0.6, 0.4, 0.3, 0.1, 0.1, 0.1])
    lines = path.read_text().splitlines()
    lines[3] = (
        lines[3]
        .replace('"state":"recovery"', '"state":"normal"')
        .replace('"action":"halt"', '"action":"proceed"')
    )
    path.write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["verify", str(path)])
    assert result.exit_code == 1
    assert "anti-thrash v2: VIOLATED" in result.stdout
    assert (
        "step 2: cleared (intervention -> normal) with fast 0.4 not below tau_exit "
        "0.35" in result.stdout
    )
    assert "some properties are VIOLATED" in result.stdout


def test_rlb_violation_with_a_smaller_w(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", [0.1, 0.6, 0.4, 0.3, 0.1, 0.1, 0.1, 0.1, 0.1])
    result = runner.invoke(app, ["verify", str(path), "--max-history", "2"])
    assert result.exit_code == 1
    assert result.stdout.splitlines()[1].startswith("RLB-v1: VIOLATED")
    assert "more than W=2" in result.stdout


def test_json_output_and_truncation_warning(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", [0.1, 0.2, 0.3])
    path.write_bytes(path.read_bytes()[:-10])
    result = runner.invoke(app, ["verify", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert "the last line is cut mid-record" in result.stderr
    data = json.loads(result.stdout)
    assert data["steps"] == 2 and data["truncated"] is True
    assert data["rlb"]["property_version"] == "RLB-v1"


def test_a_malformed_trace_is_an_error_with_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", [0.1, 0.2, 0.3])
    lines = path.read_text().splitlines()
    lines[2] = "{broken"
    path.write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["verify", str(path)])
    assert result.exit_code == 1
    assert "run.jsonl:3: not valid JSON" in result.stderr


def test_a_whole_last_record_without_newline_is_verified_without_warning(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", [0.1, 0.2, 0.3])
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    result = runner.invoke(app, ["verify", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    data = json.loads(result.stdout)
    assert data["steps"] == 3 and data["truncated"] is False
