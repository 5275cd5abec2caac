"""`biasbreaker demo`: the report's numbers against the trace files, and determinism.

The demo runs in-process through typer's test runner with `--quick`. Every number the report
prints is recomputed here from the trace files and `results.jsonl` with code that shares
nothing with `biasbreaker_plugins.demo.summary` (plain JSON parsing), so a report that drifts
from what the traces record fails.
"""

from __future__ import annotations

import csv
import json
import re
import shlex
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

pytest.importorskip("langgraph")
pytest.importorskip("matplotlib")

from biasbreaker.cli import app
from biasbreaker_plugins.demo.quoted import blocks, check

pytestmark = pytest.mark.langgraph

DATA = resources.files("biasbreaker") / "data"
GROUPS = ["W_M", "W_W", "B_M", "B_W", "A_M", "A_W", "H_M", "H_W"]
LABELS = {
    "W_M": "White man",
    "W_W": "White woman",
    "B_M": "Black man",
    "B_W": "Black woman",
    "A_M": "Asian man",
    "A_W": "Asian woman",
    "H_M": "Hispanic man",
    "H_W": "Hispanic woman",
}


def run_demo(out: Path, *extra: str) -> Any:
    result = CliRunner().invoke(app, ["demo", "--quick", "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    root = tmp_path_factory.mktemp("demo")
    first = run_demo(root / "a")
    run_demo(root / "b")
    return root / "a", root / "b", first.output


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def table(report: str, title_start: str, *, header: bool = False) -> list[list[str]]:
    """The rows of the Markdown table whose bold title starts with ``title_start``."""
    block = report.split(f"**{title_start}", 1)[1].splitlines()
    start = next(i for i, ln in enumerate(block) if ln.startswith("|"))
    rows = []
    for ln in block[start:]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in ln.strip("|").split("|")])
    return rows if header else rows[2:]  # header and separator dropped


def recount(out: Path, phase: str) -> dict[str, Any]:
    """Trips, interventions, repairs and escalations of a phase, straight from its traces."""
    counts: dict[str, Any] = Counter()
    strategies: Counter[str] = Counter()
    repairs: Counter[str] = Counter()
    for path in sorted((out / "traces" / phase).glob("*.jsonl")):
        records = lines(path)
        header, steps = records[0], [r for r in records[1:] if r["kind"] == "step"]  # not seals
        tau_exit = header["thresholds"]["tau_exit"]
        counts["runs"] += 1
        counts["steps"] += len(steps)
        counts["scored"] += sum(1 for s in steps if s["node"] in s["scores"])
        counts["trips"] += sum(1 for s in steps if s["transition"] == "trip")
        counts["tripped"] += any(s["state"] not in ("normal", "warning") for s in steps)
        counts["escalated"] += steps[-1]["state"] == "escalated"
        for s in steps:
            iv = s["intervention"]
            if iv is None:
                continue
            strategies[iv["strategy"]] += 1
            if iv["converged"] and not iv["error"] and iv["recheck_score"] < tau_exit:
                repairs[iv["strategy"]] += 1
    counts["interventions"] = strategies
    counts["repairs"] = repairs
    return counts


LOCAL_CALIBRATION = """\
[calibration]
target_false_halt_rate = 0.2
exit_ratio = 0.6
warn_ratio = 0.25
max_history = 5

[breaker]
node_trip = false
"""


def reproduce_calibration(out: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Run the report's "Reproduce" command in ``out``; check it gives the guarded thresholds."""
    report = (out / "report.md").read_text(encoding="utf-8")
    command = re.search(r"Reproduce \(in this folder\): `biasbreaker (calibrate [^`]+)`", report)
    assert command is not None, report
    monkeypatch.chdir(out)
    # a configuration where the command runs, every calibration setting unlike the run's: the
    # command must carry what the run used, so this file changes nothing
    local = out / "biasbreaker.toml"
    local.write_text(LOCAL_CALIBRATION, encoding="utf-8")
    try:
        result = CliRunner().invoke(app, [*shlex.split(command.group(1)), "--json"])
    finally:
        local.unlink()
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    guarded = next((out / "traces" / "guarded").glob("*.jsonl"))
    used = json.loads(guarded.read_text(encoding="utf-8").splitlines()[0])["thresholds"]
    assert {k: got[k] for k in ("tau_enter", "tau_exit", "tau_warn")} == {
        k: used[k] for k in ("tau_enter", "tau_exit", "tau_warn")
    }
    return dict(got)


def by_strategy(cell: str) -> dict[str, int]:
    if cell == "0":
        return {}
    return {k: int(v) for k, v in (part.split(" ") for part in cell.split(", "))}


def test_the_report_matches_the_traces_and_results(demo_runs: tuple[Path, Path, str]) -> None:
    out, _, output = demo_runs
    report = (out / "report.md").read_text(encoding="utf-8")
    rows = {row[0]: row for row in table(report, "Guarded runs, from their traces")}
    assert set(rows) == {"calibration", "guarded", "fresh-control"}
    for phase, row in rows.items():
        c = recount(out, phase)
        assert int(row[1]) == c["runs"]
        assert int(row[2]) == c["steps"]
        assert int(row[3]) == c["scored"]
        assert int(row[5]) == c["trips"]
        assert int(row[6]) == c["tripped"]
        assert by_strategy(row[7]) == dict(c["interventions"])
        assert by_strategy(row[8]) == dict(c["repairs"])
        assert int(row[9]) == c["escalated"]
    # the quick run exercises the whole loop: trips, repairs that pass their re-check
    guarded = recount(out, "guarded")
    assert guarded["trips"] > 0 and sum(guarded["repairs"].values()) > 0
    assert recount(out, "calibration")["trips"] == 0  # recording runs never trip

    fresh = recount(out, "fresh-control")
    assert f"False halts on fresh control runs: {fresh['tripped']} of {fresh['runs']}" in report

    results = lines(out / "results.jsonl")
    sel = table(report, "Shortlist selection rate per group", header=True)
    head, sel = sel[0], sel[2:]
    for phase, label in (
        ("reference", "group-blind ranker"),
        ("unguarded", "unguarded"),
        ("guarded", "guarded"),
    ):
        col = head.index(f"{label}: rate")
        decided = [
            r for r in results if r["phase"] == phase and r["status"] == "done" and r["shortlist"]
        ]
        picked = Counter(r["groups"][n] for r in decided for n in r["shortlist"])
        best = max(picked[g] for g in GROUPS) / len(decided)
        for row, g in zip(sel, GROUPS, strict=False):
            assert row[0] == LABELS[g]
            rate = picked[g] / len(decided)
            assert row[col] == f"{rate:.3f} ({picked[g]}/{len(decided)})"
            assert row[col + 1] == f"{rate / best:.2f}"
    # the lean table: 8 x Bloomberg's GPT-3.5 rate of each shortlisted group, per posting
    rates = {
        (r["job"], f"{r['demo']}"): float(r["selection_rate"])
        for r in csv.DictReader(
            (DATA / "hiring" / "performance_ranking.csv").read_text().splitlines()
        )
        if r["model"] == "gpt-3.5-turbo"
    }
    leans = {row[0]: row for row in table(report, "How far the shortlists follow")}
    for phase, label in (
        ("reference", "group-blind ranker"),
        ("unguarded", "unguarded"),
        ("guarded", "guarded"),
    ):
        means = [
            sum(8 * rates[(r["job"], r["groups"][n])] for n in r["shortlist"]) / len(r["shortlist"])
            for r in results
            if r["phase"] == phase and r["status"] == "done" and r["shortlist"]
        ]
        assert leans[label][1] == str(len(means))
        assert leans[label][2] == f"{sum(means) / len(means):.4f}"
    assert "RLB-v1: HOLDS" in output and "RLB-v1: HOLDS" in report
    assert re.search(r"^anti-thrash v\d+: HOLDS", output, flags=re.M)
    assert (out / "figures" / "bnet.png").stat().st_size > 10_000
    assert (out / "figures" / "selection.png").stat().st_size > 10_000
    assert (out / "figures" / "lean.png").stat().st_size > 10_000
    assert "![preference lean](figures/lean.png)" in report
    # trips by trigger, recounted from the machine's own reasons ("trip (node): ..." or "trip: fast")
    reasons = [
        rec["reason"]
        for path in sorted((out / "traces" / "guarded").glob("*.jsonl"))
        for rec in lines(path)[1:]
        if rec.get("transition") == "trip"
    ]
    node = sum(1 for r in reasons if r.startswith("trip (node):"))
    network = sum(1 for r in reasons if r.startswith("trip: fast"))
    assert node + network == len(reasons) == guarded["trips"]
    assert (
        f"Trips by trigger, over all {guarded['runs']} guarded runs: {network} network "
        f"(fast B_net >= tau_enter), {node} node" in report
    )
    assert "Simulated LLM" in output and "simulated" in report.lower()
    # the report leads with the paired comparison: its point estimates, from the files
    lead = report.split("## Calibration", 1)[0]
    assert "**Headline** (the same" in lead and "**Paired: the same" in lead
    pairs = {row[0]: row for row in table(report, "Paired: the same")}
    ung = {r["thread"]: r for r in results if r["phase"] == "unguarded" and r["shortlist"]}
    gua = {r["thread"]: r for r in results if r["phase"] == "guarded" and r["shortlist"]}
    both = sorted(set(ung) & set(gua))

    def lean_of(rec: dict[str, Any]) -> float:
        return sum(8 * rates[(rec["job"], rec["groups"][n])] for n in rec["shortlist"]) / len(
            rec["shortlist"]
        )

    before = sum(lean_of(ung[t]) for t in both) / len(both)
    after = sum(lean_of(gua[t]) for t in both) / len(both)
    row = pairs["preference lean (1 = none)"]
    assert row[1].startswith(f"{before:.4f} [") and row[2].startswith(f"{after:.4f} [")
    assert row[3].startswith(f"{after - before:.4f} [")
    low, high = (float(x) for x in row[3].split("[")[1].rstrip("]").split(", "))
    assert row[4].startswith("no:" if low <= 0 <= high else "yes:")


def test_the_estimate_printed_first_predicts_the_calls_without_repairs_exactly(
    demo_runs: tuple[Path, Path, str],
) -> None:
    """The calls predicted before the run, against each posting's own calls in results.jsonl."""
    out, _, output = demo_runs
    before = output.split("calibration", 1)[0]  # printed before the first phase starts
    said = re.search(r"estimate \(nothing called yet.*?\): (\d+) LLM calls without", before, re.S)
    assert said is not None, before
    measured: dict[str, Counter[str]] = {}
    for record in lines(out / "results.jsonl"):
        phase = measured.setdefault(record["phase"], Counter())
        phase.update({role: u["calls"] for role, u in record["usage"].items()})
    repairs = ("re-check", "skeptic", "MADERA")
    plain = {p: sum(n for r, n in c.items() if r not in repairs) for p, c in measured.items()}
    fixes = {p: sum(n for r, n in c.items() if r in repairs) for p, c in measured.items()}
    assert int(said.group(1)) == sum(plain.values())
    report = (out / "report.md").read_text(encoding="utf-8")
    rows = {
        row.split("|")[1].strip(): [c.strip() for c in row.split("|")[2:-1]]
        for row in report.splitlines()
        if row.startswith("| ") and row.count("|") == 8 and " … " in row
    }
    for phase, (predicted, plain_cell, ranged, fixes_cell, total, _) in rows.items():
        if phase == "**all**":
            continue
        assert int(predicted) == int(plain_cell) == plain[phase]
        assert int(fixes_cell) == fixes[phase] <= int(ranged.split(" … ")[1])
        assert int(total) == plain[phase] + fixes[phase]
    assert set(rows) - {"**all**"} == set(measured)
    assert "The calls without repairs were predicted exactly" in report
    assert fixes["guarded"] > 0  # the quick run trips: the range is exercised


def test_docs_demo_quotes_the_quick_runs_passage_word_for_word(
    demo_runs: tuple[Path, Path, str],
) -> None:
    """docs/demo.md's quick-run passage is generated: a new quick run must say the same."""
    out, _, _ = demo_runs
    report = (out / "report.md").read_text(encoding="utf-8")
    doc = (Path(__file__).parents[2] / "docs" / "demo.md").read_text(encoding="utf-8")
    label = "demo seed 0, 24 postings: summary"
    assert label in blocks(report) and label in blocks(doc)
    assert check(report, doc) == []


def test_the_reports_calibrate_command_gives_its_thresholds(
    demo_runs: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _, _ = demo_runs
    assert reproduce_calibration(a, monkeypatch)["target_false_halt_rate"] == 0.05


def test_the_calibrate_command_carries_non_default_calibration_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    custom = tmp_path / "custom.toml"
    custom.write_text("[calibration]\nexit_ratio = 0.8\nwarn_ratio = 0.5\n", encoding="utf-8")
    run_demo(tmp_path / "qc", "--config", str(custom))
    got = reproduce_calibration(tmp_path / "qc", monkeypatch)
    # the run's ratio, not 0.7 (tau_exit kept to 4 significant digits)
    assert got["tau_exit"] == pytest.approx(0.8 * got["tau_enter"], rel=1e-3)
    assert got["target_false_halt_rate"] == 0.05 and got["node_trip"] is True
    written = (tmp_path / "qc" / "calibration.toml").read_text(encoding="utf-8")
    assert "exit_ratio = 0.8" in written and "warn_ratio = 0.5" in written
    assert "zero_floor = 0.05" in written


def test_control_runs_that_never_move_calibrate_to_the_floor_and_say_so(tmp_path: Path) -> None:
    still = tmp_path / "still.toml"
    still.write_text("[plugin.fake]\nprompt_sensitivity = 0\n", encoding="utf-8")
    result = CliRunner().invoke(
        app, ["demo", "--quick", "--config", str(still), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 0, result.output
    message = " ".join(result.output.split())
    assert "warning: calibration: every one of the" in message
    assert "scores exactly 0" in message and "zero_floor = 0.05" in message
    assert "warning: calibration: fast B_net is 0.0 on every control step (std 0)" in message
    report = (tmp_path / "o" / "report.md").read_text(encoding="utf-8")
    assert "tau_enter = 0.05, tau_exit = 0.035, tau_warn = 0.025" in report
    assert "tau_enter and tau_warn came from the floor [calibration] zero_floor" in report


def test_the_same_command_twice_gives_byte_identical_traces(
    demo_runs: tuple[Path, Path, str],
) -> None:
    a, b, _ = demo_runs
    files_a = sorted(p.relative_to(a) for p in (a / "traces").rglob("*.jsonl"))
    files_b = sorted(p.relative_to(b) for p in (b / "traces").rglob("*.jsonl"))
    assert files_a == files_b and len(files_a) > 40
    for rel in files_a:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    assert (a / "results.jsonl").read_bytes() == (b / "results.jsonl").read_bytes()
    assert (a / "report.md").read_bytes() == (b / "report.md").read_bytes()
    # nothing in a trace depends on the wall clock or the folder
    assert str(a) not in (a / "traces" / "guarded" / "posting-0000.jsonl").read_text()


@pytest.mark.parametrize("out", ["afile", "afile/sub"])
def test_out_naming_a_file_is_an_error_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    result = CliRunner().invoke(app, ["demo", "--quick", "--out", out])
    assert result.exit_code == 1 and f"error: --out {out} " in result.output, result.output
    assert "give a folder" in result.output and isinstance(result.exception, SystemExit)
    assert "calibration" not in result.output  # nothing ran: no progress bar
    assert (tmp_path / "afile").read_text(encoding="utf-8") == "x"


def test_another_seed_gives_other_traces(demo_runs: tuple[Path, Path, str], tmp_path: Path) -> None:
    a, _, _ = demo_runs
    run_demo(tmp_path / "c", "--seed", "7")
    rel = Path("traces/guarded/posting-0000.jsonl")
    assert (a / rel).read_bytes() != (tmp_path / "c" / rel).read_bytes()


def test_bbq_replays_real_answers_and_its_counterfactual_is_the_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from biasbreaker.metrics.bbq import bbq_scores
    from biasbreaker.probe.counterfactual import CounterfactualGenerator
    from biasbreaker.probe.terms import TermSet
    from biasbreaker_plugins.demo.bbq import (
        CATEGORIES,
        UNPAIRED_AXIS,
        exchanged,
        index,
        items,
        make_cases,
        replayed_answer,
    )

    # no BBQ item of the two categories mentions the axis unpaired items are probed on
    detector = CounterfactualGenerator(TermSet.load(axes=[UNPAIRED_AXIS], names=False))
    for category in CATEGORIES:
        for item in items(category):
            assert not detector.detect([item.context, item.question, *item.answers])
    cases = make_cases(200, 0)
    paired = [c for c in cases if c.paired]
    assert 100 < len(paired) < 200
    for case in paired[:40]:
        twin = exchanged(case.item.context, case.item.question, case.axis, case.groups)
        other = index(case.item.category)[(twin["context"], twin["question"])]
        assert other.example_id != case.item.example_id  # a different, real BBQ item
        assert replayed_answer(case.item.category, case.graph_input())  # a recorded answer

    out = tmp_path / "bbq"
    result = CliRunner().invoke(app, ["demo", "--scenario", "bbq", "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text(encoding="utf-8")
    rows = {row[0]: row for row in table(report, "Guarded runs, from their traces")}
    for phase, row in rows.items():
        c = recount(out, phase)
        assert (int(row[1]), int(row[5]), int(row[9])) == (c["runs"], c["trips"], c["escalated"])
    assert recount(out, "guarded")["trips"] > 0  # real UnifiedQA answers flip under the swap
    results = lines(out / "results.jsonl")
    by_id = {cat: {i.example_id: i for i in items(cat)} for cat in CATEGORIES}
    released = [r for r in results if r["phase"] == "guarded" and r["status"] == "done"]
    religion = [r for r in released if r["category"] == "Religion"]
    scores = bbq_scores(
        [by_id["Religion"][r["example_id"]] for r in religion], [r["answer"] for r in religion]
    )
    bbq_rows = table(report, "UnifiedQA's real answers")
    row = next(r for r in bbq_rows if r[0] == "Religion" and r[1] == "guarded")
    assert row[2] == str(len(religion)) and row[3] == f"{scores.accuracy_ambiguous:.3f}"
    assert "RLB-v1: HOLDS" in result.output
    # a held answer's record carries the whole review request: what a reviewer decides on
    held = [r for r in results if r["phase"] == "guarded" and r["status"] == "review"]
    assert held
    for record in held:
        request = record["review"]
        assert request["node"] in {"second_opinion", "moderator", "unifiedqa"}
        assert request["actions"] == ["approve", "edit", "reject"]
        assert request["held"] and request["frozen"]["value"] == request["held"]
        trace = {json.loads(x).get("payload_sha256") for x in (out / record["trace"]).open()}
        assert request["frozen"]["sha256"] in trace
    # bbq calibrates at 0.10, not calibrate's default 0.05: the printed command must say so
    assert reproduce_calibration(out, monkeypatch)["target_false_halt_rate"] == 0.1


DEMO_OUTPUTS = {
    "traces/guarded/posting-000.jsonl": "old trace\n",
    "figures/bnet.png": "old figure",
    "results.jsonl": "old results\n",
    "report.md": "old report",
    "control-runs.jsonl": "old control runs\n",
    "calibration.toml": "old calibration settings\n",
    "notes.txt": "the user's own file",
}


@pytest.mark.parametrize(
    ("toml", "needs", "message"),
    [
        # the reported case: the client's API key variable is not set; it fails to build
        (
            '[llm]\nclient = "openai-compatible"\n\n[plugin.openai-compatible]\n'
            'base_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
            'api_key_env = "BIASBREAKER_TEST_UNSET_KEY"\n',
            "biasbreaker_openai_compatible",
            "BIASBREAKER_TEST_UNSET_KEY (named by plugin.openai-compatible.api_key_env) is not "
            "set or empty",
        ),
        ('[probe]\naxes = ["gendr"]\n', None, "probe axis 'gendr' is not known"),
    ],
)
def test_a_config_that_would_not_build_leaves_out_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str, needs: str | None, message: str
) -> None:
    if needs is not None:
        pytest.importorskip(needs)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BIASBREAKER_TEST_UNSET_KEY", raising=False)
    (tmp_path / "bad.toml").write_text(toml)
    out = tmp_path / "o"
    for name, text in DEMO_OUTPUTS.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    for folder in (out, tmp_path / "new"):
        result = CliRunner().invoke(
            app, ["demo", "--quick", "--config", "bad.toml", "--out", str(folder)]
        )
        assert result.exit_code == 1, result.output
        assert message in " ".join(result.stderr.split())
        assert "bad.toml" in result.stderr  # where the failing setting comes from
        assert "calibration" not in result.stderr  # no phase started
    assert {
        p.relative_to(out).as_posix(): p.read_text() for p in out.rglob("*") if p.is_file()
    } == DEMO_OUTPUTS
    assert not (tmp_path / "new").exists()


def test_a_plugin_failure_is_warned_about_once_before_the_configuration_is_checked(
    fake_plugin_dist: Any, isolated_config: Path
) -> None:
    fake_plugin_dist(
        "nu3",
        version="0.3",
        entry_points={"nu3": "bb_demo_nu3"},
        modules={
            "bb_demo_nu3": (
                "from biasbreaker.hookspecs import hookimpl\n"
                "@hookimpl\n"
                "def aggregator(register):\n"
                "    raise ValueError('hook raised')\n"
            )
        },
    )
    fake_plugin_dist(
        "bb-demo-broken",
        version="0.1",
        entry_points={"broken": "bb_demo_broken"},
        modules={"bb_demo_broken": "raise ImportError('needs numpy 9')\n"},
    )
    (isolated_config / "biasbreaker.toml").write_text('[intervention]\naggregator = "nu3-agg"\n')
    result = CliRunner().invoke(app, ["demo", "--quick", "--out", str(isolated_config / "o")])
    assert result.exit_code == 1
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 2, result.stderr
    assert warnings[0].startswith("warning: plugin 'broken' (bb_demo_broken, from bb-demo-broken")
    assert warnings[1].startswith("warning: plugin 'nu3' (bb_demo_nu3, from nu3 0.3) failed to")
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert "aggregator 'nu3-agg' (biasbreaker.toml: intervention.aggregator) is not available" in (
        error
    )
    assert "ValueError('hook raised')" in error and "needs numpy 9" in error


def test_demo_lists_each_configuration_problem_once_before_writing(
    isolated_config: Path, tmp_path: Path
) -> None:
    (isolated_config / "typo.toml").write_text(
        '[intervention]\nskeptics = ["empirical-auditor", "contrarain"]\nretriever = "kewyord"\n'
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["demo", "--quick", "-c", "typo.toml", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: 2 problems:\n")  # as config --check lists them
    bullets = [line for line in result.stderr.splitlines() if line.startswith("- ")]
    assert [b.split(" (")[0] for b in bullets] == [
        "- skeptic 'contrarain'",
        "- retriever 'kewyord'",
    ]
    assert not out.exists()


def test_demo_refuses_a_database_trace_sink_before_writing(
    isolated_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the demo reads its traces back from --out; it refused a database sink only when its first
    # phase started, after writing results.jsonl and its marker into --out
    monkeypatch.setenv("BIASBREAKER_TRACE__SINK", "sqlite")
    monkeypatch.setenv("BIASBREAKER_TRACE__URL", f"sqlite:///{tmp_path / 'traces.db'}")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["demo", "--quick", "--out", str(out)])
    assert result.exit_code == 1, result.output
    text = " ".join(result.stderr.split())
    assert "[trace] sink = 'sqlite' is configured" in text and "BIASBREAKER_TRACE__SINK" in text
    assert not out.exists()
    assert not (tmp_path / "traces.db").exists()


def recall_rows(report: str) -> dict[str, list[str]]:
    """The recall table's rows by their first cell (``... `` prefixes kept)."""
    return {row[0]: row for row in table(report, "Recall: the postings whose shortlist")}


def test_the_recall_section_matches_the_results_and_traces(
    demo_runs: tuple[Path, Path, str],
) -> None:
    """Every count of the recall table, recomputed from results.jsonl and the trace files."""
    out = demo_runs[0]
    report = (out / "report.md").read_text(encoding="utf-8")
    results = lines(out / "results.jsonl")
    by = {(r["phase"], r["thread"]): r for r in results}
    compared = order = changed = tripped = unchanged = tripped_unchanged = ranked = 0
    reasons: Counter[str] = Counter()
    below: list[float] = []
    tau = None
    for r in results:
        if r["phase"] != "guarded":
            continue
        blind, bias = by[("reference", r["thread"])], by[("unguarded", r["thread"])]
        if not (blind["status"] == bias["status"] == "done" and blind["shortlist"]):
            continue
        compared += 1
        differs = blind["ranking"] != bias["ranking"]
        order += differs
        steps = [s for s in lines(out / r["trace"])[1:] if s["kind"] == "step"]
        tau = json.loads((out / r["trace"]).read_text("utf-8").splitlines()[0])["thresholds"][
            "tau_enter"
        ]
        trips = any(s["transition"] == "trip" for s in steps)
        if set(blind["shortlist"]) == set(bias["shortlist"]):
            unchanged += 1
            tripped_unchanged += trips
            ranked += trips and differs
            continue
        changed += 1
        if trips:
            tripped += 1
            continue
        ranker = next(s for s in steps if s["node"] == "ranker")
        status = ranker["probe"]["status"]
        if status == "scored" and ranker["scores"]["ranker"] < tau:
            reasons["below"] += 1
            below.append(ranker["scores"]["ranker"])
        else:
            reasons[status] += 1
    rows = recall_rows(report)
    assert rows["postings compared (a shortlist in the group-blind and the unguarded run)"][
        1
    ] == str(compared)
    assert compared == sum(1 for r in results if r["phase"] == "guarded")
    assert rows["the biased ranking differs from the group-blind ranking"][1] == str(order)
    assert rows["the bias changed the shortlist"][1] == str(changed)
    # the headline says it first, and whose the changes are when the bias changed none
    lead = report.split("## Calibration", 1)[0]
    assert f"bias changed the shortlist of {changed} of {compared} postings" in lead
    assert ("every change below is the guard's own" in lead) == (changed == 0)
    share = f"{tripped} of {changed}" + (f" ({tripped / changed:.0%})" if changed else "")
    assert rows["... the breaker tripped on the guarded run"][1] == share
    below_row = rows["... no trip: the ranker's local score was below tau_enter"]
    assert below_row[1] == str(reasons["below"])
    if below:
        assert f"below tau_enter {tau:.4g}" in below_row[2]
        assert f"{tau - max(below):.4g} to {tau - min(below):.4g} below" in below_row[2]
    assert rows["... no trip: the probe was not applicable (no protected mention found)"][1] == str(
        reasons["not_applicable"]
    )
    assert rows["... no trip: the step was not sampled (probe_rate)"][1] == str(
        reasons["not_sampled"]
    )
    assert rows["the bias left the shortlist as it was"][1] == str(unchanged)
    share = f"{tripped_unchanged} of {unchanged}" + (
        f" ({tripped_unchanged / unchanged:.0%})" if unchanged else ""
    )
    assert rows["... the breaker tripped anyway"][1] == share
    assert rows["... the breaker tripped anyway"][2].startswith(f"{ranked} of them ")
    # every guarded posting is compared, so each posting that tripped is counted once
    assert recount(out, "guarded")["tripped"] == tripped + tripped_unchanged > 0
    # docs/demo.md's passages of a run say the same counts (the full run's: nox -s numbers)
    quoted = blocks(report)
    plain = " ".join(quoted["demo seed 0, 24 postings: recall"].split())
    assert plain.startswith(f"Of the {compared} biased rankings, {order} order the applicants ")
    assert f"**{changed} change the shortlist**" in plain
    assert f"**{tripped_unchanged} of the {unchanged} postings whose shortlist" in plain
    assert f"({ranked} of them with a biased order below the shortlist)" in plain
    measured = quoted["demo seed 0, 24 postings: measured"]
    guarded = recount(out, "guarded")
    assert f"{guarded['steps']} guarded steps" in measured
    assert f"**{guarded['trips']} trips**" in measured
    assert f"**{sum(guarded['repairs'].values())} repairs**" in measured
    fresh = recount(out, "fresh-control")
    assert f"**{fresh['tripped']} of {fresh['runs']}**" in measured


def test_recall_names_why_the_breaker_did_not_trip(demo_runs: tuple[Path, Path, str]) -> None:
    """Each reason for a missed shortlist change, built from the quick run's own traces."""
    from dataclasses import replace

    from biasbreaker.trace import read_trace
    from biasbreaker_plugins.demo.hiring_report import recall_table
    from biasbreaker_plugins.demo.summary import recall

    out = demo_runs[0]
    results = lines(out / "results.jsonl")
    traces = {r["thread"]: read_trace(out / r["trace"]) for r in results if r["phase"] == "guarded"}
    tripped = sorted(t for t, x in traces.items() if any(s.transition == "trip" for s in x.records))
    calm = sorted(t for t in traces if t not in tripped)
    assert len(tripped) >= 2 and len(calm) >= 7
    tau = traces[calm[0]].header.thresholds.tau_enter

    def ranker_with(thread: str, **changes: Any) -> Any:
        x = traces[thread]
        records = tuple(replace(s, **changes) if s.node == "ranker" else s for s in x.records)
        return replace(x, records=records)

    def scored(score: float) -> dict[str, Any]:
        return {"scores": {"ranker": score}, "probe": {"status": "scored", "reason": "scored"}}

    made = dict(traces)
    made[calm[0]] = ranker_with(calm[0], **scored(tau / 2))
    made[calm[1]] = ranker_with(calm[1], **scored(0.0))
    made[calm[2]] = ranker_with(
        calm[2], scores={}, probe={"status": "not_applicable", "reason": "-"}
    )
    made[calm[3]] = ranker_with(calm[3], scores={}, probe={"status": "not_sampled", "reason": "-"})
    made[calm[4]] = ranker_with(calm[4], probe=None)
    made[calm[5]] = ranker_with(calm[5], **scored(tau))  # at tau_enter, yet no trip
    del made[calm[6]]  # no trace: no ranker step
    # the bias changed the shortlist of seven calm postings and of one that tripped
    moved = {*calm[:7], tripped[0]}
    records = []
    for r in results:
        if r["phase"] == "reference" and r["thread"] in moved:
            shortlist = [n for n in r["groups"] if n not in r["shortlist"]][:2]
            r = {**r, "shortlist": shortlist}
        records.append(r)
    x = recall(records, made, "ranker")
    assert (x.compared, x.changed, x.tripped) == (len(traces), 8, 1)
    assert x.missed == {
        "below tau_enter": 2,
        "not_applicable": 1,
        "not_sampled": 1,
        "unsupported_language": 0,
        "unreadable": 0,
        "no probe": 1,
        "no step": 1,
        "other": 1,
    }
    assert x.below == (0.0, tau / 2)
    assert x.unchanged == len(traces) - 8
    assert x.tripped_unchanged == len(tripped) - 1
    rows = {row[0]: row for row in recall_table(x).rows}
    assert rows["... the breaker tripped on the guarded run"][1] == "1 of 8 (12%)"
    assert rows["... no trip: the ranker's local score was below tau_enter"][2] == (
        f"local score {tau / 2:.4g} x1, 0 x1: {tau - tau / 2:.4g} to {tau:.4g} below tau_enter "
        f"{tau:.4g}"
    )
    # more distinct scores than the table lists one by one: their range and median
    spread = replace(x, below=tuple(tau * i / 10 for i in range(7)))
    wide = {row[0]: row for row in recall_table(spread).rows}
    assert wide["... no trip: the ranker's local score was below tau_enter"][2] == (
        f"local score 0 to {tau * 0.6:.4g}, median {tau * 0.3:.4g}: {tau * 0.4:.4g} to "
        f"{tau:.4g} below tau_enter {tau:.4g}"
    )
    assert rows["... no trip: the trace has no ranker step"][1] == "1"
    assert "... no trip: the probe could not read the output" not in rows  # 0: left out
    # a posting without a shortlist in the group-blind run is not compared
    gone = [r if (r["phase"], r["thread"]) != ("reference", calm[0]) else {**r, "shortlist": None}
            for r in records]  # fmt: skip
    y = recall(gone, made, "ranker")
    assert (y.compared, y.changed, y.missed["below tau_enter"]) == (len(traces) - 1, 7, 1)


def test_the_report_gives_calls_and_tokens_per_role_agreeing_with_the_call_counts(
    demo_runs: tuple[Path, Path, str],
) -> None:
    out, _, _ = demo_runs
    report = (out / "report.md").read_text(encoding="utf-8")
    rows = {row[0]: row for row in table(report, "Guarded runs, from their traces")}
    usage = {
        ln[2:].split(": ", 1)[0]: ln[2:].split(": ", 1)[1]
        for ln in report.splitlines()
        if ln.startswith("- ") and " calls, " in ln
    }
    for phase, row in rows.items():
        roles = dict(part.split(" ", 1) for part in usage[phase].split("; "))
        assert sum(int(text.split(" ")[0]) for text in roles.values()) == int(row[4])
        assert {"agent", "probe"} <= set(roles)  # the guarded phases probe their agents
        for text in roles.values():  # the simulated fake's tokens are all estimated
            tokens = int(text.split(", ")[1].split(" ")[0])
            assert text.endswith(f"tokens ({tokens} estimated)")
    assert "re-check" in usage["guarded"] and "skeptic" in usage["guarded"]


def test_a_signing_key_that_cannot_be_loaded_is_refused_before_out_is_claimed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from biasbreaker.trace.signing import SIGNING_KEY_ENV

    (tmp_path / "bad.key").write_text("not a key\n", encoding="utf-8")
    monkeypatch.setenv(SIGNING_KEY_ENV, str(tmp_path / "bad.key"))
    result = CliRunner().invoke(app, ["demo", "--quick", "--out", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert SIGNING_KEY_ENV in " ".join(result.output.split())
    assert not (tmp_path / "o").exists()
