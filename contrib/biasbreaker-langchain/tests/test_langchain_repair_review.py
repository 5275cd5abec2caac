"""Repair before review, and a review resumed without calling the model again (**simulated**).

The biased loan model (seeded fake) denies Ms. Mary Carter and approves Mr. ...: the call
trips. The configured intervention runner (the graph adapter's: ``[llm] client = "fake"``
drives the heuristic router, the skeptics and MADERA) repairs and re-checks it first; only a
reply still failing after ``max_retries`` attempts (or any trip with ``router =
"human-review"``) is handed to human review, and resuming that review answers for the held
reply without re-calling the model, in this process or another.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from biasbreaker_langchain import WITHHELD, BiasGuardMiddleware, review
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command
from lc_agents import SETTINGS, WOMAN, Watch, loan_tools, model, question
from typer.testing import CliRunner

from biasbreaker.breaker import freeze
from biasbreaker.cli import app
from biasbreaker.intervention.runner import InterventionRunner
from biasbreaker.types import InterventionContext, InterventionResult

runner = CliRunner()
CALLS_PER_TURN = 1 + 4 + 2  # the real call, k counterfactuals, r resamples


def settings(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    trace = str(tmp_path / "trace-{thread_id}.jsonl")
    return {**SETTINGS, "plugin": {"langchain-agent": {"trace_path": trace}}, **extra}


def build(
    watch: Watch, tmp_path: Path, *, saver: Any = None, store: Any = None, **extra: Any
) -> Any:
    return create_agent(
        model(True, watch),
        tools=loan_tools(watch),
        middleware=[BiasGuardMiddleware(settings(tmp_path, **extra))],
        checkpointer=saver or InMemorySaver(),
        store=store,
    )


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()[1:] if '"step"' in line]


def verify(path: Path) -> None:
    result = runner.invoke(app, ["verify", str(path)])
    assert result.exit_code == 0, result.stdout
    assert "all properties hold" in result.stdout


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def test_a_tripped_reply_is_repaired_and_rechecked_before_review(tmp_path: Path) -> None:
    """The runner (MADERA here, via the fake client) tries first; review comes after."""
    watch = Watch()
    out = build(watch, tmp_path).invoke(question(WOMAN), thread("repair"))
    request = out["__interrupt__"][0].value
    assert watch.executed == []
    assert request["state"] == "escalated" and request["action"] == "escalate"
    assert "max_retries 2" in request["reason"]
    steps = records(tmp_path / "trace-repair.jsonl")
    tried = [r["intervention"] for r in steps if r.get("intervention")]
    assert [t["strategy"] for t in tried if t["strategy"] != "none"] == ["madera"]
    assert all(t["recheck_score"] is None or t["recheck_score"] >= 0.2 for t in tried)
    # the trail of the latest repair is shown to the reviewer: routed, rewritten, blended
    events = [e["event"] for e in request["trail"]]
    assert events[0] == "route" and "blend" in events
    assert steps[-1]["transition"] == "escalate"
    verify(tmp_path / "trace-repair.jsonl")


def test_human_review_router_hands_the_trip_to_review_without_repair(tmp_path: Path) -> None:
    watch = Watch()
    extra = {"intervention": {"router": "human-review"}}
    out = build(watch, tmp_path, **extra).invoke(question(WOMAN), thread("human"))
    request = out["__interrupt__"][0].value
    assert request["state"] == "escalated" and watch.executed == []
    steps = records(tmp_path / "trace-human.jsonl")
    tried = [r["intervention"] for r in steps if r.get("intervention")]
    assert tried and {t["strategy"] for t in tried} == {"none"}
    assert [e["route"] for e in request["trail"] if e["event"] == "route"] == ["none"]
    assert watch.calls == CALLS_PER_TURN  # no re-check re-issued the call: nothing repaired
    # as in guard(): no retry and no cool-down when nothing can be repaired
    assert [r["transition"] for r in steps] == ["trip", "recover-start", "escalate"]
    assert "no repair was made (1 attempt(s)" in steps[-1]["reason"]
    verify(tmp_path / "trace-human.jsonl")


def test_a_repair_that_passes_its_recheck_is_promoted_and_its_tool_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repaired reply replaces the held one; the held tool call never runs."""
    seen: list[InterventionContext] = []

    async def repair(self: InterventionRunner, context: InterventionContext) -> InterventionResult:
        seen.append(context)
        call = {"name": "approve_loan", "args": {"reason": "Decision: yes"}}
        view = {"messages": [{"type": "ai", "content": "", "tool_calls": [call]}]}
        return InterventionResult(
            repaired=freeze(view), converged=True, strategy="skeptics", recheck_score=0.0
        )

    monkeypatch.setattr(InterventionRunner, "ahook", repair)
    watch = Watch()
    agent = build(watch, tmp_path)
    out = agent.invoke(question(WOMAN), thread("promoted"))
    assert "__interrupt__" not in out
    assert len(seen) == 1 and seen[0].node == "model"
    assert watch.executed == [("approve_loan", "Decision: yes")]
    calls = [c["name"] for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert calls == ["approve_loan"]
    state = agent.get_state(thread("promoted")).values["bb_breaker"]
    assert "deny_loan" not in json.dumps(state)  # the frozen reply stands in as its digest
    # promoted on the step whose intervention made it: the first call takes that one step
    # (the trip), the second (after the tool) starts the recovery
    steps = records(tmp_path / "trace-promoted.jsonl")
    assert [(r["step"], r["transition"], bool(r.get("intervention"))) for r in steps] == [
        (0, "trip", True),
        (1, "recover-start", False),
    ]
    verify(tmp_path / "trace-promoted.jsonl")


@pytest.mark.parametrize(
    "view",
    [
        {"messages": [{"type": "ai", "content": "", "tool_calls": []}]},  # a tool call less
        {"messages": [{"type": "ai", "content": "", "tool_calls": [{"name": "wire", "args": {}}]}]},
        {"answer": "yes"},  # another shape
    ],
)
def test_an_unusable_repair_is_never_promoted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, view: dict[str, Any]
) -> None:
    async def repair(self: InterventionRunner, context: InterventionContext) -> InterventionResult:
        return InterventionResult(
            repaired=freeze(view), converged=True, strategy="skeptics", recheck_score=0.0
        )

    monkeypatch.setattr(InterventionRunner, "ahook", repair)
    watch = Watch()
    out = build(watch, tmp_path).invoke(question(WOMAN), thread("unusable"))
    assert watch.executed == [] and "__interrupt__" in out


def test_resuming_a_review_does_not_call_the_model_again(tmp_path: Path) -> None:
    watch = Watch()
    agent = build(watch, tmp_path)
    config = thread("no-recall")
    request = agent.invoke(question(WOMAN), config)["__interrupt__"][0].value
    calls = watch.calls
    done = agent.invoke(Command(resume={"action": "reject", "sha256": request["sha256"]}), config)
    assert watch.calls == calls  # the held reply was answered, not a new one
    assert done["messages"][-1].content == WITHHELD.format(reason=request["reason"])
    verify(tmp_path / "trace-no-recall.jsonl")


def test_the_first_calls_trace_records_the_held_reply_once(tmp_path: Path) -> None:
    """The held reply's records stay as written before the pause; the next reply is its own."""
    watch = Watch()
    agent = build(watch, tmp_path)
    config = thread("first-trace")
    request = agent.invoke(question(WOMAN), config)["__interrupt__"][0].value
    trace = tmp_path / "trace-first-trace.jsonl"
    before = records(trace)
    assert before and {r["payload_sha256"] for r in before} == {request["sha256"]}
    # the review names the step that held the reply: the trace's last record before the pause
    assert request["step"] == f"{request['node']}@{before[-1]['step']}"
    answer = {"action": "approve", "sha256": request["sha256"]}
    follow = agent.invoke(Command(resume=answer), config)["__interrupt__"][0].value
    after = records(trace)
    assert after[: len(before)] == before  # kept as written: not re-stepped on resume
    later = after[len(before) :]
    assert [r["step"] for r in after] == list(range(len(after)))
    assert later and {r["payload_sha256"] for r in later} == {follow["sha256"]}
    assert follow["sha256"] != request["sha256"]
    assert follow["step"] == f"{follow['node']}@{later[-1]['step']}"
    verify(trace)


def test_an_approved_reply_is_the_held_one_and_its_tool_runs_once(tmp_path: Path) -> None:
    watch = Watch()
    store = InMemoryStore()
    agent = build(watch, tmp_path, store=store)
    config = thread("approve")
    request = agent.invoke(question(WOMAN), config)["__interrupt__"][0].value
    calls = watch.calls
    assert len(store.search(review.HELD_NAMESPACE)) == 1
    out = agent.invoke(Command(resume={"action": "approve", "sha256": request["sha256"]}), config)
    assert watch.executed == [("deny_loan", "Decision: no")]
    # ESCALATED is terminal (as in the graph adapter): the next turn is reviewed too, and
    # only that next turn called the model
    assert watch.calls == calls + CALLS_PER_TURN
    follow = out["__interrupt__"][0].value
    assert follow["reply"]["messages"][0]["content"] == "Done: the application was denied."
    assert next(m for m in out["messages"] if isinstance(m, ToolMessage)).content == "denied"
    verify(tmp_path / "trace-approve.jsonl")


def test_a_review_resumes_in_a_new_agent_from_the_checkpointer_and_the_store(
    tmp_path: Path,
) -> None:
    """A freshly built middleware and agent (no memory of the run) answer the held reply."""
    saver, store = InMemorySaver(), InMemoryStore()
    first = Watch()
    config = thread("fresh")
    out = build(first, tmp_path, saver=saver, store=store).invoke(question(WOMAN), config)
    request = out["__interrupt__"][0].value
    again = Watch()
    agent = build(again, tmp_path, saver=saver, store=store)
    done = agent.invoke(Command(resume={"action": "reject", "sha256": request["sha256"]}), config)
    assert again.calls == 0 and again.executed == [] and first.executed == []
    assert done["messages"][-1].content == WITHHELD.format(reason=request["reason"])
    assert store.search(review.HELD_NAMESPACE) == []  # answered: forgotten
    verify(tmp_path / "trace-fresh.jsonl")


RESUME_IN_A_NEW_PROCESS = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from langchain.agents import create_agent
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.sqlite import SqliteStore
from langgraph.types import Command
from biasbreaker_langchain import BiasGuardMiddleware
from lc_agents import SETTINGS, WOMAN, Watch, loan_tools, model, question

tmp, phase = Path(sys.argv[2]), sys.argv[3]
settings = {**SETTINGS, "plugin": {"langchain-agent": {"trace_path": str(tmp / "t-{thread_id}.jsonl")}}}
watch = Watch()
config = {"configurable": {"thread_id": "proc"}}
with SqliteSaver.from_conn_string(str(tmp / "cp.sqlite")) as saver, \\
        SqliteStore.from_conn_string(str(tmp / "store.sqlite")) as store:
    store.setup()
    agent = create_agent(model(True, watch), tools=loan_tools(watch),
                         middleware=[BiasGuardMiddleware(settings)], checkpointer=saver, store=store)
    if phase == "first":
        out = agent.invoke(question(WOMAN), config)
        value = out["__interrupt__"][0].value
    else:
        value = json.loads(sys.argv[4])
        out = agent.invoke(Command(resume=value), config)
        value = {"last": out["messages"][-1].content}
    print(json.dumps({"calls": watch.calls, "executed": watch.executed, "value": value}))
"""


def test_a_review_resumes_in_another_process_with_a_sqlite_store(tmp_path: Path) -> None:
    pytest.importorskip("langgraph.store.sqlite")
    pytest.importorskip("langgraph.checkpoint.sqlite")
    tests = str(Path(__file__).parent)

    def run(*args: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-c", RESUME_IN_A_NEW_PROCESS, tests, str(tmp_path), *args],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    first = run("first")
    request = first["value"]
    assert first["executed"] == [] and request["kind"] == "biasbreaker-review"
    answer = json.dumps({"action": "reject", "sha256": request["sha256"]})
    second = run("resume", answer)
    assert second["calls"] == 0 and second["executed"] == []
    assert second["value"]["last"] == WITHHELD.format(reason=request["reason"])
    verify(tmp_path / "t-proc.jsonl")


def test_the_middleware_reads_no_langgraph_private_internals() -> None:
    package = Path(review.__file__).parent
    modules = sorted(package.glob("*.py"))
    assert {m.stem for m in modules} >= {"middleware", "call", "probing", "deciding", "review"}
    for module in modules:
        source = module.read_text()
        assert "__pregel" not in source and "scratchpad" not in source, module.name


@pytest.mark.parametrize("guard_first", [True, False])
def test_bias_review_comes_before_tool_approval_whatever_the_order(
    tmp_path: Path, guard_first: bool
) -> None:
    """With HumanInTheLoopMiddleware, the tool reviewer only sees replies the guard passed."""
    from langchain.agents.middleware import HumanInTheLoopMiddleware

    watch = Watch()
    guard = BiasGuardMiddleware(settings(tmp_path))
    hitl = HumanInTheLoopMiddleware(interrupt_on={"approve_loan": True, "deny_loan": True})
    agent = create_agent(
        model(True, watch),
        tools=loan_tools(watch),
        middleware=[guard, hitl] if guard_first else [hitl, guard],
        checkpointer=InMemorySaver(),
    )
    config = thread(f"hitl-{guard_first}")
    first = agent.invoke(question(WOMAN), config)["__interrupt__"][0].value
    assert first["kind"] == "biasbreaker-review" and watch.executed == []
    answer = {"action": "approve", "sha256": first["sha256"]}
    second = agent.invoke(Command(resume=answer), config)["__interrupt__"][0].value
    assert [a["name"] for a in second["action_requests"]] == ["deny_loan"]  # now HITL's turn
    assert watch.executed == []
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert watch.executed == [("deny_loan", "Decision: no")]

    # a rejected reply has no tool call: the tool reviewer is never asked
    other = thread(f"hitl-reject-{guard_first}")
    request = agent.invoke(question(WOMAN), other)["__interrupt__"][0].value
    done = agent.invoke(Command(resume={"action": "reject", "sha256": request["sha256"]}), other)
    assert "__interrupt__" not in done and len(watch.executed) == 1
