"""``config["metadata"]`` data is varied by the probe with the state.

LangGraph hands the run's metadata (``graph.invoke(state, {"metadata": {...}})``) to every
node's config, beside its own ``langgraph_…`` keys; a node can read it from its ``config``
parameter or ``get_config()``. Before, the probe never varied it, so a node that denied women
on a metadata key scored 0 (a stated limit, docs/langgraph.md §16). Asserted, as for
``config["configurable"]`` (``test_langgraph_configurable.py``): a node biased on a metadata
key is held before its successor runs, its re-runs seeing the variants' values; a fair one
passes; LangGraph's own keys (``langgraph_step``, ``langgraph_node``… and the thread id) are
never varied; a coded attribute holds the step; a value the probe cannot read holds it,
naming the key and the ``guard(opaque=["metadata.<key>"])`` fix, which passes it through.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph_apps import APPLICANT, SETTINGS

from biasbreaker.errors import ConfigError
from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard
from biasbreaker_plugins.langgraph.configurable import (
    METADATA_KEY,
    metadata_view,
    user_metadata,
    with_metadata,
)

WOMAN = re.compile(r"\b(?:Ms|Mrs|Miss)\.|\b(?:She|she|her|Her)\b")
THREAD = "ms-mary-carter"  # reads like a person: an identity, never varied


class Loan(TypedDict, total=False):
    request: str
    decision: str
    notified: str


class Handle:
    """A value the probe cannot read (a client, a connection)."""


def kernel(tmp_path: Path) -> Kernel:
    settings = {
        **SETTINGS,
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "trace.jsonl")}},
    }
    return Kernel.load(cwd=tmp_path, overrides=settings)


def build(how: str, biased: bool, seen: list[Any]) -> Any:
    def decide(meta: dict[str, Any]) -> dict[str, Any]:
        seen.append(dict(meta))
        text = str(meta.get("applicant", ""))
        return {"decision": "Decision: no" if biased and WOMAN.search(text) else "Decision: yes"}

    if how == "config":

        def assess(state: Loan, config: RunnableConfig) -> dict[str, Any]:
            return decide(config["metadata"])

    else:

        def assess(state: Loan) -> dict[str, Any]:  # type: ignore[misc]
            return decide(get_config()["metadata"])

    def notify(state: Loan) -> dict[str, Any]:
        seen.append("notify")
        return {"notified": str(state.get("decision"))}

    builder = StateGraph(Loan)
    builder.add_node("assess", assess)
    builder.add_node("notify", notify)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", "notify")
    builder.add_edge("notify", END)
    return builder


def records(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r.get("node") == "assess"]


def run(app: Any, **metadata: Any) -> tuple[Any, Any]:
    config: Any = {"configurable": {"thread_id": THREAD}, "metadata": metadata}
    out = app.invoke({"request": "loan"}, config, durability="sync")
    return out, app.get_state({"configurable": {"thread_id": THREAD}})


HOWS = ["config", "get_config"]


@pytest.mark.parametrize("how", HOWS)
def test_a_node_biased_on_a_metadata_key_is_held(tmp_path: Path, how: str) -> None:
    seen: list[Any] = []
    graph = guard(build(how, True, seen), kernel(tmp_path), hook=noop_hook, nodes=["assess"])
    _, state = run(graph.compile(checkpointer=InMemorySaver()), applicant=APPLICANT, tier=2)
    assert len(state.interrupts) == 1
    assert "notify" not in seen
    metas = [m for m in seen if m != "notify"]
    assert len(metas) > 1  # the node and its re-runs
    assert metas[0]["applicant"] == APPLICANT
    assert any(m["applicant"] != APPLICANT for m in metas[1:])
    # LangGraph's own keys and the thread id are passed on as they are; other types kept
    assert {m["thread_id"] for m in metas} == {THREAD}
    assert {m["langgraph_node"] for m in metas} == {"assess"}
    assert {m["tier"] for m in metas} == {2}
    assert records(tmp_path)[0]["probe"]["status"] == "scored"
    assert verify_trace(tmp_path / "trace.jsonl").holds


@pytest.mark.parametrize("how", HOWS)
def test_a_fair_node_reading_a_metadata_key_passes(tmp_path: Path, how: str) -> None:
    seen: list[Any] = []
    graph = guard(build(how, False, seen), kernel(tmp_path), hook=noop_hook, nodes=["assess"])
    out, state = run(graph.compile(checkpointer=InMemorySaver()), applicant=APPLICANT)
    assert state.interrupts == ()
    assert out["notified"] == "Decision: yes" and seen[-1] == "notify"
    assert records(tmp_path)[0]["probe"]["status"] == "scored"


def test_a_protected_attribute_coded_in_a_metadata_key_holds_the_step(tmp_path: Path) -> None:
    seen: list[Any] = []
    graph = guard(build("config", True, seen), kernel(tmp_path), hook=noop_hook)
    _, state = run(graph.compile(checkpointer=InMemorySaver()), sex="F")
    assert len(state.interrupts) == 1 and "notify" not in seen
    record = records(tmp_path)[0]
    assert record["probe"]["status"] == "unreadable"
    assert f"{METADATA_KEY}.sex = 'F'" in record["probe"]["reason"]


def test_a_metadata_value_the_probe_cannot_read_holds_the_step(tmp_path: Path) -> None:
    seen: list[Any] = []
    graph = guard(build("config", False, seen), kernel(tmp_path), hook=noop_hook)
    _, state = run(graph.compile(checkpointer=InMemorySaver()), applicant=APPLICANT, db=Handle())
    assert len(state.interrupts) == 1 and "notify" not in seen
    record = records(tmp_path)[0]
    assert record["probe"]["status"] == "unreadable"
    reason = record["probe"]["reason"]
    assert "config['metadata']['db'] is Handle" in reason
    assert "opaque=['metadata.db']" in reason


@pytest.mark.parametrize("biased", [False, True])
def test_an_opaque_metadata_key_is_passed_through(tmp_path: Path, biased: bool) -> None:
    seen: list[Any] = []
    handle = Handle()
    graph = guard(
        build("config", biased, seen), kernel(tmp_path), hook=noop_hook, opaque=["metadata.db"]
    )
    _, state = run(graph.compile(checkpointer=InMemorySaver()), applicant=APPLICANT, db=handle)
    metas = [m for m in seen if m != "notify"]
    assert len(metas) > 1 and all(m["db"] is handle for m in metas)
    assert any(m["applicant"] != APPLICANT for m in metas[1:])  # the rest is still varied
    assert records(tmp_path)[0]["probe"]["status"] == "scored"
    assert len(state.interrupts) == (1 if biased else 0)
    assert ("notify" in seen) is not biased


def test_guard_refuses_an_opaque_name_that_is_no_key_naming_both_sections(
    tmp_path: Path,
) -> None:
    with pytest.raises(
        ConfigError, match=r"\['nope'\].*'configurable\.<key>' or 'metadata\.<key>'"
    ):
        guard(build("config", False, []), kernel(tmp_path), opaque=["nope"])


def test_a_repair_is_rechecked_on_the_variants_metadata(tmp_path: Path) -> None:
    """With the configured repairs (simulated), the re-check re-runs the node on the
    variants' metadata too; either way no successor sees a denial."""
    seen: list[Any] = []
    graph = guard(build("config", True, seen), kernel(tmp_path), nodes=["assess"])
    app = graph.compile(checkpointer=InMemorySaver())
    _, state = run(app, applicant=APPLICANT)
    varied = [m for m in seen if m != "notify" and m["applicant"] != APPLICANT]
    assert len(varied) > 4  # the probe's variants, then the re-checks'
    assert state.values.get("notified") != "Decision: no"
    assert verify_trace(tmp_path / "trace.jsonl").holds


def test_the_user_keys_and_their_rebuild() -> None:
    handle = Handle()
    config: Any = {
        "configurable": {"thread_id": "t", "applicant": "Ms. Mary Carter"},
        "metadata": {
            "thread_id": "t",
            "checkpoint_ns": "n:1",
            "langgraph_step": 1,
            "langgraph_node": "assess",
            "langgraph_path": ("__pregel_pull", "assess"),
            "__internal": handle,
            "applicant": "Ms. Mary Carter",
            "tiers": (1, 2),
            "db": handle,
        },
        "tags": ["x"],
    }
    assert sorted(user_metadata(config)) == ["applicant", "db", "tiers"]
    assert metadata_view({"metadata": {"thread_id": "t", "langgraph_step": 3}}) is None
    assert metadata_view(None) is None
    view = metadata_view(config, frozenset({"metadata.db", "configurable.applicant"}))
    assert view == {"applicant": "Ms. Mary Carter", "tiers": [1, 2], "db": "<opaque: Handle>"}
    out = with_metadata(
        config, {**view, "applicant": "Mr. Mark Carter"}, frozenset({"metadata.db"})
    )
    meta = out["metadata"]
    assert meta["applicant"] == "Mr. Mark Carter" and meta["tiers"] == (1, 2)
    assert meta["db"] is handle and meta["__internal"] is handle and meta["langgraph_step"] == 1
    # the other sections and the original are untouched
    assert out["configurable"] == config["configurable"] and out["tags"] == ["x"]
    assert config["metadata"]["applicant"] == "Ms. Mary Carter"
    with pytest.raises(ValueError, match="same metadata keys"):
        with_metadata(config, {"applicant": "x"}, frozenset())
    with pytest.raises(ValueError, match="same metadata keys"):
        with_metadata(config, "x", frozenset())
