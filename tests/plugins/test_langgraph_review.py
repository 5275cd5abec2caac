"""Human review on real LangGraph graphs: bad resume values, and outputs that are not JSON.

A resume value that is not a valid decision, of any kind, pauses the review again with an
``error`` field; it never raises from the review node, which LangGraph would replay on every
later resume of the thread. An output that cannot be frozen (NaN, infinity, a set) goes to
review with the reason, never a score and never an exception out of ``invoke``; a reviewer's
edit that is not JSON never reaches the next node. Sync and async runs alike.
"""

from __future__ import annotations

import asyncio
import json
import math
import operator
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import pytest
from typing_extensions import TypedDict

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt
from pydantic import ValidationError

from biasbreaker.errors import ConfigError
from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.types import FrozenPayload
from biasbreaker_plugins.langgraph import (
    BB_KEYS,
    BiasState,
    ReviewDecision,
    guard,
    guard_node,
    guard_state,
)
from biasbreaker_plugins.langgraph.state import annotation_problem

SETTINGS: dict[str, Any] = {
    "seed": 1,
    "llm": {"client": "fake"},  # the skeptics and MADERA: seeded, simulated
    "probe": {"scorers": ["decision"], "axes": ["gender"], "k": 2, "r": 1, "bootstrap": 0},
}
NAN, INF = float("nan"), float("inf")


@pytest.fixture
def kernel(tmp_path: Path) -> Kernel:
    return Kernel.load(cwd=tmp_path, overrides=SETTINGS)


class Case(BiasState, total=False):
    candidate: str
    decision: str
    score: float
    notes: Annotated[list[str], operator.add]
    letter: str


def hires_men(state: Case) -> dict[str, Any]:
    """Biased: yes for a man's name, no otherwise (the probe's gender swap flips it)."""
    return {"decision": "yes" if state["candidate"].startswith("John") else "no"}


@dataclass
class Mailroom:
    """The unguarded letter node downstream: records every state it receives."""

    seen: list[dict[str, Any]]

    def node(self, asynchronous: bool) -> Any:
        def letter(state: Case) -> dict[str, Any]:
            self.seen.append({k: state.get(k) for k in ("decision", "score")})
            return {"letter": f"outcome {state.get('decision')} {state.get('score')}"}

        if not asynchronous:
            return letter

        async def aletter(state: Case) -> dict[str, Any]:
            return letter(state)

        return aletter


def asynced(fn: Any) -> Any:
    """An async node doing what ``fn`` does, marked ``@guard_node(probe=False)`` like it."""
    plain = getattr(fn, "__wrapped__", fn)

    async def node(state: Case) -> dict[str, Any]:
        await asyncio.sleep(0)
        result: dict[str, Any] = plain(state)
        return result

    node.__name__ = fn.__name__
    return guard_node(probe=False)(node) if hasattr(fn, "__biasbreaker_node__") else node


def pipeline(
    kernel: Kernel, first: Any, mail: Mailroom, *, asynchronous: bool = False, hook: Any = None
) -> Any:
    """``first -> letter``: only ``first`` is guarded (the letter runs once it is let through)."""
    node = asynced(first) if asynchronous and not asyncio.iscoroutinefunction(first) else first
    builder = StateGraph(Case)
    builder.add_node("first", node)
    builder.add_node("letter", mail.node(asynchronous))
    builder.add_edge(START, "first")
    builder.add_edge("first", "letter")
    builder.add_edge("letter", END)
    app = guard(builder, kernel, nodes=["first"], hook=hook)
    return app.compile(checkpointer=InMemorySaver())


def run(app: Any, value: Any, name: str, asynchronous: bool) -> dict[str, Any]:
    config = {"configurable": {"thread_id": name}}
    if asynchronous:
        out: dict[str, Any] = asyncio.run(app.ainvoke(value, config, durability="sync"))
    else:
        out = app.invoke(value, config, durability="sync")
    return {**out, **guard_state(app, config)}  # the application's keys and the guard's


def review(out: dict[str, Any]) -> dict[str, Any]:
    value: dict[str, Any] = out["__interrupt__"][0].value
    return value


def strict_json(values: dict[str, Any]) -> None:
    """The biasbreaker keys are plain JSON, without NaN or infinity."""
    bb = {k: values[k] for k in BB_KEYS if k in values}
    assert json.loads(json.dumps(bb, allow_nan=False)) == bb


# ------------------------------------------------------------------ bad resume values

BAD_RESUMES = [
    ({"action": "edit", "update": {"bb_reviews": []}}, "may not write the biasbreaker keys"),
    ({"action": "edit", "update": {"decision": "no", "bb_breaker": {}}}, r"\['bb_breaker'\]"),
    ({"action": "edit", "update": {"score": NAN}}, r"update\['score'\] is nan: JSON has no NaN"),
    ({"action": "edit", "update": {"score": -INF}}, r"update\['score'\] is -inf"),
    ({"action": "edit", "update": {"decision": {"yes"}}}, r"update\['decision'\] has type set"),
    ({"action": "edit", "update": {"nope": "x"}}, r"writes \['nope'\], which are not keys"),
    ({"action": "edit", "update": {"notes": 5}}, "reducer refuses the edit's update .*TypeError"),
    ({"action": "publish"}, "action: Input should be 'approve', 'edit' or 'reject'"),
    ({"action": "edit"}, "'edit' needs 'update'"),
    ({"action": "edit", "update": {}}, r"empty 'update' would release nothing.* use 'reject'"),
    ({"action": "approve", "update": {"decision": "no"}}, "'approve' takes no 'update'"),
    ({"action": "approve", "colour": "red"}, "colour: Extra inputs are not permitted"),
    ("approve", "Input should be a valid dictionary"),
    ([{"action": "approve"}], "Input should be a valid dictionary"),
    (
        {"action": "edit", "update": {"decision": 5}},
        r"writes 5 \(int\) to 'decision', which the state declares as str; give a value",
    ),
    ({"action": "edit", "update": {"score": True}}, r"True \(bool\) to 'score'.* as float"),
    ({"action": "edit", "update": {"score": "0.5"}}, r"'0.5' \(str\) to 'score'"),
    ({"action": "approve"}, r"approve is missing 'sha256'.* resume with \{'action': 'approve'"),
    ({"action": "approve", "sha256": "0" * 64}, r"sha256 0{64} is not this request's"),
    ({"action": "reject", "sha256": "0" * 64}, r"is not this request's"),
    ({"action": "approve", "sha256": "ABC"}, r"sha256: String should match pattern"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_RESUMES)
def test_a_bad_resume_value_pauses_again_and_a_valid_one_continues(
    kernel: Kernel, bad: Any, message: str
) -> None:
    mail = Mailroom([])
    app = pipeline(kernel, hires_men, mail, hook=noop_hook)
    out = run(app, {"candidate": "John Smith", "notes": []}, "bad", False)
    first = review(out)
    assert first["node"] == "first" and first["error"] is None

    out = run(app, Command(resume=bad), "bad", False)  # never raises
    again = review(out)
    assert again["key"] == first["key"] and again["held"] == {"decision": "yes"}
    assert again["error"] is not None
    assert __import__("re").search(message, again["error"]), again["error"]
    assert mail.seen == [] and "decision" not in out
    strict_json(out)

    # the thread is not jammed: a valid decision continues the run
    out = run(app, Command(resume={"action": "edit", "update": {"decision": "no"}}), "bad", False)
    assert "__interrupt__" not in out and out["letter"] == "outcome no None"
    assert mail.seen == [{"decision": "no", "score": None}]
    assert [r["action"] for r in out["bb_reviews"]] == ["edit"]


def test_approving_names_the_output_approved(kernel: Kernel) -> None:
    """An approve without the request's sha256 was accepted (the LangChain middleware always
    required it): it could approve an output the reviewer never saw."""
    mail = Mailroom([])
    app = pipeline(kernel, hires_men, mail, hook=noop_hook)
    request = review(run(app, {"candidate": "John Smith"}, "sha", False))
    assert request["sha256"] == FrozenPayload.of(request["held"]).sha256
    assert request["sha256"] == request["frozen"]["sha256"]  # the trace's payload_sha256
    # in Python the decision is built without the request; the review node checks it
    decision = ReviewDecision(action="approve", reviewer="qa")
    error = review(run(app, Command(resume=decision.model_dump()), "sha", False))["error"]
    assert error == (
        "approve is missing 'sha256': name the output you approve with this request's "
        f"sha256; resume with {{'action': 'approve', 'sha256': '{request['sha256']}'}}"
    )
    assert mail.seen == []
    approve = decision.model_copy(update={"sha256": request["sha256"]})
    out = run(app, Command(resume=approve.model_dump()), "sha", False)
    assert "__interrupt__" not in out and mail.seen == [{"decision": "yes", "score": None}]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_bad_values_in_a_row_each_ask_again_then_reject_ends_the_run(
    kernel: Kernel, asynchronous: bool
) -> None:
    mail = Mailroom([])
    app = pipeline(kernel, hires_men, mail, asynchronous=asynchronous, hook=noop_hook)
    run(app, {"candidate": "John Smith"}, "row", asynchronous)
    errors = []
    for bad, _ in BAD_RESUMES[:4]:
        errors.append(review(run(app, Command(resume=bad), "row", asynchronous))["error"])
    assert all(errors) and len(set(errors)) == 4
    out = run(app, Command(resume={"action": "reject"}), "row", asynchronous)
    assert "__interrupt__" not in out and mail.seen == [] and "decision" not in out
    assert out["bb_frozen"]["first@1"]["status"] == "rejected"


def test_resume_none_and_an_empty_dict_never_reach_the_review_node(kernel: Kernel) -> None:
    """What docs/langgraph.md §5 says LangGraph does with them: nothing written, not jammed."""
    mail = Mailroom([])
    app = pipeline(kernel, hires_men, mail, hook=noop_hook)
    run(app, {"candidate": "John Smith"}, "empty", False)
    config = {"configurable": {"thread_id": "empty"}}
    bad = review(run(app, Command(resume={"action": "publish"}), "empty", False))
    assert bad["error"] is not None
    before = app.get_state(config).values

    # None: LangGraph's own loop fails before any node runs
    with pytest.raises(UnboundLocalError, match="resume_is_map"):
        app.invoke(Command(resume=None), config, durability="sync")
    # {}: an empty map of interrupt ids answers nothing; the same request, stale error included
    again = review(run(app, Command(resume={}), "empty", False))
    assert again == bad
    assert app.get_state(config).values == before and mail.seen == []

    out = run(app, Command(resume={"action": "reject"}), "empty", False)
    assert "__interrupt__" not in out and mail.seen == []


def test_an_edit_of_the_declared_type_is_promoted(kernel: Kernel) -> None:
    mail = Mailroom([])
    app = pipeline(kernel, hires_men, mail, hook=noop_hook)
    run(app, {"candidate": "John Smith"}, "typed", False)
    # an int for a float key is a float to JSON and to Python's typing
    edit = {"action": "edit", "update": {"decision": "no", "score": 1}}
    out = run(app, Command(resume=edit), "typed", False)
    assert "__interrupt__" not in out and mail.seen == [{"decision": "no", "score": 1}]


class Kinds(TypedDict, total=False):
    """Annotations the check reads from LangGraph's channels, as a TypedDict declares them."""

    plain: str
    count: int
    ratio: float
    flag: bool
    maybe: Optional[int]  # noqa: UP045 (what an older schema writes)
    either: str | None
    verdict: Literal["hire", "reject"]
    tags: list[str]
    table: dict[str, int]
    bare: list  # type: ignore[type-arg]
    tagged: Annotated[str, "a note, not a reducer"]
    anything: Any
    nested: dict[str, list[Kinds]]
    pair: tuple[int, int]


KIND = typing.get_type_hints(Kinds, include_extras=True)

TYPED = [
    ("plain", "x", True),
    ("plain", 5, False),
    ("plain", None, False),
    ("count", 3, True),
    ("count", True, False),
    ("count", 3.0, False),
    ("ratio", 3, True),
    ("ratio", 0.5, True),
    ("ratio", False, False),
    ("flag", True, True),
    ("flag", 1, False),
    ("maybe", None, True),
    ("maybe", 2, True),
    ("maybe", "2", False),
    ("either", None, True),
    ("either", 1.5, False),
    ("verdict", "hire", True),
    ("verdict", "maybe", False),
    ("tags", ["a", "b"], True),
    ("tags", ["a", 1], False),
    ("tags", "a", False),
    ("table", {"a": 1}, True),
    ("table", {"a": "1"}, False),
    ("bare", [1, "x"], True),
    ("bare", {}, False),
    ("tagged", "x", True),
    ("tagged", 1, False),
    # unchecked: Any, a nested TypedDict, a tuple
    ("anything", object(), True),
    ("nested", {"a": [{"whatever": 1}]}, True),
    ("nested", {"a": 1}, False),  # the outer layers are still plain and checked
    ("pair", "not a pair", True),
]


@pytest.mark.parametrize(("key", "value", "accepted"), TYPED)
def test_annotation_problem_checks_plain_types_and_leaves_the_rest(
    key: str, value: Any, accepted: bool
) -> None:
    problem = annotation_problem(KIND[key], value, key)
    assert (problem is None) is accepted, problem
    if problem is not None:
        assert f"to {key!r}, which the state declares as" in problem


def test_review_decision_refuses_breaker_keys_and_values_that_are_not_json() -> None:
    with pytest.raises(ValidationError, match="may not write the biasbreaker keys"):
        ReviewDecision(action="edit", update={"bb_frozen": {}})
    with pytest.raises(ValidationError, match=r"update\['x'\]\[0\] is inf"):
        ReviewDecision(action="edit", update={"x": [INF]})
    assert ReviewDecision(action="edit", update={"x": [1.5, None]}).update == {"x": [1.5, None]}


# ------------------------------------------------------------------ outputs that are not JSON


def nan_score(state: Case) -> dict[str, Any]:
    """Group-blind, but its score is NaN."""
    return {"decision": "yes", "score": NAN}


def biased_inf(state: Case) -> dict[str, Any]:
    return {**hires_men(state), "score": INF}


def no_group_nan(state: Case) -> dict[str, Any]:
    return {"decision": "yes", "score": NAN}


@guard_node(probe=False)
def unprobed_bytes(state: Case) -> dict[str, Any]:
    return {"decision": "yes", "notes": b"a"}  # type: ignore[dict-item]


CANDIDATE = {"candidate": "John Smith"}
NO_GROUP = {"candidate": "applicant 42"}  # no protected term: the probe is not applicable


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize(
    ("node", "given", "path"),
    [
        (nan_score, CANDIDATE, "output['score'] is nan"),
        (biased_inf, CANDIDATE, "output['score'] is inf"),
        (no_group_nan, NO_GROUP, "output['score'] is nan"),
        (unprobed_bytes, CANDIDATE, "output['notes'] is bytes"),
    ],
)
def test_an_output_that_cannot_be_frozen_goes_to_review_with_the_reason(
    kernel: Kernel, node: Any, given: dict[str, Any], path: str, asynchronous: bool
) -> None:
    mail = Mailroom([])
    app = pipeline(kernel, node, mail, asynchronous=asynchronous)
    out = run(app, given, "nan", asynchronous)  # no InputError out of invoke
    request = review(out)
    assert request["reason"].startswith("held for review: the probe cannot read the output: ")
    assert path in request["reason"]
    assert mail.seen == [] and "score" not in out and "decision" not in out
    assert "first" not in out.get("bb_local_scores", {})  # never a score
    assert any(str(v).startswith("<not JSON: ") for v in request["held"].values())
    assert out["bb_audit_trail"][0]["event"] == "not-json"
    strict_json(out)

    # approve would pass it on: refused; an edit with JSON values goes through
    approve = {"action": "approve", "sha256": request["sha256"]}
    out = run(app, Command(resume=approve), "nan", asynchronous)
    assert "which is not JSON" in review(out)["error"] and mail.seen == []
    edit = {"action": "edit", "update": {"decision": "yes", "score": 0.5}}
    out = run(app, Command(resume=edit), "nan", asynchronous)
    assert mail.seen == [{"decision": "yes", "score": 0.5}]
    assert "__interrupt__" not in out


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_nan_edit_never_reaches_the_next_node(kernel: Kernel, asynchronous: bool) -> None:
    mail = Mailroom([])
    app = pipeline(kernel, hires_men, mail, asynchronous=asynchronous, hook=noop_hook)
    sha256 = review(run(app, CANDIDATE, "edit", asynchronous))["sha256"]
    out = run(
        app,
        Command(resume={"action": "edit", "update": {"decision": "no", "score": NAN}}),
        "edit",
        asynchronous,
    )
    assert "is nan" in review(out)["error"] and mail.seen == []
    out = run(app, Command(resume={"action": "approve", "sha256": sha256}), "edit", asynchronous)
    assert mail.seen == [{"decision": "yes", "score": None}]
    assert not any(isinstance(v, float) and math.isnan(v) for v in out.values())


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_counterfactual_re_run_returning_nan_fails_the_probe_closed(
    kernel: Kernel, asynchronous: bool
) -> None:
    def shaky(state: Case) -> dict[str, Any]:
        # fine on the given input; NaN on the probe's swapped name
        return {"decision": "yes", "score": 0.7 if state["candidate"].startswith("John") else NAN}

    mail = Mailroom([])
    app = pipeline(kernel, shaky, mail, asynchronous=asynchronous)
    out = run(app, CANDIDATE, "cf", asynchronous)
    reason = review(out)["reason"]
    assert reason.startswith("held for review: probe failed: ProbeError: step 'first' raised ")
    assert "counterfactual variant 0" in reason and "is nan" in reason
    assert mail.seen == [] and "first" not in out.get("bb_local_scores", {})
    strict_json(out)


# ------------------------------------------------------------------ nodes the probe cannot re-run


def test_a_probed_node_calling_interrupt_says_to_mark_it_probe_false(kernel: Kernel) -> None:
    def asks(state: Case) -> dict[str, Any]:
        answer = interrupt(f"decide on {state['candidate']}")
        return {"decision": str(answer)}

    mail = Mailroom([])
    app = pipeline(kernel, asks, mail)
    out = run(app, CANDIDATE, "ask", False)
    assert out["__interrupt__"][0].value == "decide on John Smith"  # the node's own question
    out = run(app, Command(resume="yes"), "ask", False)
    reason = review(out)["reason"]
    # what to do, first: not LangGraph's GraphInterrupt(Interrupt(value=..., id=...)) repr
    assert reason.startswith(
        "held for review: probe failed: node 'first' calls interrupt(), so the probe cannot "
        "re-run it: mark it unprobed, guard(..., unprobed=['first']) (or "
        "@guard_node(probe=False) on its function)"
    )
    assert "GraphInterrupt" not in reason and "Interrupt(" not in reason
    assert mail.seen == []


def offer_graph(sent: list[str]) -> StateGraph[Any, Any, Any, Any]:
    """``agent -> tools``: a real ``ToolNode`` whose tool asks a human before it sends."""

    @tool
    def send_offer(application: str) -> str:
        """Send the loan offer once a human confirms."""
        confirmed = interrupt({"confirm": "send the offer?"})
        sent.append(application)
        return f"offer sent (confirmed={confirmed})"

    def agent(state: MessagesState) -> dict[str, Any]:
        call = {
            "name": "send_offer",
            "args": {"application": state["messages"][0].content},
            "id": "call_1",
            "type": "tool_call",
        }
        return {"messages": [AIMessage("", tool_calls=[call])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([send_offer]))
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tools")
    builder.add_edge("tools", END)
    return builder


@pytest.mark.parametrize("unprobed", [True, False])
def test_a_toolnode_whose_tool_calls_interrupt_is_guarded_unprobed(
    kernel: Kernel, unprobed: bool
) -> None:
    sent: list[str] = []
    builder = offer_graph(sent)
    if unprobed:  # guard(builder) guards a ToolNode unprobed
        guarded = guard(builder, kernel)
    else:  # naming it in nodes= probes it, and warns
        with pytest.warns(UserWarning, match="is a ToolNode and probed"):
            guarded = guard(builder, kernel, nodes=list(builder.nodes))
    graph = guarded.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "offer"}}
    question = {"messages": [HumanMessage("Loan application from Mr. John Smith.")]}
    out = graph.invoke(question, config, durability="sync")
    assert review(out) == {"confirm": "send the offer?"}  # the tool's own question
    out = graph.invoke(Command(resume="yes"), config, durability="sync")
    if unprobed:  # runs once, and its output is still checked by the breaker
        assert "__interrupt__" not in out and len(sent) == 1
        assert out["messages"][-1].content == "offer sent (confirmed=yes)"
        bb = guard_state(graph, config)
        assert "tools" not in bb["bb_local_scores"] and bb["bb_breaker"]["machine"]
    else:  # the probe's re-runs ask again: held, and the reason says to mark it unprobed
        reason = review(out)["reason"]
        assert "node 'tools' calls interrupt()" in reason
        assert "guard(..., unprobed=['tools'])" in reason and "GraphInterrupt" not in reason


def test_guard_node_refuses_a_runnable_and_names_unprobed(kernel: Kernel) -> None:
    tools = ToolNode([tool(lambda application: "ok", description="Answer.")])
    with pytest.raises(
        ConfigError, match=r"ToolNode is a Runnable.*unprobed=\['<its node name>'\]"
    ):
        guard_node(probe=False)(tools)
    with pytest.raises(ConfigError, match=r"ToolNode is a Runnable.*guard\(builder, nodes="):
        guard_node(tools)


def test_unprobed_names_are_checked_like_nodes(kernel: Kernel) -> None:
    builder = offer_graph([])
    with pytest.raises(
        ConfigError, match=r"guard\(unprobed=\.\.\.\) names unknown nodes \['tool'\]"
    ):
        guard(builder, kernel, unprobed=["tool"])
    with pytest.raises(ConfigError, match=r"is one string.*e\.g\. unprobed=\['tools'\]"):
        guard(builder, kernel, unprobed="tools")
    # None names no node, as nodes=None names every node (a new-user trial's first try); a
    # ToolNode is unprobed when every node is guarded
    specs = guard(builder, kernel, unprobed=None).guard.nodes
    assert all(spec.probe for name, spec in specs.items() if name != "tools")
    assert not specs["tools"].probe
    # guarded whatever nodes= says, like a node marked @guard_node(probe=False)
    guarded = guard(builder, kernel, nodes=[], unprobed=["tools"])
    assert guarded.guarded_nodes == ("tools",)
    assert not guarded.guard.nodes["tools"].probe


def test_a_node_marked_probe_false_may_call_interrupt(kernel: Kernel) -> None:
    @guard_node(probe=False)
    def asks(state: Case) -> dict[str, Any]:
        return {"decision": str(interrupt(f"decide on {state['candidate']}"))}

    mail = Mailroom([])
    app = pipeline(kernel, asks, mail)
    assert run(app, CANDIDATE, "ask", False)["__interrupt__"][0].value == "decide on John Smith"
    out = run(app, Command(resume="yes"), "ask", False)
    assert "__interrupt__" not in out and mail.seen == [{"decision": "yes", "score": None}]
    assert out["bb_breaker"]["machine"]["state"] == "normal"  # checked by the breaker
