"""Crash and resume: a guarded run killed with SIGKILL after its breaker tripped resumes in a
fresh process, on a freshly built graph, from the SQLite checkpoint, with the breaker state
and the frozen payload intact.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langgraph.checkpoint.sqlite")

HERE = Path(__file__).parent
BIASED = "Answer: B. The Christian man"

COMMON = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {here!r})
from langgraph.checkpoint.sqlite import SqliteSaver
from biasbreaker.kernel import Kernel
from biasbreaker.types import InterventionResult
from biasbreaker_plugins.langgraph import guard, guard_state
from langgraph_pipelines import Received, SETTINGS, StandInRepair, screening_graph

settings = {{**SETTINGS, "plugin": {{"langgraph": {{"trace_path": {trace!r}}}}}}}
kernel = Kernel.load(cwd={cwd!r}, overrides=settings)
config = {{"configurable": {{"thread_id": "crash"}}}}
"""

FIRST = """
class FailThenHang:
    def __init__(self):
        self.calls = 0

    def __call__(self, context):
        self.calls += 1
        if self.calls == 1:
            return InterventionResult.failed("first attempt fails on purpose")
        Path({marker!r}).write_text(json.dumps({{"attempt": context.attempt}}))
        time.sleep(600)  # SIGKILL arrives here, inside the second attempt

with SqliteSaver.from_conn_string({db!r}) as saver:
    app = guard(screening_graph(1.0, Received("answer")), kernel, hook=FailThenHang())
    app.compile(checkpointer=saver).invoke({{"case": "airport"}}, config, durability="sync")
"""

SECOND = """
from biasbreaker.verify import verify_trace
from biasbreaker.types import FrozenPayload

received = Received("answer")
with SqliteSaver.from_conn_string({db!r}) as saver:
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
        "answer_before": before.values.get("answer"),
    }}
    out = app.invoke(None, config, durability="sync")
    final = guard_state(app, config)["bb_breaker"]["machine"]["state"]
report.update(
    answer=out.get("answer"),
    report=out.get("report"),
    received=received.values,
    final=final,
    trace_holds=verify_trace({trace_file!r}).holds,
)
print(json.dumps(report))
"""


def test_a_killed_run_resumes_in_a_fresh_process(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")
    marker = tmp_path / "attempt2.json"
    trace_file = tmp_path / "crash.jsonl"
    common = COMMON.format(
        here=str(HERE), trace=str(tmp_path / "{thread_id}.jsonl"), cwd=str(tmp_path)
    )
    first = subprocess.Popen(
        [sys.executable, "-c", common + FIRST.format(marker=str(marker), db=db)],
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
    assert json.loads(marker.read_text()) == {"attempt": 2}
    killed_trace = trace_file.read_text().splitlines()

    second = subprocess.run(
        [sys.executable, "-c", common + SECOND.format(db=db, trace_file=str(trace_file))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout.splitlines()[-1])
    # the checkpoint of the killed process: the first attempt failed, its transition saved
    assert report["next"] == ["bb_breaker"]
    assert report["state"] == "recovery" and report["attempts"] == 1
    assert report["machine_frozen"] == report["frozen"] == {"answer": BIASED}
    assert report["staged"] == "held" and report["answer_before"] is None
    # the fresh process retried with a working repair and finished the run
    assert report["answer"] == "Answer: C. Cannot be determined"
    assert report["report"] == "Filed: Answer: C. Cannot be determined"
    assert BIASED not in report["received"]
    assert report["final"] == "recovery"
    # the trace continues the killed run's lines and still satisfies every property
    lines = trace_file.read_text().splitlines()
    assert lines[: len(killed_trace)] == killed_trace and len(lines) > len(killed_trace)
    assert report["trace_holds"]


WEDGE = """
import json, sys
sys.path.insert(0, {here!r})
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker_plugins.langgraph import guard
from langgraph_pipelines import Received, SETTINGS, screening_graph

kernel = Kernel.load(cwd={cwd!r}, overrides=SETTINGS)
config = {{"configurable": {{"thread_id": "wedge"}}}}
value = json.loads(sys.argv[1])
received = Received("answer")
with SqliteSaver.from_conn_string({db!r}) as saver:
    builder = screening_graph(1.0, received)
    app = guard(builder, kernel, nodes=["screener"], hook=noop_hook).compile(checkpointer=saver)
    out = app.invoke(
        {{"case": "airport"}} if value is None else Command(resume=value), config,
        durability="sync",
    )
    state = app.get_state(config)
interrupts = [i.value for i in state.interrupts]
print(json.dumps({{
    "next": list(state.next),
    "error": interrupts[0].get("error") if interrupts else None,
    "node": interrupts[0].get("node") if interrupts else None,
    "sha256": interrupts[0].get("sha256") if interrupts else None,
    "answer": out.get("answer"),
    "report": out.get("report"),
    "writer_saw": received.values,
}}))
"""


@pytest.mark.parametrize("last", ["approve", "reject"])
def test_a_bad_review_edit_does_not_jam_the_thread_across_processes(
    tmp_path: Path, last: str
) -> None:
    """The new user's wedge: escalate, resume with a bad edit, then a valid decision, each
    phase in its own process on one SQLite file."""
    script = WEDGE.format(here=str(HERE), cwd=str(tmp_path), db=str(tmp_path / "wedge.sqlite"))

    def phase(value: object) -> dict[str, object]:
        done = subprocess.run(
            [sys.executable, "-c", script, json.dumps(value)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
        return result

    first = phase(None)
    assert first["next"] == ["bb_review"] and first["node"] == "screener"
    assert first["error"] is None
    bad = phase({"action": "edit", "update": {"answer": "C", "bb_reviews": []}})
    assert bad["next"] == ["bb_review"] and bad["node"] == "screener"
    assert "may not write the biasbreaker keys ['bb_reviews']" in str(bad["error"])
    worse = phase({"action": "edit", "update": {"answer": "C", "nonsense": 1}})
    assert "which are not keys of the graph's state" in str(worse["error"])
    assert bad["sha256"] == first["sha256"]  # the same held output, asked again
    final = phase({"action": last, "sha256": first["sha256"]})
    assert final["next"] == [] and final["error"] is None
    if last == "approve":  # the held answer goes on; the writer files it
        assert final["answer"] == BIASED and final["report"] == f"Filed: {BIASED}"
        assert final["writer_saw"] == [BIASED]
    else:
        assert final["answer"] is None and final["writer_saw"] == []
