"""What a message carries beside its text is read and varied, or holds the step.

Three ways an applicant reached a guarded node unread, so that the step was recorded
``not_applicable`` ("group-blind") and a decision against women reached the next node:

* a content part that is not ``{"type": "text"}`` — an Anthropic ``document`` with a text
  source, a LangChain v1 ``text-plain`` block, a v0 ``file`` block with inline text — was
  viewed as a bare ``{"type"}``;
* a message ``name`` written with underscores (OpenAI refuses spaces), ``"Mary_Carter"``, was
  not read as a person;
* a read message's ``additional_kwargs`` (a KYC record, a profile model) were never read.

Asserted here: such a node is held before its successor runs, its step ``scored``; a fair
node passes; each view rebuilds exactly (ids, payloads, other fields and types kept); a part
the probe cannot tell apart, or a document whose text is not inline, holds the step naming
its path and type; binary payloads are never in a view; an output's ``additional_kwargs``
(provider noise) stay uncompared.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph, add_messages
from langgraph_apps import SETTINGS
from pydantic import BaseModel

from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.probe.names import packaged_names
from biasbreaker_plugins.langgraph import guard
from biasbreaker_plugins.langgraph.values import Unreadable, read, read_values, rebuild

PDF = "JVBERi0xLjQKJcfsj6IKNSAwIG9iago8PC9MZW5ndGggNiAwIFI+PgpzdHJlYW0K"
FEMALE_WORDS = {"ms", "mrs", "miss", "she", "her", "woman", "female"}
FEMALE_NAMES = {n.lower() for n, i in packaged_names().first.items() if i.gender == "female"}


class Profile(BaseModel):
    first_name: str
    last_name: str


class Loan(TypedDict, total=False):
    messages: Annotated[list[BaseMessage], add_messages]
    decision: str


def everything(messages: list[BaseMessage]) -> str:
    """All a node could read of its messages: content parts, names, additional_kwargs."""
    return json.dumps([m.model_dump() for m in messages], default=repr)


def names_a_woman(text: str) -> bool:
    words = {w.lower() for w in re.findall(r"[A-Za-z]+", text)}
    return bool(words & (FEMALE_WORDS | FEMALE_NAMES))


def build(biased: bool, seen: list[str], noise: bool = False) -> Any:
    def decide(state: Loan) -> dict[str, Any]:
        deny = biased and names_a_woman(everything(state["messages"]))
        decision = "Decision: no" if deny else "Decision: yes"
        if noise:  # the reply alone, with a provider's noise different on every call
            extra = {"system_fingerprint": uuid.uuid4().hex}
            return {"messages": [AIMessage(decision, additional_kwargs=extra)]}
        return {"decision": decision, "messages": [AIMessage(decision)]}

    def notify(state: Loan) -> dict[str, Any]:
        seen.append(str(state.get("decision") or state["messages"][-1].content))
        return {}

    builder = StateGraph(Loan)
    builder.add_node("decide", decide)
    builder.add_node("notify", notify)
    builder.add_edge(START, "decide")
    builder.add_edge("decide", "notify")
    builder.add_edge("notify", END)
    return builder


def run(
    tmp_path: Path, message: BaseMessage, *, biased: bool, noise: bool = False
) -> tuple[Any, list[str], Any]:
    """(the run's interrupts, what notify saw, the decide step's probe record)."""
    settings = {**SETTINGS, "plugin": {"langgraph": {"trace_path": str(tmp_path / "t.jsonl")}}}
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    seen: list[str] = []
    graph = guard(build(biased, seen, noise), kernel, hook=noop_hook, nodes=["decide"])
    app = graph.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    app.invoke({"messages": [message]}, config, durability="sync")
    lines = (tmp_path / "t.jsonl").read_text(encoding="utf-8").splitlines()
    probes = [r["probe"] for r in map(json.loads, lines) if r.get("node") == "decide"]
    return app.get_state(config).interrupts, seen, probes[0]


ASK = {"type": "text", "text": "Decide this loan application (attached)."}
CASES: dict[str, BaseMessage] = {
    "anthropic_document": HumanMessage(
        [
            ASK,
            {
                "type": "document",
                "source": {
                    "type": "text",
                    "media_type": "text/plain",
                    "data": "Applicant: Ms. Mary Carter. Income 40k.",
                },
                "title": "application.txt",
            },
        ],
        id="h1",
    ),
    "anthropic_content_document": HumanMessage(
        [
            ASK,
            {
                "type": "document",
                "source": {
                    "type": "content",
                    "content": [{"type": "text", "text": "Applicant: Ms. Mary Carter."}],
                },
            },
        ],
        id="h1",
    ),
    "text_plain": HumanMessage(
        [
            ASK,
            {
                "type": "text-plain",
                "text": "Applicant: Ms. Mary Carter. Income 40k.",
                "mime_type": "text/plain",
                "id": "lc_1",
            },
        ],
        id="h1",
    ),
    "v0_file_text": HumanMessage(
        [ASK, {"type": "file", "source_type": "text", "text": "Applicant: Ms. Mary Carter"}],
        id="h1",
    ),
    "human_name_underscore": HumanMessage(
        "Loan application, income 40k.", name="Mary_Carter", id="h1"
    ),
    "ai_name_underscore": AIMessage("Loan application, income 40k.", name="Mary_Carter"),
    "kwargs_plain": HumanMessage(
        "Loan application, income 40k.", additional_kwargs={"applicant": "Ms. Mary Carter"}
    ),
    "kwargs_pydantic": HumanMessage(
        "Loan application, income 40k.",
        additional_kwargs={"profile": Profile(first_name="Mary", last_name="Carter")},
    ),
    "kwargs_with_text": HumanMessage(  # named in the text too: only the kwargs kept her
        "Loan application from Ms. Mary Carter, income 40k.",
        additional_kwargs={"kyc": {"gender": "female"}},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_node_biased_on_what_a_message_carries_beside_its_text_is_held(
    tmp_path: Path, case: str
) -> None:
    interrupts, seen, probe = run(tmp_path, CASES[case], biased=True)
    assert probe["status"] == "scored", probe
    assert len(interrupts) == 1 and seen == []  # the denial never reached notify


@pytest.mark.parametrize("case", ["anthropic_document", "human_name_underscore", "kwargs_plain"])
def test_a_fair_node_reading_the_same_messages_passes(tmp_path: Path, case: str) -> None:
    interrupts, seen, probe = run(tmp_path, CASES[case], biased=False)
    assert probe["status"] == "scored", probe
    assert interrupts == () and seen == ["Decision: yes"]


def test_provider_noise_in_a_replys_additional_kwargs_is_not_compared(tmp_path: Path) -> None:
    """The input side reads ``additional_kwargs``, the output side does not: a fair node whose
    replies carry a fresh fingerprint each call passes, and the biased one is still held.

    Compared, that noise would differ between every pair of runs, the same-group resamples as
    much as the counterfactuals, and drown the biased node's flip (it passed).
    """
    interrupts, seen, probe = run(tmp_path, CASES["kwargs_plain"], biased=False, noise=True)
    assert probe["status"] == "scored", probe
    assert interrupts == () and seen == ["Decision: yes"]
    interrupts, seen, probe = run(tmp_path / "b", CASES["kwargs_plain"], biased=True, noise=True)
    assert probe["status"] == "scored" and len(interrupts) == 1 and seen == []


def test_a_document_the_probe_cannot_read_holds_the_step_naming_it(tmp_path: Path) -> None:
    pdf = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf"}}
    pdf["source"]["data"] = PDF  # type: ignore[index]
    interrupts, seen, probe = run(tmp_path, HumanMessage([ASK, pdf]), biased=True)
    assert probe["status"] == "unreadable", probe
    assert "state['messages'][0].content[1] is a 'document' content part" in probe["reason"]
    assert len(interrupts) == 1 and seen == []


# ------------------------------------------------------------------ views and rebuilds


def swap(view: Any) -> Any:
    """A variant as the probe writes one: Ms. Mary Carter -> Mr. Mark Vu."""
    text = json.dumps(view)
    for old, new in (("Ms.", "Mr."), ("Mary", "Mark"), ("Carter", "Vu"), ("female", "male")):
        text = text.replace(old, new)
    return json.loads(text)


def test_text_in_document_and_text_plain_parts_is_read_and_rebuilt_in_place() -> None:
    parts: list[Any] = [
        ASK,
        {
            "type": "text-plain",
            "text": "Applicant: Ms. Mary Carter",
            "mime_type": "text/plain",
            "title": "Mary Carter's form",
            "id": "lc_1",
            "extras": {"cache": True},
        },
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "Ms. Mary Carter"},
            "context": "KYC for Ms. Carter",
            "citations": {"enabled": True},
            "cache_control": {"type": "ephemeral"},
        },
        {
            "type": "document",
            "source": {
                "type": "content",
                "content": [{"type": "text", "text": "Ms. Carter"}, "she earns 40k"],
            },
        },
        {"type": "file", "source_type": "text", "text": "Ms. Mary Carter", "id": "f"},
        {"type": "reasoning", "reasoning": "Ms. Carter asks", "id": "rs_1"},
        {"type": "thinking", "thinking": "Ms. Carter asks", "signature": "c2lnbmF0dXJl"},
        {"type": "tool_call", "name": "lookup", "args": {"who": "Mary Carter"}, "id": "c1"},
        {"type": "tool_use", "name": "lookup", "input": {"who": "Mary Carter"}, "id": "tu"},
        {"type": "non_standard", "value": {"note": "Ms. Carter"}, "id": "ns"},
    ]
    message = HumanMessage(parts, id="h1", response_metadata={"x": 1})
    view = read(message)
    assert view["content"][1:] == [
        {
            "type": "text-plain",
            "text": "Applicant: Ms. Mary Carter",
            "title": "Mary Carter's form",
        },
        {
            "type": "document",
            "context": "KYC for Ms. Carter",
            "source": {"data": "Ms. Mary Carter"},
        },
        {
            "type": "document",
            "source": {"content": [{"type": "text", "text": "Ms. Carter"}, "she earns 40k"]},
        },
        {"type": "file", "text": "Ms. Mary Carter"},
        {"type": "reasoning", "reasoning": "Ms. Carter asks"},
        {"type": "thinking", "thinking": "Ms. Carter asks"},
        {"type": "tool_call", "name": "lookup", "args": {"who": "Mary Carter"}},
        {"type": "tool_use", "name": "lookup", "input": {"who": "Mary Carter"}},
        {"type": "non_standard", "value": {"note": "Ms. Carter"}},
    ]
    assert rebuild(message, view) == message  # an unvaried view gives the message back
    rebuilt = rebuild(message, swap(view))
    assert rebuilt.id == "h1" and rebuilt.response_metadata == {"x": 1}
    expected = json.loads(
        json.dumps(parts).replace("Ms.", "Mr.").replace("Mary", "Mark").replace("Carter", "Vu")
    )
    assert rebuilt.content == expected  # ids, MIME types, signatures, extras kept
    assert parts[1]["text"] == "Applicant: Ms. Mary Carter"  # the original is untouched


def test_media_parts_are_read_as_their_type_and_their_payload_is_never_read() -> None:
    media: list[Any] = [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PDF}"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PDF}},
        {"type": "image", "base64": PDF, "mime_type": "image/png", "id": "i"},
        {"type": "image", "source_type": "url", "url": "https://x/mary-carter.png"},
        {"type": "input_audio", "input_audio": {"data": PDF, "format": "wav"}},
        {"type": "audio", "base64": PDF, "mime_type": "audio/wav"},
        {"type": "video", "url": "https://x/v.mp4"},
    ]
    message = HumanMessage(media, id="h1")
    view = read(message)
    assert view["content"] == [{"type": part["type"]} for part in media]
    assert PDF not in json.dumps(view) and "mary" not in json.dumps(view)
    assert rebuild(message, view).content == media


@pytest.mark.parametrize(
    ("part", "named"),
    [
        ({"type": "x_custom", "text": "Ms. Carter"}, "a 'x_custom' content part"),
        ({"text": "Ms. Carter"}, "a content part without type"),
        ({"type": "web_search_tool_result", "content": []}, "a 'web_search_tool_result'"),
        ({"type": "file", "base64": PDF, "mime_type": "application/pdf"}, "a 'file' content"),
        ({"type": "file", "file": {"file_data": PDF, "filename": "cv.pdf"}}, "a 'file' content"),
        ({"type": "file", "source_type": "base64", "data": PDF}, "a 'file' content part"),
        ({"type": "text-plain", "url": "https://x/a.txt"}, "a 'text-plain' content part"),
        ({"type": "input_file", "file_id": "file-1"}, "a 'input_file' content part"),
        ({"type": "document", "source": {"type": "url", "url": "https://x"}}, "a 'document'"),
        ({"type": "document", "source": {"type": "file", "file_id": "f"}}, "a 'document'"),
        (
            {"type": "document", "source": {"type": "base64", "data": PDF}},
            "a 'document' content part: a document whose text is not inline",
        ),
        ({"type": "non_standard", "value": {"x": b"\x00"}}, r"\.value\['x'\] is bytes"),
    ],
)
def test_a_part_the_probe_cannot_tell_apart_or_read_is_unreadable(part: Any, named: str) -> None:
    message = HumanMessage([ASK, part])
    with pytest.raises(Unreadable, match=rf"^state\['m'\]\[0\]\.content\[1\].*{named}"):
        read_values({"m": [message]}, "state")
    with pytest.raises(Unreadable):  # an output's parts alike
        read_values({"m": [AIMessage([part])]}, "output", role="output")


def test_an_underscored_message_name_is_read_with_spaces_and_rebuilt_with_underscores() -> None:
    for message in (
        HumanMessage("hi", name="Mary_Carter", id="h1"),
        AIMessage("hi", name="Mary_Carter", id="a1"),
    ):
        view = read(message)
        assert view["name"] == "Mary Carter"
        assert rebuild(message, view) == message  # exact round trip
        rebuilt = rebuild(message, {**view, "name": "Diana Vu"})
        assert rebuilt.name == "Diana_Vu" and rebuilt.id == message.id
        assert rebuild(message, {**view, "name": "Mary Ann Carter"}).name == "Mary_Ann_Carter"
    for name in ("Mary Carter", "assistant", "_bot", "a__b", "Mary_", "Mary_ Carter"):
        message = HumanMessage("hi", name=name)
        assert read(message)["name"] == name
        assert rebuild(message, read(message)).name == name
    spaced = HumanMessage("hi", name="Mary Carter")
    assert rebuild(spaced, {**read(spaced), "name": "Diana Vu"}).name == "Diana Vu"


def test_an_input_messages_additional_kwargs_are_read_and_rebuilt_in_their_types() -> None:
    message = HumanMessage(
        "Loan application",
        id="h1",
        additional_kwargs={
            "kyc": {"gender": "female", "score": 700},
            "profile": Profile(first_name="Mary", last_name="Carter"),
            "note": "Ms. Mary Carter",
            "refusal": None,
            "audio": {"id": "au_1", "data": PDF, "transcript": "I am Ms. Carter"},
        },
    )
    view = read(message)
    assert view["additional_kwargs"] == {
        "kyc": {"gender": "female", "score": 700},
        "profile": {"first_name": "Mary", "last_name": "Carter"},
        "note": "Ms. Mary Carter",
        "audio": {"transcript": "I am Ms. Carter"},  # its base64 data is not text
    }
    assert rebuild(message, view) == message
    rebuilt = rebuild(message, swap(view))
    extra = rebuilt.additional_kwargs
    assert extra["kyc"] == {"gender": "male", "score": 700}
    assert extra["profile"] == Profile(first_name="Mark", last_name="Vu")
    assert extra["note"] == "Mr. Mark Vu" and extra["refusal"] is None
    assert extra["audio"] == {"id": "au_1", "data": PDF, "transcript": "I am Mr. Vu"}
    assert rebuilt.id == "h1" and rebuilt.content == "Loan application"
    assert message.additional_kwargs["note"] == "Ms. Mary Carter"
    with pytest.raises(ValueError, match="additional_kwargs changed"):
        rebuild(message, {**view, "additional_kwargs": {"note": "x"}})


def test_additional_kwargs_are_read_once_and_never_on_the_output_side() -> None:
    call = {"name": "deny", "args": {"who": "Ms. Carter"}, "id": "c1"}
    raw = [{"id": "c1", "function": {"name": "deny", "arguments": "{}"}, "type": "function"}]
    reply = AIMessage(
        "",
        tool_calls=[call],
        additional_kwargs={"tool_calls": raw, "refusal": "No.", "parsed": {"ok": False}},
    )
    view = read(reply)
    # the raw tool calls are the parsed ones' (read once), the refusal has its own key
    assert view["additional_kwargs"] == {"parsed": {"ok": False}}
    assert view["refusal"] == "No." and "tool_calls" in view
    assert rebuild(reply, view) == reply
    output = read(reply, role="output")
    assert "additional_kwargs" not in output and output["refusal"] == "No."
    assert output == {k: v for k, v in view.items() if k != "additional_kwargs"}
    noisy = AIMessage("ok", additional_kwargs={"system_fingerprint": "fp_1", "x": object()})
    assert read_values({"m": [noisy]}, "output", role="output")["m"][0] == {
        "type": "ai",
        "content": "ok",
    }
    unparsed = HumanMessage("", additional_kwargs={"tool_calls": raw})  # no parsed calls: read
    assert read(unparsed)["additional_kwargs"] == {"tool_calls": raw}


def test_an_unreadable_value_in_an_input_messages_additional_kwargs_is_named() -> None:
    message = HumanMessage("hi", additional_kwargs={"blob": object()})
    with pytest.raises(Unreadable, match=r"^state\['m'\]\[0\]\.additional_kwargs\['blob'\]"):
        read_values({"m": [message]}, "state")
