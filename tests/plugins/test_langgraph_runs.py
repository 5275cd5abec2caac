"""The LangGraph adapter on larger runs: parallel branches, the Send panel, the real runner,
the run trace, and the fail-closed concurrency check.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from biasbreaker.errors import ConfigError
from biasbreaker.hookspecs import hookimpl
from biasbreaker.intervention.types import ReviewRequest, SkepticVerdict
from biasbreaker.kernel import Kernel
from biasbreaker.llm import LLMRequest, complete_sync
from biasbreaker.machine import noop_hook
from biasbreaker.probe import with_current_sample
from biasbreaker.trace import read_trace
from biasbreaker.types import BreakerState, InterventionContext
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import BiasState, guard, guard_state
from biasbreaker_plugins.llm_fake import FakeLLM, FakeLLMOptions

sys.path.insert(0, str(Path(__file__).parent))
from langgraph_pipelines import (
    ASSESS_SETTINGS,
    NEUTRAL,
    QUESTION,
    SETTINGS,
    WEIGHTS,
    Received,
    StandInRepair,
    assessment_graph,
    screening_graph,
)

BIASED = "Answer: B. The Christian man"


def thread(name: str) -> Any:
    return {"configurable": {"thread_id": name}}


# ------------------------------------------------------------------ parallel branches


class Fork(BiasState, total=False):
    question: str
    left: str
    right: str
    joined: str


def fork_graph(left_bias: float, received: Received) -> StateGraph[Any, Any, Any, Any]:
    """``compose -> (left, right) -> join``: two parallel answerers, a join after both."""
    left_llm = FakeLLM(FakeLLMOptions(bias=left_bias, weights=WEIGHTS), seed=0)
    right_llm = FakeLLM(FakeLLMOptions(bias=0.0, weights=WEIGHTS), seed=1)

    def compose(state: Fork) -> dict[str, Any]:
        return {"question": QUESTION}

    def left(state: Fork) -> dict[str, Any]:
        request = with_current_sample(LLMRequest.chat(state["question"]))
        return {"left": complete_sync(left_llm, request).text}

    def right(state: Fork) -> dict[str, Any]:
        request = with_current_sample(LLMRequest.chat(state["question"]))
        return {"right": complete_sync(right_llm, request).text}

    def join(state: Fork) -> dict[str, Any]:
        received.record(state)
        return {"joined": f"{state['left']} | {state['right']}"}

    builder = StateGraph(Fork)
    for fn in (compose, left, right, join):
        builder.add_node(fn)
    builder.add_edge(START, "compose")
    builder.add_edge("compose", "left")
    builder.add_edge("compose", "right")
    builder.add_edge(["left", "right"], "join")
    builder.add_edge("join", END)
    return builder


@pytest.fixture
def kernel(tmp_path: Path) -> Kernel:
    return Kernel.load(cwd=tmp_path, overrides=SETTINGS)


def test_parallel_branches_are_checked_in_turn_and_promoted_together(kernel: Kernel) -> None:
    guarded = guard(fork_graph(0.0, Received("left")), kernel)
    modes = {name: spec.mode for name, spec in guarded.guard.nodes.items()}
    assert modes == {"compose": "inline", "left": "queued", "right": "queued", "join": "queued"}

    plain = fork_graph(0.0, Received("left")).compile().invoke({})
    received = Received("left")
    app = guard(fork_graph(0.0, received), kernel).compile(checkpointer=InMemorySaver())
    out = app.invoke({}, thread("clean-fork"))
    assert out["joined"] == plain["joined"] and received.guarded_call == [plain["left"]]

    received = Received("left")
    repair = StandInRepair()
    app = guard(fork_graph(1.0, received), kernel, hook=repair).compile(
        checkpointer=InMemorySaver()
    )
    out = app.invoke({}, thread("biased-fork"))
    assert [c.node for c in repair.contexts] == ["left"]
    assert out["joined"] == f"{NEUTRAL} | {plain['right']}"
    assert received.guarded_call == [NEUTRAL]  # the join ran once, after both were decided
    assert BIASED not in received.values
    assert guard_state(app, thread("biased-fork"))["bb_unverified_output"] == {}
    assert guard_state(app, thread("biased-fork"))["bb_frozen"]["left@2"]["status"] == "repaired"


def test_a_held_branch_stops_the_join_while_its_sibling_waits(kernel: Kernel) -> None:
    received = Received("left")
    app = guard(fork_graph(1.0, received), kernel, hook=noop_hook).compile(
        checkpointer=InMemorySaver()
    )
    out = app.invoke({}, thread("held-fork"))
    assert received.calls == [] and "left" not in out and "right" not in out
    staged = guard_state(app, thread("held-fork"))["bb_unverified_output"]
    assert staged["left@2"]["status"] == "escalated"
    # the clean sibling was let through by the breaker, then held once the machine escalated
    assert staged["right@2"]["status"] == "escalated"
    plain = fork_graph(1.0, Received("left")).compile().invoke({})
    out = app.invoke(Command(resume={"action": "reject"}), thread("held-fork"))
    right = out["__interrupt__"][0].value
    assert right["key"] == "right@2"  # reviews go in order
    approve = {"action": "approve", "sha256": right["sha256"]}
    out = app.invoke(Command(resume=approve), thread("held-fork"))
    assert out["right"] == plain["right"] and "left" not in out
    assert received.calls == []  # the join waits for both branches; one was rejected
    assert (
        guard_state(app, thread("held-fork"))["bb_unverified_output"] == {}
        and "__interrupt__" not in out
    )


# ------------------------------------------------------------------ the concurrency net


class Spread(BiasState, total=False):
    text: str
    a: str
    b: str


def spreading_graph() -> StateGraph[Any, Any, Any, Any]:
    """An unguarded dispatcher fans out with Command(goto=[a, b]), which the edges do not show."""

    def dispatch(state: Spread) -> Command[Any]:
        return Command(goto=["a", "b"])

    def a(state: Spread) -> dict[str, Any]:
        return {"a": "A"}

    def b(state: Spread) -> dict[str, Any]:
        return {"b": "B"}

    builder = StateGraph(Spread)
    builder.add_node(dispatch)
    builder.add_node(a)
    builder.add_node(b)
    builder.add_edge(START, "dispatch")
    return builder


def test_an_undeclared_fan_out_fails_closed_and_concurrent_fixes_it(kernel: Kernel) -> None:
    app = guard(spreading_graph(), kernel, nodes=["a", "b"]).compile(checkpointer=InMemorySaver())
    with pytest.raises(ConfigError, match="stepped the bias breaker concurrently"):
        app.invoke({"text": "x"}, thread("net"))
    # the thread stays stopped: LangGraph re-applies the step's saved writes on every read
    with pytest.raises(ConfigError, match="concurrently"):
        app.get_state(thread("net"))
    fixed = guard(spreading_graph(), kernel, nodes=["a", "b"], concurrent=["a", "b"])
    out = fixed.compile(checkpointer=InMemorySaver()).invoke({"text": "x"}, thread("ok"))
    assert (out["a"], out["b"]) == ("A", "B")


# ------------------------------------------------------------------ the real runner


def test_the_real_intervention_runner_repairs_the_biased_node(tmp_path: Path) -> None:
    kernel = Kernel.load(cwd=tmp_path, overrides=ASSESS_SETTINGS)
    received = Received("assessment")
    app = guard(assessment_graph(1.0, received), kernel).compile(checkpointer=InMemorySaver())
    out = asyncio.run(app.ainvoke({"case": "c1"}, thread("runner")))
    record = guard_state(app, thread("runner"))["bb_frozen"]["assessor@2"]
    biased = record["payload"]["value"]["assessment"]
    assert record["status"] == "repaired"
    assert out["assessment"] == record["repaired"]["assessment"] != biased
    assert received.guarded_call == [out["assessment"]]
    assert biased not in received.values
    summary = [
        e
        for e in guard_state(app, thread("runner"))["bb_audit_trail"]
        if e["event"] == "intervention"
    ][-1]
    assert summary["converged"] and summary["recheck_score"] < 0.2  # measured, below tau_exit
    assert summary["strategy"] in ("madera", "skeptics")
    assert (
        guard_state(app, thread("runner"))["bb_local_scores"]["assessor"]
        == summary["recheck_score"]
    )


@pytest.fixture
def first_party(register_plugin: Any, make_kernel: Any) -> Any:
    """A kernel on the first-party plugins (the fake's skeptics) and an always-skeptics router."""
    import biasbreaker_plugins.aggregators as aggregators
    import biasbreaker_plugins.calibrator_percentile as calibrator_percentile
    import biasbreaker_plugins.langgraph_plugin as langgraph_plugin
    import biasbreaker_plugins.llm_fake as llm_fake
    import biasbreaker_plugins.madera as madera
    import biasbreaker_plugins.router_heuristic as router_heuristic
    import biasbreaker_plugins.scorers as scorers
    import biasbreaker_plugins.skeptics as skeptics
    import biasbreaker_plugins.trace_sinks as trace_sinks

    for name, module in [
        ("llm-fake", llm_fake),
        ("scorers", scorers),
        ("skeptics", skeptics),
        ("aggregators", aggregators),
        ("madera", madera),
        ("langgraph", langgraph_plugin),
        ("trace-sinks", trace_sinks),  # the adapter writes through the [trace] sink
        # guard() validates like `run`: every point the settings select needs its plugin
        ("calibrator-percentile", calibrator_percentile),
        ("router-heuristic", router_heuristic),
    ]:
        register_plugin(module, name=name)

    class Router:
        def route(self, context: InterventionContext) -> str:
            return "skeptics"

    class AlwaysSkeptics:
        @staticmethod
        @hookimpl
        def classify_route(register: Any) -> None:
            register("always-skeptics", lambda options, context: Router())

    register_plugin(AlwaysSkeptics, name="undo-always-skeptics")

    def make(panel: str) -> Kernel:
        settings = {
            **ASSESS_SETTINGS,
            "intervention": {"router": "always-skeptics"},
            "plugin": {**ASSESS_SETTINGS["plugin"], "langgraph": {"panel": panel}},
        }
        return make_kernel(settings)

    return make


@pytest.mark.parametrize("panel", ["in-process", "send"])
def test_the_real_runner_repairs_with_the_fakes_skeptics(first_party: Any, panel: str) -> None:
    received = Received("assessment")
    app = guard(assessment_graph(1.0, received), first_party(panel)).compile(
        checkpointer=InMemorySaver()
    )
    out = asyncio.run(app.ainvoke({}, thread(panel)))
    out = {**out, **guard_state(app, thread(panel))}
    record = out["bb_frozen"]["assessor@2"]
    biased = record["payload"]["value"]["assessment"]
    assert record["status"] == "repaired" and out["assessment"] != biased
    assert received.guarded_call == [out["assessment"]] and biased not in received.values
    trail = out["bb_breaker"]["machine"]["result"]["trail"]
    kinds = sorted(e["kind"] for e in trail if e["event"] == "verdict")
    assert kinds == ["devils-advocate", "diversity-champion", "empirical-auditor"]
    summary = [e for e in out["bb_audit_trail"] if e["event"] == "intervention"][-1]
    assert summary["strategy"] == "skeptics" and summary["converged"]
    assert summary["recheck_score"] < 0.2


def test_the_real_runner_leaves_a_clean_run_alone(tmp_path: Path) -> None:
    kernel = Kernel.load(cwd=tmp_path, overrides=ASSESS_SETTINGS)
    received = Received("assessment")
    app = guard(assessment_graph(0.0, received), kernel).compile(checkpointer=InMemorySaver())
    out = asyncio.run(app.ainvoke({"case": "c1"}, thread("clean")))
    assert (
        guard_state(app, thread("clean"))["bb_audit_trail"] == []
        and guard_state(app, thread("clean"))["bb_breaker"]["machine"]["state"] == "normal"
    )
    assert received.guarded_call == [out["assessment"]]


# ------------------------------------------------------------------ the Send panel


KINDS = ("probe-alpha", "probe-beta", "probe-gamma")


class InFlight:
    """Counts reviews in flight per request; each waits until all kinds of its request run."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.threads: dict[str, set[int]] = {}

    async def enter(self, payload: str) -> None:
        with self.lock:
            self.now[payload] = self.now.get(payload, 0) + 1
            self.peak[payload] = max(self.peak.get(payload, 0), self.now[payload])
            self.threads.setdefault(payload, set()).add(threading.get_ident())
        deadline = time.monotonic() + 20.0
        while True:
            with self.lock:
                if self.peak[payload] >= len(KINDS):
                    break
            if time.monotonic() > deadline:  # reviews ran one after another: fail the skeptic
                raise TimeoutError(f"only {self.peak[payload]} of {len(KINDS)} reviews in flight")
            await asyncio.sleep(0.001)

    def leave(self, payload: str) -> None:
        with self.lock:
            self.now[payload] -= 1


def panel_plugin(tracker: InFlight) -> object:
    class Reviewer:
        def __init__(self, kind: str) -> None:
            self.kind = kind

        async def review(self, request: ReviewRequest) -> SkepticVerdict:
            await tracker.enter(request.payload)
            try:
                return SkepticVerdict(
                    kind=self.kind,
                    decision="revise",
                    critique="the answer follows the religion, not the facts",
                    revision=json.dumps({"answer": NEUTRAL}),
                    confidence=0.8,
                    evidence=["the question gives no facts about either man"],
                    attribute="religion",
                )
            finally:
                tracker.leave(request.payload)

    class Router:
        def route(self, context: InterventionContext) -> str:
            return "skeptics"

    class Plugin:
        @staticmethod
        @hookimpl
        def skeptic(register: Any) -> None:
            for kind in KINDS:
                register(kind, lambda options, context, kind=kind: Reviewer(kind))

        @staticmethod
        @hookimpl
        def classify_route(register: Any) -> None:
            register("always-skeptics", lambda options, context: Router())

    return Plugin


@pytest.fixture
def panel_kernel(register_plugin: Any, make_kernel: Any) -> Any:
    import biasbreaker_plugins.aggregators as aggregators
    import biasbreaker_plugins.calibrator_percentile as calibrator_percentile
    import biasbreaker_plugins.langgraph_plugin as langgraph_plugin
    import biasbreaker_plugins.llm_fake as llm_fake
    import biasbreaker_plugins.madera as madera
    import biasbreaker_plugins.scorers as scorers
    import biasbreaker_plugins.trace_sinks as trace_sinks

    for name, module in [
        ("llm-fake", llm_fake),
        ("scorers", scorers),
        ("aggregators", aggregators),
        ("madera", madera),
        ("langgraph", langgraph_plugin),
        ("trace-sinks", trace_sinks),  # the adapter writes through the [trace] sink
        ("calibrator-percentile", calibrator_percentile),  # guard() validates like `run`
    ]:
        register_plugin(module, name=name)

    def make(panel: str, tracker: InFlight | None = None) -> tuple[Kernel, InFlight]:
        tracker = tracker or InFlight()
        register_plugin(panel_plugin(tracker), name=f"undo-panel-{panel}")
        settings = {
            **SETTINGS,
            "intervention": {"router": "always-skeptics", "skeptics": list(KINDS)},
            "plugin": {"langgraph": {"panel": panel}},
        }
        return make_kernel(settings), tracker

    return make


@pytest.mark.parametrize("panel", ["send", "in-process"])
def test_the_skeptic_panel_runs_in_parallel_and_aggregates(panel_kernel: Any, panel: str) -> None:
    kernel, tracker = panel_kernel(panel)
    received = Received("answer")
    guarded = guard(screening_graph(1.0, received), kernel)
    app = guarded.compile(checkpointer=InMemorySaver())
    if panel == "send":
        assert {"bb_skeptic", "bb_aggregate"} <= set(app.get_graph().nodes)
    out = app.invoke({"case": "airport"}, thread(panel))

    primary = json.dumps({"answer": BIASED}, separators=(",", ":"), sort_keys=True)
    assert tracker.peak[primary] == len(KINDS)  # all reviews of the held output in flight at once
    # every review runs in a worker thread of its own in both modes (its time-out must hold
    # whatever the skeptic does: biasbreaker.deadline), so each kind had a thread to itself
    assert len(tracker.threads[primary]) >= len(KINDS)
    assert out["answer"] == NEUTRAL and received.guarded_call == [NEUTRAL]
    assert BIASED not in received.values
    trail = guard_state(app, thread(panel))["bb_breaker"]["machine"]["result"]["trail"]
    verdicts = [e for e in trail if e["event"] == "verdict"]
    assert sorted(v["kind"] for v in verdicts) == sorted(KINDS)
    assert [e["decision"] for e in trail if e["event"] == "panel"] == ["revise"]
    assert (
        guard_state(app, thread(panel))["bb_verdicts"] == {}
    )  # the branches' outcomes were consumed


class Unavailable(InFlight):
    """Every review fails: each Send branch records a failed skeptic."""

    async def enter(self, payload: str) -> None:
        raise RuntimeError("skeptic unavailable")


def test_failed_branches_fail_the_send_panel_closed(panel_kernel: Any) -> None:
    kernel, _ = panel_kernel("send", Unavailable())
    received = Received("answer")
    app = guard(screening_graph(1.0, received), kernel).compile(checkpointer=InMemorySaver())
    app.invoke({"case": "airport"}, thread("closed"))
    assert (
        received.calls == []
        and guard_state(app, thread("closed"))["bb_breaker"]["machine"]["state"] == "escalated"
    )
    summaries = [
        e
        for e in guard_state(app, thread("closed"))["bb_audit_trail"]
        if e["event"] == "intervention"
    ]
    assert len(summaries) == SETTINGS.get("breaker", {}).get("max_retries", 2)
    assert all("skeptic panel failed closed" in s["error"] for s in summaries)


# ------------------------------------------------------------------ the run trace


def test_the_run_trace_records_every_guarded_step_and_its_properties_hold(
    tmp_path: Path,
) -> None:
    texts = []
    for run in ("a", "b"):
        trace_path = tmp_path / run / "{thread_id}.jsonl"
        settings = {**SETTINGS, "plugin": {"langgraph": {"trace_path": str(trace_path)}}}
        kernel = Kernel.load(cwd=tmp_path, overrides=settings)
        app = guard(screening_graph(1.0, Received("answer")), kernel, hook=StandInRepair())
        app.compile(checkpointer=InMemorySaver()).invoke({"case": "x"}, thread("run0"))
        texts.append((tmp_path / run / "run0.jsonl").read_bytes())
    assert texts[0] == texts[1]  # same inputs and seed: byte-identical traces
    trace = read_trace(tmp_path / "a" / "run0.jsonl")
    nodes = [r.node for r in trace.records]
    assert nodes[0] == "compose" and nodes[-1] == "writer" and "screener" in nodes
    states = [r.state for r in trace.records]
    assert BreakerState.INTERVENTION in states and states[-1] is BreakerState.RECOVERY
    assert [r.step for r in trace.records] == list(range(len(trace.records)))
    report = verify_trace(tmp_path / "a" / "run0.jsonl")
    assert report.holds, report


def test_a_trace_ahead_of_the_checkpoint_is_cut_back_on_resume(tmp_path: Path) -> None:
    from biasbreaker.machine import ControlMachine, MachineConfig
    from biasbreaker.types import Thresholds
    from biasbreaker_plugins.langgraph.traces import Traces

    config = MachineConfig(Thresholds(0.3, 0.2, 0.15, 0.05), probation="half-open")
    records: list[Any] = []
    machine = ControlMachine(config, recorder=records.append)
    for fast in (0.0, 0.1, 0.05, 0.02):
        machine.step(fast, 0.0, node="n")
    first = Traces(str(tmp_path / "{thread_id}.jsonl"))
    first.write("t", machine, records)  # the crashed process wrote steps 0..3
    first.close()
    # the checkpoint only had steps 0..1: a fresh process re-executes step 2 and goes on
    resumed = Traces(str(tmp_path / "{thread_id}.jsonl"))
    again = [records[2].__class__.from_json({**records[2].to_json(), "reason": "re-run"})]
    resumed.write("t", machine, again)
    resumed.close()
    trace = read_trace(tmp_path / "t.jsonl")
    assert [r.step for r in trace.records] == [0, 1, 2]
    assert trace.records[2].reason == "re-run"


def start(app: Any, asynchronous: bool) -> None:
    """A new run of ``app`` on thread ``same``."""
    if asynchronous:
        asyncio.run(app.ainvoke({"text": "a Muslim applicant"}, thread("same")))
    else:
        app.invoke({"text": "a Muslim applicant"}, thread("same"))


def test_a_new_run_on_a_thread_whose_trace_holds_records_is_refused(tmp_path: Path) -> None:
    """Reusing a thread id with a fresh checkpointer must not overwrite the first run's trace."""
    from biasbreaker.errors import TraceError

    settings = {**SETTINGS, "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}")}}}
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    first = guard(screening_graph(0.0, Received("answer")), kernel)
    first.compile(checkpointer=InMemorySaver()).invoke({"case": "x"}, thread("same"))
    written = (tmp_path / "same").read_bytes()
    count = len(read_trace(tmp_path / "same").records)
    assert count == 3  # compose, screener, writer

    class Tiny(BiasState, total=False):
        text: str
        out: str

    calls: list[str] = []

    def first(state: Tiny) -> dict[str, Any]:
        calls.append(state["text"])
        return {"out": "ok"}

    builder = StateGraph(Tiny)
    builder.add_node(first)
    builder.add_edge(START, "first")
    again = guard(builder, kernel).compile(checkpointer=InMemorySaver())
    for asynchronous in (False, True):
        with pytest.raises(TraceError) as info:
            start(again, asynchronous)
        message = str(info.value)
        assert str(tmp_path / "same") in message and "thread 'same'" in message
        assert f"holds {count} record(s)" in message
        assert "new thread id" in message and "trace_path" in message and "delete" in message
        assert calls == []  # refused before the node ran (and before the probe re-ran it)
        assert (tmp_path / "same").read_bytes() == written

    # the same thread continued on its own checkpointer (a resume, not a new run) appends
    saver = InMemorySaver()
    app = guard(screening_graph(0.0, Received("answer")), kernel).compile(checkpointer=saver)
    app.invoke({"case": "x"}, thread("kept"))
    app.invoke({"case": "y"}, thread("kept"))
    steps = [r.step for r in read_trace(tmp_path / "kept").records]
    assert steps == list(range(len(steps))) and len(steps) > 3  # continued, not refused


@pytest.mark.parametrize("where", ["file in the way", "trace is a folder", "proc"])
def test_a_trace_path_that_cannot_be_written_is_refused_when_the_guard_is_built(
    tmp_path: Path, where: str
) -> None:
    """It used to fail at the first invoke (a raw FileExistsError/FileNotFoundError after the
    node ran), the thread left paused before bb_decide; now guard() refuses it, writing nothing."""
    (tmp_path / "plain").write_text("not a folder")
    (tmp_path / "folder").mkdir()
    template, cause = {
        "file in the way": (tmp_path / "plain" / "t" / "{thread_id}.jsonl", "is a file"),
        "trace is a folder": (tmp_path / "folder", "is a folder, not a trace file"),
        "proc": (Path("/proc/biasbreaker-traces/{thread_id}.jsonl"), "nothing can be created"),
    }[where]
    settings = {**SETTINGS, "plugin": {"langgraph": {"trace_path": str(template)}}}
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(ConfigError) as info:
        guard(screening_graph(0.0, Received("answer")), kernel)
    message = str(info.value)
    assert f"[plugin.langgraph] trace_path = {str(template)!r}" in message, message
    assert cause in message and "a folder you can write" in message, message
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing half-written
    assert not Path("/proc/biasbreaker-traces").exists()


def test_a_trace_folder_that_does_not_exist_yet_is_accepted(tmp_path: Path) -> None:
    """The check creates nothing: the folder is made by the first record, as before."""
    template = tmp_path / "runs" / "{thread_id}" / "trace.jsonl"
    settings = {**SETTINGS, "plugin": {"langgraph": {"trace_path": str(template)}}}
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    app = guard(screening_graph(0.0, Received("answer")), kernel).compile()
    assert list(tmp_path.iterdir()) == []
    app.invoke({"case": "x"}, thread("t1"))
    assert len(read_trace(tmp_path / "runs" / "t1" / "trace.jsonl").records) == 3


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_node_returning_a_string_is_a_node_return_error_and_nothing_proceeds(
    tmp_path: Path, asynchronous: bool
) -> None:
    """It was a ConfigError, though nothing is wrong with the configuration: the node's code
    returns a str where LangGraph wants a state update (LangGraph's own InvalidUpdateError)."""
    from langgraph.errors import InvalidUpdateError

    from biasbreaker.errors import BiasbreakerError
    from biasbreaker_plugins.langgraph import NodeReturnError

    trace = tmp_path / "{thread_id}.jsonl"
    settings = {**SETTINGS, "plugin": {"langgraph": {"trace_path": str(trace)}}}
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)

    class Tiny(BiasState, total=False):
        text: str
        out: str
        after: str

    ran: list[str] = []

    def first(state: Tiny) -> Any:
        return "Answer: the Muslim applicant"

    def then(state: Tiny) -> dict[str, Any]:
        ran.append("then")
        return {"after": "ran"}

    builder = StateGraph(Tiny)
    builder.add_node(first)
    builder.add_node(then)
    builder.add_edge(START, "first")
    builder.add_edge("first", "then")
    app = guard(builder, kernel).compile(checkpointer=InMemorySaver())
    with pytest.raises(NodeReturnError) as info:
        start(app, asynchronous)
    error = info.value
    assert isinstance(error, InvalidUpdateError) and isinstance(error, BiasbreakerError)
    assert isinstance(error, TypeError)  # LangGraph's default RetryPolicy does not retry it
    assert not isinstance(error, ConfigError)
    message = str(error)
    assert "guarded node 'first' returned a str 'Answer: the Muslim applicant'" in message
    assert "Return a dict of the state keys it writes" in message and "\n" not in message
    assert ran == []  # fail closed: nothing downstream ran
    snapshot = app.get_state(thread("same"))
    assert snapshot.next == ("first",) and "out" not in snapshot.values
    assert not (tmp_path / "same.jsonl").exists()  # no step was recorded as let through


def test_a_hook_is_the_repair_so_guard_needs_no_llm_client(tmp_path: Path) -> None:
    """guard(hook=...) used to fail without an LLM client: validation built the configured
    skeptics and MADERA, which the hook replaces."""
    settings = {key: value for key, value in SETTINGS.items() if key != "llm"}
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    with pytest.raises(ConfigError, match="client is not set"):
        guard(screening_graph(0.0, Received("answer")), kernel)  # the configured repairs
    repair = StandInRepair()
    app = guard(screening_graph(1.0, Received("answer")), kernel, hook=repair).compile()
    out = app.invoke({"case": "x"}, thread("hooked"))
    assert repair.contexts and out["answer"] == NEUTRAL  # the hook repaired the trip
    # a configuration error elsewhere is still refused with a hook
    bad = Kernel.load(cwd=tmp_path, overrides={**settings, "probe": {"axes": ["gendr"]}})
    with pytest.raises(ConfigError, match="probe axis 'gendr' is not known"):
        guard(screening_graph(0.0, Received("answer")), bad, hook=repair)


def test_the_trace_writer_refuses_a_step_zero_over_another_runs_records(tmp_path: Path) -> None:
    from biasbreaker.errors import TraceError
    from biasbreaker.machine import ControlMachine, MachineConfig
    from biasbreaker.types import Thresholds
    from biasbreaker_plugins.langgraph.traces import Traces

    config = MachineConfig(Thresholds(0.3, 0.2, 0.15, 0.05), probation="half-open")
    records: list[Any] = []
    machine = ControlMachine(config, recorder=records.append)
    for fast in (0.0, 0.1):
        machine.step(fast, 0.0, node="n")
    traces = Traces(str(tmp_path / "{thread_id}.jsonl"))
    traces.write("t", machine, records)
    before = (tmp_path / "t.jsonl").read_bytes()
    # a new machine in the same process (a new run on the thread) starts again at step 0
    with pytest.raises(TraceError, match=r"holds 2 record\(s\) of a run on thread 't'"):
        traces.write("t", machine, records[:1])
    with pytest.raises(TraceError, match="holds 2 record"):
        Traces(str(tmp_path / "{thread_id}.jsonl")).write("t", machine, records[:1])
    traces.close()
    assert (tmp_path / "t.jsonl").read_bytes() == before
    Traces(str(tmp_path / "{thread_id}.jsonl")).check_new_run("other")  # no file: fine


def test_a_queued_branch_is_announced_with_why_it_waits(kernel: Kernel) -> None:
    """A new-user trial's UI got ``held`` events with an empty reason for fair fan-out nodes."""
    from biasbreaker_plugins.langgraph.runtime import QUEUED_REASON

    app = guard(fork_graph(0.0, Received("left")), kernel).compile(checkpointer=InMemorySaver())
    events = [
        chunk["biasbreaker"]
        for chunk in app.stream({}, thread("announced-fork"), stream_mode="custom")
        if isinstance(chunk, dict) and "biasbreaker" in chunk
    ]
    held = [e for e in events if e["event"] == "held"]
    assert held and all(e["status"] == "queued" for e in held)
    assert all(e["reason"] == QUEUED_REASON for e in held)
    released = {e["node"] for e in events if e["event"] == "released"}
    assert {e["node"] for e in held} <= released
