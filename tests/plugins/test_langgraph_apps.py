"""Real application shapes, each with one biased agent planted, run guarded.

For each shape: the biased output is held; no downstream node's input and no streamed chunk
contains it or any of the probe's variants; the clean run passes, its stream as the unguarded
graph's; the run trace verifies.
"""

from __future__ import annotations

import operator
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, Send
from langgraph_apps import (
    APPLICANT,
    SETTINGS,
    Watch,
    flat,
    loan_tools,
    model,
    question,
    scrub,
)
from pydantic import BaseModel

from biasbreaker.errors import ConfigError
from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.trace import read_trace
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard, guard_state
from biasbreaker_plugins.langgraph.probing import in_rerun


def kernel(tmp_path: Path) -> Kernel:
    settings = {
        **SETTINGS,
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    return Kernel.load(cwd=tmp_path, overrides=settings)


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


# ------------------------------------------------------------------ a tool-calling agent


def react_agent(biased: bool, watch: Watch, seen_by_tools: list[list[BaseMessage]]) -> StateGraph:
    tools = loan_tools(watch)
    llm = model(biased, watch).bind_tools(tools)
    tool_node = ToolNode(tools)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    def run_tools(state: MessagesState) -> Any:
        seen_by_tools.append(list(state["messages"]))
        return tool_node.invoke(state)

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", run_tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", END)
    return builder


def test_a_biased_tool_call_is_held_and_never_executed(tmp_path: Path) -> None:
    watch, seen = Watch(), []
    graph = guard(
        react_agent(True, watch, seen), kernel(tmp_path), nodes=["agent"], hook=noop_hook
    ).compile(checkpointer=InMemorySaver())
    chunks = list(
        graph.stream(
            question(),
            thread("react"),
            stream_mode=["updates", "messages", "values", "custom"],
            durability="sync",
        )
    )
    assert watch.executed == [] and seen == []  # the tool never ran, its node never started
    request = graph.get_state(thread("react")).interrupts[0].value
    assert request["node"] == "agent"
    held = request["held"]["messages"][0]
    assert held["type"] == "ai" and [c["name"] for c in held["tool_calls"]] == ["deny_loan"]
    bb = guard_state(graph, thread("react"))
    assert bb["bb_local_scores"]["agent"] >= 0.3  # a tool call only for one group: a flip
    text = flat(scrub(chunks))
    assert "deny_loan" not in text
    variants = watch.variants(APPLICANT)
    assert variants  # the probe asked about other people
    assert not any(v in text for v in variants)
    record = read_trace(tmp_path / "react.jsonl").records[-1]
    assert record.probe == {
        "status": "scored",
        "reason": "scored: k=4 counterfactual(s), r=2 resample(s)",
    }
    assert verify_trace(tmp_path / "react.jsonl").holds


def test_a_fair_agent_runs_its_tool_once_and_streams_as_unguarded(tmp_path: Path) -> None:
    def run(guarded: bool) -> tuple[list[Any], Watch, dict[str, Any]]:
        watch, seen = Watch(), []
        builder = react_agent(False, watch, seen)
        if guarded:
            app = guard(builder, kernel(tmp_path), nodes=["agent"]).compile(
                checkpointer=InMemorySaver()
            )
        else:
            app = builder.compile(checkpointer=InMemorySaver())
        chunks = list(app.stream(question(), thread(f"fair-{guarded}"), stream_mode="messages"))
        return chunks, watch, app.get_state(thread(f"fair-{guarded}")).values

    plain, plain_watch, plain_state = run(False)
    chunks, watch, state = run(True)
    assert watch.executed == plain_watch.executed and len(watch.executed) == 1
    shown = [
        (m.content, getattr(m, "tool_calls", None), meta["langgraph_node"]) for m, meta in chunks
    ]
    expected = [
        (m.content, getattr(m, "tool_calls", None), meta["langgraph_node"]) for m, meta in plain
    ]
    assert shown == expected
    assert [type(m) for m in state["messages"]] == [type(m) for m in plain_state["messages"]]
    assert isinstance(state["messages"][1], AIMessage) and isinstance(
        state["messages"][2], ToolMessage
    )


# ------------------------------------------------------------------ model states


class LoanCase(BaseModel):
    application: str = ""
    decision: str = ""
    letter: str = ""


@dataclass
class LoanRecord:
    application: str = ""
    decision: str = ""
    letter: str = ""


def decide_then_write(schema: Any, biased: bool, watch: Watch, letters: list[Any]) -> StateGraph:
    llm = model(biased, watch)

    def decide(state: Any) -> dict[str, Any]:
        assert isinstance(state, schema)  # the node (and every probe re-run) gets its own type
        return {"decision": str(llm.invoke(state.application).content)}

    def write(state: Any) -> dict[str, Any]:
        letters.append(state)
        return {"letter": f"Dear applicant: {state.decision}"}

    builder = StateGraph(schema)
    builder.add_node("decide", decide)
    builder.add_node("write", write)
    builder.add_edge(START, "decide")
    builder.add_edge("decide", "write")
    builder.add_edge("write", END)
    return builder


@pytest.mark.parametrize("schema", [LoanCase, LoanRecord], ids=["pydantic", "dataclass"])
@pytest.mark.parametrize("biased", [True, False])
def test_a_model_state_graph_is_guarded(tmp_path: Path, schema: Any, biased: bool) -> None:
    plain_letters: list[Any] = []
    plain = decide_then_write(schema, biased, Watch(), plain_letters).compile()
    expected = plain.invoke({"application": APPLICANT})
    watch, letters = Watch(), []
    graph = guard(
        decide_then_write(schema, biased, watch, letters),
        kernel(tmp_path),
        nodes=["decide"],
        hook=noop_hook,
    ).compile(checkpointer=InMemorySaver())
    out = graph.invoke({"application": APPLICANT}, thread("model"), durability="sync")
    assert watch.variants(APPLICANT)  # the probe re-ran decide on counterfactual applicants
    if biased:
        assert expected["decision"] == "Decision: no"  # unguarded, the letter denies her
        assert letters == [] and out.get("letter", "") == ""
        request = graph.get_state(thread("model")).interrupts[0].value
        assert request["held"] == {"decision": "Decision: no"}
    else:
        assert out == expected and len(letters) == 1 and isinstance(letters[0], schema)
        assert letters[0] == plain_letters[0]
    assert verify_trace(tmp_path / "model.jsonl").holds


# ------------------------------------------------------------------ a supervisor with two guarded subgraphs


class Desk(TypedDict, total=False):
    application: str
    decision: str
    offer: str
    route: str


def desk(name: str, key: str, biased: bool, watch: Watch, tmp_path: Path) -> Any:
    llm = model(biased, watch)

    def work(state: Desk) -> dict[str, Any]:
        return {key: str(llm.invoke(state["application"]).content)}

    builder = StateGraph(Desk)
    builder.add_node(f"{name}_agent", work)
    builder.add_edge(START, f"{name}_agent")
    builder.add_edge(f"{name}_agent", END)
    settings = {
        **SETTINGS,
        "plugin": {"langgraph": {"trace_path": str(tmp_path / f"{name}-{{thread_id}}.jsonl")}},
    }
    return guard(builder, Kernel.load(cwd=tmp_path, overrides=settings), hook=noop_hook).compile()


def supervisor(biased_screening: bool, tmp_path: Path, watch: Watch, routed: list[str]) -> Any:
    def route(state: Desk) -> dict[str, Any]:
        routed.append(state.get("decision", ""))
        return {"route": "offer" if state.get("decision") else "screening"}

    def choose(state: Desk) -> str:
        return "done" if state.get("offer") else str(state["route"])

    builder = StateGraph(Desk)
    builder.add_node("supervisor", route)
    builder.add_node("screening", desk("screening", "decision", biased_screening, watch, tmp_path))
    builder.add_node("offer", desk("offer", "offer", False, Watch(), tmp_path))
    builder.add_edge(START, "supervisor")
    builder.add_conditional_edges(
        "supervisor", choose, {"screening": "screening", "offer": "offer", "done": END}
    )
    builder.add_edge("screening", "supervisor")
    builder.add_edge("offer", "supervisor")
    # the desks are guarded subgraphs, each with its own breaker; the router is not an agent
    return guard(builder, kernel(tmp_path), nodes=[], hook=noop_hook).compile(
        checkpointer=InMemorySaver()
    )


def test_a_supervisor_over_two_guarded_subgraphs_keeps_each_ones_breaker(tmp_path: Path) -> None:
    watch, routed = Watch(), []
    graph = supervisor(True, tmp_path, watch, routed)
    chunks = list(
        graph.stream(
            {"application": APPLICANT},
            thread("sup"),
            stream_mode=["updates", "values"],
            subgraphs=True,
            durability="sync",
        )
    )
    assert routed == [""]  # the supervisor never saw the screening desk's biased decision
    request = graph.get_state(thread("sup"), subgraphs=True).tasks[0].state.interrupts[0].value
    assert request["node"] == "screening_agent" and request["held"] == {"decision": "Decision: no"}
    assert "Decision: no" not in flat(scrub(chunks))
    # each graph keeps its own breaker over its own nodes: the parent's scores name its own
    assert set(guard_state(graph, thread("sup"))["bb_local_scores"]) <= {"supervisor"}
    graph.invoke(
        Command(resume={"action": "edit", "update": {"decision": "Decision: refer"}}),
        thread("sup"),
        durability="sync",
    )
    assert routed == ["", "Decision: refer", "Decision: refer"]
    assert graph.get_state(thread("sup")).values["offer"].startswith("Decision: ")
    # the screening desk's own breaker, its own trace (thread id + the subgraph's namespace)
    (trace,) = tmp_path.glob("screening-sup.screening-*.jsonl")
    assert verify_trace(trace).holds


def test_a_fair_supervisor_run_passes_through_both_desks(tmp_path: Path) -> None:
    watch, routed = Watch(), []
    graph = supervisor(False, tmp_path, watch, routed)
    out = graph.invoke({"application": APPLICANT}, thread("fair-sup"), durability="sync")
    decision = str(model(False, Watch()).invoke(APPLICANT).content)
    assert out["decision"] == decision and out["offer"] == decision
    assert routed == ["", decision, decision]
    assert "__interrupt__" not in out and watch.variants(APPLICANT)


# ------------------------------------------------------------------ Send map-reduce


class Batch(TypedDict, total=False):
    applications: list[str]
    decisions: Annotated[list[str], operator.add]
    summary: str


def map_reduce(biased_index: int | None, watch: Watch, summarised: list[list[str]]) -> StateGraph:
    biased, fair = model(True, watch), model(False, Watch())

    def fan_out(state: Batch) -> list[Send]:
        return [Send("assess", {"applications": [a]}) for a in state["applications"]]

    def assess(state: Batch) -> dict[str, Any]:
        label, application = state["applications"][0].split(" ", 1)
        llm = biased if biased_index is not None and label == f"#{biased_index}" else fair
        return {"decisions": [f"{label} {llm.invoke(application).content}"]}

    def summarise(state: Batch) -> dict[str, Any]:
        summarised.append(sorted(state.get("decisions", [])))
        return {"summary": "; ".join(sorted(state.get("decisions", [])))}

    builder = StateGraph(Batch)
    builder.add_node("assess", assess)
    builder.add_node("summarise", summarise)
    builder.add_conditional_edges(START, fan_out, ["assess"])
    builder.add_edge("assess", "summarise")
    builder.add_edge("summarise", END)
    return builder


# the START fan-out hands every item on; it leaves bb_entry and is probed, and so is each branch
@pytest.mark.parametrize("biased_index", [0, 1, None])
def test_a_send_map_reduce_holds_the_biased_branch_and_the_reducer_waits(
    tmp_path: Path, biased_index: int | None
) -> None:
    watch, summarised = Watch(), []
    applications = [f"#{i} {APPLICANT}" for i in range(2)]
    graph = guard(
        map_reduce(biased_index, watch, summarised),
        kernel(tmp_path),
        nodes=["assess"],
        hook=noop_hook,
    ).compile(checkpointer=InMemorySaver())
    chunks = list(
        graph.stream(
            {"applications": applications},
            thread("map"),
            stream_mode=["updates", "messages"],
            durability="sync",
        )
    )
    if biased_index is None:
        fair = str(model(False, Watch()).invoke(APPLICANT).content)
        assert summarised == [[f"#0 {fair}", f"#1 {fair}"]]
        return
    assert summarised == []  # the reducer never ran with (or without) the held branch
    request = graph.get_state(thread("map")).interrupts[0].value
    assert request["held"] == {"decisions": [f"#{biased_index} Decision: no"]}
    assert "Decision: no" not in flat(scrub(chunks))
    graph.invoke(Command(resume={"action": "reject"}), thread("map"), durability="sync")
    fair = str(model(False, Watch()).invoke(APPLICANT).content)
    if biased_index == 0:
        # checked first, it escalated the thread: ESCALATED is terminal, so the clean sibling
        # waits for a reviewer too, and the reducer still has not run
        assert summarised == []
        assert graph.get_state(thread("map")).interrupts[0].value["held"] == {
            "decisions": [f"#1 {fair}"]
        }
    else:
        # the clean sibling was let through first; with the biased one rejected, the reducer
        # runs on the approved output alone
        assert summarised == [[f"#0 {fair}"]]
    assert verify_trace(tmp_path / "map.jsonl").holds


# ------------------------------------------------------------------ the functional API


def test_the_functional_api_guards_a_step_by_invoking_a_guarded_graph(tmp_path: Path) -> None:
    from langgraph.func import entrypoint, task

    watch, letters = Watch(), []
    step = guard(
        decide_then_write(LoanCase, True, watch, letters),
        kernel(tmp_path),
        nodes=["decide"],
        hook=noop_hook,
    ).compile()

    @task
    def assess(application: str) -> dict[str, Any]:
        return step.invoke({"application": application})

    @entrypoint(checkpointer=InMemorySaver())
    def workflow(application: str) -> dict[str, Any]:
        return assess(application).result()

    out = list(workflow.stream(APPLICANT, thread("func"), stream_mode="updates"))
    assert letters == []  # the guarded step inside the task held the biased decision
    assert "Decision: no" not in flat(scrub(out))
    request = workflow.get_state(thread("func"), subgraphs=True)
    assert any(i.value["held"] == {"decision": "Decision: no"} for i in request.interrupts)
    done = workflow.invoke(
        Command(resume={"action": "edit", "update": {"decision": "Decision: refer"}}),
        thread("func"),
    )
    assert done["letter"] == "Dear applicant: Decision: refer"
    with pytest.raises(
        ConfigError, match=r"functional API.*invoke the guarded graph in your @task"
    ):
        guard(workflow, kernel(tmp_path))  # type: ignore[arg-type]


# ------------------------------------------------------------------ node policies


def test_a_retry_policy_never_reruns_a_node_because_its_output_was_held(tmp_path: Path) -> None:
    from langgraph.types import RetryPolicy

    watch, letters = Watch(), []
    builder = decide_then_write(LoanCase, True, watch, letters)
    builder.nodes["decide"].retry_policy = RetryPolicy(max_attempts=3, retry_on=Exception)
    graph = guard(builder, kernel(tmp_path), nodes=["decide"], hook=noop_hook).compile(
        checkpointer=InMemorySaver()
    )
    graph.invoke({"application": APPLICANT}, thread("retry"), durability="sync")
    own_calls = [p for p in watch.prompts if p == APPLICANT]
    assert letters == [] and graph.get_state(thread("retry")).interrupts  # held for review
    # one own call (plus its same-group resamples, which see the same text): never retried
    assert len(own_calls) == 1 + SETTINGS["probe"]["r"]


def flaky_decider(biased: bool, watch: Watch, letters: list[Any], policy: Any) -> StateGraph:
    """``decide -> write``, whose ``decide`` backend fails once per text, on its first re-run.

    The node's own call succeeds; one of the probe's same-group resamples (the first re-run
    with the same text; they start with the node's own call) raises ``ConnectionError``, as a
    model backend timing out once would.
    """
    llm = model(biased, watch)
    calls: dict[str, int] = {}
    lock = threading.Lock()

    def decide(state: LoanCase) -> dict[str, Any]:
        with lock:
            if in_rerun():
                calls[state.application] = calls.get(state.application, 0) + 1
            failing = in_rerun() and calls[state.application] == 1
        if failing:
            watch.executed.append(("timeout", state.application))
            raise ConnectionError("upstream model timeout (transient)")
        return {"decision": str(llm.invoke(state.application).content)}

    def write(state: LoanCase) -> dict[str, Any]:
        letters.append(state)
        return {"letter": f"Dear applicant: {state.decision}"}

    builder = StateGraph(LoanCase)
    builder.add_node("decide", decide, retry_policy=policy)
    builder.add_node("write", write)
    builder.add_edge(START, "decide")
    builder.add_edge("decide", "write")
    builder.add_edge("write", END)
    return builder


def test_a_probe_rerun_that_fails_transiently_is_retried_by_the_nodes_retry_policy(
    tmp_path: Path,
) -> None:
    from langgraph.types import RetryPolicy

    policy = RetryPolicy(max_attempts=3, initial_interval=0.01, retry_on=ConnectionError)
    watch, letters = Watch(), []
    graph = guard(
        flaky_decider(False, watch, letters, policy), kernel(tmp_path), nodes=["decide"]
    ).compile(checkpointer=InMemorySaver())
    out = graph.invoke({"application": APPLICANT}, thread("flaky"), durability="sync")
    assert [call for call in watch.executed if call[0] == "timeout"]  # a re-run did fail
    assert not graph.get_state(thread("flaky")).interrupts  # retried, so nothing is held
    assert out["letter"].startswith("Dear applicant: Decision:") and len(letters) == 1
    assert guard_state(graph, thread("flaky"))["bb_local_scores"]["decide"] < 0.3
    record = read_trace(tmp_path / "flaky.jsonl").records[-1]
    assert record.probe["status"] == "scored"


def test_without_a_retry_policy_a_probe_rerun_that_fails_holds_the_step(tmp_path: Path) -> None:
    watch, letters = Watch(), []
    graph = guard(
        flaky_decider(False, watch, letters, None), kernel(tmp_path), nodes=["decide"]
    ).compile(checkpointer=InMemorySaver())
    graph.invoke({"application": APPLICANT}, thread("flaky"), durability="sync")
    interrupts = graph.get_state(thread("flaky")).interrupts
    assert letters == [] and interrupts  # fail closed
    reason = interrupts[0].value["reason"]
    assert "probe failed" in reason and "ConnectionError" in reason


def test_a_retry_policy_does_not_let_a_biased_flaky_node_through(tmp_path: Path) -> None:
    from langgraph.types import RetryPolicy

    policy = RetryPolicy(max_attempts=3, initial_interval=0.01, retry_on=ConnectionError)
    watch, letters = Watch(), []
    graph = guard(
        flaky_decider(True, watch, letters, policy),
        kernel(tmp_path),
        nodes=["decide"],
        hook=noop_hook,
    ).compile(checkpointer=InMemorySaver())
    graph.invoke({"application": APPLICANT}, thread("flaky"), durability="sync")
    assert [call for call in watch.executed if call[0] == "timeout"]
    interrupts = graph.get_state(thread("flaky")).interrupts
    assert letters == [] and interrupts
    assert "probe failed" not in interrupts[0].value["reason"]  # held for its bias, scored
    assert guard_state(graph, thread("flaky"))["bb_local_scores"]["decide"] >= 0.3


def test_a_probe_retry_waits_as_langgraph_would_without_jitter() -> None:
    from langgraph.errors import GraphInterrupt
    from langgraph.types import RetryPolicy

    from biasbreaker_plugins.langgraph.retrying import retry_delay, retry_policies

    policy = RetryPolicy(initial_interval=0.5, backoff_factor=2.0, max_interval=1.5, max_attempts=4)
    assert retry_policies(None) == () and retry_policies(policy) == (policy,)
    timeout = ConnectionError("timeout")
    # the same waits on every run: jitter (on by default) never applies to a probe's re-run
    assert [retry_delay([policy], timeout, n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 1.5, None]
    assert retry_delay([policy], ValueError("bad input"), 1) is None  # default_retry_on
    assert retry_delay([policy], GraphInterrupt(()), 1) is None  # an interrupt is no failure
    retry_values = RetryPolicy(retry_on=ValueError, initial_interval=0.1)
    assert retry_delay([retry_values, policy], ValueError("x"), 1) == 0.1  # the first match
    assert retry_delay([retry_values, policy], timeout, 1) == 0.5


def test_a_probe_retry_wraps_sync_and_async_nodes_and_reads_the_builders_default(
    tmp_path: Path,
) -> None:
    import asyncio

    from langgraph.types import RetryPolicy

    from biasbreaker_plugins.langgraph.retrying import retried

    policy = RetryPolicy(initial_interval=0.001, max_attempts=2, retry_on=ConnectionError)
    calls: list[str] = []

    def flaky(state: str) -> str:
        calls.append(state)
        if len(calls) % 2:
            raise ConnectionError("timeout")
        return state.upper()

    async def aflaky(state: str) -> str:
        return flaky(state)

    assert retried(flaky, (), False) is flaky  # no policy: the node as it is
    assert retried(flaky, [policy], False)("a") == "A" and calls == ["a", "a"]
    assert asyncio.run(retried(aflaky, [policy], True)("b")) == "B" and calls[2:] == ["b", "b"]
    once = RetryPolicy(max_attempts=1, retry_on=ConnectionError)
    with pytest.raises(ConnectionError):  # max_attempts counts the first call
        retried(flaky, [once], False)("c")
    builder = decide_then_write(LoanCase, False, Watch(), [])
    builder.set_node_defaults(retry_policy=policy)
    guarded = guard(builder, kernel(tmp_path), nodes=["decide"])
    assert guarded.guard.nodes["decide"].retry == (policy,)


def test_a_cache_policy_on_a_guarded_node_is_refused(tmp_path: Path) -> None:
    from langgraph.types import CachePolicy

    builder = decide_then_write(LoanCase, True, Watch(), [])
    builder.nodes["decide"].cache_policy = CachePolicy()
    with pytest.raises(ConfigError, match=r"guarded node 'decide' has a CachePolicy"):
        guard(builder, kernel(tmp_path), nodes=["decide"])
    guard(builder, kernel(tmp_path), nodes=["write"])  # an unguarded node may keep its cache


def tool_node_agent(watch: Watch) -> StateGraph:
    """The quickstart's shape with the ``ToolNode`` itself as the node (ending the run: the
    fake model calls a tool on every turn)."""
    tools = loan_tools(watch)
    llm = model(False, watch).bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", END)
    return builder


def test_a_tool_node_runs_once_unless_named_and_then_it_warns(tmp_path: Path) -> None:
    """Trial 11 and 12: guard(builder) probed the ToolNode, and `approve_loan` ran eight
    times for one application, five of them for people the probe invented. Guarding every
    node now guards a ToolNode without probing; naming it in nodes= probes it, with a
    warning."""
    from biasbreaker_plugins.langgraph import ProbedToolNodeWarning

    watch = Watch()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProbedToolNodeWarning)
        every = guard(tool_node_agent(watch), kernel(tmp_path)).compile(
            checkpointer=InMemorySaver()
        )
        guard(tool_node_agent(Watch()), kernel(tmp_path), nodes=["agent"])
        guard(
            tool_node_agent(Watch()), kernel(tmp_path), nodes=["agent", "tools"], unprobed=["tools"]
        )
    every.invoke(question(), thread("every"), durability="sync")
    assert len(watch.executed) == 1  # run once per step, its output still checked
    tools = [r for r in read_trace(tmp_path / "every.jsonl").records if r.node == "tools"]
    assert tools and {r.probe["status"] for r in tools} == {"not_probed"}

    watch = Watch()
    with pytest.warns(ProbedToolNodeWarning, match=r"unprobed=\['tools'\]") as caught:
        named = guard(tool_node_agent(watch), kernel(tmp_path), nodes=["agent", "tools"])
    assert caught[0].filename == __file__  # points at the caller's guard(...) line
    named.compile(checkpointer=InMemorySaver()).invoke(
        question(), thread("named"), durability="sync"
    )
    assert len(watch.executed) > 1  # what the warning says: the tool ran on probe inputs


def test_the_demo_phases_that_record_do_not_advise_against_their_own_tau_enter(
    tmp_path: Path,
) -> None:
    """Trial 12: ``demo --quick`` printed "tau_enter = 1: only a score of exactly 1 trips"
    about its own recording phase, which sets it on purpose."""
    from biasbreaker.config.advice import ConfigAdviceWarning
    from biasbreaker_plugins.demo.phases import RECORD_ONLY, deliberate

    settings = {**SETTINGS, "breaker": RECORD_ONLY}
    with pytest.warns(ConfigAdviceWarning, match="tau_enter = 1"):
        guard(tool_node_agent(Watch()), settings, unprobed=["tools"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigAdviceWarning)
        with deliberate():
            guard(tool_node_agent(Watch()), settings, unprobed=["tools"])
