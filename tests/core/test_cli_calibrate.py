"""The `calibrate` command, in-process through typer's test runner."""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from biasbreaker.cli import app
from biasbreaker.config import load_settings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

runner = CliRunner()


def write_control(path: Path, runs: int, *, seed: int = 1) -> None:
    """Control runs as step records, each step with the guarded node's own score."""
    rng = random.Random(seed)
    with path.open("w") as out:
        for run in range(runs):
            fast = slow = 0.05
            for _ in range(30):
                x = max(0.0, rng.gauss(0.05, 0.02))
                own = min(1.0, max(0.0, rng.gauss(0.08, 0.03)))
                fast, slow = 0.5 * fast + 0.5 * x, 0.95 * slow + 0.05 * x
                record = {"run": run, "fast": fast, "slow": slow, "own": own}
                out.write(json.dumps(record) + "\n")


def test_control_runs_all_at_zero_calibrate_to_distinct_floor_thresholds_and_say_so(
    isolated_config: Path,
) -> None:
    """tau_warn used to be written equal to tau_enter (0.05 / 0.05) at the floor, unsaid."""
    with (isolated_config / "control.jsonl").open("w") as out:
        for run in range(40):
            for _ in range(5):
                out.write(json.dumps({"run": run, "fast": 0.0, "slow": 0.0}) + "\n")
    result = runner.invoke(
        app, ["calibrate", "control.jsonl", "--no-node-trip", "--write-toml", "biasbreaker.toml"]
    )
    assert result.exit_code == 0, result.output
    assert "scores exactly 0" in result.stderr and "zero_floor = 0.05" in result.stderr
    assert "zero floor used for tau_enter and tau_warn" in result.stdout
    breaker = load_settings(cwd=isolated_config).settings.breaker
    assert (breaker.tau_enter, breaker.tau_exit, breaker.tau_warn) == (0.05, 0.035, 0.025)
    as_json = runner.invoke(app, ["calibrate", "control.jsonl", "--no-node-trip", "--json"])
    assert json.loads(as_json.stdout)["zero_floor"] == ["tau_enter", "tau_warn"]


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
    assert result.stderr == ""
    assert "calibrated from 120 control runs (3600 steps)" in result.stdout
    assert (
        "trigger: fast B_net or the step's own score (node trips on); 3600 of 3600 steps "
        "carry an own score" in result.stdout
    )
    assert "tau_enter = " in result.stdout and "starting point" in result.stdout
    settings = load_settings(cwd=isolated_config).settings
    digest = hashlib.sha256((isolated_config / "control.jsonl").read_bytes()).hexdigest()
    assert settings.calibration.source_sha256 == digest
    assert settings.calibration.calibrated_on is not None
    assert settings.calibration.calibrated_on.isoformat() == "2026-06-01"
    assert settings.calibration.control is not None
    assert settings.calibration.control.n_steps == 3600
    tau_enter = settings.breaker.tau_enter
    assert settings.breaker.tau_exit == pytest.approx(0.7 * tau_enter, rel=1e-3)
    assert len(repr(tau_enter).lstrip("0.")) <= 4  # 4 significant digits, stored and printed
    assert settings.breaker.node_trip is True
    assert f"tau_enter = {tau_enter!r}" in result.stdout
    assert "(calibrated_on = 2026-06-01, node_trip = true)" in result.stdout
    # the own scores (mean 0.08) lie above fast B_net (mean 0.05): they set tau_enter
    data = [json.loads(line) for line in (isolated_config / "control.jsonl").open()]
    top_fast = sorted(max(r["fast"] for r in data if r["run"] == run) for run in range(120))
    assert tau_enter > top_fast[-1]


def test_calibrate_writes_pyproject_under_tool_biasbreaker(isolated_config: Path) -> None:
    write_control(isolated_config / "control.jsonl", 40)
    pyproject = isolated_config / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "demo"\n\n[tool.ruff]\nline-length = 99\n\n'
        "[tool.biasbreaker]\nseed = 4\n"
    )
    result = runner.invoke(app, ["calibrate", "control.jsonl", "--write-toml", "pyproject.toml"])
    assert result.exit_code == 0, result.output
    assert "written to pyproject.toml [tool.biasbreaker]" in result.stdout
    document = tomllib.loads(pyproject.read_text())
    assert "breaker" not in document and "calibration" not in document
    assert document["project"] == {"name": "demo"}
    assert document["tool"]["ruff"] == {"line-length": 99}
    written = document["tool"]["biasbreaker"]
    assert written["seed"] == 4
    # biasbreaker reads the calibrated values (the bug: they were written where nothing reads)
    loaded = load_settings(cwd=isolated_config)
    assert loaded.settings.breaker.tau_enter == written["breaker"]["tau_enter"]
    assert loaded.source_of("breaker.tau_enter") == "pyproject.toml [tool.biasbreaker]"
    assert loaded.settings.calibration.control is not None
    shown = runner.invoke(app, ["config"])
    assert repr(written["breaker"]["tau_enter"]) in shown.stdout


PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "my-app"
dependencies = ["biasbreaker", "requests>=2"]  # keep

[tool.ruff]
line-length = 120
select = [ "E",   "F" ]

[tool.biasbreaker]
seed = 11   # the seed we publish with

[tool.biasbreaker.probe]
k = 6

[tool.black]
target-version = ["py311"]
"""


def test_writing_pyproject_keeps_every_other_byte(isolated_config: Path) -> None:
    write_control(isolated_config / "control.jsonl", 40)
    pyproject = isolated_config / "pyproject.toml"
    pyproject.write_text(PYPROJECT)
    result = runner.invoke(app, ["calibrate", "control.jsonl", "--write-toml", "pyproject.toml"])
    assert result.exit_code == 0, result.output
    text = pyproject.read_text()
    # the calibration is one block inserted after [tool.biasbreaker]'s last table; the text
    # before and after it (comments, inline arrays, spacing, other tools' tables) is unchanged
    cut = PYPROJECT.index("[tool.black]")
    assert text.startswith(PYPROJECT[:cut]) and text.endswith(PYPROJECT[cut:])
    inserted = text[cut : len(text) - len(PYPROJECT) + cut]
    assert inserted.startswith("[tool.biasbreaker.breaker]\n") and inserted.endswith("\n\n")
    assert set(tomllib.loads(inserted)["tool"]["biasbreaker"]) == {"breaker", "calibration"}
    loaded = load_settings(cwd=isolated_config)
    assert loaded.settings.seed == 11 and loaded.settings.probe.k == 6
    assert loaded.source_of("breaker.tau_enter") == "pyproject.toml [tool.biasbreaker]"
    # calibrating again changes only the values: every line keeps its place
    write_control(isolated_config / "control.jsonl", 40, seed=2)
    again = runner.invoke(app, ["calibrate", "control.jsonl", "--write-toml", "pyproject.toml"])
    assert again.exit_code == 0, again.output
    second = pyproject.read_text()
    assert second != text
    assert [line.split(" = ")[0] for line in second.splitlines()] == [
        line.split(" = ")[0] for line in text.splitlines()
    ]
    assert second.startswith(PYPROJECT[:cut]) and second.endswith(PYPROJECT[cut:])


def test_writing_a_config_file_updates_keys_in_place_and_keeps_comments(
    isolated_config: Path,
) -> None:
    write_control(isolated_config / "control.jsonl", 40)
    original = (
        "# my deployment config -- DO NOT LOSE THIS COMMENT\n"
        "seed = 7\n"
        "\n"
        "[breaker]\n"
        "# tuned by hand\n"
        "cooldown_steps = 4\n"
        "tau_enter = 0.9  # before calibration\n"
        "\n"
        "[intervention]\n"
        'skeptics = ["empirical-auditor", "devils-advocate"]   # mine\n'
    )
    config = isolated_config / "biasbreaker.toml"
    config.write_text(original)
    result = runner.invoke(
        app,
        ["calibrate", "control.jsonl", "--write-toml", "biasbreaker.toml", "--date", "2026-06-01"],
    )
    assert result.exit_code == 0, result.output
    settings = load_settings(cwd=isolated_config).settings
    breaker, control = settings.breaker, settings.calibration.control
    assert control is not None
    digest = hashlib.sha256((isolated_config / "control.jsonl").read_bytes()).hexdigest()
    expected = (
        "# my deployment config -- DO NOT LOSE THIS COMMENT\n"
        "seed = 7\n"
        "\n"
        "[breaker]\n"
        "# tuned by hand\n"
        "cooldown_steps = 4\n"
        f"tau_enter = {breaker.tau_enter!r}  # before calibration\n"
        f"tau_exit = {breaker.tau_exit!r}\n"
        f"tau_warn = {breaker.tau_warn!r}\n"
        "node_trip = true\n"
        "\n"
        "[intervention]\n"
        'skeptics = ["empirical-auditor", "devils-advocate"]   # mine\n'
        "\n"
        "[calibration]\n"
        f"target_false_halt_rate = {settings.calibration.target_false_halt_rate!r}\n"
        "calibrated_on = 2026-06-01\n"
        f'source_sha256 = "{digest}"\n'
        "\n"
        "[calibration.control]\n"
        f"mean = {control.mean!r}\n"
        f"std = {control.std!r}\n"
        f"n_steps = {control.n_steps}\n"
    )
    assert config.read_text() == expected


def test_a_missing_folder_is_named_and_nothing_is_created(isolated_config: Path) -> None:
    write_control(isolated_config / "control.jsonl", 40)
    result = runner.invoke(app, ["calibrate", "control.jsonl", "--write-toml", "new/dir/x.toml"])
    assert result.exit_code == 1, result.output
    assert (
        "error: new/dir/x.toml: cannot write the calibration: the folder new/dir does not "
        "exist; create it first" in " ".join(result.stderr.split())
    )
    assert ".tmp" not in result.stderr and "left unchanged" not in result.stderr
    assert sorted(p.name for p in isolated_config.iterdir()) == ["control.jsonl"]


@pytest.mark.parametrize(
    ("name", "text", "shown"),
    [
        ("deploy.toml", "# mine\n[breaker]\ntau_entre = 0.4\n", "unknown key breaker.tau_entre"),
        ("deploy.toml", "[breaker]\nkappa = 7\n", "breaker.kappa = 7"),
        (
            "pyproject.toml",
            '[project]\nname = "x"\n[tool.biasbreaker.breaker]\ntau_entre = 0.4\n',
            "unknown key breaker.tau_entre",
        ),
        ("deploy.toml", "breaker = 3\n", "'breaker' is 3, not a table"),
        ("pyproject.toml", 'tool = "x"\n', "'tool' is 'x', not a table"),
        ("deploy.toml", "[breaker\n", "it is not readable TOML"),
    ],
)
def test_a_target_that_would_not_load_is_left_unchanged(
    isolated_config: Path, name: str, text: str, shown: str
) -> None:
    write_control(isolated_config / "control.jsonl", 40)
    target = isolated_config / "deploy" / name
    target.parent.mkdir()
    target.write_text(text)
    original = target.read_bytes()
    result = runner.invoke(app, ["calibrate", "control.jsonl", "--write-toml", str(target)])
    assert result.exit_code == 1, result.output
    assert shown in result.stderr
    assert "Traceback" not in result.output
    assert target.read_bytes() == original
    assert [p.name for p in target.parent.iterdir()] == [name]  # no temporary file left


def test_the_write_is_validated_and_keeps_the_targets_permissions(isolated_config: Path) -> None:
    write_control(isolated_config / "control.jsonl", 40)
    target = isolated_config / "deploy.toml"
    target.write_text('[intervention]\nrouter = "heuristic"\n')
    target.chmod(0o640)
    result = runner.invoke(app, ["calibrate", "control.jsonl", "--write-toml", "deploy.toml"])
    assert result.exit_code == 0, result.output
    assert target.stat().st_mode & 0o777 == 0o640
    settings = load_settings(target, cwd=isolated_config / "elsewhere").settings
    assert settings.intervention.router == "heuristic"
    assert settings.calibration.calibrated_on is not None


def test_bad_values_in_the_input_are_input_errors_with_file_and_line(
    isolated_config: Path,
) -> None:
    path = isolated_config / "control.jsonl"
    write_control(path, 40)
    lines = path.read_text().splitlines()
    for value, shown in (
        ("1e300", "fast=1e+300 is above 1"),
        ("9" * 400, "fast=<an integer beyond the float range>"),
        ("5", "fast=5 is above 1"),
    ):
        bad = json.loads(lines[3])
        path.write_text(
            "\n".join([*lines[:3], json.dumps(bad).replace(repr(bad["fast"]), value), *lines[4:]])
        )
        result = runner.invoke(app, ["calibrate", "control.jsonl"])
        assert result.exit_code == 1, result.output
        assert f"error: control.jsonl:4: {shown}" in result.stderr
        assert "Traceback" not in result.output


def test_a_cut_last_line_is_a_warning(isolated_config: Path) -> None:
    path = isolated_config / "control.jsonl"
    write_control(path, 40)
    path.write_text(path.read_text() + '{"run": 39, "fast": 0.0')
    result = runner.invoke(app, ["calibrate", "control.jsonl", "--json"])
    assert result.exit_code == 0, result.output
    assert "warning: control.jsonl:1201: the last line is cut mid-record" in result.stderr
    assert json.loads(result.stdout)["control"]["n_steps"] == 1200


def test_step_records_without_own_scores_warn_when_node_trips_are_on(
    isolated_config: Path,
) -> None:
    path = isolated_config / "control.jsonl"
    write_control(path, 40)
    path.write_text(
        "".join(
            json.dumps({k: v for k, v in json.loads(line).items() if k != "own"}) + "\n"
            for line in path.read_text().splitlines()
        )
    )
    result = runner.invoke(app, ["calibrate", "control.jsonl"])
    assert result.exit_code == 0, result.output
    assert "no control step carries its own score" in result.stderr
    assert "0 of 1200 steps carry an own score" in result.stdout
    (isolated_config / "biasbreaker.toml").write_text("[breaker]\nnode_trip = false\n")
    literal = runner.invoke(app, ["calibrate", "control.jsonl"])
    assert literal.exit_code == 0 and literal.stderr == ""
    assert "trigger: fast B_net only (node trips off)" in literal.stdout


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


def test_node_trip_flag_overrides_the_configuration(isolated_config: Path) -> None:
    write_control(isolated_config / "control.jsonl", 40)
    (isolated_config / "biasbreaker.toml").write_text("[breaker]\nnode_trip = false\n")

    def run(*flags: str) -> dict[str, object]:
        result = runner.invoke(app, ["calibrate", "control.jsonl", "--json", *flags])
        assert result.exit_code == 0, result.output
        return dict(json.loads(result.stdout))

    configured, on, off = run(), run("--node-trip"), run("--no-node-trip")
    assert configured["node_trip"] is False and off == configured
    assert on["node_trip"] is True
    # own scores run above fast B_net here, so node trips need a higher tau_enter
    assert float(str(on["tau_enter"])) > float(str(off["tau_enter"]))


def _calibrate_into(folder: Path, name: str) -> dict[str, object]:
    """Run ``calibrate --json --write-toml name`` in ``folder``; the reported values."""
    write_control(folder / "control.jsonl", 40)
    args = ["calibrate", "control.jsonl", "--json", "--date", "2026-01-02", "--write-toml", name]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report: dict[str, object] = json.loads(result.stdout)
    return report


def _calibrated_lines(report: dict[str, object], prefix: str) -> str:
    """The ``key = value`` lines of the calibration, each key written as ``prefix + key``."""
    control = report["control"]
    assert isinstance(control, dict)
    return "".join(
        f"{prefix}{key} = {value}\n"
        for key, value in [
            ("target_false_halt_rate", report["target_false_halt_rate"]),
            ("calibrated_on", "2026-01-02"),
            ("source_sha256", json.dumps(report["source_sha256"])),
            ("control.mean", control["mean"]),
            ("control.std", control["std"]),
            ("control.n_steps", control["n_steps"]),
        ]
    )


def _assert_loaded(report: dict[str, object], source: str, folder: Path, **kw: Path) -> None:
    """biasbreaker reads every calibrated value from ``source``."""
    loaded = load_settings(kw.get("config"), cwd=folder)
    settings = loaded.settings
    assert settings.breaker.tau_enter == report["tau_enter"]
    assert settings.breaker.tau_exit == report["tau_exit"]
    assert settings.breaker.tau_warn == report["tau_warn"]
    assert settings.breaker.node_trip == report["node_trip"]
    assert settings.calibration.source_sha256 == report["source_sha256"]
    assert settings.calibration.control is not None
    assert settings.calibration.control.model_dump() == report["control"]
    assert str(settings.calibration.calibrated_on) == "2026-01-02"
    for key in ("breaker.tau_enter", "calibration.control.mean", "calibration.calibrated_on"):
        assert loaded.source_of(key) == source


def test_pyproject_dotted_keys_and_inline_breaker_stay_under_tool_biasbreaker(
    isolated_config: Path,
) -> None:
    # the new user's file: the calibration used to go to a top-level [calibration.control]
    head = '[project]\nname = "x"\n\n[tool.biasbreaker]\n'
    tail = "\n[tool.other]\na = 1\n"
    pyproject = isolated_config / "pyproject.toml"
    pyproject.write_text(
        head + "breaker = { tau_enter = 0.5, kappa = 0.5 }\ncalibration.max_history = 8\n" + tail
    )
    report = _calibrate_into(isolated_config, "pyproject.toml")
    breaker = (
        f"breaker = {{ tau_enter = {report['tau_enter']}, kappa = 0.5, "
        f"tau_exit = {report['tau_exit']}, tau_warn = {report['tau_warn']}, node_trip = true }}\n"
    )
    calibration = "calibration.max_history = 8\n" + _calibrated_lines(report, "calibration.")
    assert pyproject.read_text() == head + breaker + calibration + tail
    _assert_loaded(report, "pyproject.toml [tool.biasbreaker]", isolated_config)
    assert load_settings(cwd=isolated_config).settings.breaker.kappa == 0.5


def test_an_inline_calibration_table_gets_control_as_an_inline_table(
    isolated_config: Path,
) -> None:
    # this used to be a traceback: "Inline tables cannot contain a table"
    config = isolated_config / "biasbreaker.toml"
    config.write_text("calibration = {max_history = 8}\n")
    report = _calibrate_into(isolated_config, "biasbreaker.toml")
    control = report["control"]
    assert isinstance(control, dict)
    assert config.read_text() == (
        f"calibration = {{max_history = 8, "
        f"target_false_halt_rate = {report['target_false_halt_rate']}, "
        f"calibrated_on = 2026-01-02, source_sha256 = {json.dumps(report['source_sha256'])}, "
        f"control = {{mean = {control['mean']}, std = {control['std']}, "
        f"n_steps = {control['n_steps']}}}}}\n"
        "\n"
        f"[breaker]\ntau_enter = {report['tau_enter']}\ntau_exit = {report['tau_exit']}\n"
        f"tau_warn = {report['tau_warn']}\nnode_trip = true\n"
    )
    _assert_loaded(report, "biasbreaker.toml", isolated_config)
    assert load_settings(cwd=isolated_config).settings.calibration.max_history == 8


def test_fully_dotted_keys_are_continued_as_dotted_keys(isolated_config: Path) -> None:
    pyproject = isolated_config / "pyproject.toml"
    pyproject.write_text("tool.biasbreaker.breaker.kappa = 0.5  # tuned\n")
    report = _calibrate_into(isolated_config, "pyproject.toml")
    text = pyproject.read_text()
    assert text.startswith("tool.biasbreaker.breaker.kappa = 0.5  # tuned\n")
    assert text.endswith(_calibrated_lines(report, "tool.biasbreaker.calibration."))
    assert "[" not in text  # no header: every key stays a dotted key
    _assert_loaded(report, "pyproject.toml [tool.biasbreaker]", isolated_config)


def test_crlf_line_endings_are_kept_byte_for_byte(isolated_config: Path) -> None:
    original = b'[project]\r\nname = "x"\r\n\r\n[tool.ruff]\r\nline-length = 100\r\n'
    pyproject = isolated_config / "pyproject.toml"
    pyproject.write_bytes(original)
    report = _calibrate_into(isolated_config, "pyproject.toml")
    data = pyproject.read_bytes()
    assert data.startswith(original)
    assert data.count(b"\n") == data.count(b"\r\n") > original.count(b"\n")  # no bare LF
    assert not data.endswith(b"\r\n\r\n")
    _assert_loaded(report, "pyproject.toml [tool.biasbreaker]", isolated_config)
    # a file that mixes endings keeps each of its own; only the lines added end in LF
    mixed = b"[breaker]\r\nkappa = 0.5\n"
    config = isolated_config / "mixed.toml"
    config.write_bytes(mixed)
    write_control(isolated_config / "control.jsonl", 40)
    result = runner.invoke(app, ["calibrate", "control.jsonl", "--write-toml", "mixed.toml"])
    assert result.exit_code == 0, result.output
    assert config.read_bytes().startswith(mixed) and config.read_bytes().count(b"\r") == 1


def test_a_calibration_that_would_not_take_effect_is_refused(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # simulate an edit that lands outside [tool.biasbreaker] (what the dotted-key bug did):
    # the read-back check must refuse it and leave the file as it was
    from biasbreaker.calibration import toml as calibration_toml

    real_put = calibration_toml._put

    def misplaced(parent: Any, key: str, values: Any, *args: Any) -> None:
        if key != "tool":
            real_put(parent, key, values, *args)
            return
        for name, table in values["biasbreaker"].items():  # [tool.biasbreaker] left out
            real_put(parent, name, table, *args)

    monkeypatch.setattr(calibration_toml, "_put", misplaced)
    write_control(isolated_config / "control.jsonl", 40)
    pyproject = isolated_config / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n\n[tool.biasbreaker]\nseed = 3\n')
    original = pyproject.read_bytes()
    result = runner.invoke(app, ["calibrate", "control.jsonl", "--write-toml", "pyproject.toml"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "pyproject.toml [tool.biasbreaker]: the calibrated file would not set" in result.stderr
    assert "breaker.tau_enter" in result.stderr and "left unchanged" in result.stderr
    assert pyproject.read_bytes() == original
    assert [p.name for p in isolated_config.iterdir() if p.name.startswith(".")] == []


def _write_traces(folder: Path, runs: int, *, tau_enter: float = 1.0, seed: int = 3) -> None:
    """One run trace per control run, as `run --control` writes them (traces/input-N.jsonl)."""
    from biasbreaker.machine import ControlMachine, MachineConfig
    from biasbreaker.trace import TraceWriter
    from biasbreaker.types import Thresholds

    folder.mkdir(parents=True, exist_ok=True)
    config = MachineConfig(Thresholds(tau_enter, 0.7 * tau_enter, 1.0, 0.05), node_trip=True)
    rng = random.Random(seed)
    for run in range(runs):
        path = folder / f"input-{run + 1:05d}.jsonl"
        with TraceWriter(path, config.trace_header({"thread": path.stem})) as writer:
            machine = ControlMachine(config, recorder=writer)
            for _ in range(5):
                own = rng.random() * 0.2
                machine.step(own / 2, own / 4, node="a", local_scores={"a": own})


def test_calibrate_reads_a_folder_of_traces_like_their_concatenation(
    isolated_config: Path,
) -> None:
    _write_traces(isolated_config / "o" / "traces", 25)
    files = sorted((isolated_config / "o" / "traces").glob("*.jsonl"))
    (isolated_config / "all.jsonl").write_bytes(b"".join(p.read_bytes() for p in files))
    folder = runner.invoke(app, ["calibrate", "o/traces", "--json"])
    assert folder.exit_code == 0, folder.output
    joined = runner.invoke(app, ["calibrate", "all.jsonl", "--json"])
    assert joined.exit_code == 0, joined.output
    assert json.loads(folder.stdout) == json.loads(joined.stdout)  # the same sha256 too
    assert json.loads(folder.stdout)["n_runs"] == 25
    shown = runner.invoke(app, ["calibrate", "o/traces"])
    assert "calibrated from 25 control runs (125 steps) in 25 files in o/traces" in shown.stdout
    # several arguments, files and folders, are read in order
    both = runner.invoke(app, ["calibrate", str(files[0]), "o/traces", "--json"])
    assert both.exit_code == 0 and json.loads(both.stdout)["n_runs"] == 25  # a file once
    # a folder holding other JSON Lines says which folder to give
    (isolated_config / "o" / "results.jsonl").write_text('{"thread": "input-00001"}\n')
    mixed = runner.invoke(app, ["calibrate", "o"])
    assert mixed.exit_code == 1
    message = " ".join(mixed.stderr.split())
    assert "results.jsonl:1" in message and "give the folder that holds only the run traces" in (
        message
    )


def test_calibrate_refuses_traces_recorded_with_different_configurations(
    isolated_config: Path,
) -> None:
    _write_traces(isolated_config / "a", 12)
    _write_traces(isolated_config / "b", 12, tau_enter=0.3, seed=4)
    result = runner.invoke(app, ["calibrate", "a", "b"])
    assert result.exit_code == 1
    message = " ".join(result.stderr.split())
    assert "b/input-00001.jsonl:1: this run trace was recorded with another configuration" in (
        message
    )
    assert "than the one at a/input-00001.jsonl:1" in message
    assert "thresholds.tau_enter 0.3 here, 1.0 in a/input-00001.jsonl:1" in message
    # the same check inside one file of concatenated traces
    joined = b"".join(
        p.read_bytes() for d in ("a", "b") for p in sorted((isolated_config / d).glob("*.jsonl"))
    )
    (isolated_config / "joined.jsonl").write_bytes(joined)
    one = runner.invoke(app, ["calibrate", "joined.jsonl"])
    assert one.exit_code == 1 and "another configuration" in one.stderr


def test_a_missing_path_or_an_empty_folder_is_named(isolated_config: Path) -> None:
    (isolated_config / "empty").mkdir()
    result = runner.invoke(app, ["calibrate", "empty"])
    assert result.exit_code == 1 and "folder 'empty' holds no .jsonl file" in result.stderr
    result = runner.invoke(app, ["calibrate", "nope.jsonl"])
    assert result.exit_code == 1 and "'nope.jsonl' does not exist" in result.stderr


def test_the_same_run_given_twice_is_refused_not_counted_twice(isolated_config: Path) -> None:
    _write_traces(isolated_config / "o" / "traces", 20)
    files = sorted((isolated_config / "o" / "traces").glob("*.jsonl"))
    (isolated_config / "o" / "control-runs.jsonl").write_bytes(
        b"".join(p.read_bytes() for p in files)
    )
    result = runner.invoke(app, ["calibrate", "o/control-runs.jsonl", "o/traces"])
    assert result.exit_code == 1
    message = " ".join(result.stderr.split())
    assert "o/traces/input-00001.jsonl:1: this run trace is the one at " in message
    assert "o/control-runs.jsonl:1 again, byte for byte" in message
    # within one file too: a trace concatenated twice
    twice = files[0].read_bytes() * 2
    (isolated_config / "twice.jsonl").write_bytes(twice)
    again = runner.invoke(app, ["calibrate", "twice.jsonl"])
    assert again.exit_code == 1 and "twice.jsonl:1 again, byte for byte" in again.stderr
