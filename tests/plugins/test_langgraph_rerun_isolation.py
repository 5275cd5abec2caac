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

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict
from uuid import UUID

import pytest

pytest.importorskip("langgraph")

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tracers.context import _tracing_v2_is_enabled, tracing_v2_enabled
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_store
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph_apps import APPLICANT, SETTINGS, Watch, model, question
from langsmith.run_helpers import tracing_context
from pydantic import BaseModel

from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker_plugins.langgraph import guard
from biasbreaker_plugins.langgraph.probing import in_rerun
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
    assert found == {"kept": {"v": 1}, "changed": {"v": 20}, "new": {"v": 4}}  # as it left them
    # the graph's store is untouched
    assert {item.key: item.value for item in base.search(("a",))} == {
        "kept": {"v": 1},
        "changed": {"v": 2},
        "gone": {"v": 3},
    }
    assert base.get(("a",), "new") is None
    assert scratch.list_namespaces() == base.list_namespaces()


def test_a_re_runs_search_lists_its_own_writes_as_the_store_would() -> None:
    """A search merges the re-run's writes with the graph's items: prefix, filter (equality,
    operators, nested values), an overwrite that no longer matches left out, offset and limit
    over the merged list (the items the graph lists first, in its order, then those only the
    re-run's writes make match, in the order written)."""
    base = InMemoryStore()
    base.put(("apps", "1"), "a", {"kind": "loan", "score": 1})
    base.put(("apps", "2"), "b", {"kind": "card", "score": 2})
    base.put(("apps", "3"), "c", {"kind": "loan", "score": 3})
    base.put(("desk",), "d", {"kind": "loan", "score": 4})
    scratch = ScratchStore(base)
    scratch.put(("apps", "4"), "e", {"kind": "loan", "score": 5, "who": {"tier": [1, 2]}})
    scratch.put(("apps", "3"), "c", {"kind": "card", "score": 3})  # no longer a loan
    scratch.put(("apps", "2"), "b", {"kind": "loan", "score": 2})  # now a loan

    def keys(**kwargs: Any) -> list[str]:
        return [item.key for item in scratch.search(("apps",), **kwargs)]

    assert keys() == ["a", "b", "c", "e"]
    assert keys(filter={"kind": "loan"}) == ["a", "e", "b"]  # b matches by the re-run's write
    assert keys(filter={"score": {"$gte": 2}, "kind": {"$ne": "card"}}) == ["e", "b"]
    assert keys(filter={"who": {"tier": [1, 2]}}) == ["e"]
    assert keys(filter={"kind": "loan"}, limit=1, offset=1) == ["e"]
    assert keys(filter={"kind": "loan"}, offset=2) == ["b"]
    found = scratch.search(("apps", "4"), filter={"kind": "loan"})
    assert [(item.namespace, item.value["score"], item.score) for item in found] == [
        (("apps", "4"), 5, None)
    ]
    assert [item.key for item in scratch.search(("desk",))] == ["d"]  # untouched prefix
    scratch.delete(("apps", "1"), "a")
    assert keys(filter={"kind": "loan"}) == ["e", "b"]
    assert [item.key for item in base.search(("apps",), filter={"kind": "loan"})] == ["a", "c"]


def test_a_semantic_search_of_a_re_runs_own_writes_is_unreadable() -> None:
    """A store that ranks by embeddings cannot rank the scratch items: the search raises
    Unreadable (the step is held) instead of guessing; before any write it is the store's."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from biasbreaker_plugins.langgraph.values import Unreadable

    base = InMemoryStore(index={"dims": 8, "embed": DeterministicFakeEmbedding(size=8)})
    base.put(("apps",), "a", {"text": "a loan"})
    scratch = ScratchStore(base)
    assert [item.key for item in scratch.search(("apps",), query="loan")] == ["a"]
    scratch.put(("apps",), "b", {"text": "another loan"})
    with pytest.raises(Unreadable, match=r"store\.search\(\('apps',\), query=\.\.\.\).*filter="):
        scratch.search(("apps",), query="loan")
    assert [item.key for item in scratch.search(("other",), query="loan")] == []
    # a store without an index ignores query: the merge answers it
    plain = ScratchStore(InMemoryStore())
    plain.put(("apps",), "b", {"text": "another loan"})
    assert [item.key for item in plain.search(("apps",), query="loan")] == ["b"]


def fair_filing_graph(found_in: list[int]) -> StateGraph:
    def assess(state: Letter, store: BaseStore) -> dict[str, Any]:
        # filed under the applicant, found by the applicant: a variant finds its own record
        store.put(("applications",), state["request"], {"text": state["request"]})
        found = store.search(("applications",), filter={"text": state["request"]})
        found_in.append(len(found))
        return {"decision": "Decision: yes" if found else "Decision: no"}

    builder = StateGraph(Letter)
    builder.add_node("assess", assess)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", END)
    return builder


def test_a_fair_node_that_finds_what_it_has_put_passes(tmp_path: Path) -> None:
    """Its re-runs found nothing (the scratch store did not list their own writes): the
    fair node scored 1.0 and was held (a new-user trial)."""
    store = InMemoryStore()
    found: list[int] = []
    graph = guard(fair_filing_graph(found), kernel(tmp_path), hook=noop_hook, nodes=["assess"])
    app = graph.compile(checkpointer=InMemorySaver(), store=store)
    config = thread("filing")
    out = app.invoke({"request": APPLICANT}, config, durability="sync")
    assert len(found) == 7 and set(found) == {1}
    assert out["decision"] == "Decision: yes" and not app.get_state(config).interrupts
    (record,) = [r for r in records(tmp_path, config) if r.get("node") == "assess"]
    assert record["probe"]["status"] == "scored"
    assert [item.value["text"] for item in store.search(("applications",))] == [APPLICANT]


def test_a_node_whose_re_run_ranks_its_own_writes_by_embeddings_is_held(tmp_path: Path) -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    def assess(state: Letter, store: BaseStore) -> dict[str, Any]:
        store.put(("applications",), "current", {"text": state["request"]})
        found = store.search(("applications",), query=state["request"])
        return {"decision": "Decision: yes" if found else "Decision: no"}

    builder = StateGraph(Letter)
    builder.add_node("assess", assess)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", END)
    store = InMemoryStore(index={"dims": 8, "embed": DeterministicFakeEmbedding(size=8)})
    graph = guard(builder, kernel(tmp_path), hook=noop_hook, nodes=["assess"])
    app = graph.compile(checkpointer=InMemorySaver(), store=store)
    config = thread("ranked")
    app.invoke({"request": APPLICANT}, config, durability="sync")
    assert app.get_state(config).interrupts
    (record,) = [r for r in records(tmp_path, config) if r.get("node") == "assess"]
    assert record["probe"]["status"] == "unreadable"
    reason = record["probe"]["reason"]
    assert reason.startswith("the probe cannot re-run node 'assess': store.search(('applicati")
    assert "semantic search" in reason and "filter=" in reason and "opaque" not in reason


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
        await scratch.aput(("a", "b"), "new", {"v": 9})
        found = await scratch.asearch(("a",), filter={"v": 9}, offset=1)
        assert [(i.namespace, i.key) for i in found] == [(("a", "b"), "new")]

    asyncio.run(run())
    assert base.get(("a",), "kept").value == {"v": 1}  # type: ignore[union-attr]


# --------------------------------------------------------------------- state changed in place


class Logged(TypedDict, total=False):
    request: str
    log: list[str]
    decision: str
    after: str


@dataclass
class LoggedData:
    request: str = ""
    log: list[str] = field(default_factory=list)
    decision: str = ""
    after: str = ""


class LoggedModel(BaseModel):
    request: str = ""
    log: list[str] = []
    decision: str = ""
    after: str = ""


def logged_graph(schema: Any, assess: Any) -> StateGraph:
    def after(state: Any) -> dict[str, Any]:
        return {"after": "ran"}

    builder = StateGraph(schema)
    builder.add_node("assess", assess)
    builder.add_node("after", after)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", "after")
    builder.add_edge("after", END)
    return builder


def _log_of(state: Any) -> list[str]:
    return state["log"] if isinstance(state, dict) else state.log


@pytest.mark.parametrize("schema", [Logged, LoggedData, LoggedModel])
def test_a_node_that_changes_its_input_in_place_is_held(tmp_path: Path, schema: Any) -> None:
    """``state["log"].append(...)`` changes the graph's own value on a TypedDict or dataclass
    state (it was probed on the changed input and scored 0, the change already in the state):
    the step is held, naming the key. A pydantic state's fields are LangGraph's copies for the
    node, so its change reaches nothing and the step is scored."""

    def assess(state: Any) -> dict[str, Any]:
        _log_of(state).append("DENY")  # a common mistake: the input changed in place
        return {"decision": "noted"}

    graph = guard(logged_graph(schema, assess), kernel(tmp_path), hook=noop_hook, nodes=["assess"])
    app = graph.compile(checkpointer=InMemorySaver())
    config = thread(f"inplace-{schema.__name__}")
    app.invoke({"request": APPLICANT, "log": ["opened"]}, config, durability="sync")
    state = app.get_state(config)
    record = next(r for r in records(tmp_path, config) if r.get("node") == "assess")
    if schema is LoggedModel:
        assert record["probe"]["status"] == "scored"
        assert state.values["log"] == ["opened"] and not state.interrupts
        return
    assert record["probe"]["status"] == "unreadable"
    assert "changed the graph's values of ['log'] in place" in record["probe"]["reason"]
    assert state.interrupts and state.values.get("after") != "ran"  # the run stops here


def test_a_change_in_place_shows_in_the_values_stream_too(tmp_path: Path) -> None:
    """As docs/langgraph.md §8 says: not only in what invoke returns; in the held chunk and in
    an earlier chunk the caller kept (it holds LangGraph's own list)."""

    def assess(state: Any) -> dict[str, Any]:
        state["log"].append("DENY")
        return {"decision": "noted"}

    graph = guard(logged_graph(Logged, assess), kernel(tmp_path), hook=noop_hook, nodes=["assess"])
    app = graph.compile(checkpointer=InMemorySaver())
    given = {"request": APPLICANT, "log": ["opened"]}
    chunks = list(app.stream(given, thread("inplace-stream"), stream_mode="values"))
    assert "__interrupt__" in chunks[-1]
    assert [chunk["log"] for chunk in chunks] == [["opened", "DENY"]] * len(chunks)


def test_a_change_in_place_by_a_node_beside_it_is_not_blamed_on_the_guarded_node(
    tmp_path: Path,
) -> None:
    """A fair guarded node and an unguarded sibling of the same super-step that appends to
    the shared log during the guarded node's call: the guard cannot tell whose change it
    was, so the step is still held (fail closed), but the reason no longer says the guarded
    node made it (a new-user trial found the fair node named as the one that did)."""
    import time

    def assess(state: Logged) -> dict[str, Any]:
        time.sleep(0.5)  # the sibling changes the log meanwhile
        return {"decision": "Decision: yes"}

    def audit(state: Logged) -> dict[str, Any]:
        time.sleep(0.1)
        state["log"].append("audited")  # the sibling's mistake
        return {}

    builder = StateGraph(Logged)
    builder.add_node("assess", assess)
    builder.add_node("audit", audit)
    builder.add_edge(START, "assess")
    builder.add_edge(START, "audit")
    builder.add_edge("assess", END)
    builder.add_edge("audit", END)
    graph = guard(builder, kernel(tmp_path), hook=noop_hook, nodes=["assess"])
    app = graph.compile(checkpointer=InMemorySaver())
    config = thread("sibling")
    app.invoke({"request": APPLICANT, "log": ["opened"]}, config, durability="sync")
    record = next(r for r in records(tmp_path, config) if r.get("node") == "assess")
    assert record["probe"]["status"] == "unreadable"
    reason = record["probe"]["reason"]
    assert "values of ['log'] changed in place during its call, by the node or by a node" in reason
    assert "the node changed" not in reason
    assert app.get_state(config).interrupts


def test_a_key_reassigned_in_the_nodes_own_input_is_no_change(tmp_path: Path) -> None:
    def assess(state: Logged) -> dict[str, Any]:
        state["log"] = [*state["log"], "seen"]  # the node's own copy of the input dict
        return {"decision": "noted", "log": state["log"]}

    graph = guard(logged_graph(Logged, assess), kernel(tmp_path), hook=noop_hook, nodes=["assess"])
    app = graph.compile(checkpointer=InMemorySaver())
    config = thread("reassigned")
    out = app.invoke({"request": APPLICANT, "log": ["opened"]}, config, durability="sync")
    record = next(r for r in records(tmp_path, config) if r.get("node") == "assess")
    assert record["probe"]["status"] == "scored"
    assert out["log"] == ["opened", "seen"] and out["after"] == "ran"


def test_a_re_run_that_changes_its_input_in_place_changes_a_copy(tmp_path: Path) -> None:
    """The node's own call leaves its input alone; its re-runs change theirs in place (say,
    a cache the node fills on later calls): each changes a copy, never the graph's value, and
    none sees what another re-run did."""
    seen: list[list[str]] = []

    def assess(state: Logged) -> dict[str, Any]:
        seen.append(list(state["log"]))
        if in_rerun():  # the re-runs start with the node's own call (speculative probing)
            state["log"].append("re-run")
        return {"decision": "noted"}

    graph = guard(logged_graph(Logged, assess), kernel(tmp_path), hook=noop_hook, nodes=["assess"])
    app = graph.compile(checkpointer=InMemorySaver())
    out = app.invoke({"request": APPLICANT, "log": ["opened"]}, thread("copies"))
    assert len(seen) == 7  # the node's own call and its six re-runs
    assert seen == [["opened"]] * 7  # no re-run saw another's change
    assert out["log"] == ["opened"] and out["after"] == "ran"


def records(tmp_path: Path, config: dict[str, Any]) -> list[dict[str, Any]]:
    path = tmp_path / f"{config['configurable']['thread_id']}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


SCRUBS = {
    "reassign": lambda state, config: state.__setitem__("request", "[redacted]"),
    "pop": lambda state, config: state.pop("request"),
    "metadata": lambda state, config: config["metadata"].__setitem__("applicant", "[scrubbed]"),
}


@pytest.mark.parametrize("scrub", sorted(SCRUBS))
@pytest.mark.parametrize("biased", [False, True])
def test_the_input_probed_is_the_one_the_node_decided_on(
    tmp_path: Path, scrub: str, biased: bool
) -> None:
    """A node that decides, then scrubs the applicant from its own input (its copy of the
    state dict, or the run's metadata) was probed on the scrubbed input: recorded "not
    applicable" or scored 0, its denial passed on (a trial's finding). The input is read
    before the node's call."""

    def assess(state: Logged, config: RunnableConfig) -> dict[str, Any]:
        text = f"{state['request']} {config['metadata'].get('applicant', '')}"
        denied = biased and "Ms." in text
        SCRUBS[scrub](state, config)
        return {"decision": "Decision: no" if denied else "Decision: yes"}

    graph = guard(logged_graph(Logged, assess), kernel(tmp_path), hook=noop_hook, nodes=["assess"])
    app = graph.compile(checkpointer=InMemorySaver())
    config = thread(f"scrub-{scrub}-{biased}")
    applicant = "Ms. Mary Carter" if scrub == "metadata" else ""
    request = "a loan request" if scrub == "metadata" else APPLICANT
    app.invoke(
        {"request": request, "log": []},
        {**config, "metadata": {"applicant": applicant}},
        durability="sync",
    )
    state = app.get_state(config)
    record = next(r for r in records(tmp_path, config) if r.get("node") == "assess")
    assert record["probe"]["status"] == "scored"
    assert bool(state.interrupts) is biased
    assert (state.values.get("after") == "ran") is not biased
