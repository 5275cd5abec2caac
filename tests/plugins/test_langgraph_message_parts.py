"""What a message carries beside its text is read and varied, or holds the step.

Two ways an applicant reached a guarded node unread, so that the step was recorded
``not_applicable`` ("group-blind") and a decision against women reached the next node:

* a content part that is not ``{"type": "text"}`` — an Anthropic ``document`` with a text
  source, a LangChain v1 ``text-plain`` block, a v0 ``file`` block with inline text — was
  viewed as a bare ``{"type"}``;
* a message ``name`` written with underscores (OpenAI refuses spaces in ``name``),
  ``"Mary_Carter"``, was not read as a person.

Asserted here: such a node is held before its successor runs, its step ``scored``; a fair
node passes; each view rebuilds exactly (ids, payloads, other fields and types kept); a part
the probe cannot tell apart, or a document whose text is not inline, holds the step naming
its path and type; binary payloads are never in a view.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph, add_messages
from langgraph_apps import SETTINGS

from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.probe.names import packaged_names
from biasbreaker_plugins.langgraph import guard
from biasbreaker_plugins.langgraph.values import Unreadable, read, read_values, rebuild

PDF = "JVBERi0xLjQKJcfsj6IKNSAwIG9iago8PC9MZW5ndGggNiAwIFI+PgpzdHJlYW0K"
FEMALE_WORDS = {"ms", "mrs", "miss", "she", "her", "woman", "female"}
FEMALE_NAMES = {n.lower() for n, i in packaged_names().first.items() if i.gender == "female"}


class Loan(TypedDict, total=False):
    messages: Annotated[list[BaseMessage], add_messages]
    decision: str


def everything(messages: list[BaseMessage]) -> str:
    """All a node could read of its messages: content parts, names, additional_kwargs."""
    return json.dumps([m.model_dump() for m in messages], default=repr)


def names_a_woman(text: str) -> bool:
    words = {w.lower() for w in re.findall(r"[A-Za-z]+", text)}
    return bool(words & (FEMALE_WORDS | FEMALE_NAMES))


def build(biased: bool, seen: list[str]) -> Any:
    def decide(state: Loan) -> dict[str, Any]:
        deny = biased and names_a_woman(everything(state["messages"]))
        decision = "Decision: no" if deny else "Decision: yes"
        return {"decision": decision, "messages": [AIMessage(decision)]}

    def notify(state: Loan) -> dict[str, Any]:
        seen.append(str(state.get("decision")))
        return {}

    builder = StateGraph(Loan)
    builder.add_node("decide", decide)
    builder.add_node("notify", notify)
    builder.add_edge(START, "decide")
    builder.add_edge("decide", "notify")
    builder.add_edge("notify", END)
    return builder


def run(tmp_path: Path, message: BaseMessage, *, biased: bool) -> tuple[Any, list[str], Any]:
    """(the run's interrupts, what notify saw, the decide step's probe record)."""
    settings = {**SETTINGS, "plugin": {"langgraph": {"trace_path": str(tmp_path / "t.jsonl")}}}
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    seen: list[str] = []
    graph = guard(build(biased, seen), kernel, hook=noop_hook, nodes=["decide"])
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
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_node_biased_on_what_a_message_carries_beside_its_text_is_held(
    tmp_path: Path, case: str
) -> None:
    interrupts, seen, probe = run(tmp_path, CASES[case], biased=True)
    assert probe["status"] == "scored", probe
    assert len(interrupts) == 1 and seen == []  # the denial never reached notify


@pytest.mark.parametrize("case", ["anthropic_document", "human_name_underscore"])
def test_a_fair_node_reading_the_same_messages_passes(tmp_path: Path, case: str) -> None:
    interrupts, seen, probe = run(tmp_path, CASES[case], biased=False)
    assert probe["status"] == "scored", probe
    assert interrupts == () and seen == ["Decision: yes"]


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
    for old, new in (("Ms.", "Mr."), ("Mary", "Mark"), ("Carter", "Vu")):
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
        read_values({"m": [AIMessage([part])]}, "output")


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
