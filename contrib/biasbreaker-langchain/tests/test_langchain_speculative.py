"""Speculative probing in the middleware: re-issues start with the model's own call.

The traces are byte for byte those of probing after the call (``[probe] speculative = false``)
for the same seed, sync and async, a trip and review included; the re-issues do start before
the model's own call has returned; a held reply still never runs its tool.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from biasbreaker_langchain import BiasGuardMiddleware
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from lc_agents import SETTINGS, WOMAN, LoanModel, Watch, loan_tools, model, question


def _agent(
    biased: bool, watch: Watch, tmp_path: Path, speculative: bool, model_: Any = None
) -> Any:
    trace = str(tmp_path / "trace-{thread_id}.jsonl")
    middleware = BiasGuardMiddleware(
        {
            **SETTINGS,
            "probe": {**SETTINGS["probe"], "speculative": speculative},
            "plugin": {"langchain-agent": {"trace_path": trace}},
        }
    )
    return create_agent(
        model_ if model_ is not None else model(biased, watch),
        tools=loan_tools(watch),
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


def _traces(tmp_path: Path, speculative: bool, asynchronous: bool) -> dict[str, bytes]:
    for biased in (True, False):
        watch = Watch()
        agent = _agent(biased, watch, tmp_path, speculative)
        config = {"configurable": {"thread_id": "biased" if biased else "fair"}}
        value: Any = question(WOMAN)
        for _ in range(2):
            if asynchronous:
                out = asyncio.run(agent.ainvoke(value, config))
            else:
                out = agent.invoke(value, config)
            if "__interrupt__" not in out:
                break
            sha = out["__interrupt__"][0].value["sha256"]
            value = Command(resume={"action": "approve", "sha256": sha})
        if biased:
            assert [e[0] for e in watch.executed] == ["deny_loan"]  # ran once, after review
    return {p.name: p.read_bytes() for p in sorted(tmp_path.glob("*.jsonl"))}


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_traces_are_byte_identical_to_probing_after_the_call(
    tmp_path: Path, asynchronous: bool
) -> None:
    (tmp_path / "seq").mkdir()
    (tmp_path / "spec").mkdir()
    sequential = _traces(tmp_path / "seq", False, asynchronous)
    speculative = _traces(tmp_path / "spec", True, asynchronous)
    assert sorted(sequential) == ["trace-biased.jsonl", "trace-fair.jsonl"]
    assert speculative == sequential
    assert b'"trip"' in sequential["trace-biased.jsonl"]


class SlowModel(LoanModel):
    """A :class:`LoanModel` that records when each call starts and ends, each taking 0.3 s."""

    marks: Any = None

    def _reply(self, messages: Any) -> Any:
        with self.marks[0]:
            self.marks[1].append(("start", time.monotonic()))
        time.sleep(0.3)
        out = super()._reply(messages)
        with self.marks[0]:
            self.marks[1].append(("end", time.monotonic()))
        return out


def _marks(tmp_path: Path, speculative: bool) -> list[tuple[str, float]]:
    """When each model call of a fair loan question started and ended (two model calls: the
    tool call, then the closing reply)."""
    watch = Watch()
    base = model(False, watch)
    marks: list[tuple[str, float]] = []
    slow = SlowModel(**{**base.__dict__, "marks": (threading.Lock(), marks)})
    agent = _agent(False, watch, tmp_path, speculative, slow)
    agent.invoke(question(WOMAN), {"configurable": {"thread_id": "t"}})
    return marks


def test_the_reissues_start_before_the_models_own_call_returns(tmp_path: Path) -> None:
    marks = _marks(tmp_path, True)
    first_end = min(t for what, t in marks if what == "end")
    starts = sorted(t for what, t in marks if what == "start")
    assert len([t for t in starts if t < first_end]) == 7  # the call and its 6 re-issues
    # and they are the ones scored: no model call is re-issued again after it returned
    assert len(starts) == 2 * 7


def test_without_speculation_the_reissues_start_after_the_models_own_call(
    tmp_path: Path,
) -> None:
    marks = _marks(tmp_path, False)
    first_end = min(t for what, t in marks if what == "end")
    starts = sorted(t for what, t in marks if what == "start")
    assert len([t for t in starts if t < first_end]) == 1  # the model's own call alone
    assert len(starts) == 2 * 7


class EditingModel(LoanModel):
    """A :class:`LoanModel` whose own call edits the question in place (the re-issues are
    asked rebuilt copies of it): the request the call is read with after it is not the one its
    re-issues were drawn from. Records ``(own call?, the last message's text)`` of every call."""

    asked: Any = None

    def _reply(self, messages: Any) -> Any:
        question_, seen = self.asked
        own = any(m is question_ for m in messages)
        seen.append((own, str(messages[-1].content)))
        if own and "Ms. Mary Carter" in question_.content:
            time.sleep(0.1)  # the re-issues have started
            question_.content = WOMAN.replace("Ms. Mary", "Mr. John").replace("She ", "He ")
        return super()._reply(messages)


def test_a_request_changed_during_the_call_is_probed_as_read_after_it(tmp_path: Path) -> None:
    """The speculation drew from the request before the call; the call is probed as read after
    it (as without speculation): the speculation is discarded and the changed request
    re-issued, so the score is never the stale request's."""
    watch = Watch()
    base = model(False, watch)
    asked = HumanMessage(WOMAN, id="q-1")
    seen: list[tuple[bool, str]] = []
    editing = EditingModel(**{**base.__dict__, "asked": (asked, seen)})
    agent = _agent(False, watch, tmp_path, True, editing)
    agent.invoke({"messages": [asked]}, {"configurable": {"thread_id": "t"}})
    first = [(mine, text) for mine, text in seen if text.startswith("Loan application")]
    assert len(first) == 1 + 6 + 6  # its re-issues drawn before the call, then after it
    assert len(seen) - len(first) == 1 + 6  # the closing reply's, drawn before its call
    # the resamples re-issued after the call are of the edited request, the one scored
    assert sum("Mr. John Carter" in text for mine, text in first if not mine) == 2
