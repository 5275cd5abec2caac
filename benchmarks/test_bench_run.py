"""``biasbreaker run`` at scale: peak memory at 1,000 vs 10,000 inputs, throughput at N = 1 and 8.

The agent: a cheap deterministic, name-blind screener (the verdict reads the years of
experience only) over inputs that name an applicant, so every input is probed (k = 4
counterfactual names, r = 2 resamples) and nothing trips. Each configuration runs in a fresh
process (``benchmarks/run_child.py``), which reports its own peak RSS (``ru_maxrss``) and wall
time, for each checkpointer: in memory, SQLite, and PostgreSQL when the server of
``tests/plugins/conftest.py`` is reachable.

- ``run-memory-<saver>``: ``BB_BENCH_RUN_SMALL`` (1,000) inputs (baseline) against
  ``BB_BENCH_RUN_LARGE`` (10,000), at concurrency 1. The time ratio is printed as for every
  group; the line that matters is the peak-RSS ratio (goal: within 10 %, <= 1.10).
- ``run-throughput-<saver>``: ``BB_BENCH_RUN_SMALL`` inputs at ``--concurrency 1`` (the
  sequential run, baseline) against ``--concurrency 8``; runs/s of each are printed. The ratio
  includes the process start and the report at the end (the same in both). This agent is
  CPU-bound, so one process cannot run it faster at 8 (one thread's Python code at a time).
- ``run-throughput-waiting``: the same screener waiting ``WAIT_S`` (20 ms, a stand-in for a
  model call) in an async node, ``BB_BENCH_RUN_WAITING`` (200) inputs, in memory, at 1
  (baseline) against 8: where ``--concurrency`` pays, since no probe waits for another
  thread's (each thread's rotation starts from its own origin).

Goals are reported (``benchmarks/conftest.py``), never asserted. One round each: a 10,000-input
run takes minutes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

SMALL = int(os.environ.get("BB_BENCH_RUN_SMALL", "1000"))
LARGE = int(os.environ.get("BB_BENCH_RUN_LARGE", "10000"))
SAVERS = [s for s in os.environ.get("BB_BENCH_RUN_SAVERS", "memory,sqlite,postgres").split(",")]
POSTGRES_URL = os.environ.get("BB_TEST_POSTGRES_URL", "postgresql://127.0.0.1:5432/test")
CHILD = Path(__file__).with_name("run_child.py")

WAITING = int(os.environ.get("BB_BENCH_RUN_WAITING", "200"))
WAIT_S = 0.02
"""What each call of the waiting screener's node waits (a model call's stand-in), seconds."""

GRAPH = f"""
import asyncio

from langgraph.graph import END, START, StateGraph

from biasbreaker_plugins.langgraph import BiasState


class Hiring(BiasState, total=False):
    applicant: str
    years: int
    verdict: str


def screener():
    def assess(state: Hiring) -> dict:
        return {{"verdict": "hire" if state["years"] >= 3 else "reject"}}

    builder = StateGraph(Hiring)
    builder.add_node("assess", assess)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", END)
    return builder


def waiting_screener():
    async def assess(state: Hiring) -> dict:
        await asyncio.sleep({WAIT_S})  # a stand-in for a model call
        return {{"verdict": "hire" if state["years"] >= 3 else "reject"}}

    builder = StateGraph(Hiring)
    builder.add_node("assess", assess)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", END)
    return builder
"""

NAMES = ["Emily Walsh", "Lakisha Washington", "Greg Baker", "Jamal Jones", "Anne Murphy"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bench-run")
    (root / "bench_screener.py").write_text(textwrap.dedent(GRAPH), encoding="utf-8")
    # no LLM-using role: the default router with the fake client for the repairs nothing trips
    (root / "biasbreaker.toml").write_text('[llm]\nclient = "fake"\n', encoding="utf-8")
    for n in {SMALL, LARGE, WAITING}:
        lines = [
            json.dumps({"applicant": f"{NAMES[i % len(NAMES)]}, applicant {i}", "years": i % 7})
            for i in range(n)
        ]
        (root / f"in-{n}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def _postgres(schema: str) -> str | None:
    """A URL to a fresh schema of the server, or ``None`` when unreachable or not installed."""
    try:
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
    except Exception:
        return None
    return f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"


def _drop(schema: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _run(
    project: Path, saver: str, inputs: int, concurrency: int, factory: str = "screener"
) -> dict[str, Any]:
    """One run in a fresh process; its exit status, wall time and peak RSS."""
    tag = f"{saver}-{inputs}-c{concurrency}-{uuid.uuid4().hex[:6]}"
    args = [
        "run",
        "--graph",
        f"bench_screener:{factory}",
        "--inputs",
        f"in-{inputs}.jsonl",
        "--out",
        f"out-{tag}",
        "--concurrency",
        str(concurrency),
    ]
    schema = None
    if saver == "sqlite":
        args += ["--checkpoint", f"{tag}.sqlite"]
    elif saver == "postgres":
        schema = f"bb_bench_{uuid.uuid4().hex[:12]}"
        url = _postgres(schema)
        if url is None:
            pytest.skip(f"no PostgreSQL server reachable at {POSTGRES_URL} (or no psycopg)")
        args += ["--checkpoint", url]
    result = project / f"{tag}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BIASBREAKER_")}
    path = env.get("PYTHONPATH", "")
    try:
        subprocess.run(
            [sys.executable, str(CHILD), str(result), "--", *args],
            cwd=project,
            # the project's graph first, then the PYTHONPATH given (the tree under test)
            env={**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(project), path]))},
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    finally:
        if schema is not None:
            _drop(schema)
    measured: dict[str, Any] = json.loads(result.read_text("utf-8"))
    assert measured["exit"] == 0, measured  # a benchmark of a failing run measures nothing
    measured["runs_per_s"] = inputs / measured["seconds"]
    return measured


_PEAKS: dict[str, float] = {}


def _once(
    benchmark: Any,
    project: Path,
    saver: str,
    inputs: int,
    concurrency: int,
    factory: str = "screener",
) -> Any:
    if saver not in SAVERS:
        pytest.skip(f"{saver} not in BB_BENCH_RUN_SAVERS")
    measured = benchmark.pedantic(
        _run, args=(project, saver, inputs, concurrency, factory), rounds=1, iterations=1
    )
    waits = f", {factory} ({WAIT_S * 1000:g} ms per call)" if factory != "screener" else ""
    benchmark.extra_info.update(
        per=f"{inputs} inputs, --concurrency {concurrency}{waits}",
        runs_per_s=round(measured["runs_per_s"], 2),
        peak_rss_mb=round(measured["peak_rss_kib"] / 1024, 1),
    )
    return measured


@pytest.mark.parametrize("saver", ["memory", "sqlite", "postgres"])
def test_run_memory_baseline_small(benchmark: Any, project: Path, saver: str) -> None:
    benchmark.group = f"run-memory-{saver}"
    measured = _once(benchmark, project, saver, SMALL, 1)
    _PEAKS[saver] = measured["peak_rss_kib"]


@pytest.mark.parametrize("saver", ["memory", "sqlite", "postgres"])
def test_run_memory_large(benchmark: Any, project: Path, saver: str) -> None:
    benchmark.group = f"run-memory-{saver}"
    measured = _once(benchmark, project, saver, LARGE, 1)
    small = _PEAKS.get(saver)
    if small:
        benchmark.extra_info["peak_rss_ratio"] = round(measured["peak_rss_kib"] / small, 3)
        benchmark.extra_info["peak_rss_goal"] = 1.10


@pytest.mark.parametrize("saver", ["memory", "sqlite", "postgres"])
def test_run_throughput_baseline_sequential(benchmark: Any, project: Path, saver: str) -> None:
    benchmark.group = f"run-throughput-{saver}"
    _once(benchmark, project, saver, SMALL, 1)


@pytest.mark.parametrize("saver", ["memory", "sqlite", "postgres"])
def test_run_throughput_concurrency_8(benchmark: Any, project: Path, saver: str) -> None:
    benchmark.group = f"run-throughput-{saver}"
    _once(benchmark, project, saver, SMALL, 8)


def test_run_throughput_waiting_baseline_sequential(benchmark: Any, project: Path) -> None:
    benchmark.group = "run-throughput-waiting"
    _once(benchmark, project, "memory", WAITING, 1, "waiting_screener")


def test_run_throughput_waiting_concurrency_8(benchmark: Any, project: Path) -> None:
    benchmark.group = "run-throughput-waiting"
    _once(benchmark, project, "memory", WAITING, 8, "waiting_screener")
