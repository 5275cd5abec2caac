"""Speculative probing in the LangGraph adapter: re-runs start with the node's own call.

Two promises (issue 15, item 1): the node's output and its stream events stay staged until the
breaker decides, although its re-runs ran beside it, so no downstream node and no stream
consumer sees them earlier; and the traces are byte for byte those of probing after the call
(``[probe] speculative = false``) for the same seed, trips, repairs and reviews included.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command
from langgraph_apps import APPLICANT, SETTINGS, Watch, flat, model, question, scrub
from typing_extensions import TypedDict

from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker_plugins.langgraph import guard
from biasbreaker_plugins.langgraph.probing import in_rerun

RERUN_S = 0.15
"""How long each probe re-run takes: the window in which a speculative guard could leak the
node's output before its decision."""
OWN_S = 0.05
"""How long the node's own call takes (its re-runs start during it)."""


def kernel(tmp_path: Path, speculative: bool = True, **probe: Any) -> Kernel:
    return Kernel.load(
        cwd=tmp_path,
        overrides={
            **SETTINGS,
            "probe": {**SETTINGS["probe"], "speculative": speculative, **probe},
            "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
        },
    )


class Timeline:
    """When things happened, in ``time.monotonic()`` seconds, from every thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[float, str]] = []

    def mark(self, what: str) -> None:
        with self.lock:
            self.events.append((time.monotonic(), what))

    def first(self, what: str) -> float:
        return min(t for t, w in self.events if w == what)

    def all(self, what: str) -> list[float]:
        return [t for t, w in self.events if w == what]


def chat_graph(biased: bool, watch: Watch, timeline: Timeline, asynchronous: bool) -> StateGraph:
    """``chat -> sign``: chat streams a custom event and its model's tokens; its re-runs are slow."""
    llm = model(biased, watch)

    def reply(state: MessagesState) -> dict[str, Any]:
        get_stream_writer()({"thinking": str(state["messages"][-1].content)[:60]})
        answer = llm.invoke(state["messages"])
        return {"messages": [AIMessage(content=str(answer.content), id="reply")]}

    async def areply(state: MessagesState) -> dict[str, Any]:
        get_stream_writer()({"thinking": str(state["messages"][-1].content)[:60]})
        answer = await llm.ainvoke(state["messages"])
        return {"messages": [AIMessage(content=str(answer.content), id="reply")]}

    def chat_sync(state: MessagesState) -> dict[str, Any]:
        rerun = in_rerun()
        timeline.mark("rerun start" if rerun else "own start")
        time.sleep(RERUN_S if rerun else OWN_S)
        out = reply(state)
        timeline.mark("rerun end" if rerun else "own end")
        return out

    async def chat_async(state: MessagesState) -> dict[str, Any]:
        rerun = in_rerun()
        timeline.mark("rerun start" if rerun else "own start")
        await asyncio.sleep(RERUN_S if rerun else OWN_S)
        out = await areply(state)
        timeline.mark("rerun end" if rerun else "own end")
        return out

    def sign(state: MessagesState) -> dict[str, Any]:
        timeline.mark("sign")
        watch.executed.append(("sign", " | ".join(str(m.content) for m in state["messages"])))
        return {"messages": [AIMessage(content="-- the loans desk", id="sign")]}

    builder = StateGraph(MessagesState)
    builder.add_node("chat", chat_async if asynchronous else chat_sync)
    builder.add_node("sign", sign)
    builder.add_edge(START, "chat")
    builder.add_edge("chat", "sign")
    builder.add_edge("sign", END)
    return builder


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("biased", [True, False], ids=["biased", "fair"])
def test_nothing_of_the_node_reaches_downstream_or_the_caller_before_the_decision(
    tmp_path: Path, biased: bool, asynchronous: bool
) -> None:
    watch, timeline = Watch(), Timeline()
    guarded = guard(
        chat_graph(biased, watch, timeline, asynchronous),
        kernel(tmp_path),
        nodes=["chat"],
        hook=noop_hook,
    )
    decider = guarded.guard.decider  # type: ignore[attr-defined]
    finish = decider.finish

    def deciding(call: Any) -> Any:
        timeline.mark("decided")
        return finish(call)

    decider.finish = deciding
    graph = guarded.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    kwargs = {"stream_mode": ["messages", "custom", "updates"], "durability": "sync"}
    received: list[tuple[float, Any]] = []

    if asynchronous:

        async def gather() -> None:
            async for chunk in graph.astream(question(), config, **kwargs):
                received.append((time.monotonic(), chunk))

        asyncio.run(gather())
    else:
        for chunk in graph.stream(question(), config, **kwargs):
            received.append((time.monotonic(), chunk))

    # speculation happened: every re-run started before the node's own call ended, and the
    # decision waited for the last of them
    assert len(timeline.all("rerun start")) == 6  # k = 4 variants, r = 2 resamples
    assert max(timeline.all("rerun start")) < timeline.first("own end")
    decided = timeline.first("decided")
    assert decided >= max(timeline.all("rerun end"))
    assert decided - timeline.first("own end") > (RERUN_S - OWN_S) / 2  # the output waited

    # the review request (an interrupt, addressed to a reviewer) carries the held output
    shown = [(t, flat(scrub([c]))) for t, c in received]
    ours = [(t, c) for t, c in shown if "thinking" in c or "Decision:" in c]
    assert all(t >= decided for t, _ in ours)  # nothing of the node before the decision
    variants = watch.variants(APPLICANT)
    assert variants and not any(v in c for _, c in shown for v in variants)
    if biased:
        assert not ours  # held: the reply and its custom event are never streamed
        assert not [e for e in watch.executed if e[0] == "sign"]  # downstream never ran
        assert graph.get_state(config).interrupts  # waiting for review
    else:
        assert any("thinking" in c for _, c in ours)  # released after the decision
        assert any("Decision:" in c for _, c in ours)
        assert timeline.first("sign") > decided  # downstream ran after it, on the output
        assert "Decision:" in next(e for e in watch.executed if e[0] == "sign")[1]


def test_a_node_that_raises_discards_its_started_reruns(tmp_path: Path) -> None:
    timeline = Timeline()

    class State(TypedDict, total=False):
        text: str
        out: str

    def flaky(state: State) -> dict[str, Any]:
        if in_rerun():
            timeline.mark("rerun start")
            time.sleep(1.0)
            timeline.mark("rerun end")
            return {"out": "fine"}
        time.sleep(OWN_S)
        raise RuntimeError("the node's own call failed")

    builder = StateGraph(State)
    builder.add_node("flaky", flaky)
    builder.add_edge(START, "flaky")
    builder.add_edge("flaky", END)
    graph = guard(builder, kernel(tmp_path), hook=noop_hook).compile()
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="own call failed"):
        graph.invoke({"text": APPLICANT})
    assert time.monotonic() - started < 0.8  # raised at once, the re-runs not awaited
    assert timeline.all("rerun start") and not timeline.all("rerun end")  # started, dropped


# ------------------------------------------------------------------ byte-identical traces


class Case(TypedDict, total=False):
    application: str
    decision: str
    route: str
    letter: str


def routed_graph(biased: bool, asynchronous: bool) -> StateGraph:
    """``decide`` (a model; a ``Command`` naming its route) -> ``approve`` | ``refer`` -> END."""
    watch = Watch()
    llm = model(biased, watch)

    def decide_sync(state: Case) -> Command[Any]:
        answer = str(llm.invoke(state["application"]).content)
        goto = "approve" if answer.endswith("yes") else "refer"
        return Command(update={"decision": answer}, goto=goto)

    async def decide_async(state: Case) -> Command[Any]:
        answer = str((await llm.ainvoke(state["application"])).content)
        goto = "approve" if answer.endswith("yes") else "refer"
        return Command(update={"decision": answer}, goto=goto)

    def approve(state: Case) -> dict[str, Any]:
        return {"letter": f"approved: {state['decision']}"}

    def refer(state: Case) -> dict[str, Any]:
        return {"letter": f"referred: {state['decision']}"}

    builder = StateGraph(Case)
    builder.add_node("decide", decide_async if asynchronous else decide_sync)
    builder.add_node("approve", approve)
    builder.add_node("refer", refer)
    builder.add_edge(START, "decide")
    builder.add_edge("approve", END)
    builder.add_edge("refer", END)
    return builder


def _run_all(tmp_path: Path, speculative: bool, asynchronous: bool) -> dict[str, bytes]:
    """Several threads on three graphs (fair, tripped and repaired, tripped and reviewed)."""
    k = kernel(tmp_path, speculative=speculative)
    apps = {
        "fair-chat": guard(
            chat_graph(False, Watch(), Timeline(), asynchronous), k, nodes=["chat"]
        ).compile(checkpointer=InMemorySaver()),
        "repaired-chat": guard(
            chat_graph(True, Watch(), Timeline(), asynchronous), k, nodes=["chat"]
        ).compile(checkpointer=InMemorySaver()),
        "reviewed-route": guard(routed_graph(True, asynchronous), k, hook=noop_hook).compile(
            checkpointer=InMemorySaver()
        ),
        "fair-route": guard(routed_graph(False, asynchronous), k).compile(
            checkpointer=InMemorySaver()
        ),
    }
    inputs = {
        "fair-chat": question(),
        "repaired-chat": question(),
        "reviewed-route": {"application": APPLICANT},
        "fair-route": {"application": APPLICANT.replace("Ms. Mary", "Mr. John")},
    }

    async def run_async(app: Any, value: Any, config: Any) -> None:
        async for _ in app.astream(value, config, stream_mode=["custom", "updates"]):
            pass

    for name, app in apps.items():
        config = {"configurable": {"thread_id": name}}
        for value in (inputs[name], Command(resume={"action": "approve"})):
            if asynchronous:
                asyncio.run(run_async(app, value, config))
            else:
                app.invoke(value, config, durability="sync")
            if not app.get_state(config).interrupts:
                break
    return {p.name: p.read_bytes() for p in sorted(tmp_path.glob("*.jsonl"))}


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_traces_are_byte_identical_to_probing_after_the_call(
    tmp_path: Path, asynchronous: bool
) -> None:
    (tmp_path / "seq").mkdir()
    (tmp_path / "spec").mkdir()
    sequential = _run_all(tmp_path / "seq", False, asynchronous)
    speculative = _run_all(tmp_path / "spec", True, asynchronous)
    assert sorted(sequential) == [
        "fair-chat.jsonl",
        "fair-route.jsonl",
        "repaired-chat.jsonl",
        "reviewed-route.jsonl",
    ]
    for name, data in sequential.items():
        assert speculative[name] == data, name
    records = [json.loads(line) for data in sequential.values() for line in data.splitlines()]
    transitions = {r.get("transition") for r in records}
    assert {"trip", "retry", "escalate"} <= transitions  # trips, repairs, reviews among them
    assert {(r.get("probe") or {}).get("status") for r in records if r.get("node")} == {"scored"}


def test_the_reruns_count_interrupts_and_subgraphs_on_a_scratchpad_of_their_own() -> None:
    """Re-runs beside the node's own call must not take its interrupt or subgraph indices."""
    import itertools

    from langgraph._internal._constants import CONF, CONFIG_KEY_SCRATCHPAD
    from langgraph._internal._scratchpad import PregelScratchpad

    from biasbreaker_plugins.langgraph._internals import RERUN_SUBGRAPHS, own_scratchpad

    own = PregelScratchpad(
        step=3,
        stop=25,
        call_counter=itertools.count(5).__next__,
        interrupt_counter=itertools.count(1).__next__,
        get_null_resume=lambda consume=False: "yes",
        resume=["earlier answer"],
        subgraph_counter=itertools.count(2).__next__,
    )
    config: Any = {CONF: {CONFIG_KEY_SCRATCHPAD: own, "thread_id": "t"}}
    rerun = own_scratchpad(config)[CONF][CONFIG_KEY_SCRATCHPAD]
    assert (rerun.step, rerun.stop, rerun.resume, rerun.get_null_resume(True)) == (3, 25, [], None)
    assert (rerun.interrupt_counter(), rerun.call_counter()) == (0, 0)
    assert rerun.subgraph_counter() == RERUN_SUBGRAPHS
    # the node's own counts are where they were
    assert (own.interrupt_counter(), own.call_counter(), own.subgraph_counter()) == (1, 5, 2)
    assert own.resume == ["earlier answer"] and config[CONF][CONFIG_KEY_SCRATCHPAD] is own
    assert own_scratchpad({}) == {}


class Loan(TypedDict, total=False):
    text: str
    decision: str


def test_a_failing_node_with_a_retry_policy_does_not_retry_its_discarded_reruns(
    tmp_path: Path,
) -> None:
    """A new-user trial: a node whose backend is down, retried 3 times by LangGraph, called it
    39 times speculatively (each discarded re-run retried too) against 3 without the guard."""
    from langgraph.types import RetryPolicy

    calls = {"own": 0, "rerun": 0}
    lock = threading.Lock()

    def decide(state: Loan) -> dict[str, Any]:
        with lock:
            calls["rerun" if in_rerun() else "own"] += 1
        time.sleep(0.02)
        raise ConnectionError("backend down")

    builder = StateGraph(Loan)
    policy = RetryPolicy(max_attempts=3, initial_interval=0.1, jitter=False)
    builder.add_node("decide", decide, retry_policy=policy)
    builder.add_edge(START, "decide")
    builder.add_edge("decide", END)
    app = guard(builder, kernel(tmp_path)).compile(checkpointer=InMemorySaver())
    with pytest.raises(ConnectionError):
        app.invoke({"text": APPLICANT}, {"configurable": {"thread_id": "down"}})
    assert calls["own"] == 3  # LangGraph's own retries, as unguarded
    # each attempt started at most one call per re-run, none retried once discarded
    per_attempt = 4 + 2  # k = 4 variants, r = 2 resamples (one axis: no joint variant)
    assert 0 < calls["rerun"] <= 3 * per_attempt, calls


def test_a_sync_rerun_that_raises_stop_iteration_fails_the_probe_at_once(tmp_path: Path) -> None:
    """asyncio cannot set StopIteration on a future: the probe waited out call_timeout_s, then
    blamed a time-out (new-user trial: a fake chat model's iterator of replies ran dry)."""
    replies = iter(["approve"])  # the re-runs' only reply: the rest find the iterator dry

    def decide(state: Loan) -> dict[str, Any]:
        # the node's own call answers without it (it runs beside its re-runs, so which of
        # them took the one reply first would depend on the threads' timing)
        return {"decision": next(replies) if in_rerun() else "approve"}

    builder = StateGraph(Loan)
    builder.add_node("decide", decide)
    builder.add_edge(START, "decide")
    builder.add_edge("decide", END)
    app = guard(builder, kernel(tmp_path, call_timeout_s=30)).compile(checkpointer=InMemorySaver())
    started = time.monotonic()
    out = app.invoke({"text": APPLICANT}, {"configurable": {"thread_id": "dry"}})
    assert time.monotonic() - started < 20  # not the 30 s time-out
    (interrupt,) = out["__interrupt__"]
    reason = json.dumps(interrupt.value, default=str)
    assert "StopIteration" in reason and "timed out" not in reason


# ------------------------------------------------------------------ when not to speculate


def _raising_scratchpad(config: Any) -> Any:
    raise RuntimeError("the re-runs' scratchpad cannot be built before the call")


@pytest.mark.parametrize("case", ["off", "unreadable-before-the-call"])
def test_the_reruns_start_after_the_nodes_own_call_when_not_speculating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """``[probe] speculative = false``, or what the re-runs need not readable before the call
    (``Prober.speculate`` returns ``None``): the call is probed after the node's own call, as
    without speculation, and scored."""
    from biasbreaker_plugins.langgraph import probing

    if case != "off":
        monkeypatch.setattr(probing, "own_scratchpad", _raising_scratchpad)
    timeline = Timeline()
    guarded = guard(
        chat_graph(False, Watch(), timeline, False),
        kernel(tmp_path, speculative=case != "off"),
        nodes=["chat"],
        hook=noop_hook,
    )
    graph = guarded.compile(checkpointer=InMemorySaver())
    graph.invoke(question(), {"configurable": {"thread_id": "t"}}, durability="sync")
    assert len(timeline.all("rerun start")) == 6  # probed: k = 4 variants, r = 2 resamples
    assert min(timeline.all("rerun start")) >= timeline.first("own end")
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert [(r.get("probe") or {}).get("status") for r in records if r.get("node")] == ["scored"]


def test_an_async_node_that_raises_cancels_its_started_reruns(tmp_path: Path) -> None:
    """The re-runs run on the node's own loop: discarded, they are cancelled, not left to run
    (and call the model) after the node raised."""
    timeline = Timeline()

    class State(TypedDict, total=False):
        text: str
        out: str

    async def flaky(state: State) -> dict[str, Any]:
        if in_rerun():
            timeline.mark("rerun start")
            await asyncio.sleep(0.3)
            timeline.mark("rerun end")
            return {"out": "fine"}
        await asyncio.sleep(OWN_S)
        raise RuntimeError("the node's own call failed")

    builder = StateGraph(State)
    builder.add_node("flaky", flaky)
    builder.add_edge(START, "flaky")
    builder.add_edge("flaky", END)
    graph = guard(builder, kernel(tmp_path), hook=noop_hook).compile()

    async def run() -> None:
        with pytest.raises(RuntimeError, match="own call failed"):
            await graph.ainvoke({"text": APPLICANT})
        await asyncio.sleep(0.6)  # the loop runs on: a re-run left running would end here

    asyncio.run(run())
    assert timeline.all("rerun start") and not timeline.all("rerun end")  # started, cancelled


@pytest.mark.parametrize("speculative", [True, False], ids=["speculative", "after"])
def test_a_probe_failure_before_the_reruns_holds_the_step_as_probing_after_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, speculative: bool
) -> None:
    """The language identifier raises while the re-runs are drawn (``Probe.draw``): kept by
    ``Speculation.launch`` and raised where probing after the call raises it, so the step is
    held for review with the same reason either way, and the graph does not raise."""
    from biasbreaker.probe import language

    def broken(text: str) -> tuple[str, float]:
        raise OSError("the model file is unreadable")

    guarded = guard(
        chat_graph(False, Watch(), Timeline(), False),
        kernel(tmp_path, speculative=speculative),
        nodes=["chat"],
        hook=noop_hook,
    )
    graph = guarded.compile(checkpointer=InMemorySaver())
    monkeypatch.setattr(language, "_py3langid", lambda: broken)
    config: Any = {"configurable": {"thread_id": "t"}}
    out = graph.invoke(question(), config, durability="sync")
    (interrupt,) = out["__interrupt__"]
    reason = json.dumps(interrupt.value, default=str)
    assert "probe failed: ProbeError: the language identifier raised OSError(" in reason
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    (record,) = [r for r in records if r.get("node")]
    assert record["probe"]["status"] == "failed"
    assert record["transition"] == "held-for-review"


@pytest.mark.parametrize("section", ["configurable", "metadata"])
def test_the_reruns_beside_the_call_get_its_config_as_it_was_before_the_call(
    tmp_path: Path, section: str
) -> None:
    """The node's own call takes a key out of its config before its re-runs, started beside
    it, read theirs: they get the config as it was before the call (``Before.config``), not
    the node's changed one (which would fail them: "probed with config[...] keys
    ['applicant'], and this run has []")."""
    from langchain_core.runnables import RunnableConfig

    popped = threading.Event()
    seen: list[str] = []

    class Request(TypedDict, total=False):
        request: str
        decision: str

    def assess(state: Request, config: RunnableConfig) -> dict[str, Any]:
        rerun = in_rerun()
        if rerun:
            assert popped.wait(5)  # read after the node's own call changed its config
        seen.append(str(config[section]["applicant"].get("text", "")))
        if not rerun:
            config[section]["applicant"].pop("text")
            popped.set()
        return {"decision": "Decision: yes"}

    builder = StateGraph(Request)
    builder.add_node("assess", assess)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", END)
    app = guard(builder, kernel(tmp_path), hook=noop_hook).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}, "metadata": {}}
    config[section]["applicant"] = {"text": APPLICANT}
    out = app.invoke({"request": "loan"}, config, durability="sync")
    assert out["decision"] == "Decision: yes" and "__interrupt__" not in out
    assert len(seen) == 1 + 6 and all(seen)  # the node's call and its 6 re-runs
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert [(r.get("probe") or {}).get("status") for r in records if r.get("node")] == ["scored"]
