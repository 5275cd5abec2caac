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


def test_the_reissues_start_before_the_models_own_call_returns(tmp_path: Path) -> None:
    watch = Watch()
    base = model(False, watch)
    marks: list[tuple[str, float]] = []
    slow = SlowModel(**{**base.__dict__, "marks": (threading.Lock(), marks)})
    agent = _agent(False, watch, tmp_path, True, slow)
    agent.invoke(question(WOMAN), {"configurable": {"thread_id": "t"}})
    first_end = min(t for what, t in marks if what == "end")
    starts = sorted(t for what, t in marks if what == "start")
    assert len([t for t in starts if t < first_end]) == 7  # the call and its 6 re-issues
