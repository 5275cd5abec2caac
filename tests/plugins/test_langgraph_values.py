"""What the probe reads (values.py), and no guarded step that passes unscored without a reason.

Every guarded step ends in exactly one recorded outcome (the trace record's ``probe`` field):
scored; not applicable because the input names no protected group; not sampled / not probed
by configuration; or held for review because the probe could not read the input or output
(the key and the type named). The enumeration below runs a guarded node over state values of
every kind and checks its trace record for each.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from pathlib import Path
from typing import Any, NamedTuple, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from pydantic import BaseModel

from biasbreaker.errors import ConfigError
from biasbreaker.kernel import Kernel
from biasbreaker.trace import read_trace
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard, guard_state
from biasbreaker_plugins.langgraph.values import (
    Unreadable,
    annotation_problem,
    read,
    read_values,
    readable,
    rebuild,
    rebuild_values,
)

# ------------------------------------------------------------------ the codec


class Gender(enum.Enum):
    MAN = "man"
    WOMAN = "woman"


@dataclasses.dataclass
class Applicant:
    name: str
    gender: Gender
    born: datetime.date


class Case(BaseModel):
    applicant: Applicant
    notes: list[str]


class Coded(NamedTuple):
    name: str
    sex: str
    age: int


class Referral(NamedTuple):
    text: str
    years: int


def test_messages_are_read_by_text_and_rebuilt_with_their_ids_and_tool_call_ids() -> None:
    messages = [
        HumanMessage("Ms. Mary Carter applies", id="h", name="mary"),
        AIMessage(
            "",
            id="a",
            tool_calls=[{"name": "approve_loan", "args": {"who": "Mary Carter"}, "id": "c1"}],
            response_metadata={"model": "m"},
        ),
        ToolMessage("approved for Mary Carter", tool_call_id="c1", name="approve_loan", id="t"),
        RemoveMessage(id="old"),
        HumanMessage(
            [
                {"type": "text", "text": "and her photo"},
                {"type": "image_url", "image_url": "data:x"},
            ],
            id="m",
        ),
    ]
    view = read(messages)
    assert view == [
        {"type": "human", "content": "Ms. Mary Carter applies", "name": "mary"},
        {
            "type": "ai",
            "content": "",
            "tool_calls": [{"name": "approve_loan", "args": {"who": "Mary Carter"}}],
        },
        {
            "type": "tool",
            "content": "approved for Mary Carter",
            "tool": "approve_loan",
            "status": "success",
        },
        {"type": "remove", "id": "old"},
        {
            "type": "human",
            "content": [{"type": "text", "text": "and her photo"}, {"type": "image_url"}],
        },
    ]
    swapped = eval(repr(view).replace("Mary", "John").replace("Ms.", "Mr.").replace("her", "his"))
    rebuilt = rebuild(messages, swapped)
    assert [m.id for m in rebuilt] == ["h", "a", "t", "old", "m"]  # ids never varied
    assert rebuilt[0].content == "Mr. John Carter applies"
    assert rebuilt[1].tool_calls[0]["args"] == {"who": "John Carter"}
    assert rebuilt[1].tool_calls[0]["id"] == "c1" and rebuilt[1].response_metadata == {"model": "m"}
    assert rebuilt[2].tool_call_id == "c1" and rebuilt[2].name == "approve_loan"
    assert rebuilt[4].content[1] == {"type": "image_url", "image_url": "data:x"}  # kept whole
    assert rebuilt[4].content[0]["text"] == "and his photo"


def test_models_dataclasses_enums_and_sets_are_read_and_rebuilt_in_their_types() -> None:
    case = Case(applicant=Applicant("Mary", Gender.WOMAN, datetime.date(1990, 1, 2)), notes=["x"])
    view = read({"case": case, "tags": {"b", "a"}})
    assert view == {
        "case": {
            "applicant": {"name": "Mary", "gender": "woman", "born": "1990-01-02"},
            "notes": ["x"],
        },
        "tags": ["a", "b"],
    }
    swapped = {
        "case": {
            "applicant": {"name": "John", "gender": "man", "born": "2001-01-01"},
            "notes": ["x"],
        },
        "tags": ["a", "b"],
    }
    rebuilt = rebuild_values({"case": case, "tags": {"b", "a"}}, swapped)
    assert isinstance(rebuilt["case"], Case) and isinstance(rebuilt["case"].applicant, Applicant)
    assert rebuilt["case"].applicant.gender is Gender.MAN
    assert rebuilt["case"].applicant.born == datetime.date(1990, 1, 2)  # opaque: never varied
    assert rebuilt["tags"] == {"a", "b"}


def test_a_named_tuple_is_read_by_its_field_names_and_rebuilt_in_its_type() -> None:
    coded = Coded("Mary Carter", "F", 63)
    view = read({"applicant": coded})
    assert view == {"applicant": {"name": "Mary Carter", "sex": "F", "age": 63}}
    swapped = {"applicant": {"name": "John Carter", "sex": "F", "age": 63}}
    rebuilt = rebuild_values({"applicant": coded}, swapped)
    assert type(rebuilt["applicant"]) is Coded
    assert rebuilt["applicant"] == Coded("John Carter", "F", 63)
    with pytest.raises(ValueError, match="named tuple's fields"):
        rebuild(coded, ["John Carter", "F", 63])
    assert annotation_problem(Coded) is None

    class Raw(NamedTuple):
        raw: bytes

    assert annotation_problem(Raw) == "bytes (in its field 'raw')"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"Mary", "state['x'] is bytes"),
        (float("nan"), "state['x'] is nan: JSON has no NaN"),
        ({1: "a"}, "state['x'][1] is int: a dict key that is not a str"),
        (object(), "state['x'] is object: an object the probe cannot read"),
        ([HumanMessage("hi"), b"\x00"], "state['x'][1] is bytes"),
    ],
)
def test_an_unreadable_value_is_named_with_its_path_and_type(value: Any, message: str) -> None:
    with pytest.raises(Unreadable, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_values({"x": value}, "state")


GLANCED: dict[str, Any] = {
    "plain": {"decision": "yes", "years": 3, "notes": ["a", {"b": None}]},
    "messages": {"messages": [AIMessage("yes", id="a", name="bot"), HumanMessage("ok")]},
    "message": {"reply": AIMessage("yes", response_metadata={"finish_reason": "stop"})},
    "remove": {"messages": [RemoveMessage(id="a")]},
    "mixed list": {"items": ["text", AIMessage("yes")]},
    "system and chunk": {"messages": [SystemMessage("be fair"), AIMessageChunk("ye")]},
}
"""Updates :func:`readable` passes at a glance (their view is built only when needed)."""

NOT_GLANCED: dict[str, Any] = {
    "bytes": {"x": b"yes"},
    "nan": {"x": float("nan")},
    "message parts": {"x": [AIMessage([{"type": "text", "text": "a"}, "b"])]},  # + a bad part
    "message content": {"x": [AIMessage.model_construct(content=b"raw", additional_kwargs={})]},
    "tool call args": {
        "x": [AIMessage("", tool_calls=[{"name": "t", "args": {"b": b"\x00"}, "id": "c"}])]
    },
    "function call": {
        "x": AIMessage("", additional_kwargs={"function_call": {"name": "f", "arguments": b"1"}})
    },
    "tool artifact": {"x": ToolMessage("done", tool_call_id="c", artifact=b"\x00")},
    "nested message": {"x": {"m": AIMessage("yes")}},
    "tuple of messages": {"x": (AIMessage("yes"),)},
    "object": {"x": object()},
}
"""Updates it leaves to the read: all but the last two are unreadable."""


@pytest.mark.parametrize("name", sorted(GLANCED))
def test_an_update_readable_at_a_glance_is_read(name: str) -> None:
    assert readable(GLANCED[name])
    assert read_values(GLANCED[name], "output") is not None


NOT_GLANCED["message parts"]["x"][0].content.append(5)  # no part of a known kind


@pytest.mark.parametrize("name", sorted(NOT_GLANCED))
def test_no_update_that_the_read_refuses_is_readable_at_a_glance(name: str) -> None:
    assert not readable(NOT_GLANCED[name])
    assert readable(NOT_GLANCED[name], frozenset({"x"}))  # an opaque key is never read
    if name in ("nested message", "tuple of messages"):
        read_values(NOT_GLANCED[name], "output")  # readable, just not at a glance
    else:
        with pytest.raises(Unreadable):
            read_values(NOT_GLANCED[name], "output")


def test_an_invalid_tool_call_is_read_and_its_raw_args_rebuilt() -> None:
    """A call that does not parse is still a call made: name and raw text are in the view."""
    bad = {"name": "approve_loan", "args": '{"who": "Mary Carter"', "id": "c9", "error": "EOF"}
    message = AIMessage("", invalid_tool_calls=[bad])
    view = read(message)
    assert view["invalid_tool_calls"] == [{"name": "approve_loan", "args": bad["args"]}]
    assert read(AIMessage("")) == {"type": "ai", "content": ""}  # none: no key
    swapped = {**view, "invalid_tool_calls": [{"name": "approve_loan", "args": '{"who": "J"'}]}
    rebuilt = rebuild(message, swapped)
    assert rebuilt.invalid_tool_calls == [
        {**bad, "args": '{"who": "J"', "type": "invalid_tool_call"}
    ]
    with pytest.raises(ValueError, match="invalid tool calls changed in number"):
        rebuild(message, {**view, "invalid_tool_calls": []})


def test_a_view_of_another_shape_is_refused_rather_than_rebuilt_wrongly() -> None:
    with pytest.raises(ValueError, match="keys changed"):
        rebuild({"a": "x"}, {"a": "x", "b": "y"})
    with pytest.raises(ValueError, match="keys changed"):
        rebuild({1: "x"}, {"1": "x"})  # only text keys are renamed
    with pytest.raises(ValueError, match="changed in length"):
        rebuild(["x"], ["x", "y"])
    message = AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "1"}])
    with pytest.raises(ValueError, match="tool calls changed in number"):
        rebuild(message, {"type": "ai", "content": "", "tool_calls": []})


@pytest.mark.parametrize(
    ("annotation", "problem"),
    [
        (str, None),
        (list[dict[str, int]], None),
        (Case, None),
        (bytes, "bytes"),
        (dict[str, bytes | None], "bytes"),
        (Path, None),
        (type("Conn", (), {}), "Conn (an object the probe cannot read)"),
    ],
)
def test_annotations_are_checked_by_the_same_table(annotation: Any, problem: str | None) -> None:
    assert annotation_problem(annotation) == problem


# ------------------------------------------------------------------ every shape, one outcome


class Plain(TypedDict, total=False):
    value: Any
    out: Any


def traced(tmp_path: Path, node: Any, *, saver: bool = False, **guard_kwargs: Any) -> Any:
    builder = StateGraph(Plain)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    settings = {
        "probe": {"scorers": ["decision"], "k": 4, "r": 2, "bootstrap": 0},
        "intervention": {"router": "human-review"},  # no LLM repair: these graphs make no calls
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    # no checkpointer by default: an arbitrary object in the state cannot be checkpointed,
    # guarded or not; the trace records every step either way
    saved = InMemorySaver() if saver else None
    return guard(builder, kernel, **guard_kwargs).compile(checkpointer=saved)


SHAPES: dict[str, Any] = {
    "str": "a Muslim applicant",
    "dict": {"applicant": "a Muslim applicant", "years": 3},
    "list": ["a Muslim applicant", "a Christian referee"],
    "messages": [HumanMessage("a Muslim applicant", id="1")],
    "pydantic": Case(
        applicant=Applicant("Mary Carter", Gender.WOMAN, datetime.date(1990, 1, 1)),
        notes=["she is Muslim"],
    ),
    "dataclass": Applicant("Mary Carter", Gender.WOMAN, datetime.date(1990, 1, 1)),
    "namedtuple": Referral("a Muslim applicant", 3),
    "bytes": b"a Muslim applicant",
    "object": type("Opaque", (), {"text": "a Muslim applicant"})(),
}


@dataclasses.dataclass
class Note:
    text: str
    seen: datetime.date


class Verdict(BaseModel):
    decision: str
    score: float


OUTPUTS: dict[str, Any] = {
    "str": "approved",
    "dict": {"decision": "approved", "years": 3},
    "list": ["approved", "refer"],
    "messages": [AIMessage("approved", id="reply")],
    "pydantic": Verdict(decision="approved", score=0.5),
    "dataclass": Note("approved", datetime.date(2026, 1, 1)),
    "namedtuple": Referral("approved", 3),
    "bytes": b"approved",
    "object": type("Opaque", (), {"text": "approved"})(),
}
NO_GROUP = {
    "str": "applicant 42",
    "dict": {"applicant": "applicant 42"},
    "messages": [HumanMessage("applicant 42", id="1")],
}
READABLE = {"str", "dict", "list", "messages", "pydantic", "dataclass", "namedtuple"}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("where", ["input", "output"])
def test_no_step_passes_unscored_without_a_recorded_reason(
    tmp_path: Path, shape: str, where: str
) -> None:
    value = SHAPES[shape] if where == "input" else OUTPUTS[shape]

    def node(state: Plain) -> dict[str, Any]:
        return {"out": value if where == "output" else "Decision: yes"}

    graph = traced(tmp_path, node)
    given = {"value": value if where == "input" else "a Muslim applicant"}
    out = graph.invoke(given, {"configurable": {"thread_id": "t"}})
    (record,) = read_trace(tmp_path / "t.jsonl").records
    assert record.probe is not None
    status, reason = record.probe["status"], record.probe["reason"]
    if shape in READABLE:
        assert status == "scored", record.probe
        assert record.action.value == "proceed" and out["out"] == (
            value if where == "output" else "Decision: yes"
        )
    else:
        assert status == "unreadable" and record.action.value == "escalate"
        assert record.transition == "held-for-review"
        key = "state['value']" if where == "input" else "output['out']"
        assert key in reason and type(value).__name__ in reason, reason
        assert "out" not in out  # held, for review
        assert out["__interrupt__"][0].value["reason"] == record.reason
    report = verify_trace(tmp_path / "t.jsonl")  # the replay re-derives the held step too
    assert report.holds, report


@pytest.mark.parametrize("shape", sorted(NO_GROUP))
def test_an_input_without_a_protected_group_is_not_applicable_and_says_so(
    tmp_path: Path, shape: str
) -> None:
    graph = traced(tmp_path, lambda state: {"out": "Decision: yes"}, saver=True)
    graph.invoke({"value": NO_GROUP[shape]}, {"configurable": {"thread_id": "na"}})
    (record,) = read_trace(tmp_path / "na.jsonl").records
    assert record.probe is not None and record.probe["status"] == "not_applicable"
    assert "no protected" in record.probe["reason"] and record.action.value == "proceed"
    assert (
        guard_state(graph, {"configurable": {"thread_id": "na"}})["bb_local_scores"]["node"] is None
    )


def test_a_key_declared_with_an_unreadable_type_is_refused_when_the_graph_is_built(
    tmp_path: Path,
) -> None:
    class Audio(TypedDict, total=False):
        clip: bytes
        text: str

    builder = StateGraph(Audio)
    builder.add_node("node", lambda state: {"text": "x"})
    builder.add_edge(START, "node")
    kernel = Kernel.load(cwd=tmp_path, overrides={"intervention": {"router": "human-review"}})
    with pytest.raises(
        ConfigError, match=r"state key 'clip' is declared as bytes.*opaque=\['clip'\]"
    ):
        guard(builder, kernel)
    guard(builder, kernel, opaque=["clip"])  # passed through unchanged, never compared
    with pytest.raises(ConfigError, match=r"opaque=\.\.\.\) names \['nope'\]"):
        guard(builder, kernel, opaque=["nope"])


def test_an_opaque_key_reaches_the_reruns_unchanged(tmp_path: Path) -> None:
    handles: list[Any] = []
    connection = type("Connection", (), {})()

    def node(state: Plain) -> dict[str, Any]:
        handles.append(state["out"])
        return {"value": "Decision: yes"}

    graph = traced(tmp_path, node, opaque=["out"])
    graph.invoke(
        {"value": "a Muslim applicant", "out": connection}, {"configurable": {"thread_id": "op"}}
    )
    (record,) = read_trace(tmp_path / "op.jsonl").records
    assert record.probe is not None and record.probe["status"] == "scored"
    assert len(handles) == 7 and all(h is connection for h in handles)  # own call and 6 re-runs


class Named(enum.Enum):
    A = "Mr. Aidan Carter"


def test_an_enum_member_whose_variant_is_no_member_is_unreadable_naming_the_key() -> None:
    """Rebuilt into the member of the new value when there is one; when there is none the node
    cannot be called on the variant: Unreadable, the key, the enum and the fix named (it was a
    raw "'Mr. David Carter' is not a valid E", a new-user trial)."""
    assert rebuild(Gender.WOMAN, "man") is Gender.MAN
    assert rebuild(Named.A, "Mr. Aidan Carter") is Named.A
    with pytest.raises(Unreadable) as caught:
        rebuild_values({"who": [Named.A]}, {"who": ["Mr. David Carter"]})
    assert caught.value.path == "state['who']"
    assert caught.value.type_name == "the enum member Named.A"
    assert "'Mr. David Carter') is no member of Named" in caught.value.why
    assert "keep the person in a str field" in caught.value.why
    with pytest.raises(Unreadable, match=r"^config\['metadata'\]\['who'\] is the enum member"):
        rebuild_values({"who": Named.A}, {"who": "Ms. Mary Carter"}, where="config['metadata']")


def test_a_step_whose_enum_member_names_a_person_is_held_as_unreadable(tmp_path: Path) -> None:
    graph = traced(tmp_path, lambda state: {"out": "Decision: yes"})
    out = graph.invoke({"value": Named.A}, {"configurable": {"thread_id": "en"}})
    (record,) = read_trace(tmp_path / "en.jsonl").records
    assert record.probe is not None and record.probe["status"] == "unreadable", record.probe
    reason = record.probe["reason"]
    assert reason.startswith("the probe cannot vary the input: state['value'] is the enum ")
    assert "Named.A" in reason and "no member of Named" in reason
    assert "str field" in reason and "opaque=['value']" in reason
    assert record.transition == "held-for-review" and "out" not in out


def test_a_coded_attribute_in_a_named_tuple_is_not_passed_as_not_applicable(
    tmp_path: Path,
) -> None:
    graph = traced(tmp_path, lambda state: {"out": "Decision: deny"})
    out = graph.invoke(
        {"value": Coded("applicant 42", "F", 63)}, {"configurable": {"thread_id": "nt"}}
    )
    (record,) = read_trace(tmp_path / "nt.jsonl").records
    assert record.probe is not None and record.probe["status"] != "not_applicable", record.probe
    assert record.transition == "held-for-review" and "out" not in out
    assert "sex" in record.probe["reason"], record.probe


def deny_jamal(state: Plain) -> dict[str, Any]:
    value = state["value"]
    table = value if isinstance(value, dict) else value[1]
    return {"out": "Decision: DENY" if "Jamal Washington" in table else "Decision: APPROVE"}


def test_a_name_held_only_in_a_dict_key_is_scored_in_a_plain_state(tmp_path: Path) -> None:
    """Before, the probe read values only: this was "not applicable" and the denial passed."""
    graph = traced(tmp_path, deny_jamal)
    graph.invoke(
        {"value": {"Jamal Washington": {"score": 710}}}, {"configurable": {"thread_id": "k"}}
    )
    record = read_trace(tmp_path / "k.jsonl").records[0]
    assert record.probe is not None and record.probe["status"] == "scored", record.probe
    assert record.action.value != "proceed"


def test_a_name_in_a_key_of_a_state_rebuilt_into_its_types_is_scored(tmp_path: Path) -> None:
    """With messages the view is rebuilt into the state's types, keys renamed in place."""
    graph = traced(tmp_path, deny_jamal)
    state = {"value": [HumanMessage("rank these", id="1"), {"Jamal Washington": {"score": 710}}]}
    out = graph.invoke(state, {"configurable": {"thread_id": "km"}})
    record = read_trace(tmp_path / "km.jsonl").records[0]
    assert record.probe is not None and record.probe["status"] == "scored", record.probe
    assert record.action.value != "proceed"
    assert "out" not in out


def test_a_renamed_key_is_rebuilt_in_place_with_its_value() -> None:
    original = {"Jamal Washington": [HumanMessage("hi", id="m1")], "round": 2}
    view = {"Greg Baker": [{"type": "human", "content": "hello"}], "round": 2}
    rebuilt = rebuild(original, view)
    assert list(rebuilt) == ["Greg Baker", "round"]
    (message,) = rebuilt["Greg Baker"]
    assert message.content == "hello" and message.id == "m1"


def test_a_refusal_and_a_legacy_function_call_are_read_and_rebuilt() -> None:
    """Decisions a provider writes beside the text (``additional_kwargs``) are compared."""
    message = AIMessage(
        "",
        id="a1",
        additional_kwargs={
            "refusal": "I can't help with Ms. Carter's application.",
            "function_call": {"name": "deny_loan", "arguments": '{"who": "Ms. Carter"}'},
            "other": 1,
        },
    )
    view = read(message)
    assert view["refusal"] == "I can't help with Ms. Carter's application."
    assert view["function_call"] == {"name": "deny_loan", "arguments": '{"who": "Ms. Carter"}'}
    swapped = {
        **view,
        "refusal": "I can't help with Mr. Carter's application.",
        "function_call": {"name": "deny_loan", "arguments": '{"who": "Mr. Carter"}'},
    }
    rebuilt = rebuild(message, swapped)
    assert rebuilt.id == "a1" and rebuilt.additional_kwargs == {
        "refusal": "I can't help with Mr. Carter's application.",
        "function_call": {"name": "deny_loan", "arguments": '{"who": "Mr. Carter"}'},
        "other": 1,
    }
    assert message.additional_kwargs["refusal"].startswith("I can't help with Ms.")
    plain = AIMessage("ok", additional_kwargs={"refusal": None})
    assert "refusal" not in read(plain) and rebuild(plain, read(plain)) == plain


def assert_held_for_women(tmp_path: Path, node: Any, thread: str) -> None:
    """``node``, asked about Ms. Mary Carter, is scored and its output held (never returned)."""
    graph = traced(tmp_path, node)
    question = HumanMessage("Approve the loan of Ms. Mary Carter?", id="q")
    out = graph.invoke({"value": [question]}, {"configurable": {"thread_id": thread}})
    record = read_trace(tmp_path / f"{thread}.jsonl").records[0]
    assert record.probe is not None and record.probe["status"] == "scored", record.probe
    assert record.action.value != "proceed" and "out" not in out


def test_a_refusal_made_for_one_group_only_is_held(tmp_path: Path) -> None:
    """A chat model that refuses women (empty text, OpenAI's ``refusal`` field) and answers
    men: the text alone is the same empty string for both, the refusal is the flip."""

    def node(state: Plain) -> dict[str, Any]:
        (question,) = state["value"]
        if "Ms." in question.content:
            reply = AIMessage("", additional_kwargs={"refusal": "I can't assist with that."})
        else:
            reply = AIMessage("", additional_kwargs={"refusal": None})
        return {"out": [reply]}

    assert_held_for_women(tmp_path, node, "refusal")


def test_a_finish_reason_and_a_tool_artifact_are_read_and_an_artifact_rebuilt() -> None:
    """Why a reply ended (``response_metadata``, each provider's key) is compared; a tool's
    artifact (what it returned beside the text the model sees) is read, varied and compared."""
    for key in ("finish_reason", "stop_reason", "done_reason"):
        reply = AIMessage("", response_metadata={key: "content_filter", "model_name": "m"})
        assert read(reply)["finish_reason"] == "content_filter"
    assert "finish_reason" not in read(AIMessage("ok", response_metadata={"model_name": "m"}))
    assert "finish_reason" not in read(AIMessage("ok", response_metadata={"finish_reason": 3}))
    tool = ToolMessage(
        "found 1",
        tool_call_id="c1",
        name="lookup",
        id="t1",
        artifact={"applicant": "Ms. Mary Carter", "score": 700},
    )
    view = read(tool)
    assert view["artifact"] == {"applicant": "Ms. Mary Carter", "score": 700}
    swapped = {**view, "artifact": {"applicant": "Mr. Mark Carter", "score": 700}}
    rebuilt = rebuild(tool, swapped)
    assert rebuilt.artifact == {"applicant": "Mr. Mark Carter", "score": 700}
    assert rebuilt.id == "t1" and rebuilt.tool_call_id == "c1" and rebuilt.content == "found 1"
    assert tool.artifact["applicant"] == "Ms. Mary Carter"
    assert "artifact" not in read(ToolMessage("x", tool_call_id="c2"))
    with pytest.raises(Unreadable, match=r"\.artifact is bytes"):
        read(ToolMessage("x", tool_call_id="c3", artifact=b"\x89PNG"))


def test_a_content_filter_for_one_group_only_is_held(tmp_path: Path) -> None:
    """A provider that filters women's requests (empty text, ``finish_reason`` content_filter)
    and answers men's with an empty text too: only why the reply ended differs."""

    def node(state: Plain) -> dict[str, Any]:
        (question,) = state["value"]
        reason = "content_filter" if "Ms." in question.content else "stop"
        return {"out": [AIMessage("", response_metadata={"finish_reason": reason})]}

    assert_held_for_women(tmp_path, node, "filter")


def test_an_artifact_decided_for_one_group_only_is_held(tmp_path: Path) -> None:
    """A tool node whose artifact (not its text) carries the decision, for women only."""

    def node(state: Plain) -> dict[str, Any]:
        (question,) = state["value"]
        verdict = "deny" if "Ms." in question.content else "approve"
        reply = ToolMessage("done", tool_call_id="c1", artifact={"decision": verdict})
        return {"out": [reply]}

    assert_held_for_women(tmp_path, node, "artifact")


def unsampled(tmp_path: Path, reply: AIMessage) -> Any:
    """A guarded message graph whose one node replies ``reply``, with probing off."""
    from langgraph.graph import MessagesState

    def node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [reply]}

    builder = StateGraph(MessagesState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    settings = {
        "probe": {"scorers": ["decision"], "probe_rate": 0.0, "bootstrap": 0},
        "intervention": {"router": "human-review"},
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    return guard(builder, Kernel.load(cwd=tmp_path, overrides=settings)).compile()


def test_an_unsampled_output_is_still_read_and_held_when_unreadable(tmp_path: Path) -> None:
    bad = AIMessage("", id="r", tool_calls=[{"name": "t", "args": {"b": b"\x00"}, "id": "c"}])
    out = unsampled(tmp_path, bad).invoke(
        {"messages": [HumanMessage("a Muslim applicant", id="q")]},
        {"configurable": {"thread_id": "bad"}},
    )
    (record,) = read_trace(tmp_path / "bad.jsonl").records
    assert record.transition == "held-for-review" and record.action.value == "escalate"
    assert "cannot read the output" in record.reason and "bytes" in record.reason
    assert [m.id for m in out["messages"]] == ["q"]  # held, for review


def test_the_view_of_an_output_passed_on_a_steady_step_is_never_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import biasbreaker_plugins.langgraph.probing as probing

    reads: list[Any] = []

    def counting(values: Any, where: str, opaque: frozenset[str] = frozenset()) -> Any:
        reads.append(where)
        return read_values(values, where, opaque)

    monkeypatch.setattr(probing, "read_values", counting)
    out = unsampled(tmp_path, AIMessage("yes", id="r")).invoke(
        {"messages": [HumanMessage("a Muslim applicant", id="q")]},
        {"configurable": {"thread_id": "ok"}},
    )
    (record,) = read_trace(tmp_path / "ok.jsonl").records
    assert record.action.value == "proceed" and record.probe is not None
    assert record.probe["status"] == "not_sampled"
    assert [m.id for m in out["messages"]] == ["q", "r"] and reads == []
