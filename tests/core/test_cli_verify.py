"""The `verify` command, in-process through typer's test runner."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from biasbreaker.cli import app
from machine_traces import write

runner = CliRunner()


def rlb_line(stdout: str) -> str:
    [line] = [line for line in stdout.splitlines() if line.startswith("RLB-v1")]
    return line


def test_a_recovering_run_holds(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", [0.1, 0.6, 0.4, 0.3, 0.1, 0.1, 0.1, 0.1, 0.1])
    result = runner.invoke(app, ["verify", str(path)])
    assert result.exit_code == 0, result.output
    assert rlb_line(result.stdout).startswith(
        "RLB-v1: HOLDS (W=3, 9 cycles, 1 recovery transition(s), first at step 6, 0 violation(s)"
    )  # last outlier at step 3, W = 3
    assert "chain v1: HOLDS (11 line(s) linked, 1 seal(s), 0 violation(s))" in result.stdout
    assert "replay v1: HOLDS (9 step(s) replayed" in result.stdout
    assert "anti-thrash v2: HOLDS" in result.stdout
    assert "recovery-after-cooldown v1: HOLDS (1 recovery(ies), 0 violation(s))" in result.stdout
    assert result.stdout.strip().endswith("all properties hold")


def test_a_run_that_never_recovers_holds_vacuously_and_says_so(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", [0.1] + [0.6] * 10)
    result = runner.invoke(app, ["verify", str(path)])
    assert result.exit_code == 0, result.output
    assert rlb_line(result.stdout) == (
        "RLB-v1: HOLDS (W=3, 11 cycles, 0 recovery transition(s), 0 violation(s); ADR literal "
        "bound exceeded at 0); holds vacuously: no recovery transition (the window never went "
        "from dirty to clean)"
    )


def broken(path: Path) -> Path:
    """A recovering run whose step 2 is edited to clear inside the dead-band (anti-thrash)."""
    write(path, [0.1, 0.6, 0.4, 0.3, 0.1, 0.1, 0.1])
    lines = path.read_text().splitlines()
    lines[3] = (
        lines[3]
        .replace('"state":"recovery"', '"state":"normal"')
        .replace('"action":"halt"', '"action":"proceed"')
    )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_violations_exit_1_and_are_listed(tmp_path: Path) -> None:
    path = broken(tmp_path / "run.jsonl")
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
    assert rlb_line(result.stdout).startswith("RLB-v1: VIOLATED")
    assert "more than W=2" in result.stdout


def test_json_output_and_truncation_warning(tmp_path: Path) -> None:
    path = write(tmp_path / "run.jsonl", [0.1, 0.2, 0.3])
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-2]) + lines[-2][:-10])  # cut inside the last step
    result = runner.invoke(app, ["verify", str(path), "--json"])
    # schema 2: the cut is read as before, and now detected: the trace no longer ends sealed
    assert result.exit_code == 1, result.output
    assert "the last line is cut mid-record" in result.stderr
    data = json.loads(result.stdout)
    assert data["steps"] == 2 and data["truncated"] is True
    assert data["rlb"]["property_version"] == "RLB-v1"
    assert "the trace ends without a seal after step 1" in data["chain"]["violations"][0]["message"]


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


def test_a_folder_of_traces_is_verified_as_a_set(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    write(tmp_path / "a" / "one.jsonl", [0.1, 0.6, 0.4, 0.3, 0.1, 0.1, 0.1, 0.1, 0.1])
    write(tmp_path / "a" / "two.jsonl", [0.1] + [0.6] * 10)
    (tmp_path / "a" / "notes.txt").write_text("not a trace")
    result = runner.invoke(app, ["verify", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "2 traces, 0 with a violation"
    assert lines[1].startswith("chain v1: HOLDS (2 traces, ")
    assert lines[2].startswith("replay v1: HOLDS (2 traces, 20 checked, 0 violation(s)")
    assert lines[3] == (
        "RLB-v1: HOLDS (2 traces, 20 cycles, 1 recovery transition(s), 0 violation(s); "
        "vacuous on 1)"
    )
    assert "bounded-retries v1: HOLDS (2 traces, 2 checked, 0 violation(s); vacuous on 0)" in lines
    assert lines[-1] == "all properties hold on 2 traces"


def test_one_violating_trace_in_a_set_is_named_and_exits_1(tmp_path: Path) -> None:
    good = write(tmp_path / "good.jsonl", [0.1, 0.6, 0.4, 0.3, 0.1, 0.1, 0.1, 0.1, 0.1])
    bad = broken(tmp_path / "bad.jsonl")
    result = runner.invoke(app, ["verify", str(good), str(bad), "--json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["holds"] is False
    assert list(data["traces"]) == [str(good), str(bad)]
    anti = next(t for t in data["totals"] if t["name"] == "anti-thrash v2")
    alone = json.loads(runner.invoke(app, ["verify", str(bad), "--json"]).stdout)
    violations = next(p for p in alone["properties"] if p["name"] == "anti-thrash")
    assert violations["violation_count"] >= 1
    assert (anti["traces"], anti["holding"], anti["violations"]) == (
        2,
        1,
        violations["violation_count"],
    )
    text = runner.invoke(app, ["verify", str(good), str(bad)])
    assert text.exit_code == 1
    [named] = [line for line in text.stdout.splitlines() if line.startswith(f"  {bad}: ")]
    assert "anti-thrash v2" in named and named.endswith("VIOLATED (verify it alone for the steps)")
    assert str(good) not in text.stdout
    assert "anti-thrash v2: VIOLATED (2 traces, " in text.stdout


def test_a_missing_path_or_an_empty_folder_is_an_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["verify", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 1
    assert "does not exist" in result.output
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["verify", str(tmp_path / "empty")])
    assert result.exit_code == 1
    assert "holds no .jsonl file" in result.output


def test_concatenated_traces_are_refused_with_what_to_do(tmp_path: Path) -> None:
    one = write(tmp_path / "one.jsonl", [0.1, 0.2])
    both = tmp_path / "both.jsonl"
    both.write_text(one.read_text() * 2)
    result = runner.invoke(app, ["verify", str(both)])
    assert result.exit_code == 1
    assert ":5: expected a step record, got a second header" in result.output  # after the seal
    assert "verify each run's own trace file, or their folder" in result.output


def test_a_folder_holding_other_jsonl_files_says_which_folder_to_give(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    write(tmp_path / "traces" / "one.jsonl", [0.1, 0.2])
    (tmp_path / "results.jsonl").write_text('{"status": "done"}\n')
    result = runner.invoke(app, ["verify", str(tmp_path)])
    assert result.exit_code == 1
    message = " ".join(result.output.split())
    assert "results.jsonl" in message and "give the folder that holds only the traces" in message
    assert runner.invoke(app, ["verify", str(tmp_path / "traces")]).exit_code == 0


def test_a_malformed_trace_in_a_folder_of_traces_gets_no_folder_hint(tmp_path: Path) -> None:
    """A new-user trial's malformed trace read like a usage mistake ("give the folder that
    holds only the traces") although the folder held traces only."""
    (tmp_path / "traces").mkdir()
    one = write(tmp_path / "traces" / "one.jsonl", [0.1, 0.2])
    one.write_text(one.read_text() * 2)  # a second header: not one run trace
    result = runner.invoke(app, ["verify", str(tmp_path / "traces")])
    assert result.exit_code == 1
    assert "second header" in result.output
    assert "holds only the traces" not in " ".join(result.output.split())


# --- keygen shows the public key; a SQLite file is named as such (new-user trial, C3) -------


def test_keygen_prints_the_public_key_and_never_the_private_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the console script's redacting streams, as a user sees it."""
    pytest.importorskip("cryptography")
    from biasbreaker.cli import main
    from biasbreaker.trace.signing import load_public_key

    monkeypatch.setattr(sys, "argv", ["biasbreaker", "keygen", str(tmp_path / "k")])
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code in (0, None)
    shown = capsys.readouterr()
    public = load_public_key(tmp_path / "k.pub")
    assert f"public key {tmp_path / 'k.pub'}: {public}" in " ".join(shown.out.split())
    assert "<redacted>" not in shown.out
    private = (tmp_path / "k").read_text()
    body = "".join(private.strip().splitlines()[1:-1])  # the PEM's base64, without its armour
    leaked = body in shown.out + shown.err or "PRIVATE KEY" in shown.out + shown.err
    assert not leaked, "the private key was printed"  # a bool: a failure never shows the key


def test_the_public_key_rule_shows_only_that_value() -> None:
    from biasbreaker.redaction import redact_text, register_public

    register_public("Qm9vZ3lNYW4xMjM0NTY3ODkwQWJDZEVmR2hJams9PQ==")
    assert redact_text("key Qm9vZ3lNYW4xMjM0NTY3ODkwQWJDZEVmR2hJams9PQ==") == (
        "key Qm9vZ3lNYW4xMjM0NTY3ODkwQWJDZEVmR2hJams9PQ=="
    )
    assert redact_text("key a3F9kL2mQ8xZ7vB1nC4dE6gH") == "key <redacted>"


def test_verify_names_a_sqlite_database_and_its_url(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "x.db"
    connection = sqlite3.connect(db)
    connection.execute("CREATE TABLE t (a BLOB)")
    connection.execute("INSERT INTO t VALUES (?)", (bytes(range(256)) * 8,))
    connection.commit()
    connection.close()
    result = runner.invoke(app, ["verify", str(db)])
    assert result.exit_code == 1
    message = " ".join(result.stderr.split())
    assert f"{db} is a SQLite database, not a JSON Lines run trace" in message
    assert f"give its URL: sqlite:///{db.as_posix()}" in message
    assert "codec" not in message


def test_verify_names_a_binary_file_as_no_trace(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(b'{"kind": "\xb9"}\n')
    result = runner.invoke(app, ["verify", str(path)])
    assert result.exit_code == 1
    assert "run.jsonl:1: not UTF-8 text, so not a JSON Lines run trace" in " ".join(
        result.stderr.split()
    )
