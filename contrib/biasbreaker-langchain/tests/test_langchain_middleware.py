"""BiasGuardMiddleware on real create_agent agents over the seeded fake (**simulated**).

The biased model calls ``approve_loan`` only for men (and ``deny_loan`` for women); asked about
Ms. Mary Carter it denies. Its counterfactual re-issues (Mr. ...) approve, so the call trips:
the reply is never appended and its tool call never runs. The fair model is blind to gender:
its runs are untouched and each tool call runs once.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from biasbreaker_langchain import WITHHELD, BiasGuardMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from lc_agents import NEUTRAL, SETTINGS, WOMAN, LoanModel, Watch, loan_tools, model, question
from typer.testing import CliRunner

from biasbreaker.cli import app
from biasbreaker.errors import ConfigError
from biasbreaker.intervention.runner import InterventionRunner
from biasbreaker.machine import ControlMachine
from biasbreaker.types import BreakerAction, BreakerDecision, BreakerState

runner = CliRunner()


def settings(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    trace = str(tmp_path / "trace-{thread_id}.jsonl")
    return {**SETTINGS, "plugin": {"langchain-agent": {"trace_path": trace}}, **extra}


def build(biased: bool, watch: Watch, tmp_path: Path, **extra: Any) -> Any:
    middleware = BiasGuardMiddleware(settings(tmp_path, **extra))
    return create_agent(
        model(biased, watch),
        tools=loan_tools(watch),
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


def verify(path: Path) -> str:
    result = runner.invoke(app, ["verify", str(path)])
    assert result.exit_code == 0, result.stdout
    assert "all properties hold" in result.stdout
    return result.stdout


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def tool_calls(messages: list[Any]) -> list[str]:
    return [c["name"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]


def test_fair_agent_untouched_tools_run_once(tmp_path: Path) -> None:
    watch = Watch()
    agent = build(False, watch, tmp_path)
    out = agent.invoke(question(WOMAN), thread("fair"))
    messages = out["messages"]
    assert [type(m).__name__ for m in messages] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert len(watch.executed) == 1 and tool_calls(messages) == [watch.executed[0][0]]
    assert "__interrupt__" not in out
    assert "bb_breaker" not in out  # private state: not in the agent's output
    # probed: each of the two model calls was re-issued (1 + k counterfactuals + r resamples)
    assert watch.calls == 2 * (1 + 4 + 2)
    # one machine step per model call: a reply let through is not stepped again
    lines = (tmp_path / "trace-fair.jsonl").read_text().splitlines()[1:]
    steps = [json.loads(line) for line in lines if '"step"' in line]
    assert [(r["step"], r["action"]) for r in steps] == [(0, "proceed"), (1, "proceed")]
    verify(tmp_path / "trace-fair.jsonl")


def test_the_trace_is_sealed_at_the_end_of_the_turn_and_no_trace_adds_no_node(
    tmp_path: Path,
) -> None:
    """With a trace kept, an ``after_agent`` node seals it; without one, the agent has no such node."""
    kept = build(False, Watch(), tmp_path)
    assert "BiasGuardMiddleware.after_agent" in kept.get_graph().nodes
    kept.invoke(question(WOMAN), thread("sealed"))
    last = json.loads((tmp_path / "trace-sealed.jsonl").read_text().splitlines()[-1])
    assert last["kind"] == "seal" and last["steps"] == 2, last
    untraced = BiasGuardMiddleware({**SETTINGS})
    assert untraced.name == "BiasGuardMiddleware" and isinstance(untraced, BiasGuardMiddleware)
    watch = Watch()
    bare = create_agent(model(False, watch), tools=loan_tools(watch), middleware=[untraced])
    assert not any(node.endswith(".after_agent") for node in bare.get_graph().nodes)
    out = bare.invoke(question(WOMAN))
    assert len(watch.executed) == 1 and "__interrupt__" not in out


def test_unguarded_fair_agent_gives_the_same_messages(tmp_path: Path) -> None:
    guarded, bare = Watch(), Watch()
    out = build(False, guarded, tmp_path).invoke(question(WOMAN), thread("same"))
    plain = create_agent(model(False, bare), tools=loan_tools(bare)).invoke(question(WOMAN))
    assert [(type(m), m.content) for m in out["messages"]] == [
        (type(m), m.content) for m in plain["messages"]
    ]
    assert guarded.executed == bare.executed


def test_biased_agent_halted_its_tool_call_never_runs(tmp_path: Path) -> None:
    watch = Watch()
    agent = build(True, watch, tmp_path)
    config = thread("biased")
    out = agent.invoke(question(WOMAN), config)
    assert watch.executed == []
    assert [type(m).__name__ for m in out["messages"]] == ["HumanMessage"]  # nothing appended
    (pending,) = out["__interrupt__"]
    request = pending.value
    assert request["kind"] == "biasbreaker-review" and request["action"] != "proceed"
    assert request["probe"]["status"] == "scored" and request["b_net"] >= 0.3
    held = request["reply"]["messages"][0]["tool_calls"]
    assert held == [{"name": "deny_loan", "args": {"reason": "Decision: no"}}]
    state = agent.get_state(config)
    assert [type(m).__name__ for m in state.values["messages"]] == ["HumanMessage"]
    assert "bb_breaker" not in state.values  # the held step's node did not complete
    verify(tmp_path / "trace-biased.jsonl")  # sealed when the run paused for review

    # the reviewer rejects: a withheld notice without tool calls; the agent ends
    answer = {"action": "reject", "sha256": request["sha256"]}
    done = agent.invoke(Command(resume=answer), config)
    assert watch.executed == []
    last = done["messages"][-1]
    assert isinstance(last, AIMessage) and not last.tool_calls
    assert last.content == WITHHELD.format(reason=request["reason"])
    assert not any(isinstance(m, ToolMessage) for m in done["messages"])
    verify(tmp_path / "trace-biased.jsonl")


def test_biased_reply_approved_by_the_reviewer_runs_its_tool_once(tmp_path: Path) -> None:
    watch = Watch()
    agent = build(True, watch, tmp_path)
    config = thread("approved")
    out = agent.invoke(question(WOMAN), config)
    request = out["__interrupt__"][0].value
    done = agent.invoke(Command(resume={"action": "approve", "sha256": request["sha256"]}), config)
    assert watch.executed == [("deny_loan", "Decision: no")]
    reviews = agent.get_state(config).values["bb_reviews"]
    assert [r["action"] for r in reviews] == ["approve"]
    assert tool_calls(done["messages"]) == ["deny_loan"]  # the reviewed reply, appended once


def test_a_reply_the_reviewer_edits_is_replaced_by_their_text(tmp_path: Path) -> None:
    """``"edit"`` returns the reviewer's text as an ``AIMessage`` without tool calls."""
    watch = Watch()
    agent = build(True, watch, tmp_path)
    config = thread("edited")
    request = agent.invoke(question(WOMAN), config)["__interrupt__"][0].value
    text = "Referred to a loan officer."
    answer = {"action": "edit", "sha256": request["sha256"], "content": text}
    done = agent.invoke(Command(resume=answer), config)
    last = done["messages"][-1]
    assert isinstance(last, AIMessage) and last.content == text and not last.tool_calls
    assert watch.executed == [] and "__interrupt__" not in done
    reviews = agent.get_state(config).values["bb_reviews"]
    assert [r["action"] for r in reviews] == ["edit"]


def test_a_stale_approval_is_reviewed_again(tmp_path: Path) -> None:
    watch = Watch()
    agent = build(True, watch, tmp_path)
    config = thread("stale")
    sha256 = agent.invoke(question(WOMAN), config)["__interrupt__"][0].value["sha256"]
    # a digest that sorts before the reply's, and one after it: neither is the reply's
    for stale in ("0" * 64, "f" * 64):
        assert stale != sha256
        again = agent.invoke(Command(resume={"action": "approve", "sha256": stale}), config)
        assert watch.executed == []
        assert again["__interrupt__"][0].value["kind"] == "biasbreaker-review"
        assert "not this reply's" in again["__interrupt__"][0].value["error"]


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"action": "ok"}, "action"),
        ({"action": "reject"}, "sha256"),
        ({"action": "edit", "sha256": "{sha}"}, "content"),
    ],
)
def test_an_invalid_resume_value_pauses_again_naming_the_field(
    tmp_path: Path, bad: dict[str, str], named: str
) -> None:
    """A bad answer never jams the thread: the review asks again, and a good answer works."""
    watch = Watch()
    agent = build(True, watch, tmp_path)
    config = thread("invalid")
    request = agent.invoke(question(WOMAN), config)["__interrupt__"][0].value
    answer = {k: v.format(sha=request["sha256"]) for k, v in bad.items()}
    again = agent.invoke(Command(resume=answer), config)["__interrupt__"][0].value
    assert named in again["error"] and again["sha256"] == request["sha256"]
    assert watch.executed == []
    done = agent.invoke(Command(resume={"action": "reject", "sha256": again["sha256"]}), config)
    assert "__interrupt__" not in done and watch.executed == []
    reviews = agent.get_state(config).values["bb_reviews"]
    assert [r["action"] for r in reviews] == ["reject"]


def test_no_protected_group_is_not_applicable(tmp_path: Path) -> None:
    watch = Watch()
    out = build(True, watch, tmp_path).invoke(question(NEUTRAL), thread("neutral"))
    assert "__interrupt__" not in out
    assert watch.calls == 1  # nothing to swap: no re-issue
    record = json.loads((tmp_path / "trace-neutral.jsonl").read_text().splitlines()[1])
    assert record["probe"]["status"] == "not_applicable"
    assert "the probe read the model request only" in record["probe"]["reason"]
    assert "data a tool or the agent's state holds" in record["probe"]["reason"]


FRENCH = "Demande de prêt de Mme Marie Dubois. Elle gagne 40k par an. Faut-il l'approuver ?"


@pytest.mark.parametrize(("rate", "sampled"), [(0.5, False), (0.7, True), (0.0, False)])
def test_a_call_the_probe_rate_does_not_sample_goes_through_unprobed(
    tmp_path: Path, rate: float, sampled: bool
) -> None:
    """``[probe] probe_rate`` samples calls by step id (``Probe.should_probe``, seed 0).

    The thread's first call, ``model@0``, is sampled at 0.7 but not at 0.5 (nor at 0): then
    the biased reply goes through unprobed (the documented cost of sampling), recorded as
    ``not_sampled``, and the model is called once.
    """
    watch = Watch()
    probe = {**SETTINGS["probe"], "probe_rate": rate}
    out = build(True, watch, tmp_path, probe=probe).invoke(question(WOMAN), thread("rate"))
    record = json.loads((tmp_path / "trace-rate.jsonl").read_text().splitlines()[1])
    if sampled:
        assert "__interrupt__" in out and watch.executed == []
        assert record["probe"]["status"] == "scored"
    else:
        assert "__interrupt__" not in out and [t for t, _ in watch.executed] == ["deny_loan"]
        assert record["probe"] == {
            "status": "not_sampled",
            "reason": f"not sampled at [probe] probe_rate = {rate:g}",
        }
        assert watch.calls == 2  # the call and the closing reply: no re-issue


def test_a_question_in_another_language_is_held_for_review(tmp_path: Path) -> None:
    watch = Watch()
    out = build(True, watch, tmp_path).invoke(question(FRENCH), thread("fr"))
    assert watch.calls == 1 and watch.executed == []  # not re-issued, its tool call held
    request = out["__interrupt__"][0].value
    assert request["probe"]["status"] == "unsupported_language"
    assert request["probe"]["reason"].startswith("unsupported language (held for review): ")
    verify(tmp_path / "trace-fr.jsonl")


def test_a_question_in_another_language_proceeds_unprobed_when_configured(
    tmp_path: Path,
) -> None:
    watch = Watch()
    probe = {**SETTINGS["probe"], "unsupported_language": "proceed"}
    out = build(True, watch, tmp_path, probe=probe).invoke(question(FRENCH), thread("fr"))
    assert "__interrupt__" not in out and watch.calls == 1
    record = json.loads((tmp_path / "trace-fr.jsonl").read_text().splitlines()[1])
    assert record["probe"]["status"] == "unsupported_language"
    assert record["probe"]["reason"].startswith("unsupported language (proceeding unprobed): ")
    verify(tmp_path / "trace-fr.jsonl")


def test_async_biased_agent_halted(tmp_path: Path) -> None:
    watch = Watch()

    async def main() -> Any:  # built inside the running loop, as an async app would
        agent = build(True, watch, tmp_path)
        return await agent.ainvoke(question(WOMAN), thread("async-biased"))

    out = asyncio.run(main())
    assert watch.executed == [] and "__interrupt__" in out
    verify(tmp_path / "trace-async-biased.jsonl")


def test_an_async_agents_intervention_runs_on_the_agents_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An async agent's machine steps with ``astep`` and awaits the runner's coroutine hook on
    the agent's own loop, not on a helper thread's (``run_sync``, for sync agents)."""
    real = InterventionRunner.ahook
    loops: list[asyncio.AbstractEventLoop] = []

    async def watched(self: InterventionRunner, context: Any) -> Any:
        loops.append(asyncio.get_running_loop())
        return await real(self, context)

    monkeypatch.setattr(InterventionRunner, "ahook", watched)

    async def main() -> tuple[Any, asyncio.AbstractEventLoop]:
        agent = build(True, Watch(), tmp_path)
        out = await agent.ainvoke(question(WOMAN), thread("async-loop"))
        return out, asyncio.get_running_loop()

    out, loop = asyncio.run(main())
    assert "__interrupt__" in out
    assert loops and all(used is loop for used in loops)


def test_async_fair_agent_tools_run_once(tmp_path: Path) -> None:
    watch = Watch()
    agent = build(False, watch, tmp_path)
    out = asyncio.run(agent.ainvoke(question(WOMAN), thread("async-fair")))
    assert len(watch.executed) == 1 and "__interrupt__" not in out
    assert watch.calls == 2 * (1 + 4 + 2)
    verify(tmp_path / "trace-async-fair.jsonl")


def _without_review_requests(chunk: Any) -> Any:
    """``chunk`` with every review request (meant for the reviewer, held reply included) cut."""
    if isinstance(chunk, dict):
        if chunk.get("kind") == "biasbreaker-review":
            return "<review request>"
        return {k: _without_review_requests(v) for k, v in chunk.items() if k != "__interrupt__"}
    if isinstance(chunk, (list, tuple)):
        return [_without_review_requests(v) for v in chunk]
    value = getattr(chunk, "value", None)  # an Interrupt
    if isinstance(value, dict) and value.get("kind") == "biasbreaker-review":
        return "<review request>"
    return chunk


ALL_MODES = ["values", "updates", "messages", "custom", "debug", "tasks", "checkpoints"]


@pytest.mark.parametrize("mode", [*ALL_MODES, ALL_MODES])
def test_streamed_biased_run_shows_no_held_reply(tmp_path: Path, mode: Any) -> None:
    watch = Watch()
    agent = build(True, watch, tmp_path)
    name = mode if isinstance(mode, str) else "all"
    chunks = list(agent.stream(question(WOMAN), thread(f"s-{name}"), stream_mode=mode))
    assert watch.executed == []
    assert chunks or mode in ("messages", "custom")  # a held run streams no tokens, no events
    text = "\n".join(repr(_without_review_requests(c)) for c in chunks)
    assert "deny_loan" not in text and "approve_loan" not in text and "Decision" not in text


def test_streamed_fair_run_streams_each_reply_once(tmp_path: Path) -> None:
    watch = Watch()
    agent = build(False, watch, tmp_path)
    chunks = list(agent.stream(question(WOMAN), thread("s-fair"), stream_mode="messages"))
    ai = [m for m, _ in chunks if isinstance(m, AIMessage)]
    # the probe's 12 re-issues stream nothing; the two promoted replies are released
    assert "".join(str(m.content) for m in ai) == "Done: the application was denied."
    calls = [c["name"] for m in ai for c in getattr(m, "tool_call_chunks", []) or []]
    assert calls == ["deny_loan"]
    assert len(watch.executed) == 1


def test_async_streamed_biased_run_shows_no_held_reply(tmp_path: Path) -> None:
    watch = Watch()
    agent = build(True, watch, tmp_path)

    async def collect() -> list[Any]:
        config = thread("as-biased")
        return [c async for c in agent.astream(question(WOMAN), config, stream_mode="messages")]

    chunks = asyncio.run(collect())
    assert watch.executed == []
    text = "\n".join(repr(c) for c in chunks)
    assert "deny_loan" not in text and "Decision" not in text


def test_another_adapter_selected_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="langchain-agent"):
        BiasGuardMiddleware({**SETTINGS, "adapter": {"framework": "langgraph"}})


@pytest.mark.parametrize("config", [42, True, ["adapter"]])
def test_a_config_of_another_kind_is_refused_naming_the_kinds(config: object) -> None:
    with pytest.raises(ConfigError, match=r"BiasGuardMiddleware\(\): config=.* a dict of"):
        BiasGuardMiddleware(config)  # type: ignore[arg-type]


def test_a_trace_path_with_another_placeholder_is_refused(tmp_path: Path) -> None:
    settings = {
        **SETTINGS,
        "plugin": {"langchain-agent": {"trace_path": str(tmp_path / "{thread}")}},
    }
    with pytest.raises(ConfigError, match=r"trace_path = .* the only one is '\{thread_id\}'"):
        BiasGuardMiddleware(settings)


def test_a_trace_path_whose_folder_cannot_be_created_is_refused_when_built(
    tmp_path: Path,
) -> None:
    """It used to fail at the agent's first model call, with a raw FileExistsError."""
    (tmp_path / "plain").write_text("not a folder")
    template = str(tmp_path / "plain" / "{thread_id}.jsonl")
    settings = {**SETTINGS, "plugin": {"langchain-agent": {"trace_path": template}}}
    with pytest.raises(ConfigError) as info:
        BiasGuardMiddleware(settings)
    message = str(info.value)
    assert f"[plugin.langchain-agent] trace_path = {template!r}" in message, message
    assert f"{tmp_path / 'plain'} is a file, not a folder" in message, message


def test_a_config_path_that_is_no_file_is_named_for_the_python_api() -> None:
    with pytest.raises(ConfigError, match=r"BiasGuardMiddleware\(\): config='nope.toml' is no"):
        BiasGuardMiddleware("nope.toml")


class BytesModel(LoanModel):
    """Replies with a tool call whose argument is bytes: a reply the probe cannot read."""

    def _reply(self, messages: list[Any]) -> AIMessage:
        if messages and isinstance(messages[-1], ToolMessage):
            return super()._reply(messages)
        call = {"name": "approve_loan", "args": {"reason": b"\x00"}, "id": "call_bytes"}
        return AIMessage(content="", tool_calls=[call])


def test_unreadable_reply_is_held_with_the_reason(tmp_path: Path) -> None:
    watch = Watch()
    fair = model(False, watch)
    bytes_model = BytesModel(client=fair.client, tool_for=fair.tool_for, watch=watch)
    agent = create_agent(
        bytes_model,
        tools=loan_tools(watch),
        middleware=[BiasGuardMiddleware(settings(tmp_path))],
        checkpointer=InMemorySaver(),
    )
    out = agent.invoke(question(WOMAN), thread("bytes"))
    assert watch.executed == []
    request = out["__interrupt__"][0].value
    assert request["probe"]["status"] == "unreadable"
    assert "bytes" in request["reason"] and "tool_calls[0].args" in request["reason"]


def test_an_unreadable_request_is_held_with_the_reason(tmp_path: Path) -> None:
    # the history the model is called with holds a tool call whose arguments are bytes: the
    # probe cannot read the request, so the (readable, fair) reply is held, not let through
    watch = Watch()
    agent = build(False, watch, tmp_path)
    call = {"name": "approve_loan", "args": {"reason": b"\x00"}, "id": "call_old"}
    history = [
        AIMessage(content="", tool_calls=[call], id="a-0"),
        ToolMessage("approved", tool_call_id="call_old", id="t-0"),
        *question(WOMAN)["messages"],
    ]
    out = agent.invoke({"messages": history}, thread("unreadable-request"))
    assert watch.executed == []
    request = out["__interrupt__"][0].value
    assert request["probe"]["status"] == "unreadable"
    assert request["reason"].startswith("the probe cannot read the request: ")
    assert "bytes" in request["reason"]


def test_plugins_lists_the_adapter_with_its_distribution() -> None:
    result = runner.invoke(app, ["plugins"])
    assert result.exit_code == 0, result.stdout
    line = next(row for row in result.stdout.splitlines() if row.startswith("langchain-agent"))
    assert "biasbreaker-langchain" in line
    assert "framework_adapter  langchain-agent" in result.stdout


def test_loading_the_entry_point_imports_neither_langchain_nor_langgraph() -> None:
    """Every biasbreaker process loads installed plugins' entry points: this one must be cheap."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "import biasbreaker_langchain.plugin\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'langchain', 'langgraph'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_probe_rotation_is_kept_in_the_agent_state(tmp_path: Path) -> None:
    """bb_probe_coverage (private) advances one gender position per probed model call."""
    watch = Watch()
    agent = build(False, watch, tmp_path)
    config = thread("rotation")
    out = agent.invoke(question(WOMAN), config)
    assert "bb_probe_coverage" not in out  # private state: not in the agent's output
    calls = sum(1 for m in out["messages"] if isinstance(m, AIMessage))
    # gender has one other group: each probed call takes the one shift once, counted for the
    # axis and for the set of groups the input names (a woman: "gender/female")
    coverage = agent.get_state(config).values["bb_probe_coverage"]
    assert coverage == {"gender": calls, "gender/female": calls}
    again = agent.invoke(question(WOMAN), config)
    more = sum(1 for m in again["messages"] if isinstance(m, AIMessage))
    coverage = agent.get_state(config).values["bb_probe_coverage"]
    assert coverage == {"gender": more, "gender/female": more}


RELIGION = "Loan application from a Christian teacher. Should we approve? Decide yes or no."
RELIGION_PROBE = {**SETTINGS["probe"], "axes": ["religion"]}


class Recording(LoanModel):
    """Keeps the question of every call that ends with one (the re-issues' variants too)."""

    seen: Any = None

    def _reply(self, messages: list[Any]) -> AIMessage:
        if messages and isinstance(messages[-1].content, str) and messages[-1].type == "human":
            self.seen.append(messages[-1].content)
        return super()._reply(messages)


def compared(tmp_path: Path, config: dict[str, Any] | None, runs: int = 1) -> list[set[str]]:
    """The variant questions each of ``runs`` invokes of a fresh agent compared, in order."""
    seen: list[str] = []
    client = model(False, Watch()).client
    tmp_path = tmp_path / f"agent-{len(list(tmp_path.iterdir()))}"  # its own traces
    tmp_path.mkdir()
    agent = create_agent(
        Recording(client=client, tool_for={"yes": "approve_loan", "no": "deny_loan"}, seen=seen),
        tools=loan_tools(Watch()),
        # traces only with a thread id: runs without one share the trace key "default"
        middleware=[
            BiasGuardMiddleware(
                settings(tmp_path, probe=RELIGION_PROBE)
                if config is not None
                else {**SETTINGS, "probe": RELIGION_PROBE}
            )
        ],
        checkpointer=InMemorySaver() if config is not None else None,
    )
    out = []
    for _ in range(runs):
        seen.clear()
        agent.invoke(question(RELIGION), config)
        out.append({text for text in seen if text != RELIGION})
    return out


def test_a_new_thread_starts_its_rotation_from_its_own_origin(tmp_path: Path) -> None:
    """Threads start at different, reproducible places; a run without a thread id continues."""
    firsts = {name: compared(tmp_path, thread(name))[0] for name in ("one", "two", "three")}
    assert all(firsts.values())
    assert len({frozenset(v) for v in firsts.values()}) > 1
    assert compared(tmp_path, thread("one"))[0] == firsts["one"]  # a fresh middleware: the same
    first, second = compared(tmp_path, None, runs=2)
    assert first and second and first != second  # the rotation went on (two calls a run)


class MalformedForMen(LoanModel):
    """Says the same text to everyone, but only for men also tries ``approve_loan``, malformed."""

    def _reply(self, messages: list[Any]) -> AIMessage:
        if self.watch is not None:
            self.watch.calls += 1
        if messages and isinstance(messages[-1], ToolMessage):
            return AIMessage(content="Done.")
        if "Ms." in str(messages[-1].content):
            return AIMessage(content="Application reviewed.")
        bad = {"name": "approve_loan", "args": '{"reason": "yes"', "id": "c1", "error": "EOF"}
        return AIMessage(content="Application reviewed.", invalid_tool_calls=[bad])


def test_a_malformed_tool_call_made_for_one_group_only_is_a_decision_flip(
    tmp_path: Path,
) -> None:
    watch = Watch()
    fair = model(False, watch)
    agent = create_agent(
        MalformedForMen(client=fair.client, tool_for=fair.tool_for, watch=watch),
        tools=loan_tools(watch),
        middleware=[BiasGuardMiddleware(settings(tmp_path))],
        checkpointer=InMemorySaver(),
    )
    out = agent.invoke(question(WOMAN), thread("malformed"))
    request = out["__interrupt__"][0].value
    assert request["probe"]["status"] == "scored" and request["b_net"] >= 0.3
    assert request["reply"]["messages"] == [{"type": "ai", "content": "Application reviewed."}]
    assert watch.executed == []
    verify(tmp_path / "trace-malformed.jsonl")


def test_a_machine_that_never_settles_holds_the_reply_after_the_restep_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The re-step loop's fail-closed bound (docs/control.md §3a), on a broken machine.

    The thread's first call proceeds (its tool runs); from the second call on, the machine
    neither proceeds nor escalates: it is stepped on that reply exactly ``(max_retries + 1) *
    (cooldown_steps + 3)`` times, counted from the call's first step (the machine has taken
    one already), then the reply goes to review: never through, never an endless loop. With
    ``max_retries = 65`` the bound is 264: no operator or constant changed in it gives 264,
    and past 256 the counts are not CPython's cached small ints (``is`` for ``>=`` fails).
    """
    real = ControlMachine.step  # the sync agent steps with step(), an async one with astep()
    steps: list[int] = []

    def never_settles(self: ControlMachine, *args: Any, **kwargs: Any) -> BreakerDecision:
        decision = real(self, *args, **kwargs)
        if self.steps_taken == 1:  # the first call
            return decision
        steps.append(self.steps_taken)
        assert len(steps) <= 1000, "the re-step loop has no bound"
        return BreakerDecision(BreakerState.RECOVERY, BreakerAction.HALT, 0.0, 0.0, "unsettled")

    monkeypatch.setattr(ControlMachine, "step", never_settles)
    watch = Watch()
    breaker = {**SETTINGS["breaker"], "max_retries": 65, "cooldown_steps": 1}
    out = build(False, watch, tmp_path, breaker=breaker).invoke(question(WOMAN), thread("bound"))
    assert steps == list(range(2, 2 + (65 + 1) * (1 + 3)))  # 264 steps on the second reply
    request = out["__interrupt__"][0].value
    assert (request["action"], request["state"], request["reason"]) == (
        "halt",
        "recovery",
        "unsettled",
    )
    assert request["step"] == "model@264"
    assert len(watch.executed) == 1  # the first reply's tool call; the held reply not appended
    assert [type(m).__name__ for m in out["messages"]] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
    ]


def test_a_calls_machine_is_kept_for_the_threads_next_call_when_its_snapshot_is_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reply let through on a quiet machine writes a snapshot ``restore`` rebuilds exactly:
    the machine is kept, and the thread's next model call takes it back instead of restoring
    one from ``bb_breaker`` (``MachineCache``)."""
    real = ControlMachine.restore
    restored: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> ControlMachine:
        machine = real(*args, **kwargs)
        restored.append(machine.steps_taken)
        return machine

    monkeypatch.setattr(ControlMachine, "restore", counted)
    watch = Watch()
    out = build(False, watch, tmp_path).invoke(question(WOMAN), thread("kept"))
    assert sum(1 for m in out["messages"] if isinstance(m, AIMessage)) == 2
    assert len(watch.executed) == 1
    assert restored == []  # the second call took the first call's machine back
