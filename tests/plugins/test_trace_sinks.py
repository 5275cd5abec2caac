"""The database trace sinks (``[trace] sink = "sqlite" | "postgresql"``) against real databases.

A guarded LangGraph run (the seeded fake LLM, simulated) writes its trace through a database
sink; exported, it is byte for byte the file sink's trace of the same run, signatures included.
Two writers on one thread: the second is refused loudly and nothing is duplicated or lost. An
edited or deleted row fails ``biasbreaker verify``; ``verify`` and ``calibrate`` on the URL give
the verdicts of the exported files; ``trace export`` is atomic and refuses to overwrite.
PostgreSQL runs against the real server in a fresh schema per test (``postgres_url``), and is
skipped, with the reason, when it is unreachable.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from langgraph_pipelines import SETTINGS, Received, StandInRepair, screening_graph
from typer.testing import CliRunner

from biasbreaker.cli import app as cli
from biasbreaker.errors import ConfigError, InputError, TraceError
from biasbreaker.kernel import Kernel
from biasbreaker.machine import ControlMachine, MachineConfig, noop_hook
from biasbreaker.trace import SIGNING_KEY_ENV, read_trace
from biasbreaker.trace.export import export_thread
from biasbreaker.trace.signing import load_public_key, write_key_pair
from biasbreaker.trace.sink import LineStore
from biasbreaker.types import Thresholds
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard, guard_state
from biasbreaker_plugins.trace_sinks.postgres import PostgresBackend, PostgresStore
from biasbreaker_plugins.trace_sinks.sqlite import SqliteBackend, SqliteStore

pytestmark = pytest.mark.langgraph

KINDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(params=KINDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database of the sink kind: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'traces.db'}"
    return str(request.getfixturevalue("postgres_url"))


def open_store(url: str) -> LineStore:
    return SqliteStore(url) if url.startswith("sqlite") else PostgresStore(url)


def backend(url: str) -> SqliteBackend | PostgresBackend:
    return SqliteBackend() if url.startswith("sqlite") else PostgresBackend()


def execute(url: str, sql: str, *args: Any) -> None:
    """Run one statement on the store's database, as someone with write access would."""
    if url.startswith("sqlite"):
        db = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        db.execute(sql.replace("%s", "?"), args)
        db.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute(sql, args)  # type: ignore[arg-type]


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def run_guarded(tmp_path: Path, trace: dict[str, Any], plugin: dict[str, Any]) -> None:
    """Two threads through the guarded screening graph, on fixed seeds.

    ``repaired``: bias 1.0, repaired by the stand-in, then invoked again on the same thread (a
    seal mid-trace, continued). ``reviewed``: bias 1.0 with no repair, so it escalates and
    pauses for review (sealed), then is resumed with an approval.
    """
    settings = {**SETTINGS, "trace": trace, "plugin": {"langgraph": plugin}}
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    graph = guard(screening_graph(1.0, Received("answer")), kernel, hook=StandInRepair())
    app = graph.compile(checkpointer=InMemorySaver())
    app.invoke({"case": "x"}, thread("repaired"))
    app.invoke({"case": "y"}, thread("repaired"))
    review = guard(screening_graph(1.0, Received("answer")), kernel, hook=noop_hook)
    paused = review.compile(checkpointer=InMemorySaver())
    paused.invoke({"case": "x"}, thread("reviewed"))
    request = paused.get_state(thread("reviewed")).interrupts[0].value
    assert guard_state(paused, thread("reviewed"))["bb_breaker"]["machine"]["state"] == (
        "escalated"
    )
    paused.invoke(
        Command(resume={"action": "approve", "sha256": request["sha256"]}), thread("reviewed")
    )


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), terminal_width=200)


@pytest.fixture
def signed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Sign every seal (file and database sinks alike) with a fresh key; its public key."""
    pytest.importorskip("cryptography", reason="needs the sign extra")
    private, public, _ = write_key_pair(tmp_path / "key")
    monkeypatch.setenv(SIGNING_KEY_ENV, str(private))
    return str(public)


def test_a_guarded_run_in_the_store_exports_to_the_file_sink_s_trace_byte_for_byte(
    tmp_path: Path, store_url: str, signed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = tmp_path / "files"
    run_guarded(tmp_path, {}, {"trace_path": str(files / "{thread_id}.jsonl")})
    run_guarded(tmp_path, {"sink": store_url.split(":")[0], "url": store_url}, {})
    store = open_store(store_url)
    assert store.threads() == ["repaired", "reviewed"]
    store.close()
    monkeypatch.chdir(tmp_path)
    for name in ("repaired", "reviewed"):
        out = tmp_path / "export" / f"{name}.jsonl"
        done = invoke("trace", "export", store_url, "--thread", name, "--out", str(out))
        assert done.exit_code == 0, done.output
        expected = (files / f"{name}.jsonl").read_bytes()
        assert out.read_bytes() == expected
        trace = read_trace(out)
        assert len(trace.seals) >= 2 and all(s.signature for s in trace.seals)  # mid and end
        report = verify_trace(out, public_key=load_public_key(signed))
        assert report.holds, report
    # the store verifies as the exported folder does, and as the file sink's folder
    for target in (store_url, str(tmp_path / "export"), str(files)):
        shown = invoke("verify", target, "--public-key", signed, "--json")
        assert shown.exit_code == 0, shown.output
        totals = json.loads(shown.output)["totals"]
        assert totals == json.loads(invoke("verify", str(files), "--json").output)["totals"]


def test_calibrate_reads_a_store_as_the_folder_it_exports_to(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = {**SETTINGS, "trace": {"sink": store_url.split(":")[0], "url": store_url}}
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    app = guard(screening_graph(0.1, Received("answer")), kernel).compile(
        checkpointer=InMemorySaver()
    )
    for n in range(4):
        app.invoke({"case": f"c{n}"}, thread(f"control-{n}"))
    monkeypatch.chdir(tmp_path)
    assert invoke("trace", "export", store_url, "--out", "exported").exit_code == 0
    args = ["--target-false-halt-rate", "0.25", "--json"]
    from_url = invoke("calibrate", store_url, *args)
    from_folder = invoke("calibrate", "exported", *args)
    assert from_url.exit_code == 0, from_url.output
    assert from_folder.exit_code == 0, from_folder.output
    url_report, folder_report = json.loads(from_url.stdout), json.loads(from_folder.stdout)
    assert url_report["source_sha256"] == folder_report["source_sha256"]
    for key in ("tau_enter", "tau_exit", "tau_warn"):
        assert url_report[key] == folder_report[key], key


def machine_records(fasts: tuple[float, ...]) -> tuple[ControlMachine, list[Any]]:
    config = MachineConfig(Thresholds(0.3, 0.2, 0.15, 0.05), probation="half-open")
    records: list[Any] = []
    machine = ControlMachine(config, recorder=records.append)
    for fast in fasts:
        machine.step(fast, 0.0, node="n")
    return machine, records


def test_a_second_writer_at_a_taken_seq_is_refused_and_nothing_is_duplicated(
    store_url: str,
) -> None:
    first = backend(store_url).open_sink(store_url, adapter="langgraph", fsync=False)
    second = backend(store_url).open_sink(store_url, adapter="langgraph", fsync=False)
    machine_a, records_a = machine_records((0.0, 0.1))
    machine_b, records_b = machine_records((0.2, 0.25))
    first.check_new_run("t")  # both workers see an empty thread
    second.check_new_run("t")
    first.write("t", machine_a, records_a)
    with pytest.raises(TraceError, match=r"thread 't' already has a trace line at seq 0"):
        second.write("t", machine_b, records_b)
    store = open_store(store_url)
    rows = store.lines("t")
    assert len(rows) == 3 and b'"fast":0.1' in rows[2]  # A's header and steps, once each
    # the raw store refuses a taken key too, and leaves the row as it was
    with pytest.raises(TraceError, match=r"thread 't' already has a trace line at seq 2"):
        store.append("t", 2, b'{"kind":"seal"}\n')
    assert store.lines("t") == rows
    # the second writer, reading the thread again, finds A's step 0 with other content
    with pytest.raises(TraceError, match=r"already holds step 0 at seq 1 with other content"):
        second.write("t", machine_b, records_b)
    assert store.lines("t") == rows
    for closing in (first, second, store):
        closing.close()


def test_a_step_re_executed_after_a_crash_is_kept_once_if_identical(store_url: str) -> None:
    machine, records = machine_records((0.0, 0.1, 0.05, 0.02))
    crashed = backend(store_url).open_sink(store_url, adapter="langgraph", fsync=False)
    crashed.write("t", machine, records)  # the checkpoint held only steps 0..1
    crashed.close()
    resumed = backend(store_url).open_sink(store_url, adapter="langgraph", fsync=False)
    resumed.write("t", machine, records[2:])  # the same steps again: not appended twice
    resumed.seal("t")
    store = open_store(store_url)
    assert len(store.lines("t")) == 1 + 4 + 1
    changed = [records[3].__class__.from_json({**records[3].to_json(), "reason": "re-run"})]
    with pytest.raises(TraceError, match=r"already holds step 3 at seq 4 with other content"):
        backend(store_url).open_sink(store_url, adapter="langgraph", fsync=False).write(
            "t", machine, changed
        )
    assert len(store.lines("t")) == 6
    store.close()


def _stored(tmp_path: Path, store_url: str) -> None:
    kernel = Kernel.load(
        cwd=tmp_path,
        overrides={**SETTINGS, "trace": {"sink": store_url.split(":")[0], "url": store_url}},
    )
    app = guard(screening_graph(1.0, Received("answer")), kernel, hook=StandInRepair())
    app.compile(checkpointer=InMemorySaver()).invoke({"case": "x"}, thread("t"))


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(
            lambda url: execute(
                url,
                "UPDATE biasbreaker_trace_lines SET line = %s WHERE thread_id = 't' AND seq = 2",
                open_store(url).lines("t")[2].replace(b'"state":"', b'"state":"X', 1),
            ),
            id="edited",
        ),
        pytest.param(
            lambda url: execute(
                url,
                "UPDATE biasbreaker_trace_lines SET line = %s WHERE thread_id = 't' AND seq = 3",
                open_store(url).lines("t")[3].replace(b'"fast":', b'"fast":0.5,"x":', 1),
            ),
            id="a step's score changed",
        ),
        pytest.param(
            lambda url: execute(
                url, "DELETE FROM biasbreaker_trace_lines WHERE thread_id = 't' AND seq = 2"
            ),
            id="deleted",
        ),
        pytest.param(
            lambda url: execute(
                url,
                "DELETE FROM biasbreaker_trace_lines WHERE thread_id = 't' AND seq = "
                "(SELECT MAX(seq) FROM biasbreaker_trace_lines)",
            ),
            id="seal dropped",
        ),
    ],
)
def test_a_tampered_store_fails_verify(
    tmp_path: Path,
    store_url: str,
    tamper: Callable[[str], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _stored(tmp_path, store_url)
    monkeypatch.chdir(tmp_path)
    assert invoke("verify", store_url).exit_code == 0
    tamper(store_url)
    shown = invoke("verify", store_url)
    assert shown.exit_code == 1, shown.output


def test_export_refuses_to_overwrite_and_never_leaves_a_half_file(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stored(tmp_path, store_url)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "t.jsonl"
    out.write_bytes(b"keep me\n")
    refused = invoke("trace", "export", store_url, "--thread", "t", "--out", str(out))
    assert refused.exit_code == 1 and "--overwrite" in refused.output
    assert out.read_bytes() == b"keep me\n"
    folder = tmp_path / "all"
    folder.mkdir()
    (folder / "t.jsonl").write_bytes(b"keep me\n")
    assert invoke("trace", "export", store_url, "--out", str(folder)).exit_code == 1
    assert sorted(p.name for p in folder.iterdir()) == ["t.jsonl"]
    done = invoke("trace", "export", store_url, "--out", str(folder), "--overwrite")
    assert done.exit_code == 0, done.output
    assert verify_trace(folder / "t.jsonl").holds
    missing = invoke("trace", "export", store_url, "--thread", "nope", "--out", "x.jsonl")
    assert missing.exit_code == 1 and "holds no trace of thread 'nope'" in missing.output
    # a write that fails half-way leaves neither the target nor a temporary file
    store = open_store(store_url)

    def broken(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken)
    target = tmp_path / "half" / "t.jsonl"
    with pytest.raises(InputError, match="No space left on device"):
        export_thread(store, "t", target)
    assert list(target.parent.iterdir()) == []
    with pytest.raises(InputError, match="No space left on device"):
        export_thread(store, "t", out, overwrite=True)
    assert out.read_bytes() == b"keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".t.jsonl")) == []
    store.close()


def test_a_trace_path_beside_a_database_sink_and_a_wrong_scheme_are_refused(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'traces.db'}"
    both = {**SETTINGS, "trace": {"sink": "sqlite", "url": url}}
    both["plugin"] = {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}}
    with pytest.raises(ConfigError, match=r"trace_path = .* is set, but \[trace\] sink"):
        guard(screening_graph(0.0, Received("answer")), Kernel.load(cwd=tmp_path, overrides=both))
    wrong = {**SETTINGS, "trace": {"sink": "sqlite", "url": "postgresql://localhost/x"}}
    with pytest.raises(ConfigError, match="is not a sqlite URL"):
        guard(screening_graph(0.0, Received("answer")), Kernel.load(cwd=tmp_path, overrides=wrong))
    with pytest.raises(ConfigError, match="sink = 'file' writes to the adapter's trace_path"):
        Kernel.load(cwd=tmp_path, overrides={"trace": {"url": url}})


def test_a_line_edited_into_text_is_a_named_error_not_a_crash(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hand edit in sqlite3 (``SET line = replace(line, ...)``) stores TEXT; a new-user trial
    saw verify and export die with a raw TypeError there."""
    if not store_url.startswith("sqlite"):
        pytest.skip("PostgreSQL's bytea column cannot hold text")
    _stored(tmp_path, store_url)
    monkeypatch.chdir(tmp_path)
    execute(
        store_url,
        "UPDATE biasbreaker_trace_lines SET line = CAST(line AS TEXT) "
        "WHERE thread_id = 't' AND seq = 2",
    )
    for args in (("verify", store_url), ("trace", "export", store_url, "--out", "out")):
        shown = invoke(*args)
        assert shown.exit_code != 0
        assert "thread 't' seq 2: the line is stored as str, not bytes" in shown.output
        assert "Traceback" not in shown.output


def test_a_database_user_is_no_secret_but_a_password_in_the_url_is_refused(
    tmp_path: Path,
) -> None:
    """``postgresql://root@host/db`` names a user (libpq's own form): accepted. A password, in
    the user info or the query (``?password=``, ``&sslpassword=``), is refused naming the key
    and where a database password goes instead, never the value."""

    def load(url: str) -> Kernel:
        return Kernel.load(cwd=tmp_path, overrides={"trace": {"sink": "postgresql", "url": url}})

    kernel = load("postgresql://root@127.0.0.1:5432/test")
    assert kernel.settings.trace.url == "postgresql://root@127.0.0.1:5432/test"
    for url in (
        "postgresql://root:hunter22@127.0.0.1:5432/test",
        "postgresql://127.0.0.1:5432/test?password=hunter22",
        "postgresql://127.0.0.1:5432/test?sslmode=require&sslpassword=hunter22",
    ):
        with pytest.raises(ConfigError) as info:
            load(url)
        message = str(info.value)
        assert "trace.url" in message and "PGPASSWORD" in message
        assert "hunter22" not in message
