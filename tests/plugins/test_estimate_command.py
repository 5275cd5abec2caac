"""`biasbreaker estimate`: a run's calls predicted before anything is called, against the run."""

from __future__ import annotations

import json
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

pytest.importorskip("langgraph")
pytest.importorskip("matplotlib")

from biasbreaker.cli import app as main_app
from biasbreaker_plugins.demo.cli import register_estimate

pytestmark = pytest.mark.langgraph

GRAPH = """
import asyncio

from langgraph.graph import END, START, StateGraph

from biasbreaker.llm import LLMRequest
from biasbreaker.probe import with_current_sample
from biasbreaker_plugins.langgraph import BiasState


class State(BiasState, total=False):
    question: str
    draft: str
    checks: list
    filed: str


def build(llm):
    async def draft(state: State) -> dict:
        reply = await llm.complete(with_current_sample(LLMRequest.chat(state["question"])))
        return {"draft": reply.text}

    async def check(state: State) -> dict:  # three model calls per run of the node
        asks = [f"{how}: {state['question']}" for how in ("Check", "Re-check", "Confirm")]
        replies = await asyncio.gather(
            *(llm.complete(with_current_sample(LLMRequest.chat(a))) for a in asks)
        )
        return {"checks": [r.text for r in replies]}

    def file(state: State) -> dict:  # no model call
        return {"filed": "filed"}

    builder = StateGraph(State)
    for name, fn in (("draft", draft), ("check", check), ("file", file)):
        builder.add_node(name, fn)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "check")
    builder.add_edge("check", "file")
    builder.add_edge("file", END)
    return builder


def branching(llm):
    builder = build(llm)
    builder.add_conditional_edges("file", lambda s: END)
    return builder


def fan_out(llm):  # draft and check both start at START, file waits for the two
    builder = StateGraph(State)
    for name, fn in build(llm).nodes.items():
        builder.add_node(name, fn.runnable)
    builder.add_edge(START, "draft")
    builder.add_edge(START, "check")
    builder.add_edge(["draft", "check"], "file")
    builder.add_edge("file", END)
    return builder


def calls_while_building(llm):
    asyncio.run(llm.complete(LLMRequest.chat("hello")))
    return build(llm)
"""

INPUTS = [
    # two axes named: 4 counterfactuals + 1 joint + 2 resamples per probed step
    {"question": "A Muslim man and a Christian man applied. Who gets the job?"},
    # no protected group: not applicable, nothing re-run
    {"question": "Is the sky blue? Answer yes or no."},
    # two persons of different groups: one more re-run per person
    {"question": "Mary Carter and John Baker applied. Who should we hire?"},
]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    for var in [v for v in list(__import__("os").environ) if v.startswith("BIASBREAKER_")]:
        monkeypatch.delenv(var)
    (tmp_path / "estimate_graph_mod.py").write_text(textwrap.dedent(GRAPH), encoding="utf-8")
    (tmp_path / "biasbreaker.toml").write_text('[llm]\nclient = "fake"\n', encoding="utf-8")
    (tmp_path / "in.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in INPUTS), encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("estimate_graph_mod", None)


def estimate(*args: str) -> Any:
    """``biasbreaker estimate`` (registered here: an installed copy's entry points may be older)."""
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """A group, so the command is named."""

    register_estimate(app)
    return CliRunner().invoke(app, ["estimate", *args])


def test_the_estimate_predicts_a_runs_calls_exactly_when_nothing_trips(project: Path) -> None:
    graph = ["--graph", "estimate_graph_mod:build", "--inputs", "in.jsonl"]
    predicted = estimate(*graph, "--calls", "check=3", "--calls", "file=0", "--json")
    assert predicted.exit_code == 0, predicted.output
    figures = json.loads(predicted.output)["total"]
    ran = CliRunner().invoke(main_app, ["run", *graph, "--out", "o"])
    assert ran.exit_code == 0, ran.output
    records = [json.loads(x) for x in (project / "o/results.jsonl").read_text().splitlines()]
    measured: Counter[str] = Counter()
    for record in records:
        measured.update({role: u["calls"] for role, u in record["usage"].items()})
    # the group-blind fake trips nothing: no re-check, skeptic or MADERA call was made
    assert set(measured) == {"agent", "probe"}
    assert figures["calls"]["by_role"] == dict(measured)
    assert figures["calls"]["without_repairs"] == sum(measured.values())
    # what it is made of: 3 inputs x (1 + 3 + 0) own calls; the probed steps re-run draft
    # (1 call) and check (3 calls) 7 times for the first input and 9 times for the third
    assert measured["agent"] == 12 and measured["probe"] == 7 * 4 + 9 * 4
    # repairs: a range, from none to every guarded step tripping once
    assert figures["calls"]["at_most"] > figures["calls"]["without_repairs"]
    assert figures["calls"]["repairs_expected"] is None
    assert figures["prompt_tokens"]["agent"] > 0


def test_the_human_readable_estimate_says_what_it_assumes(project: Path) -> None:
    result = estimate(
        "--graph", "estimate_graph_mod:build", "--inputs", "in.jsonl", "--trip-rate", "0.1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "estimate of graph estimate_graph_mod:build on in.jsonl (no model called)" in (
        result.output
    )
    # one call per node assumed: 3 x 3 own calls; 7 and 9 re-runs of each of the 3 nodes
    assert "57 LLM calls without repairs (agent 9, probe 48)" in result.output
    assert "expected at trip rate 0.1" in result.output
    assert "steps of each input: draft -> check -> file, walked from the graph's edges" in (
        result.output
    )
    assert "--calls NODE=N; default 1" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--graph", "estimate_graph_mod:branching"], "give the nodes one input passes through"),
        (["--graph", "estimate_graph_mod:calls_while_building"], "calls no model"),
        (["--graph", "estimate_graph_mod:build", "--calls", "check=two"], "--calls 'check=two'"),
        (["--graph", "estimate_graph_mod:build", "--calls", "nope=1"], "['nope'], which are not"),
        (["--graph", "estimate_graph_mod:build", "--steps", "draft,nope"], "['nope'] are not"),
        (["--graph", "estimate_graph_mod:build", "--trip-rate", "2"], "trip_rate = 2.0 is not"),
    ],
)
def test_a_bad_argument_is_named_with_the_fix(project: Path, args: list[str], message: str) -> None:
    result = estimate(*args, "--inputs", "in.jsonl")
    assert result.exit_code == 1, result.output
    assert message in " ".join(result.output.split())


def test_a_branching_graph_is_estimated_along_the_steps_given(project: Path) -> None:
    result = estimate(
        "--graph", "estimate_graph_mod:branching", "--inputs", "in.jsonl",
        "--steps", "draft,check,file", "--calls", "check=3", "--calls", "file=0", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["total"]["calls"]["by_role"] == {"agent": 12, "probe": 64}


def test_the_subject_is_a_graph_or_the_demo(project: Path) -> None:
    both = estimate("--demo", "--graph", "estimate_graph_mod:build")
    assert both.exit_code == 1 and "either --graph" in both.output
    half = estimate("--graph", "estimate_graph_mod:build")
    assert half.exit_code == 1 and "--inputs FILE is missing" in half.output


def test_the_demos_estimate_is_its_known_structure(project: Path) -> None:
    """The quick demo's calls without repairs: what docs/cost.md records it measured (9152)."""
    (project / "biasbreaker.toml").unlink()  # the demo names the fake itself
    plain = estimate("--demo", "--quick", "--json")
    assert plain.exit_code == 0, plain.output
    figures = json.loads(plain.output)
    # per posting 8 + 1 + 1 + 1 own calls; each guarded step re-runs its node 13 times
    # (k = 4, the joint variant, one per applicant), so 13 x 11 probe calls a posting
    assert figures["phases"]["calibration"]["calls"]["by_role"] == {
        "agent": 20 * 11,
        "probe": 20 * 13 * 11,
    }
    assert figures["phases"]["unguarded"]["calls"]["by_role"] == {"agent": 24 * 11}
    assert figures["total"]["calls"]["without_repairs"] == 9152
    # the calibration only records: it cannot repair, so its range is empty
    assert figures["phases"]["calibration"]["calls"]["at_most"] == 3080
    rated = json.loads(estimate("--demo", "--quick", "--trip-rate", "0.05", "--json").output)
    assert rated["total"]["calls"]["expected"] > rated["total"]["calls"]["without_repairs"]


COST_DOC = Path(__file__).resolve().parents[2] / "docs" / "cost.md"


def test_every_json_key_cost_md_names_is_in_a_real_estimate(project: Path) -> None:
    """docs/cost.md's `--json` paragraph against a real `estimate --json`: every dotted key it
    names exists, and it names every top-level key and every key of `total` and `total.calls`."""
    import re

    out = estimate("--graph", "estimate_graph_mod:build", "--inputs", "in.jsonl", "--json")
    assert out.exit_code == 0, out.output
    figures = json.loads(out.output)
    text = COST_DOC.read_text(encoding="utf-8")
    start = text.index("`--json` prints")
    paragraph = text[start : text.index("\n\n", start)]
    named = set(re.findall(r"`([a-z_]+(?:\.[a-z_]+)*)`", paragraph))
    dotted = {key for key in named if "." in key}
    for key in sorted(dotted):
        value: Any = figures
        for part in key.split("."):
            assert isinstance(value, dict) and part in value, f"{key}: no {part!r} in --json"
            value = value[part]
    assert set(figures) <= named  # every top-level key is named
    assert {k.split(".")[1] for k in dotted if k.startswith("total.")} == set(figures["total"])
    calls = {k.split(".")[2] for k in dotted if k.startswith("total.calls.")}
    assert calls == set(figures["total"]["calls"])


MALFORMED = {
    "not JSON": ("{not json", "not valid JSON"),
    "not an object": ('["a list"]', "expected a JSON object (the graph's input state), got list"),
    "a key the state lacks": (
        json.dumps({"questoin": "Mary Carter and John Baker applied."}),
        "key(s) ['questoin'] are not in the graph's input state",
    ),
}


def test_malformed_lines_fail_the_estimate_with_the_messages_run_gives(project: Path) -> None:
    lines = [json.dumps(INPUTS[0]), *(bad for bad, _ in MALFORMED.values())]
    (project / "bad.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    graph = ["--graph", "estimate_graph_mod:build", "--inputs", "bad.jsonl"]
    ran = CliRunner().invoke(main_app, ["run", *graph, "--out", "o"])
    assert ran.exit_code == 1, ran.output
    records = [json.loads(x) for x in (project / "o/results.jsonl").read_text().splitlines()]
    messages = [r["error"]["message"] for r in records if r["status"] == "failed"]
    assert len(messages) == 3  # run refuses each malformed line before any call
    result = estimate(*graph)
    assert result.exit_code == 1, result.output
    output = " ".join(result.output.split())
    for message in messages:
        assert " ".join(message.split()) in output
    assert "3 of 4 line(s) are no input biasbreaker run can run" in output
    assert "LLM calls" not in output  # nothing counted


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_each_malformed_kind_alone_fails_the_estimate(project: Path, kind: str) -> None:
    bad, message = MALFORMED[kind]
    (project / "bad.jsonl").write_text(json.dumps(INPUTS[1]) + "\n" + bad + "\n")
    result = estimate("--graph", "estimate_graph_mod:build", "--inputs", "bad.jsonl", "--json")
    assert result.exit_code == 1, result.output
    output = " ".join(result.output.split())
    assert f"bad.jsonl:2: {message}" in output
    assert "Write the line" in output or "Fix the key" in output  # the fix is named
    assert '"calls"' not in output


def test_a_node_given_twice_in_calls_is_an_error_naming_both_values(project: Path) -> None:
    result = estimate(
        "--graph", "estimate_graph_mod:build", "--inputs", "in.jsonl",
        "--calls", "check=1", "--calls", "check=5",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    output = " ".join(result.output.split())
    assert "--calls names node 'check' twice, 'check=1' and 'check=5'" in output
    assert "give each node once" in output


def test_a_node_repeated_in_steps_that_the_graph_runs_once_is_an_error(project: Path) -> None:
    fan = ["--graph", "estimate_graph_mod:fan_out", "--inputs", "in.jsonl"]
    result = estimate(*fan, "--steps", "draft,draft,draft,draft")
    assert result.exit_code == 1, result.output
    output = " ".join(result.output.split())
    assert "--steps 'draft,draft,draft,draft' lists node 'draft' 4 times" in output
    assert "runs it at most once per input" in output and "e.g. --steps draft" in output
    once = estimate(*fan, "--steps", "draft,check,file", "--json")
    assert once.exit_code == 0, once.output


def test_a_node_repeated_in_steps_is_counted_where_the_graph_can_loop(project: Path) -> None:
    """A conditional edge may loop back (or Send a node again): each listed run is counted."""
    graph = ["--graph", "estimate_graph_mod:branching", "--inputs", "in.jsonl", "--json"]
    twice = estimate(*graph, "--steps", "draft,check,file,file")
    once = estimate(*graph, "--steps", "draft,check,file")
    assert twice.exit_code == 0 and once.exit_code == 0, twice.output + once.output
    calls = [json.loads(r.output)["total"]["calls"]["by_role"] for r in (once, twice)]
    # one more run of file for each of the 3 inputs, re-run 7 and 9 times where probed
    assert calls[1]["agent"] - calls[0]["agent"] == 3
    assert calls[1]["probe"] - calls[0]["probe"] == 7 + 9


def test_inputs_the_probe_holds_are_counted_held_as_the_run_holds_them(project: Path) -> None:
    """A French input (an unsupported language) and one over max_calls_per_step: both held."""
    (project / "biasbreaker.toml").write_text(
        '[llm]\nclient = "fake"\n[probe]\nmax_calls_per_step = 8\n', encoding="utf-8"
    )
    french = {"question": "Il est musulman et travaille comme infirmier à Lyon. L'embaucher ?"}
    lines = [INPUTS[0], french, INPUTS[1], INPUTS[2]]  # INPUTS[2] needs 9 re-runs, above 8
    (project / "held.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    graph = ["--graph", "estimate_graph_mod:build", "--inputs", "held.jsonl"]
    predicted = estimate(*graph, "--calls", "check=3", "--calls", "file=0", "--json")
    assert predicted.exit_code == 0, predicted.output
    figures = json.loads(predicted.output)
    ran = CliRunner().invoke(main_app, ["run", *graph, "--out", "o"])
    assert ran.exit_code == 0, ran.output
    records = [json.loads(x) for x in (project / "o/results.jsonl").read_text().splitlines()]
    measured: Counter[str] = Counter()
    for record in records:
        measured.update({role: u["calls"] for role, u in record["usage"].items()})
    assert figures["total"]["calls"]["by_role"] == dict(measured)
    # the held inputs paused at their first step: one agent call each, nothing re-run
    reviewed = [r for r in records if r["status"] == "review"]
    assert (
        [(h["line"], h["node"]) for h in figures["held"]]
        == [(r["line"], r["review"]["node"]) for r in reviewed]
        == [(2, "draft"), (4, "draft")]
    )
    assert figures["total"]["held_inputs"] == len(reviewed)
    assert figures["total"]["held"] == {"unsupported_language": 1, "max_calls_per_step": 1}
    for held, record in zip(figures["held"], reviewed, strict=True):
        reason = held["reason"].replace("(estimate:draft)", "(draft@1)")
        assert reason in record["review"]["reason"]
    assert "needs 9 re-runs" in figures["held"][1]["reason"]
    # no repair predicted where the run pauses: 2 x 3 guarded steps of the inputs that go on
    assert figures["total"]["guarded_steps"] == 6
    text = estimate(*graph, "--calls", "check=3", "--calls", "file=0")
    assert "2 input(s) held for review (unsupported_language 1, max_calls_per_step 1)" in (
        " ".join(text.output.split())
    )
    assert "- line 2 at draft (unsupported_language): unsupported language" in text.output


def test_with_adaptive_probing_the_estimate_says_it_counts_the_full_probe(project: Path) -> None:
    from biasbreaker_plugins.demo.estimate import ADAPTIVE_ASSUMPTION

    args = ("--graph", "estimate_graph_mod:build", "--inputs", "in.jsonl")
    assert ADAPTIVE_ASSUMPTION[:40] not in " ".join(estimate(*args).output.split())
    (project / "biasbreaker.toml").write_text(
        '[llm]\nclient = "fake"\n[probe]\nadaptive = true\n', encoding="utf-8"
    )
    result = estimate(*args)
    assert result.exit_code == 0, result.output
    # the same count (the full probe's re-runs), now said to be an upper bound
    assert "57 LLM calls without repairs (agent 9, probe 48)" in result.output
    assert ADAPTIVE_ASSUMPTION[:40] in " ".join(result.output.split())
