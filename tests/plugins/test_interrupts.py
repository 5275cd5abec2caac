"""SIGINT and SIGTERM stop `demo` and `run` within 2 s, in a subprocess, timed.

Each test starts the real command line in a child process, waits until the run is in the
middle of its work (an LLM request in flight, a synchronous node blocked, worker processes
running postings), sends the signal and measures how long the process takes to exit. Then it
checks what the user is left with: one line saying where the partial output is, no traceback,
the marker saying ``partial``, a report of what completed, and every file whole.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("matplotlib")

from biasbreaker.trace import read_trace
from biasbreaker_plugins.demo.output import MARKER

pytestmark = pytest.mark.langgraph

STOP_WITHIN_S = 2.0

GRAPH = """
import asyncio
import time

from langgraph.graph import END, START, StateGraph

from biasbreaker.llm import LLMRequest
from biasbreaker.probe import with_current_sample
from biasbreaker_plugins.langgraph import BiasState


class State(BiasState, total=False):
    question: str
    answer: str


def build(llm):
    # asks the configured client; the test server holds the request marked "slow"
    async def answer(state: State) -> dict:
        reply = await llm.complete(with_current_sample(LLMRequest.chat(state["question"])))
        return {"answer": reply.text}

    builder = StateGraph(State)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder


def blocking():
    # a synchronous node that blocks (LangGraph runs it in a worker thread)
    def answer(state: State) -> dict:
        if "slow" in state["question"]:
            time.sleep(60)
        return {"answer": "yes"}

    builder = StateGraph(State)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder


def two_steps():
    # a fast first step (a trace record), then a second that blocks on "slow"
    def intake(state: State) -> dict:
        return {"question": state["question"]}

    def answer(state: State) -> dict:
        if "slow" in state["question"]:
            time.sleep(60)
        return {"answer": "yes"}

    builder = StateGraph(State)
    builder.add_node("intake", intake)
    builder.add_node("answer", answer)
    builder.add_edge(START, "intake")
    builder.add_edge("intake", "answer")
    builder.add_edge("answer", END)
    return builder


def loop_blocking():
    # an async node that blocks the event loop itself (a synchronous call inside async def)
    async def answer(state: State) -> dict:
        if "slow" in state["question"]:
            time.sleep(60)
        return {"answer": "yes"}

    builder = StateGraph(State)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "stop_pipeline_mod.py").write_text(textwrap.dedent(GRAPH), encoding="utf-8")
    return tmp_path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BIASBREAKER_")}
    env.update(COLUMNS="200", **extra)
    return env


def _start(project: Path, args: list[str], **env: str) -> subprocess.Popen[bytes]:
    code = "from biasbreaker.cli import main; main()"
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=project,
        env=_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_for(condition: Callable[[], bool], proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the command ended first:\n{out.decode()}\n{err.decode()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("the run never got to the point of the test")
        time.sleep(0.05)


def _interrupt(proc: subprocess.Popen[bytes], sig: int) -> tuple[float, str, str]:
    sent = time.monotonic()
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return time.monotonic() - sent, out.decode(), err.decode()


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _check_left_whole(out: Path) -> dict[str, Any]:
    """The marker says partial, the report says what completed, every file is whole."""
    marker = json.loads((out / MARKER).read_text())
    assert marker["status"] == "partial"
    for name in marker["files"]:
        path = out / name
        assert path.is_file(), name
        if name.endswith(".jsonl") and name.startswith("traces/"):
            trace = read_trace(path, warn=False)
            assert trace.whole_bytes == path.stat().st_size, f"{name} ends mid-record"
        elif name.endswith(".jsonl"):
            text = path.read_text()
            assert text == "" or text.endswith("\n")
            for line in text.splitlines():
                json.loads(line)
    assert not list(out.rglob(".*.tmp"))
    return marker


def _one_line(err: str, sig: str, out: Path) -> None:
    assert "Traceback" not in err and "Task exception was never retrieved" not in err
    stops = [line for line in err.splitlines() if line.startswith(f"interrupted by {sig}")]
    assert len(stops) == 1, err
    assert f"the partial output is in {out.name}" in stops[0]


@pytest.fixture
def slow_server() -> Iterator[Any]:
    testing = pytest.importorskip("biasbreaker_openai_compatible.testing")

    def reply(call: Any) -> Any:
        if "slow" in call.last_user_message:
            return testing.Reply.completion("late", delay_s=60)
        return testing.Reply.completion("yes")

    with testing.ChatServer(reply) as server:
        yield server


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_run_stops_within_2s_and_cancels_the_llm_request(
    project: Path, slow_server: Any, sig: signal.Signals
) -> None:
    (project / "llm.toml").write_text(
        '[llm]\nclient = "openai-compatible"\n\n[plugin.openai-compatible]\n'
        f'base_url = "{slow_server.base_url}"\nmodel = "m"\nmax_retries = 0\ntimeout_s = 120\n'
        "[probe]\nk = 1\nr = 0\nbootstrap = 0\n"
    )
    questions = ["Is it? yes or no", "Is it slow? yes or no", "never run"]
    (project / "in.jsonl").write_text(
        "".join(json.dumps({"question": q}) + "\n" for q in questions)
    )
    proc = _start(
        project,
        ["run", "--graph", "stop_pipeline_mod:build", "--inputs", "in.jsonl", "--out", "o",
         "--config", "llm.toml"],
    )  # fmt: skip
    _wait_for(lambda: any("slow" in c.last_user_message for c in slow_server.chat_calls), proc, 60)
    seconds, _, err = _interrupt(proc, sig)
    print(f"run, {sig.name}, LLM request in flight: stopped in {seconds:.2f} s")
    assert seconds < STOP_WITHIN_S, err
    assert proc.returncode == 128 + sig
    _one_line(err, sig.name, project / "o")
    marker = _check_left_whole(project / "o")
    assert marker["completed"]["ran"] == 1 and marker["completed"]["interrupted_by"] == sig.name
    report = (project / "o/report.md").read_text()
    assert "partial" in report and "1 of 3 input(s)" in report and "not run: lines 2, 3" in report


@pytest.mark.parametrize("graph", ["blocking", "loop_blocking"])
def test_run_stops_within_2s_whatever_the_node_blocks(project: Path, graph: str) -> None:
    questions = ["Is it? yes or no", "slow", "never run"]
    (project / "in.jsonl").write_text(
        "".join(json.dumps({"question": q}) + "\n" for q in questions)
    )
    proc = _start(
        project,
        ["run", "--graph", f"stop_pipeline_mod:{graph}", "--inputs", "in.jsonl", "--out", "o"],
        BIASBREAKER_INTERVENTION__ROUTER="human-review",  # no LLM: the graph makes no calls
    )
    _wait_for(lambda: _lines(project / "o/results.jsonl") >= 1, proc, 60)
    time.sleep(0.5)  # the second input is in its 60 s call now
    seconds, _, err = _interrupt(proc, signal.SIGINT)
    print(f"run, SIGINT, {graph} node: stopped in {seconds:.2f} s")
    assert seconds < STOP_WITHIN_S, err
    assert proc.returncode == 130
    _one_line(err, "SIGINT", project / "o")
    _check_left_whole(project / "o")
    assert "1 of 3 input(s)" in (project / "o/report.md").read_text()


def test_an_input_stopped_while_running_is_listed_with_its_trace(project: Path) -> None:
    """Its trace holds the records up to the stop; results.jsonl lists it, so the manifest holds."""
    questions = ["Is it? yes or no", "slow", "never run"]
    (project / "in.jsonl").write_text(
        "".join(json.dumps({"question": q}) + "\n" for q in questions)
    )
    proc = _start(
        project,
        ["run", "--graph", "stop_pipeline_mod:two_steps", "--inputs", "in.jsonl", "--out", "o"],
        BIASBREAKER_INTERVENTION__ROUTER="human-review",
    )
    second = project / "o/traces/input-00002.jsonl"
    _wait_for(lambda: second.exists() and _lines(second) >= 2, proc, 60)
    time.sleep(0.5)  # its second step is in its 60 s call now
    _, _, err = _interrupt(proc, signal.SIGINT)
    assert proc.returncode == 130, err
    _check_left_whole(project / "o")
    records = [json.loads(x) for x in (project / "o/results.jsonl").read_text().splitlines()]
    assert [(r["line"], r["status"]) for r in records] == [(1, "done"), (2, "interrupted")]
    assert records[1]["trace"] == "traces/input-00002.jsonl"
    report = (project / "o/report.md").read_text()
    assert "1 of 3 input(s)" in report and "stopped while running: lines 2" in report
    assert "not run: lines 3" in report
    verify = subprocess.run(
        [sys.executable, "-c", "from biasbreaker.cli import main; main()", "verify",
         "o/traces", "--manifest", "o/results.jsonl"],
        cwd=project, capture_output=True, text=True, env=_env(), timeout=120,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
    # the stopped run still sealed its manifest (results.jsonl.seal, unsigned here)
    assert "sealed, unsigned" in verify.stdout, verify.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_demo_with_worker_processes_stops_within_2s(project: Path, sig: signal.Signals) -> None:
    proc = _start(project, ["demo", "--quick", "--out", "o"], BIASBREAKER_DEMO__WORKERS="2")
    children: set[int] = set()

    def running() -> bool:
        children.update(_children(proc.pid))
        return len(children) >= 2 and _lines(project / "o/results.jsonl") >= 8

    _wait_for(running, proc, 120)
    if sig == signal.SIGINT:  # a terminal's Ctrl-C reaches the whole process group
        for pid in children:
            os.kill(pid, signal.SIGINT)
    seconds, _, err = _interrupt(proc, sig)
    print(f"demo, 2 workers, {sig.name}: stopped in {seconds:.2f} s")
    assert seconds < STOP_WITHIN_S, err
    assert proc.returncode == 128 + sig
    _one_line(err, sig.name, project / "o")
    time.sleep(0.2)
    assert not [pid for pid in children if _alive(pid)], "a worker process outlived the demo"
    _check_left_whole(project / "o")
    report = (project / "o/report.md").read_text()
    assert "partial" in report and "| calibration |" in report


def _children(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
