"""The `simulate` command: simulated DoT trajectories as JSON Lines."""

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
        app, ["simulate", preset, "--seed", "4", "--steps", "60", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == expected_bytes(preset, 4, 60)
    assert f"simulated DoT trajectory {preset!r} (seed 4, 60 steps)" in result.stderr
    again = isolated_config / "again.jsonl"
    runner.invoke(app, ["simulate", preset, "--seed", "4", "--steps", "60", "-o", str(again)])
    assert again.read_bytes() == out.read_bytes()
    other = isolated_config / "other.jsonl"
    runner.invoke(app, ["simulate", preset, "--seed", "5", "--steps", "60", "-o", str(other)])
    assert other.read_bytes() != out.read_bytes()


def test_simulate_to_stdout_and_the_seed_from_the_configuration(isolated_config: Path) -> None:
    (isolated_config / "biasbreaker.toml").write_text("seed = 9\n")
    result = runner.invoke(app, ["simulate", "spike", "--steps", "30"])
    assert result.exit_code == 0, result.output
    assert result.stdout.encode("utf-8") == expected_bytes("spike", 9, 30)
    assert all(json.loads(line)["simulated"] is True for line in result.stdout.splitlines())


def test_simulate_applies_the_propagation_settings(isolated_config: Path) -> None:
    (isolated_config / "biasbreaker.toml").write_text(
        "[propagation]\nfast_smoothing = 0.9\nslow_half_life = 50\n"
    )
    out = isolated_config / "t.jsonl"
    assert (
        runner.invoke(app, ["simulate", "recovery", "--seed", "1", "-o", str(out)]).exit_code == 0
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
