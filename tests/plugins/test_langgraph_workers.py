"""Workers that resume each other: N processes share a PostgreSQL checkpointer and a queue.

Each worker takes a thread id from a queue table with ``SELECT ... FOR UPDATE SKIP LOCKED``
and keeps the row locked (its transaction open) while it runs the thread; it marks the row
done and records what the thread produced in the same transaction. A worker killed with
SIGKILL loses its connection, PostgreSQL rolls its transaction back and frees the row, and
another worker takes the thread and resumes it from its last checkpoint (``invoke(None)``).

The test kills worker 0 inside the second repair attempt of thread ``t1`` while worker 1 has
run the other threads, and checks that worker 1 resumed ``t1``: breaker state, window and
frozen payload as the killed worker's last checkpointed step left them, its trace the killed
worker's lines continued (no step recorded twice or missing) and verifying, each thread done
exactly once, and no writer ever given the held output.

It runs twice, once per trace sink: ``file`` (files in one folder both workers reach; the
adapter continues a thread's file from its checkpoint) and ``postgresql`` (``[trace] sink``,
every record of a thread, whichever worker wrote it, in the one ``biasbreaker_trace_lines``
table of the same database; each thread's rows complete, in seq order, once each, and
``biasbreaker verify URL`` holding for the store as for its exported files).
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
THREADS = ["t1", "t2", "t3"]

WORKER = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {here!r})
import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from biasbreaker.kernel import Kernel
from biasbreaker.types import InterventionResult
from biasbreaker_plugins.langgraph import guard, guard_state
from langgraph_pipelines import Received, SETTINGS, StandInRepair, screening_graph

worker = int(sys.argv[1])
settings = {{
    **SETTINGS,
    **{trace!r},  # the file sink's trace_path, or [trace] sink = "postgresql"
    # a calibration window, so the breaker's window is part of the state a worker resumes
    "calibration": {{"control": {{"mean": 0.01, "std": 0.01, "n_steps": 200}}, "max_history": 8}},
}}
kernel = Kernel.load(cwd={cwd!r}, overrides=settings)


class FailThenHang:
    # worker 0's repair: the first attempt fails, the second hangs until SIGKILL
    def __init__(self):
        self.calls = 0

    def __call__(self, context):
        self.calls += 1
        if self.calls == 1:
            return InterventionResult.failed("first attempt fails on purpose")
        Path({marker!r}).write_text(json.dumps({{"attempt": context.attempt}}))
        time.sleep(600)


hook = FailThenHang() if worker == 0 else StandInRepair()
with psycopg.connect({url!r}) as queue, PostgresSaver.from_conn_string({url!r}) as saver:
    while True:
        with queue.transaction():
            row = queue.execute(
                "SELECT thread_id FROM bb_queue WHERE NOT done ORDER BY thread_id "
                "FOR UPDATE SKIP LOCKED LIMIT 1"
            ).fetchone()
            if row is None:
                left = queue.execute("SELECT count(*) FROM bb_queue WHERE NOT done").fetchone()
                if left[0] == 0:
                    break
            else:
                thread = row[0]
                received = Received("answer")
                app = guard(screening_graph(1.0, received), kernel, hook=hook).compile(
                    checkpointer=saver
                )
                config = {{"configurable": {{"thread_id": thread}}}}
                before = guard_state(app, config)
                resumed = bool(before) and bool(app.get_state(config).next)
                out = app.invoke(
                    None if resumed else {{"case": "airport"}}, config, durability="sync"
                )
                record = {{
                    "resumed": resumed,
                    "before": before.get("bb_breaker", {{}}).get("machine"),
                    "frozen_before": before.get("bb_frozen"),
                    "answer": out.get("answer"),
                    "writer_saw": received.values,
                }}
                queue.execute(
                    "INSERT INTO bb_results (thread_id, worker, record) VALUES (%s, %s, %s)",
                    (thread, worker, json.dumps(record)),
                )
                queue.execute("UPDATE bb_queue SET done = true WHERE thread_id = %s", (thread,))
                continue
        time.sleep(0.2)  # every open thread is locked by another worker: wait for it
"""


def _rows(url: str) -> list[tuple[str, int, dict[str, Any]]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return [
            (thread, worker, json.loads(record))
            for thread, worker, record in conn.execute(
                "SELECT thread_id, worker, record FROM bb_results ORDER BY thread_id"
            )
        ]


SINKS = ["file", "postgresql"]


def _trace_settings(sink: str, url: str, folder: Path) -> dict[str, Any]:
    """The workers' trace settings: a file per thread in ``folder``, or the store at ``url``."""
    if sink == "file":
        return {"plugin": {"langgraph": {"trace_path": str(folder / "{thread_id}.jsonl")}}}
    return {"trace": {"sink": "postgresql", "url": url}}


def _lines(sink: str, url: str, folder: Path, thread: str) -> list[bytes]:
    """A thread's trace lines as written so far: its file, or its store rows in seq order."""
    if sink == "file":
        return (folder / f"{thread}.jsonl").read_bytes().splitlines(keepends=True)
    from biasbreaker_plugins.trace_sinks.postgres import PostgresStore

    store = PostgresStore(url, create=False)
    try:
        return store.lines(thread)  # raises on a gap in the seqs
    finally:
        store.close()


@pytest.mark.parametrize("sink", SINKS)
def test_a_killed_workers_thread_is_resumed_by_another_worker(
    postgres_url: str, tmp_path: Path, sink: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    from biasbreaker.trace import read_trace
    from biasbreaker.types import FrozenPayload
    from biasbreaker.verify import verify_trace

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bb_queue (thread_id text PRIMARY KEY, done bool NOT NULL)")
        conn.execute("CREATE TABLE bb_results (thread_id text, worker int, record text)")
        for thread in THREADS:
            conn.execute("INSERT INTO bb_queue VALUES (%s, false)", (thread,))
    with PostgresSaver.from_conn_string(postgres_url) as saver:
        saver.setup()  # once, before the workers (concurrent migrations would race)

    marker = tmp_path / "attempt2.json"
    folder = tmp_path / "traces"
    script = WORKER.format(
        here=str(HERE),
        trace=_trace_settings(sink, postgres_url, folder),
        cwd=str(tmp_path),
        url=postgres_url,
        marker=str(marker),
    )

    def start(worker: int) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", script, str(worker)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    workers = [start(0)]
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():  # worker 0 took t1 and is inside its second attempt
            if workers[0].poll() is not None:
                pytest.fail(f"worker 0 ended before its second attempt: {workers[0].stderr.read()}")
            assert time.monotonic() < deadline, "worker 0 did not reach its second attempt"
            time.sleep(0.05)
        workers.append(start(1))
        while len(_rows(postgres_url)) < len(THREADS) - 1:  # worker 1 ran t2 and t3
            if workers[1].poll() is not None:
                pytest.fail(f"worker 1 ended early: {workers[1].stderr.read()}")
            assert time.monotonic() < deadline, "worker 1 did not run the other threads"
            time.sleep(0.1)
        os.kill(workers[0].pid, signal.SIGKILL)
        workers[0].wait(timeout=60)
        t1_killed = _lines(sink, postgres_url, folder, "t1")  # what worker 0 left
        killed_copy = tmp_path / "t1-at-kill.jsonl"
        killed_copy.write_bytes(b"".join(t1_killed))
        _, err = workers[1].communicate(timeout=240)
        assert workers[1].returncode == 0, err
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait(timeout=60)
    assert workers[0].returncode == -signal.SIGKILL
    assert json.loads(marker.read_text()) == {"attempt": 2}

    rows = _rows(postgres_url)
    assert [(thread, worker) for thread, worker, _ in rows] == [("t1", 1), ("t2", 1), ("t3", 1)]
    records = {thread: record for thread, _, record in rows}
    for thread, record in records.items():
        assert record["answer"] == NEUTRAL, thread
        assert BIASED not in record["writer_saw"], thread  # nothing downstream saw it held
        assert record["resumed"] == (thread == "t1")

    # worker 1 found t1 where worker 0's last checkpointed step left it
    t1 = records["t1"]
    machine = t1["before"]
    assert machine["state"] == "recovery" and machine["attempts"] == 1
    frozen = FrozenPayload.from_json(machine["frozen_payload"])
    assert frozen.thaw() == {"answer": BIASED}
    (key,) = t1["frozen_before"]
    assert FrozenPayload.from_json(t1["frozen_before"][key]["payload"]).thaw() == frozen.thaw()
    killed = read_trace(killed_copy, warn=False).records
    assert machine["step"] == len(killed)  # the checkpoint is at the trace's last step
    last = killed[-1]
    assert last.state.value == "recovery" and last.attempt == 1
    assert last.payload_sha256 == frozen.sha256
    levels = machine["window"]  # the window as the killed worker's last step left it
    assert last.window is not None and last.window.size == len(levels) > 0
    assert last.window.beyond_3 == sum(level >= 3 for level in levels)
    assert last.window.beyond_5 == sum(level == 5 for level in levels)

    # each thread's trace as one file: the file sink's, or the store's rows exported
    if sink == "file":
        traces = folder
    else:
        from biasbreaker.trace.export import export_all
        from biasbreaker_plugins.trace_sinks.postgres import PostgresStore

        assert not folder.exists()  # nothing went to files
        store = PostgresStore(postgres_url, create=False)
        try:
            assert store.threads() == THREADS  # both workers' records in the one store
            traces = tmp_path / "exported"
            exported = export_all(store, traces)
            assert sorted(path.name for path in exported) == [f"{t}.jsonl" for t in THREADS]
        finally:
            store.close()

    # t1's trace: the killed worker's lines continued; steps 0..n-1 once each; all verify
    t1_lines = _lines(sink, postgres_url, folder, "t1")
    assert t1_lines[: len(t1_killed)] == t1_killed and len(t1_lines) > len(t1_killed)
    resumed = read_trace(traces / "t1.jsonl").records[len(killed)]
    assert resumed.step == machine["step"] and resumed.window is not None
    assert resumed.window.size == min(8, len(levels) + 1)  # the window continued, not restarted
    for thread in THREADS:
        lines = _lines(sink, postgres_url, folder, thread)
        assert (traces / f"{thread}.jsonl").read_bytes() == b"".join(lines), thread
        assert len(set(lines)) == len(lines), thread  # no line stored twice
        trace = read_trace(traces / f"{thread}.jsonl")
        assert [r.step for r in trace.records] == list(range(len(trace.records))), thread
        assert len(lines) == 1 + len(trace.records) + len(trace.seals), thread  # nothing else
        assert trace.ends_sealed, thread
        assert verify_trace(traces / f"{thread}.jsonl").holds, thread
    if sink == "postgresql":  # the store verifies as its exported files do
        from typer.testing import CliRunner

        from biasbreaker.cli import app as cli

        monkeypatch.chdir(tmp_path)
        shown = [
            CliRunner().invoke(cli, ["verify", target, "--json"], terminal_width=200)
            for target in (postgres_url, str(traces))
        ]
        for result in shown:
            assert result.exit_code == 0, result.output
        from_url, from_files = (json.loads(result.stdout) for result in shown)
        assert from_url["holds"] is True and from_url["totals"] == from_files["totals"]
        assert len(from_url["traces"]) == len(THREADS)
