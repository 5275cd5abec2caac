"""A guarded graph served by LangGraph's own local server (``langgraph dev``), driven by the SDK.

``langgraph-cli[inmem]`` runs ``langgraph-api`` on the in-memory runtime, offline; a
``langgraph.json`` names ``guard(builder).compile()`` (no checkpointer: the server brings its
own). Through ``langgraph-sdk``, a biased run escalates to the guard's review interrupt, whose
request carries the held output and its SHA-256; a resume with ``reject`` ends the thread
without the held output in its values, one with ``approve`` releases it. Skipped, with the
reason, where ``langgraph-cli``/``langgraph-api``/``langgraph-sdk`` is not installed.

The server runs with ``--allow-blocking``: without it, the dev server's blockbuster raises
``BlockingError`` on a synchronous ``os.getcwd`` inside the guard's probe, and the guard fails
closed (holds the output for review with that error as its reason) rather than scoring it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langgraph_cli", reason="needs langgraph-cli[inmem] (langgraph dev)")
pytest.importorskip("langgraph_api", reason="needs langgraph-cli[inmem] (langgraph-api)")
pytest.importorskip("langgraph_runtime_inmem", reason="needs langgraph-cli[inmem]")
pytest.importorskip("langgraph_sdk", reason="needs langgraph-sdk")

pytestmark = pytest.mark.langgraph

HERE = Path(__file__).parent
BIASED = "Answer: B. The Christian man"
GRAPH = """
import sys
from pathlib import Path
sys.path.insert(0, {here!r})
from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker_plugins.langgraph import guard
from langgraph_pipelines import Received, SETTINGS, screening_graph

kernel = Kernel.load(cwd=Path(__file__).parent, overrides=SETTINGS)
# bias 1.0 and no repair: the screener's output escalates to review
graph = guard(screening_graph(1.0, Received("answer")), kernel, hook=noop_hook).compile()
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/ok", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@pytest.fixture
def server(tmp_path: Path) -> Any:
    """``langgraph dev`` serving the guarded graph as ``guarded`` on a free port; its URL."""
    cli = Path(sys.executable).parent / "langgraph"
    if not cli.exists():
        pytest.skip(f"no langgraph executable beside {sys.executable}")
    (tmp_path / "graph.py").write_text(GRAPH.format(here=str(HERE)))
    (tmp_path / "langgraph.json").write_text(
        '{"dependencies": ["."], "graphs": {"guarded": "./graph.py:graph"}}'
    )
    port = _free_port()
    env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false"}
    log = (tmp_path / "server.log").open("wb")
    args = ["dev", "--no-browser", "--no-reload", "--allow-blocking"]
    proc = subprocess.Popen(
        [str(cli), *args, "--host", "127.0.0.1", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while not _ready(url):
            if proc.poll() is not None:
                pytest.fail(f"langgraph dev exited: {(tmp_path / 'server.log').read_text()}")
            assert time.monotonic() < deadline, "langgraph dev did not start"
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        log.close()


def test_a_guarded_graph_served_by_langgraph_dev_pauses_for_review_and_resumes(
    server: str,
) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server)
    verdicts: dict[str, dict[str, Any]] = {}
    for action in ("reject", "approve"):
        thread = client.threads.create()["thread_id"]
        paused: Any = client.runs.wait(thread, "guarded", input={"case": "airport"})
        (interrupt,) = paused["__interrupt__"]
        request = interrupt["value"]
        assert request["node"] == "screener" and request["breaker_state"] == "escalated"
        assert request["held"] == {"answer": BIASED}
        assert request["frozen"]["sha256"] == request["sha256"]
        assert request["actions"] == ["approve", "edit", "reject"]
        assert "answer" not in paused  # held: not in the thread's values while paused
        state: Any = client.threads.get_state(thread)
        assert state["next"] == ["bb_review"]
        reviewed = []
        while True:  # an approved answer reaches the guarded writer, whose report is reviewed
            reviewed.append(request["node"])
            resume = {"action": action, "sha256": request["sha256"]}
            done: Any = client.runs.wait(thread, "guarded", command={"resume": resume})
            if "__interrupt__" not in done:
                break
            assert len(reviewed) < 3, reviewed
            request = done["__interrupt__"][0]["value"]
        verdicts[action] = {**done, "reviewed": reviewed}
        assert client.threads.get_state(thread)["next"] == [], action
    assert verdicts["reject"]["reviewed"] == ["screener"]
    assert "answer" not in verdicts["reject"]  # rejected: never released
    assert "report" not in verdicts["reject"]  # nothing downstream ran on it
    assert verdicts["approve"]["reviewed"] == ["screener", "writer"]
    assert verdicts["approve"]["answer"] == BIASED  # approved: released as held
    assert verdicts["approve"]["report"] == f"Filed: {BIASED}"
