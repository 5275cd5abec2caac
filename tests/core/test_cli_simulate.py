"""The `simulate` command: the simulated control loop's run trace, or the raw trajectory."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from biasbreaker.cli import app
from biasbreaker.dot import PRESETS, read_jsonl, simulate_dot, write_jsonl
from biasbreaker.propagation import Ewma

runner = CliRunner()


def expected_bytes(preset: str, seed: int, steps: int) -> bytes:
    buf = io.StringIO()
    write_jsonl(simulate_dot(preset, seed=seed, steps=steps), buf)
    return buf.getvalue().encode("utf-8")


@pytest.mark.parametrize("preset", list(PRESETS))
def test_simulate_writes_the_trajectory_of_simulate_dot(preset: str, isolated_config: Path) -> None:
    out = isolated_config / "out" / "trace.jsonl"
    result = runner.invoke(
        app, ["simulate", preset, "--trajectory", "--seed", "4", "--steps", "60", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == expected_bytes(preset, 4, 60)
    assert f"simulated DoT trajectory {preset!r} (seed 4, 60 steps)" in result.stderr
    again = isolated_config / "again.jsonl"
    runner.invoke(
        app, ["simulate", preset, "--trajectory", "--seed", "4", "--steps", "60", "-o", str(again)]
    )
    assert again.read_bytes() == out.read_bytes()
    other = isolated_config / "other.jsonl"
    runner.invoke(
        app, ["simulate", preset, "--trajectory", "--seed", "5", "--steps", "60", "-o", str(other)]
    )
    assert other.read_bytes() != out.read_bytes()


def test_simulate_to_stdout_and_the_seed_from_the_configuration(isolated_config: Path) -> None:
    (isolated_config / "biasbreaker.toml").write_text("seed = 9\n")
    result = runner.invoke(app, ["simulate", "spike", "--trajectory", "--steps", "30"])
    assert result.exit_code == 0, result.output
    assert result.stdout.encode("utf-8") == expected_bytes("spike", 9, 30)
    assert all(json.loads(line)["simulated"] is True for line in result.stdout.splitlines())


def test_simulate_applies_the_propagation_settings(isolated_config: Path) -> None:
    (isolated_config / "biasbreaker.toml").write_text(
        "[propagation]\nfast_smoothing = 0.9\nslow_half_life = 50\n"
    )
    out = isolated_config / "t.jsonl"
    assert (
        runner.invoke(
            app, ["simulate", "recovery", "--trajectory", "--seed", "1", "-o", str(out)]
        ).exit_code
        == 0
    )
    steps = read_jsonl(out)
    default = simulate_dot("recovery", seed=1, steps=200)
    assert [s.b_net for s in steps] == [s.b_net for s in default]
    assert [s.fast for s in steps] != [s.fast for s in default]
    fast, slow = Ewma(0.9), Ewma.from_half_life(50)
    for rec in steps:
        if rec.b_net is not None:
            fast, slow = fast.update(rec.b_net), slow.update(rec.b_net)
        assert (rec.fast, rec.slow) == (fast.value, slow.value)


def test_simulate_errors(isolated_config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = runner.invoke(app, ["simulate", "sparkle"])
    assert bad.exit_code == 1
    assert "unknown preset 'sparkle'; presets: control, spike" in bad.stderr
    monkeypatch.setenv("BIASBREAKER_PROPAGATION__FAST_HALF_LIFE", "40")
    slow_fast = runner.invoke(app, ["simulate", "spike", "--steps", "5"])
    assert slow_fast.exit_code == 1
    assert "BIASBREAKER_PROPAGATION__FAST_HALF_LIFE" in slow_fast.stderr or "fast EWMA" in (
        slow_fast.stderr
    )
    monkeypatch.delenv("BIASBREAKER_PROPAGATION__FAST_HALF_LIFE")
    assert runner.invoke(app, ["simulate", "spike", "--steps", "-1"]).exit_code != 0


# -- the whole loop: harness -> B_net -> control machine -> run trace ------------------------------


def test_simulate_recovery_then_verify_holds_with_a_recovery_transition(
    isolated_config: Path,
) -> None:
    """The issue's done-when: simulate recovery --seed 1 && verify prints RLB-v1: HOLDS."""
    out = isolated_config / "run.jsonl"
    result = runner.invoke(app, ["simulate", "recovery", "--seed", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "simulated run 'recovery' (seed 1, 200 steps, 200 guarded)" in result.stderr
    assert "first trip at step 56" in result.stderr
    verified = runner.invoke(app, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output
    [rlb_line] = [line for line in verified.stdout.splitlines() if line.startswith("RLB-v1")]
    assert rlb_line.startswith("RLB-v1: HOLDS (W=32, 200 cycles, 1 recovery transition(s)")
    report = json.loads(runner.invoke(app, ["verify", str(out), "--json"]).stdout)
    assert report["holds"] is True
    assert report["rlb"]["recovery_transitions"] >= 1
    assert report["rlb"]["vacuous"] is False


def test_simulate_persistent_holds_vacuously_and_says_so(isolated_config: Path) -> None:
    out = isolated_config / "run.jsonl"
    assert (
        runner.invoke(app, ["simulate", "persistent", "--seed", "1", "-o", str(out)]).exit_code == 0
    )
    verified = runner.invoke(app, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output
    [rlb_line] = [line for line in verified.stdout.splitlines() if line.startswith("RLB-v1")]
    assert "holds vacuously: no recovery transition" in rlb_line
    assert json.loads(runner.invoke(app, ["verify", str(out), "--json"]).stdout)["rlb"]["vacuous"]


def test_simulate_trace_is_byte_identical_per_seed_and_labelled_simulated(
    isolated_config: Path,
) -> None:
    paths = []
    for name, seed in (("a", "3"), ("b", "3"), ("c", "4")):
        path = isolated_config / f"{name}.jsonl"
        runner.invoke(app, ["simulate", "spike", "--seed", seed, "-o", str(path)])
        paths.append(path)
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert paths[0].read_bytes() != paths[2].read_bytes()
    header = json.loads(paths[0].read_text().splitlines()[0])
    assert header["kind"] == "header"
    assert header["meta"]["simulated"] is True
    assert header["meta"]["preset"] == "spike"
    assert header["meta"]["window"].startswith("simulated: 20 runs of the control preset")
    assert header["thresholds"]["tau_enter"] == 0.3  # [breaker] defaults


def test_simulate_uses_a_configured_window(isolated_config: Path) -> None:
    (isolated_config / "biasbreaker.toml").write_text(
        "[calibration]\nmax_history = 5\n[calibration.control]\nmean = 0.02\nstd = 0.01\n"
        "n_steps = 1000\n"
    )
    out = isolated_config / "run.jsonl"
    assert runner.invoke(app, ["simulate", "spike", "--seed", "1", "-o", str(out)]).exit_code == 0
    header = json.loads(out.read_text().splitlines()[0])
    assert header["max_history"] == 5
    assert header["control"] == {"mean": 0.02, "std": 0.01, "n_steps": 1000}
    assert header["meta"]["window"] == "configured ([calibration.control])"


def test_simulate_trace_to_stdout(isolated_config: Path) -> None:
    result = runner.invoke(app, ["simulate", "control", "--seed", "2", "--steps", "20"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 22  # the header, 20 steps, the seal
    assert json.loads(lines[0])["kind"] == "header"
    assert [json.loads(line)["step"] for line in lines[1:-1]] == list(range(20))
    assert json.loads(lines[-1])["kind"] == "seal"
