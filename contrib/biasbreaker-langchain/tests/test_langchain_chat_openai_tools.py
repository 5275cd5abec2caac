"""``ChatOpenAI`` calling tools over HTTP: a planted bias is held, its tool call never runs.

The model is the seeded fake (**simulated**) served by biasbreaker-openai-compatible's test
server, whose :class:`~biasbreaker_openai_compatible.testing.DecisionTools` turns its
``Decision: yes|no`` into a real OpenAI tool call to ``approve_loan`` or ``deny_loan``
(``message.tool_calls`` with ``finish_reason: "tool_calls"``, or ``delta.tool_calls``
fragments over server-sent events when ``ChatOpenAI`` streams). ``ChatOpenAI`` is the real
LangChain class parsing the real wire format; nothing is mocked below the HTTP socket.

The *biased* server approves men only (weights man 20 : woman 0.05): Ms. Mary Carter is denied
(``deny_loan``), Mr. John Carter approved (``approve_loan``). Guarded, either decision is held
and its tool never executes, in ``invoke``, ``ainvoke``, ``stream`` and ``astream``
(``stream_mode=["messages", "updates"]``; no chunk shows the held call, a variant's call or a
variant's prompt). Unguarded, the biased tool runs: the control that shows the guard is what
stops it. The *clean* server's tool call runs exactly once and the run ends as the unguarded
run does. Every guarded run's trace verifies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

pytest.importorskip("langchain_openai")
pytest.importorskip("biasbreaker_openai_compatible")

from biasbreaker_langchain import WITHHELD, BiasGuardMiddleware
from biasbreaker_openai_compatible import testing
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from lc_agents import SETTINGS, WOMAN, Watch, loan_tools, question, scrub

from biasbreaker.verify import verify_trace
from biasbreaker_plugins.llm_fake import FakeLLM, FakeLLMOptions

T = TypeVar("T")
MAN = (
    "Loan application from Mr. John Carter. He earns 40k a year. Should we approve? "
    "Decide yes or no."
)
TOOL_FOR = {"yes": "approve_loan", "no": "deny_loan"}
# the biased server's decision for each applicant, and the tool call it becomes
BIASED = {WOMAN: ("deny_loan", "Decision: no"), MAN: ("approve_loan", "Decision: yes")}
APPLICANTS = pytest.mark.parametrize("applicant", [WOMAN, MAN], ids=["woman", "man"])


def backend(biased: bool) -> testing.DecisionTools:
    """The seeded fake over HTTP, its decisions made tool calls (seed 0)."""
    weights = {"man": 20.0, "woman": 0.05} if biased else {}
    # over HTTP the probe's sample index does not reach the fake (every draw is sample 0), so
    # the planted preference is at its strongest shift, which decides these prompts at sample 0
    options = FakeLLMOptions(bias=1.0 if biased else 0.0, weights=weights, score_shift=0.5)
    return testing.DecisionTools(testing.ClientBackend(FakeLLM(options, seed=0)), TOOL_FOR)


@pytest.fixture
def biased_server() -> Iterator[testing.ChatServer]:
    with testing.ChatServer(backend(True)) as server:
        yield server


@pytest.fixture
def clean_server() -> Iterator[testing.ChatServer]:
    with testing.ChatServer(backend(False)) as server:
        yield server


class Run:
    """One agent over ``ChatOpenAI`` against ``server``, guarded or not, tracing to tmp_path."""

    def __init__(
        self,
        server: testing.ChatServer,
        tmp_path: Path,
        *,
        guarded: bool = True,
        streaming: bool = False,
        thread: str = "t",
    ) -> None:
        self.server = server
        self.watch = Watch()
        self.trace = tmp_path / f"{thread}.jsonl"
        self.config: dict[str, Any] = {"configurable": {"thread_id": thread}}
        settings = {
            **SETTINGS,
            "plugin": {"langchain-agent": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
        }
        # streaming=False given explicitly would forbid streaming: leave it unset then, so
        # ChatOpenAI streams when a stream_mode="messages" handler is attached, as by default
        always = {"streaming": True} if streaming else {}
        # langchain-openai's default async HTTP client is cached per base_url and bound to the
        # first event loop that used it: each run gets its own, closed by its asyncio.run
        self.http = httpx.AsyncClient()
        llm = ChatOpenAI(
            model="biasbreaker-test",
            base_url=server.base_url,
            api_key="not-a-key",
            max_retries=0,
            http_async_client=self.http,
            **always,
        )
        self.agent = create_agent(
            llm,
            tools=loan_tools(self.watch),
            middleware=[BiasGuardMiddleware(settings)] if guarded else [],
            checkpointer=InMemorySaver(),
        )

    def run_async(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` in a new event loop, then close this run's async HTTP client."""

        async def main() -> T:
            try:
                return await work
            finally:
                await self.http.aclose()

        return asyncio.run(main())

    def prompts(self) -> list[str]:
        """The last user message of every chat request the server received."""
        return [c.last_user_message for c in self.server.chat_calls]

    def variants(self, applicant: str) -> list[str]:
        """The probe's counterfactual prompts (other applicants), as sent over HTTP."""
        return sorted({p for p in self.prompts() if p != applicant})


def tool_calls(message: BaseMessage) -> list[tuple[str, Any]]:
    return [(c["name"], c["args"]) for c in getattr(message, "tool_calls", [])]


def shape(messages: list[BaseMessage]) -> list[tuple[str, str, list[tuple[str, Any]]]]:
    """The messages without their ids: type, text, tool calls (name, arguments)."""
    return [(m.type, str(m.content), tool_calls(m)) for m in messages]


def held_view(tool: str, text: str) -> dict[str, Any]:
    call = {"name": tool, "args": {"reason": text}}
    message = {"type": "ai", "content": "", "tool_calls": [call], "finish_reason": "tool_calls"}
    return {"messages": [message]}


def banned(run: Run, applicant: str) -> list[str]:
    """What no chunk may show: either decision's tool call and text, any variant's prompt."""
    variants = run.variants(applicant)
    assert variants, "the probe re-issued no counterfactual over HTTP: nothing to look for"
    return ["approve_loan", "deny_loan", "Decision: yes", "Decision: no", *variants]


# -- the control: without the guard the biased tool call runs ------------------------------


@APPLICANTS
def test_unguarded_the_biased_server_s_tool_call_runs(
    biased_server: testing.ChatServer, tmp_path: Path, applicant: str
) -> None:
    run = Run(biased_server, tmp_path, guarded=False)
    out = run.agent.invoke(question(applicant), run.config)
    tool, text = BIASED[applicant]
    assert run.watch.executed == [(tool, text)]
    assert len(biased_server.chat_calls) == 2  # the tool call, then the turn's close
    assert shape(out["messages"])[1] == ("ai", "", [(tool, {"reason": text})])


# -- guarded: held, the tool never runs -----------------------------------------------------


@APPLICANTS
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_biased_tool_call_over_http_is_held_and_never_runs(
    biased_server: testing.ChatServer, tmp_path: Path, applicant: str, mode: str
) -> None:
    run = Run(biased_server, tmp_path, thread=mode)
    if mode == "invoke":
        out = run.agent.invoke(question(applicant), run.config)
    else:
        out = run.run_async(run.agent.ainvoke(question(applicant), run.config))
    tool, text = BIASED[applicant]
    assert run.watch.executed == []
    assert run.variants(applicant)  # probed over HTTP
    assert [type(m).__name__ for m in out["messages"]] == ["HumanMessage"]
    request = out["__interrupt__"][0].value
    assert request["state"] == "escalated"
    assert request["reply"] == held_view(tool, text)
    # every model request carried the tools: the server was asked to call them
    assert all(c.tool_names == ["approve_loan", "deny_loan"] for c in biased_server.chat_calls)
    assert verify_trace(run.trace).holds


def test_a_rejected_tool_call_is_replaced_without_a_new_request(
    biased_server: testing.ChatServer, tmp_path: Path
) -> None:
    run = Run(biased_server, tmp_path)
    out = run.agent.invoke(question(WOMAN), run.config)
    request = out["__interrupt__"][0].value
    sent = len(biased_server.chat_calls)
    out = run.agent.invoke(
        Command(resume={"action": "reject", "sha256": request["sha256"]}), run.config
    )
    assert len(biased_server.chat_calls) == sent  # the held reply answered, not a new request
    assert run.watch.executed == []
    assert shape(out["messages"]) == [
        ("human", WOMAN, []),
        ("ai", WITHHELD.format(reason=request["reason"]), []),
    ]
    assert verify_trace(run.trace).holds


async def _astream(run: Run, applicant: str) -> list[Any]:
    modes = ["messages", "updates"]
    return [c async for c in run.agent.astream(question(applicant), run.config, stream_mode=modes)]


@APPLICANTS
@pytest.mark.parametrize("streaming", [False, True], ids=["stream-on-demand", "always-stream"])
@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_a_streamed_biased_tool_call_is_held_and_no_chunk_shows_it(
    biased_server: testing.ChatServer,
    tmp_path: Path,
    applicant: str,
    streaming: bool,
    mode: str,
) -> None:
    """``stream_mode=["messages", "updates"]``; the model's tokens arrive over SSE."""
    run = Run(biased_server, tmp_path, streaming=streaming, thread=mode)
    if mode == "stream":
        modes = ["messages", "updates"]
        chunks = list(run.agent.stream(question(applicant), run.config, stream_mode=modes))
    else:
        chunks = run.run_async(_astream(run, applicant))
    assert run.watch.executed == []
    streamed = [c for c in biased_server.chat_calls if c.stream]
    assert streamed, "no request asked for a stream: the SSE tool calls were not exercised"
    if streaming:
        assert streamed == biased_server.chat_calls  # every request, the probe's too
    interrupts = [
        c[1]["__interrupt__"] for c in chunks if c[0] == "updates" and "__interrupt__" in c[1]
    ]
    (interrupt,) = interrupts
    assert interrupt[0].value["reply"] == held_view(*BIASED[applicant])
    text = scrub(chunks)
    assert [s for s in banned(run, applicant) if s in text] == []
    assert not any(isinstance(c[1][0], AIMessageChunk) for c in chunks if c[0] == "messages")
    assert verify_trace(run.trace).holds


# -- clean: the tool call runs once, the run as unguarded -----------------------------------


def _messages_of(chunks: list[Any]) -> list[tuple[str, str, list[tuple[str, Any]]]]:
    """The ``messages`` stream's chunks: type, text, tool-call chunks (name, argument text)."""
    out = []
    for _, (message, _meta) in (c for c in chunks if c[0] == "messages"):
        calls = [(t["name"], t["args"]) for t in getattr(message, "tool_call_chunks", [])]
        out.append((message.type, str(message.content), calls))
    return out


@pytest.mark.parametrize("mode", ["invoke", "ainvoke", "stream", "astream"])
def test_a_clean_tool_call_over_http_runs_once_and_the_run_is_unchanged(
    clean_server: testing.ChatServer, tmp_path: Path, mode: str
) -> None:
    def go(run: Run) -> tuple[list[BaseMessage], list[Any]]:
        if mode == "invoke":
            return run.agent.invoke(question(WOMAN), run.config)["messages"], []
        if mode == "ainvoke":
            out = run.run_async(run.agent.ainvoke(question(WOMAN), run.config))
            return out["messages"], []
        if mode == "stream":
            modes = ["messages", "updates"]
            chunks = list(run.agent.stream(question(WOMAN), run.config, stream_mode=modes))
        else:
            chunks = run.run_async(_astream(run, WOMAN))
        return run.agent.get_state(run.config).values["messages"], chunks

    bare = Run(clean_server, tmp_path, guarded=False, thread="bare")
    bare_messages, bare_chunks = go(bare)
    bare_requests = len(clean_server.chat_calls)
    guarded = Run(clean_server, tmp_path, thread="guarded")
    messages, chunks = go(guarded)
    assert guarded.watch.executed == [("deny_loan", "Decision: no")]  # once
    assert bare.watch.executed == guarded.watch.executed
    assert shape(messages) == shape(bare_messages)
    assert shape(messages) == [
        ("human", WOMAN, []),
        ("ai", "", [("deny_loan", {"reason": "Decision: no"})]),
        ("tool", "denied", []),
        ("ai", "Done: the tool returned denied.", []),
    ]
    assert isinstance(messages[-1], AIMessage)
    assert len(clean_server.chat_calls) > bare_requests + 2  # both model calls were probed
    if chunks:
        assert not any("__interrupt__" in c[1] for c in chunks if c[0] == "updates")
        assert _messages_of(chunks) == _messages_of(bare_chunks)  # the same tokens, released
        assert any(c.stream for c in clean_server.chat_calls)  # over SSE
    assert verify_trace(guarded.trace).holds
