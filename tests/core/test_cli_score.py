"""`biasbreaker score PAIRS.jsonl`, run in-process; the scorers come from the installed plugin."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from biasbreaker.cli import app

runner = CliRunner()
DATA = Path(__file__).resolve().parents[1] / "data" / "langfair"


def langfair_pairs(tmp_path: Path) -> Path:
    doc = json.loads((DATA / "autoeval_results_file.json").read_text("utf-8"))
    data = doc["counterfactual_responses"]["gender"]["data"]
    path = tmp_path / "langfair.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for i, (m, f) in enumerate(
            zip(data["male_response"], data["female_response"], strict=True)
        ):
            fh.write(json.dumps({"id": i, "original": m, "counterfactual": f}) + "\n")
    return path


def test_score_prints_a_table(isolated_config: Path, tmp_path: Path) -> None:
    path = langfair_pairs(tmp_path)
    result = runner.invoke(
        app,
        [
            "score",
            str(path),
            "-s",
            "lexical",
            "--neutralise",
            "mask",
            "--axis",
            "gender",
            "--no-names",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "75 pairs" in result.stdout
    assert "RougeL Similarity" in result.stdout
    assert "0.4754" in result.stdout


def test_score_json_uses_configured_scorers(isolated_config: Path, tmp_path: Path) -> None:
    (isolated_config / "biasbreaker.toml").write_text(
        '[probe]\nscorers = ["sentiment", "decision"]\nbootstrap = 0\n'
        '[plugin.sentiment]\nneutralised = false\nfield = "neg"\n'
    )
    result = runner.invoke(app, ["score", str(langfair_pairs(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [s["scorer"] for s in report["scorers"]] == ["sentiment", "decision"]
    sentiment = report["scorers"][0]
    assert abs(sentiment["reported"]["Sentiment Bias (strict parity)"] - 0.006973) < 1e-6
    assert sentiment["counterfactual_ci"] is None


def test_score_reports_bad_input_with_file_and_line(isolated_config: Path, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"original": "a", "counterfactual": "b"}\n{"original": 1}\n')
    result = runner.invoke(app, ["score", str(path), "-s", "decision"])
    assert result.exit_code == 1
    assert "bad.jsonl:2" in result.stderr
    assert "'original'" in result.stderr


def test_score_unknown_scorer_lists_installed(isolated_config: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["score", str(langfair_pairs(tmp_path)), "-s", "bertscore"])
    assert result.exit_code == 1
    assert "bertscore" in result.stderr
    assert "lexical" in result.stderr


def test_score_rejects_a_misspelt_group_with_file_and_line(
    isolated_config: Path, tmp_path: Path
) -> None:
    path = tmp_path / "typo.jsonl"
    path.write_text(
        json.dumps(
            {
                "original": "He is great",
                "counterfactual": "She is great",
                "axis": "gender",
                "groups": [["male", "femal"], ["female", "male"]],
            }
        )
        + "\n"
    )
    result = runner.invoke(app, ["score", str(path), "-s", "lexical"])
    assert result.exit_code == 1
    assert f"{path}:1: groups" in result.stderr
    assert "'femal' is not a group of axis 'gender'; its groups: male, female" in result.stderr


def test_score_validates_axis_option(isolated_config: Path, tmp_path: Path) -> None:
    path = langfair_pairs(tmp_path)
    result = runner.invoke(
        app, ["score", str(path), "-s", "lexical", "--neutralise", "mask", "--axis", "gendr"]
    )
    assert result.exit_code == 1
    assert "--axis 'gendr' is not an axis of [probe] axes; choose from gender" in result.stderr


def test_an_axis_without_groups_is_named(isolated_config: Path, tmp_path: Path) -> None:
    path = tmp_path / "half.jsonl"
    line = {"original": "He is here", "counterfactual": "She is here", "axis": "gendr"}
    path.write_text(json.dumps(line) + "\n")
    result = runner.invoke(app, ["score", str(path), "-s", "lexical"])
    assert result.exit_code == 1
    assert f"{path}:1: 'axis' = \"gendr\" is given without 'groups'" in result.stderr
