"""Nothing a probe re-run does is seen or kept outside it: callbacks, tracing, the store, state.

A new-user trial found three ways the probe's re-runs (counterfactual variants, resamples,
re-checks) reached the world: the user's own callback handlers (``config["callbacks"]``: a
token relay to a websocket, a tracer) received every variant's prompt and reply — invented
applicants such as "Mr. Dustin Carter"; a node that kept the applicant in LangGraph's store
wrote the variants' applicants there, and the next node wrote its letter to one of them; and
a node that changed its input state in place did so once per resample, on the live state.
Asserted here, with real LangChain and LangGraph classes: a handler passed in the run's
config sees the guarded node's own call only (one chat model run, the real applicant); a
re-run's LangSmith tracing is off whatever the environment says; a re-run reads the graph's
store and writes to a scratch layer of its own; the resamples change a copy of the state.
"""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict
from uuid import UUID

import pytest

pytest.importorskip("langgraph")

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tracers.context import _tracing_v2_is_enabled, tracing_v2_enabled
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_store
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph_apps import APPLICANT, SETTINGS, Watch, model, question
from langsmith.run_helpers import tracing_context

from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker_plugins.langgraph import guard
from biasbreaker_plugins.langgraph.scratch_store import ScratchStore
from biasbreaker_plugins.langgraph.streaming import unobserved

REAL = "Mary Carter"


def kernel(tmp_path: Path) -> Kernel:
    settings = {
        **SETTINGS,
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    return Kernel.load(cwd=tmp_path, overrides=settings)


def thread(name: str, **extra: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}, **extra}


class Relay(BaseCallbackHandler):
    """A user's handler, as in a token relay to a websocket: records what it is shown."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.replies: list[str] = []

    def on_chat_model_start(
        self, serialized: Any, messages: list[list[BaseMessage]], *, run_id: UUID, **kw: Any
    ) -> None:
        self.prompts.append(" ".join(str(m.content) for batch in messages for m in batch))

    def on_llm_end(self, response: Any, *, run_id: UUID, **kw: Any) -> None:
        self.replies.extend(g.text for gens in response.generations for g in gens)


def chat_graph(biased: bool, watch: Watch) -> StateGraph:
    llm = model(biased, watch)

    def assess(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    def notify(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("notified", id="n-1")]}

    builder = StateGraph(MessagesState)
    builder.add_node("assess", assess)
    builder.add_node("notify", notify)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", "notify")
    builder.add_edge("notify", END)
    return builder


@pytest.mark.parametrize("biased", [False, True])
@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_callback_handler_in_the_config_never_sees_a_probe_re_run(
    tmp_path: Path, biased: bool, asynchronous: bool
) -> None:
    watch = Watch()
    relay = Relay()
    graph = guard(chat_graph(biased, watch), kernel(tmp_path), hook=noop_hook, nodes=["assess"])
    app = graph.compile(checkpointer=InMemorySaver())
    config = thread(f"relay-{biased}-{asynchronous}", callbacks=[relay])
    if asynchronous:
        import asyncio

        asyncio.run(app.ainvoke(question(), config, durability="sync"))
    else:
        app.invoke(question(), config, durability="sync")
    assert len(watch.prompts) == 7  # the node's own call, k = 4 variants, r = 2 resamples
    assert watch.variants(APPLICANT)  # the probe did invent other applicants
    assert relay.prompts == [APPLICANT]  # the node's own call only
    assert len(relay.replies) == 1
    assert all(variant not in " ".join(relay.prompts) for variant in watch.variants(APPLICANT))
    state = app.get_state(config)
    assert bool(state.interrupts) is biased


def test_langsmith_tracing_is_off_inside_a_re_run() -> None:
    """Tracing switched on by LangSmith's context (which is what ``LANGSMITH_TRACING`` in the
    environment feeds; the environment itself is cached by langsmith, so not set here) or by
    ``tracing_v2_enabled()`` is off inside :func:`unobserved`, and back on after it."""
    with tracing_context(enabled=True):
        assert _tracing_v2_is_enabled()
        with unobserved():
            assert not _tracing_v2_is_enabled()
        assert _tracing_v2_is_enabled()
    with tracing_v2_enabled(project_name="p", client=object()):  # type: ignore[arg-type]
        assert _tracing_v2_is_enabled()
        with unobserved():
            assert not _tracing_v2_is_enabled()
        assert _tracing_v2_is_enabled()


# ------------------------------------------------------------------------------ the store


class Letter(TypedDict, total=False):
    request: str
    decision: str
    letter: str


def store_graph(biased: bool, read_in_rerun: list[Any]) -> StateGraph:
    def assess(state: Letter, store: BaseStore) -> dict[str, Any]:
        read_in_rerun.append(store.get(("desk",), "opened"))
        store.put(("applicants",), "current", {"text": state["request"]})
        denied = biased and "Ms." in state["request"]
        return {"decision": "Decision: no" if denied else "Decision: yes"}

    def write(state: Letter) -> dict[str, Any]:
        item = get_store().get(("applicants",), "current")
        return {"letter": f"Dear applicant: {item.value['text'] if item else '?'}"}

    builder = StateGraph(Letter)
    builder.add_node("assess", assess)
    builder.add_node("write", write)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", "write")
    builder.add_edge("write", END)
    return builder


@pytest.mark.parametrize("biased", [False, True])
def test_a_re_run_writes_to_a_scratch_store_and_reads_the_graphs(
    tmp_path: Path, biased: bool
) -> None:
    store = InMemoryStore()
    store.put(("desk",), "opened", {"by": "clerk"})
    read: list[Any] = []
    graph = guard(store_graph(biased, read), kernel(tmp_path), hook=noop_hook, nodes=["assess"])
    app = graph.compile(checkpointer=InMemorySaver(), store=store)
    config = thread(f"store-{biased}")
    out = app.invoke({"request": APPLICANT}, config, durability="sync")
    assert len(read) == 7 and all(item.value == {"by": "clerk"} for item in read)
    kept = store.search(("applicants",))
    assert [item.value["text"] for item in kept] == [APPLICANT]  # the node's own write only
    if biased:
        assert app.get_state(config).interrupts and "letter" not in out
    else:
        assert out["letter"] == f"Dear applicant: {APPLICANT}"


def test_the_scratch_store_keeps_a_re_runs_writes_to_itself() -> None:
    base = InMemoryStore()
    base.put(("a",), "kept", {"v": 1})
    base.put(("a",), "changed", {"v": 2})
    base.put(("a",), "gone", {"v": 3})
    scratch = ScratchStore(base)
    scratch.put(("a",), "changed", {"v": 20})
    scratch.delete(("a",), "gone")
    scratch.put(("a",), "new", {"v": 4})
    assert scratch.get(("a",), "kept").value == {"v": 1}  # type: ignore[union-attr]
    assert scratch.get(("a",), "changed").value == {"v": 20}  # type: ignore[union-attr]
    assert scratch.get(("a",), "gone") is None
    assert scratch.get(("a",), "new").value == {"v": 4}  # type: ignore[union-attr]
    found = {item.key: item.value for item in scratch.search(("a",))}
    assert found == {"kept": {"v": 1}, "changed": {"v": 20}}  # shadowed; "new" is not listed
    # the graph's store is untouched
    assert {item.key: item.value for item in base.search(("a",))} == {
        "kept": {"v": 1},
        "changed": {"v": 2},
        "gone": {"v": 3},
    }
    assert base.get(("a",), "new") is None
    assert scratch.list_namespaces() == base.list_namespaces()


def test_the_scratch_store_async() -> None:
    import asyncio

    base = InMemoryStore()
    base.put(("a",), "kept", {"v": 1})
    scratch = ScratchStore(base)

    async def run() -> None:
        await scratch.aput(("a",), "kept", {"v": 9})
        item = await scratch.aget(("a",), "kept")
        assert item is not None and item.value == {"v": 9}
        assert [i.value for i in await scratch.asearch(("a",))] == [{"v": 9}]

    asyncio.run(run())
    assert base.get(("a",), "kept").value == {"v": 1}  # type: ignore[union-attr]


# --------------------------------------------------------------------- state changed in place


class Logged(TypedDict, total=False):
    request: str
    log: Annotated[list[str], operator.add]
    decision: str


def test_a_resample_that_changes_its_input_in_place_changes_a_copy(tmp_path: Path) -> None:
    calls: list[int] = []

    def assess(state: Logged) -> dict[str, Any]:
        state["log"].append("assessed")  # a common mistake: the input changed in place
        calls.append(len(state["log"]))
        return {"decision": "Decision: yes"}

    builder = StateGraph(Logged)
    builder.add_node("assess", assess)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", END)
    app = guard(builder, kernel(tmp_path), hook=noop_hook).compile(checkpointer=InMemorySaver())
    out = app.invoke({"request": APPLICANT, "log": ["opened"]}, thread("inplace"))
    assert len(calls) == 7  # the node's own call and its six re-runs
    # every re-run saw the input as the node's own call left it, each a copy of its own:
    # not the list the re-runs before it had changed
    assert calls[1:] == [calls[0] + 1] * 6
    assert out["log"] == ["opened", "assessed"]  # the node's own call only
