"""Guarded graphs on LangGraph's PostgreSQL checkpointer, against a real server.

Each phase of a run is its own process on one database (a fresh schema per test): a review pause
is durable and resumed by another process, with the review request and the frozen payload
intact, on the sync ``PostgresSaver`` and the async ``AsyncPostgresSaver``; a run killed with
SIGKILL inside a repair attempt resumes in a fresh process. Skipped, with the reason, when the
``postgres`` extra is missing or no server is reachable (``BB_TEST_POSTGRES_URL``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

pytestmark = [pytest.mark.langgraph, pytest.mark.postgres]

HERE = Path(__file__).parent
BIASED = "Answer: B. The Christian man"
NEUTRAL = "Answer: C. Cannot be determined"

REVIEW = """
import asyncio, json, sys
sys.path.insert(0, {here!r})
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.types import Command
from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import aguard_state, guard, guard_state
from langgraph_pipelines import Received, SETTINGS, screening_graph

settings = {{**SETTINGS, "plugin": {{"langgraph": {{"trace_path": {trace!r}}}}}}}
kernel = Kernel.load(cwd={cwd!r}, overrides=settings)
config = {{"configurable": {{"thread_id": "review"}}}}
phase, mode = sys.argv[1], sys.argv[2]  # phase: start, read (no step run) or a resume value
received = Received("answer")
if phase == "start":
    start = {{"case": "airport"}}
elif phase != "read":
    start = Command(resume=json.loads(phase))


def report(state, bb, out):
    return {{
        "pid": __import__("os").getpid(),
        "next": list(state.next),
        "review": [i.value for i in state.interrupts],
        "frozen": bb.get("bb_frozen", {{}}),
        "machine": bb["bb_breaker"]["machine"]["state"],
        "answer": out.get("answer"),
        "report": out.get("report"),
        "writer_saw": received.values,
        "trace_holds": verify_trace({trace_file!r}).holds,
    }}


def build():
    builder = screening_graph(1.0, received, asynchronous=mode == "async")
    return guard(builder, kernel, nodes=["screener"], hook=noop_hook)


if mode == "sync":
    with PostgresSaver.from_conn_string({url!r}) as saver:
        saver.setup()
        app = build().compile(checkpointer=saver)
        out = {{}} if phase == "read" else app.invoke(start, config, durability="sync")
        result = report(app.get_state(config), guard_state(app, config), out)
else:
    guarded = build()  # outside the event loop: guard() validates the kernel with asyncio.run

    async def main():
        async with AsyncPostgresSaver.from_conn_string({url!r}) as saver:
            await saver.setup()
            app = guarded.compile(checkpointer=saver)
            out = {{}} if phase == "read" else await app.ainvoke(start, config, durability="sync")
            state = await app.aget_state(config)
            return report(state, await aguard_state(app, config), out)
    result = asyncio.run(main())
print(json.dumps(result))
"""


def _phase(script: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("action", ["approve", "reject"])
def test_a_review_pause_is_resumed_by_another_process(
    postgres_url: str, tmp_path: Path, mode: str, action: str
) -> None:
    trace_file = tmp_path / "review.jsonl"
    script = REVIEW.format(
        here=str(HERE),
        trace=str(tmp_path / "{thread_id}.jsonl"),
        trace_file=str(trace_file),
        cwd=str(tmp_path),
        url=postgres_url,
    )
    paused = _phase(script, "start", mode)
    assert paused["next"] == ["bb_review"] and paused["machine"] == "escalated"
    (request,) = paused["review"]
    assert request["node"] == "screener" and request["held"] == {"answer": BIASED}
    assert request["actions"] == ["approve", "edit", "reject"]
    assert paused["answer"] is None and paused["writer_saw"] == []  # nothing downstream saw it
    assert paused["trace_holds"]  # sealed at the pause
    paused_trace = trace_file.read_text().splitlines()

    # a second process reads the pause back unchanged; the request is the same, byte for byte
    again = _phase(script, "read", mode)
    assert again["pid"] != paused["pid"]
    assert again["review"] == paused["review"] and again["frozen"] == paused["frozen"]
    assert trace_file.read_text().splitlines() == paused_trace  # nothing re-run or re-written

    resumed = _phase(script, json.dumps({"action": action, "sha256": request["sha256"]}), mode)
    assert resumed["pid"] not in {paused["pid"], again["pid"]}
    assert resumed["next"] == [] and resumed["review"] == []
    (key,) = paused["frozen"]
    assert resumed["frozen"][key]["payload"] == paused["frozen"][key]["payload"]
    if action == "approve":
        assert resumed["answer"] == BIASED and resumed["report"] == f"Filed: {BIASED}"
        assert resumed["writer_saw"] == [BIASED]
    else:
        assert resumed["answer"] is None and resumed["writer_saw"] == []
    assert resumed["frozen"][key]["status"] == ("approved" if action == "approve" else "rejected")
    lines = trace_file.read_text().splitlines()
    assert lines[: len(paused_trace)] == paused_trace and resumed["trace_holds"]


KILLED = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {here!r})
from langgraph.checkpoint.postgres import PostgresSaver
from biasbreaker.kernel import Kernel
from biasbreaker.types import FrozenPayload, InterventionResult
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard, guard_state
from langgraph_pipelines import Received, SETTINGS, StandInRepair, screening_graph

settings = {{**SETTINGS, "plugin": {{"langgraph": {{"trace_path": {trace!r}}}}}}}
kernel = Kernel.load(cwd={cwd!r}, overrides=settings)
config = {{"configurable": {{"thread_id": "crash"}}}}


class FailThenHang:
    def __init__(self):
        self.calls = 0

    def __call__(self, context):
        self.calls += 1
        if self.calls == 1:
            return InterventionResult.failed("first attempt fails on purpose")
        Path({marker!r}).write_text(json.dumps({{"attempt": context.attempt}}))
        time.sleep(600)  # SIGKILL arrives here, inside the second attempt


received = Received("answer")
with PostgresSaver.from_conn_string({url!r}) as saver:
    saver.setup()
    if sys.argv[1] == "first":
        app = guard(screening_graph(1.0, received), kernel, hook=FailThenHang())
        app.compile(checkpointer=saver).invoke({{"case": "airport"}}, config, durability="sync")
    app = guard(screening_graph(1.0, received), kernel, hook=StandInRepair()).compile(
        checkpointer=saver
    )
    before = app.get_state(config)
    bb = guard_state(app, config)
    machine = bb["bb_breaker"]["machine"]
    report = {{
        "next": list(before.next),
        "state": machine["state"],
        "attempts": machine["attempts"],
        "machine_frozen": FrozenPayload.from_json(machine["frozen_payload"]).thaw(),
        "frozen": FrozenPayload.from_json(bb["bb_frozen"]["screener@2"]["payload"]).thaw(),
        "staged": bb["bb_unverified_output"]["screener@2"]["status"],
    }}
    out = app.invoke(None, config, durability="sync")
report.update(answer=out.get("answer"), received=received.values)
report.update(trace_holds=verify_trace({trace_file!r}).holds)
print(json.dumps(report))
"""


def test_a_run_killed_inside_a_repair_resumes_in_another_process(
    postgres_url: str, tmp_path: Path
) -> None:
    marker = tmp_path / "attempt2.json"
    trace_file = tmp_path / "crash.jsonl"
    script = KILLED.format(
        here=str(HERE),
        trace=str(tmp_path / "{thread_id}.jsonl"),
        trace_file=str(trace_file),
        cwd=str(tmp_path),
        url=postgres_url,
        marker=str(marker),
    )
    first = subprocess.Popen(
        [sys.executable, "-c", script, "first"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not marker.exists():
            if first.poll() is not None:
                pytest.fail(f"the first run ended before its second attempt: {first.stderr.read()}")
            if time.monotonic() > deadline:
                pytest.fail("the first run did not reach its second attempt within 180 s")
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGKILL)
    finally:
        first.wait(timeout=60)
    assert first.returncode == -signal.SIGKILL
    killed_trace = trace_file.read_text().splitlines()

    report = _phase(script, "second")
    assert report["next"] == ["bb_breaker"]  # the failed attempt's transition was saved
    assert report["state"] == "recovery" and report["attempts"] == 1
    assert report["machine_frozen"] == report["frozen"] == {"answer": BIASED}
    assert report["staged"] == "held"
    assert report["answer"] == NEUTRAL and BIASED not in report["received"]
    lines = trace_file.read_text().splitlines()
    assert lines[: len(killed_trace)] == killed_trace and len(lines) > len(killed_trace)
    assert report["trace_holds"]


def test_run_checkpoints_into_postgres_and_a_fresh_graph_resumes_the_review(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.types import Command
    from test_run_command import GRAPH
    from typer.testing import CliRunner

    from biasbreaker.cli import app as cli
    from biasbreaker_plugins.langgraph import guard, guard_state

    (tmp_path / "pg_pipeline_mod.py").write_text(GRAPH, encoding="utf-8")
    (tmp_path / "biasbreaker.toml").write_text('[llm]\nclient = "fake"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    inputs = tmp_path / "in.jsonl"
    inputs.write_text(json.dumps({"applicant": "Adam Erickson"}) + "\n", encoding="utf-8")
    args = ["run", "--graph", "pg_pipeline_mod:hiring", "--inputs", str(inputs), "--out", "o"]
    try:
        result = CliRunner().invoke(cli, [*args, "--checkpoint", postgres_url])
        assert result.exit_code == 0, result.output
        (record,) = [json.loads(x) for x in (tmp_path / "o/results.jsonl").read_text().splitlines()]
        assert record["status"] == "review" and record["review"]["held"] == {"verdict": "hire"}

        import pg_pipeline_mod

        settings = {"plugin": {"langgraph": {"trace_path": "o/traces/{thread_id}.jsonl"}}}
        with PostgresSaver.from_conn_string(postgres_url) as saver:
            graph = guard(pg_pipeline_mod.hiring(), settings).compile(checkpointer=saver)
            case = {"configurable": {"thread_id": record["thread"]}}
            assert graph.get_state(case).interrupts[0].value == record["review"]
            graph.invoke(Command(resume={"action": "reject"}), case, durability="sync")
            frozen = guard_state(graph, case)["bb_frozen"][record["review"]["key"]]
            assert frozen["status"] == "rejected"
        verified = CliRunner().invoke(cli, ["verify", str(tmp_path / "o" / record["trace"])])
        assert verified.exit_code == 0 and "RLB-v1: HOLDS" in verified.output

        again = CliRunner().invoke(cli, [*args, "--checkpoint", postgres_url])
        assert again.exit_code == 1
        assert f"already holds thread(s) {record['thread']}" in again.output, again.output
    finally:
        sys.modules.pop("pg_pipeline_mod", None)


def test_an_unreachable_postgres_checkpoint_is_a_config_error_without_the_password(
    tmp_path: Path,
) -> None:
    pytest.importorskip("psycopg")
    from biasbreaker.errors import ConfigError
    from biasbreaker_plugins.demo.checkpoints import PostgresCheckpoint, check_postgres_checkpoint

    # port 1 on the loopback: nothing listens, the connection is refused at once
    target = PostgresCheckpoint("postgresql://bob:Hunter2-secret@127.0.0.1:1/nope")
    with pytest.raises(ConfigError, match="cannot read it as a PostgreSQL database") as caught:
        check_postgres_checkpoint(target, ["input-00001"])
    assert "Hunter2-secret" not in str(caught.value) and "127.0.0.1:1" in str(caught.value)
