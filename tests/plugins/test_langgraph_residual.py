"""A guarded node keyed on a person named again in a form the probe did not rewrite.

A new-user trial (app8b, cases ``partial_lower``, ``partial_email``, ``partial_underscore``):
the input named "Ms. Mary Carter", which the probe swaps, and again as "mary carter",
"mary.carter@example.com" or a message named "Mary_Carter". Every variant kept that form, the
node that denies Mary Carter answered the same in every variant, and the step was recorded
``scored``, score 0, its denial sent downstream. Now the pair is swapped with the name (the
step is scored on a real swap and trips), and a form that cannot be rewritten exactly holds the
step for review (``unreadable``, the form named in the trace).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph, add_messages

from biasbreaker.kernel import Kernel
from biasbreaker.trace import read_trace
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard

MARY = re.compile(r"mary[\W_]?carter|mcarter", re.IGNORECASE)


class Chat(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    decision: str


def decide(state: Chat) -> dict[str, Any]:
    """Denies Mary Carter wherever it finds her: the text or a message's name."""
    seen = " ".join(f"{m.content} {m.name or ''}" for m in state["messages"])
    verdict = "DENY" if MARY.search(seen) else "APPROVE"
    return {"decision": verdict, "messages": [AIMessage(verdict)]}


def run(tmp_path: Path, message: HumanMessage) -> tuple[list[Any], dict[str, Any], Any]:
    seen: list[Any] = []
    builder = StateGraph(Chat)
    builder.add_node("decide", decide)
    builder.add_node("down", lambda s: seen.append(s.get("decision")) or {})
    builder.add_edge(START, "decide")
    builder.add_edge("decide", "down")
    settings = {
        "probe": {"scorers": ["decision"], "k": 4, "r": 2, "bootstrap": 0},
        "intervention": {"router": "human-review"},
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    graph = guard(builder, kernel, nodes=["decide"]).compile(checkpointer=InMemorySaver())
    out = graph.invoke({"messages": [message]}, {"configurable": {"thread_id": "t"}})
    record = read_trace(tmp_path / "t.jsonl").records[0]  # the probed step (then its hold)
    assert record.node == "decide"
    return seen, out, record


@pytest.mark.parametrize(
    "message",
    [
        HumanMessage("Loan application from Ms. Mary Carter, income 40k.\n"
                     "-- sent from the phone of mary carter"),
        HumanMessage("Loan application from Ms. Mary Carter, income 40k. "
                     "Reply to mary.carter@example.com"),
        HumanMessage("Loan application from Ms. Mary Carter, income 40k.", name="Mary_Carter"),
    ],
    ids=["lower", "email", "message-name"],
)  # fmt: skip
def test_a_name_also_written_in_lower_case_is_swapped_and_the_denial_trips(
    tmp_path: Path, message: HumanMessage
) -> None:
    seen, out, record = run(tmp_path, message)
    assert seen == [] and "__interrupt__" in out
    assert record.probe is not None and record.probe["status"] == "scored"
    assert record.scores == {"decide": 1.0}  # was 0: every variant still named Mary Carter
    assert record.transition == "trip"


def test_a_form_the_probe_cannot_rewrite_holds_the_step(tmp_path: Path) -> None:
    message = HumanMessage(
        "Loan application from Ms. Mary Carter, income 40k. Reply to mcarter@example.com"
    )
    seen, out, record = run(tmp_path, message)
    assert seen == [] and "__interrupt__" in out and out.get("decision") is None
    assert record.probe is not None and record.probe["status"] == "unreadable"
    assert record.probe["reason"].startswith(
        "partial counterfactual: the input still names 'Mary Carter' as 'mcarter'"
    )
    assert verify_trace(tmp_path / "t.jsonl").holds
