"""The README's two-line guard with the default probe: a decision flip trips, a clean run does not.

The graphs decide a loan by the applicant's gender and write the decision as a letter (shared
boilerplate, one sentence differs), a ``Decision: X`` line or a JSON object; their fair twins
write the same for everyone. Only ``[intervention] router = "human-review"`` is set (no LLM
client is configured, so there is no LLM repair): every probe setting is the default.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langgraph.graph import END, START, StateGraph

from biasbreaker.config import Settings
from biasbreaker.kernel import Kernel
from biasbreaker.trace import read_trace
from biasbreaker_plugins.langgraph import BiasState, guard
from biasbreaker_plugins.scorers.decision import DecisionScorer, decision_of
from biasbreaker_plugins.scorers.lexical import LexicalScorer

pytestmark = pytest.mark.langgraph

LETTER = """Dear {name},

Thank you for applying for a personal loan with Northfield Bank. We have reviewed your income,
your credit history and the documents you sent us.

{verdict}

If you have any questions, please call our lending team on 555-0100, Monday to Friday.

Sincerely,
The Lending Team"""
APPROVED = "We are pleased to tell you that your application has been approved."
DECLINED = "We regret to tell you that your application has been declined."
# two approvals worded differently: the same decision
APPROVED_AGAIN = "We are happy to say that we have approved your application."


def letter(verdict: str, name: str = "Mr. John Carter") -> str:
    return LETTER.format(name=name, verdict=verdict)


def is_woman(applicant: str) -> bool:
    return any(w in applicant.split() for w in ("Ms.", "Mrs.", "Mary", "She", "she", "her"))


Output = Callable[[bool], Any]
"""What a node writes for a man (``False``) or a woman (``True``)."""

BIASED: dict[str, Output] = {
    "letter": lambda woman: letter(DECLINED if woman else APPROVED),
    "decision-line": lambda woman: "Decision: DENY." if woman else "Decision: APPROVE.",
    "json": lambda woman: json.dumps(
        {"decision": "deny" if woman else "approve", "reason": "income and credit history"}
    ),
    "object": lambda woman: {"decision": "deny" if woman else "approve", "amount": 5000},
}
FAIR: dict[str, Output] = {
    "letter": lambda woman: letter(APPROVED, name="Applicant"),
    "decision-line": lambda woman: "Decision: APPROVE.",
    "json": lambda woman: json.dumps({"decision": "approve", "reason": "income verified"}),
    "object": lambda woman: {"decision": "approve", "amount": 5000},
}


class Loan(BiasState, total=False):
    applicant: str
    outcome: Any


def loan_graph(output: Output) -> StateGraph[Any, Any, Any, Any]:
    def decide(state: Loan) -> dict[str, Any]:
        return {"outcome": output(is_woman(state["applicant"]))}

    builder = StateGraph(Loan)
    builder.add_node("decide", decide)
    builder.add_edge(START, "decide")
    builder.add_edge("decide", END)
    return builder


def local_score(tmp_path: Path, output: Output) -> tuple[float, str]:
    """The node's local score with the default probe, and the breaker's state after it."""
    settings = {
        "intervention": {"router": "human-review"},
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    assert kernel.settings.probe == Settings().probe  # every probe setting is the default
    graph = guard(loan_graph(output), kernel).compile()
    graph.invoke(
        {"applicant": "Loan application from Mr. John Carter; he earns 40k a year."},
        {"configurable": {"thread_id": "t"}},
    )
    (record, *_) = read_trace(tmp_path / "t.jsonl").records
    return record.scores["decide"], record.state.value


def test_the_default_probe_pairs_decision_with_lexical() -> None:
    assert Settings().probe.scorers == ["decision", "lexical"]
    assert Settings().probe.combine == "max"


@pytest.mark.parametrize("kind", sorted(BIASED))
def test_a_decision_that_follows_gender_trips_the_default_guard(tmp_path: Path, kind: str) -> None:
    score, state = local_score(tmp_path, BIASED[kind])
    tau_enter = Settings().breaker.tau_enter
    print(f"{kind}: local score {score:.3f} (tau_enter {tau_enter})")
    assert score >= tau_enter and state != "normal"


@pytest.mark.parametrize("kind", sorted(FAIR))
def test_a_deterministic_fair_pipeline_does_not_trip(tmp_path: Path, kind: str) -> None:
    score, state = local_score(tmp_path, FAIR[kind])
    assert score == 0.0 and state == "normal"


def test_lexical_alone_misses_the_flips_the_default_catches() -> None:
    """Why lexical is not the default alone: these flips share most of their words."""
    lexical, decision = LexicalScorer(), DecisionScorer()
    tau_enter = Settings().breaker.tau_enter
    pairs = [
        (letter(APPROVED), letter(DECLINED)),
        (json.dumps({"decision": "approve", "reason": "income verified, five years in the job"}),
         json.dumps({"decision": "deny", "reason": "income verified, five years in the job"})),
    ]  # fmt: skip
    for a, b in pairs:
        assert lexical.divergence([a], [b])[0] < tau_enter
        assert decision.divergence([a], [b]) == [1.0]


class Terms(BiasState, total=False):
    applicant: str
    decision: str
    apr: float
    limit: int
    tier: str


UPDATES: dict[str, Callable[[bool], dict[str, Any]]] = {
    "apr": lambda woman: {"decision": "approve", "apr": 24.9 if woman else 12.9},
    "limit": lambda woman: {"decision": "approve", "limit": 2000 if woman else 10000},
    "tier": lambda woman: {"decision": "approve", "tier": "bronze" if woman else "gold"},
}


@pytest.mark.parametrize("kind", sorted(UPDATES))
def test_worse_terms_beside_the_same_decision_trip_the_default_guard(
    tmp_path: Path, kind: str
) -> None:
    """A new-user trial's fail-open: the node's update has a ``decision`` field, which alone
    was read (0 here, 0.2 from ``lexical``), so the terms that follow gender went on."""
    update = UPDATES[kind]

    def decide(state: Terms) -> dict[str, Any]:
        return update(is_woman(state["applicant"]))

    builder = StateGraph(Terms)
    builder.add_node("decide", decide)
    builder.add_edge(START, "decide")
    builder.add_edge("decide", END)
    settings = {
        "intervention": {"router": "human-review"},
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    graph = guard(builder, kernel).compile()
    graph.invoke(
        {"applicant": "Loan application from Ms. Mary Carter; she earns 40k a year."},
        {"configurable": {"thread_id": "t"}},
    )
    (record, *_) = read_trace(tmp_path / "t.jsonl").records
    assert record.scores["decide"] >= Settings().breaker.tau_enter
    assert record.state.value != "normal"


def test_decision_reads_the_decision_of_free_text_and_nothing_else() -> None:
    s = DecisionScorer()
    assert decision_of(letter(APPROVED)) == decision_of(letter(APPROVED_AGAIN)) == "positive"
    assert decision_of(letter(DECLINED)) == "negative"
    assert decision_of(letter("We cannot approve your application at this time.")) == "negative"
    assert decision_of(letter("We need two more payslips before we decide.")) is None
    assert decision_of("Summary of the call\nDecision: Reject\nNext steps: none") == "reject"
    # the same decision in other words is no change; text with no decision is no signal
    assert s.pair(letter(APPROVED), letter(APPROVED_AGAIN)) == 0.0
    reworded = (
        "The applicant has five years of experience in logistics and leads a small team.",
        "The applicant has 5 years of logistics experience and leads a small team of four.",
    )
    assert s.pair(*reworded) == 0.0
    # a decision stated on one side only is a change
    assert s.pair(letter(APPROVED), letter("We need two more payslips before we decide.")) == 1.0
    # short one-line answers are labels, as before
    assert s.pair("Yes.", "No.") == 1.0 and s.pair("Answer: B.", "answer: b") == 0.0


def test_the_two_line_guard_without_a_client_fails_at_build_with_the_choices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing configured: guard() refuses to build (no simulated fake repairs a real graph)."""
    from biasbreaker.errors import ConfigError

    monkeypatch.chdir(tmp_path)  # guard(builder) reads the current directory's configuration
    with pytest.raises(ConfigError) as caught:
        guard(loan_graph(FAIR["letter"]))
    text = " ".join(str(caught.value).split())
    assert "[llm] client is not set (default)" in text
    for choice in ('client = "openai-compatible"', 'router = "human-review"', 'client = "fake"'):
        assert choice in text
