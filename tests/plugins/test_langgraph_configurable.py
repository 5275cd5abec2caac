"""The run's config data — ``config["configurable"]`` and ``config["metadata"]`` — is varied by
the probe with the state.

Before ``context=``, LangGraph's documented place for run-scoped data was the config
(``graph.invoke(state, {"configurable": {"thread_id": ..., "applicant": ...}})``); a node that
denied women read the applicant from its ``config`` and scored 0, because every re-run saw the
same config (a known fail-open, docs/langgraph.md §16 until then). The run's metadata
(``{"metadata": {...}}``, handed to every node's config beside LangGraph's own
``langgraph_…`` keys) was the same kind of fail-open, a stated limit until 2026-12-07.
Asserted for each section: a node biased on one of its keys (declared ``config`` parameter,
``get_config()``) is held before its successor runs, its re-runs seeing the variants' values;
a fair one passes; the checkpoint coordinates and LangGraph's own keys are never varied; a
coded attribute in a key holds the step; a value the probe cannot read holds it, naming the
key and the ``guard(opaque=["<section>.<key>"])`` fix, which passes the value through unchanged.
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
    CONFIGURABLE_KEY,
    METADATA_KEY,
    configurable_view,
    metadata_view,
    user_configurable,
    user_metadata,
    with_configurable,
    with_metadata,
)

WOMAN = re.compile(r"\b(?:Ms|Mrs|Miss)\.|\b(?:She|she|her|Her)\b")
THREAD = "ms-mary-carter"  # a thread id that reads like a person: an identity, never varied
SECTIONS = ["configurable", "metadata"]
VIEW_KEY = {"configurable": CONFIGURABLE_KEY, "metadata": METADATA_KEY}


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


def build(how: str, biased: bool, seen: list[Any], section: str = "configurable") -> Any:
    def decide(data: dict[str, Any]) -> dict[str, Any]:
        seen.append(dict(data))
        text = str(data.get("applicant", ""))
        return {"decision": "Decision: no" if biased and WOMAN.search(text) else "Decision: yes"}

    if how == "config":

        def assess(state: Loan, config: RunnableConfig) -> dict[str, Any]:
            return decide(config[section])

    else:

        def assess(state: Loan) -> dict[str, Any]:  # type: ignore[misc]
            return decide(get_config()[section])

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


def run(app: Any, section: str = "configurable", **data: Any) -> tuple[Any, Any]:
    thread: dict[str, Any] = {"configurable": {"thread_id": THREAD}}
    config: Any = {"configurable": {"thread_id": THREAD}, "metadata": {}}
    config[section].update(data)
    out = app.invoke({"request": "loan"}, config, durability="sync")
    return out, app.get_state(thread)


HOWS = ["config", "get_config"]


@pytest.mark.parametrize("section", SECTIONS)
@pytest.mark.parametrize("how", HOWS)
def test_a_node_biased_on_a_config_key_is_held(tmp_path: Path, how: str, section: str) -> None:
    seen: list[Any] = []
    graph = guard(
        build(how, True, seen, section), kernel(tmp_path), hook=noop_hook, nodes=["assess"]
    )
    app = graph.compile(checkpointer=InMemorySaver())
    _, state = run(app, section, applicant=APPLICANT, tier=2)
    assert len(state.interrupts) == 1
    assert "notify" not in seen
    data = [c for c in seen if c != "notify"]
    assert len(data) > 1  # the node and its re-runs
    assert data[0]["applicant"] == APPLICANT
    assert any(c["applicant"] != APPLICANT for c in data[1:])
    # identities and LangGraph's own keys are passed on as they are; other types kept
    assert {c["thread_id"] for c in data} == {THREAD}
    assert {c["tier"] for c in data} == {2}
    if section == "configurable":
        assert all("__pregel_runtime" in c for c in data)
    else:
        assert {c["langgraph_node"] for c in data} == {"assess"}
    assert records(tmp_path)[0]["probe"]["status"] == "scored"
    assert verify_trace(tmp_path / "trace.jsonl").holds


@pytest.mark.parametrize("section", SECTIONS)
@pytest.mark.parametrize("how", HOWS)
def test_a_fair_node_reading_a_config_key_passes(tmp_path: Path, how: str, section: str) -> None:
    seen: list[Any] = []
    graph = guard(
        build(how, False, seen, section), kernel(tmp_path), hook=noop_hook, nodes=["assess"]
    )
    out, state = run(graph.compile(checkpointer=InMemorySaver()), section, applicant=APPLICANT)
    assert state.interrupts == ()
    assert out["notified"] == "Decision: yes" and seen[-1] == "notify"
    assert records(tmp_path)[0]["probe"]["status"] == "scored"


@pytest.mark.parametrize("section", SECTIONS)
def test_a_fair_node_with_a_tuple_in_its_config_passes(tmp_path: Path, section: str) -> None:
    """A tuple is plain JSON, read as itself: a resample's view of it was rebuilt as if it
    were a list of another length ("a list changed in length") and the fair step was held
    (a new-user trial); the same tuple in a state key was fine."""
    seen: list[Any] = []
    graph = guard(build("config", False, seen, section), kernel(tmp_path), hook=noop_hook)
    app = graph.compile(checkpointer=InMemorySaver())
    out, state = run(app, section, applicant=APPLICANT, tiers=(1, 2))
    assert state.interrupts == () and out["notified"] == "Decision: yes"
    assert records(tmp_path)[0]["probe"]["status"] == "scored"
    data = [c for c in seen if c != "notify"]
    assert len(data) > 1 and {c["tiers"] for c in data} == {(1, 2)}


def popping(biased: bool, seen: list[Any], section: str) -> Any:
    """A node that decides on a config key and then takes it out of its own config."""

    def assess(state: Loan, config: RunnableConfig) -> dict[str, Any]:
        text = str(config[section].get("applicant", ""))
        seen.append(text)
        config[section].pop("applicant")
        config[section]["seen"] = True
        return {"decision": "Decision: no" if biased and WOMAN.search(text) else "Decision: yes"}

    builder = StateGraph(Loan)
    builder.add_node("assess", assess)
    builder.add_edge(START, "assess")
    builder.add_edge("assess", END)
    return builder


@pytest.mark.parametrize("section", SECTIONS)
@pytest.mark.parametrize("biased", [False, True])
def test_a_node_that_changes_its_config_is_re_run_on_the_config_it_decided_on(
    tmp_path: Path, biased: bool, section: str
) -> None:
    """The re-runs took their config from the node's own, which it had changed: they failed
    ("probed with config[...] keys ['applicant'], and this run has []") and a fair node was
    held (a new-user trial). They get the config as it was before the call."""
    seen: list[Any] = []
    graph = guard(popping(biased, seen, section), kernel(tmp_path), hook=noop_hook)
    app = graph.compile(checkpointer=InMemorySaver())
    out, state = run(app, section, applicant=APPLICANT)
    assert len(seen) > 1 and seen[0] == APPLICANT
    assert all(text for text in seen) and any(text != APPLICANT for text in seen[1:])
    assert records(tmp_path)[0]["probe"]["status"] == "scored"
    assert len(state.interrupts) == (1 if biased else 0)
    if not biased:
        assert out["decision"] == "Decision: yes"


def test_a_thread_id_alone_is_not_data(tmp_path: Path) -> None:
    """Only the checkpoint coordinates (and the metadata LangGraph adds itself): nothing of the
    config enters the view, so a step whose state names no group stays not applicable,
    whatever the thread id reads like."""
    seen: list[Any] = []
    graph = guard(build("config", True, seen), kernel(tmp_path), hook=noop_hook)
    _, state = run(graph.compile(checkpointer=InMemorySaver()))
    assert state.interrupts == ()
    assert records(tmp_path)[0]["probe"]["status"] == "not_applicable"


@pytest.mark.parametrize("section", SECTIONS)
def test_a_protected_attribute_coded_in_a_config_key_holds_the_step(
    tmp_path: Path, section: str
) -> None:
    seen: list[Any] = []
    graph = guard(build("config", True, seen, section), kernel(tmp_path), hook=noop_hook)
    _, state = run(graph.compile(checkpointer=InMemorySaver()), section, sex="F")
    assert len(state.interrupts) == 1 and "notify" not in seen
    record = records(tmp_path)[0]
    assert record["probe"]["status"] == "unreadable"
    assert f"{VIEW_KEY[section]}.sex = 'F'" in record["probe"]["reason"]


@pytest.mark.parametrize("section", SECTIONS)
def test_a_config_value_the_probe_cannot_read_holds_the_step(tmp_path: Path, section: str) -> None:
    seen: list[Any] = []
    graph = guard(build("config", False, seen, section), kernel(tmp_path), hook=noop_hook)
    app = graph.compile(checkpointer=InMemorySaver())
    _, state = run(app, section, applicant=APPLICANT, db=Handle())
    assert len(state.interrupts) == 1 and "notify" not in seen
    record = records(tmp_path)[0]
    assert record["probe"]["status"] == "unreadable"
    reason = record["probe"]["reason"]
    assert f"config['{section}']['db'] is Handle" in reason
    assert f"opaque=['{section}.db']" in reason


@pytest.mark.parametrize("section", SECTIONS)
@pytest.mark.parametrize("biased", [False, True])
def test_an_opaque_config_key_is_passed_through(tmp_path: Path, biased: bool, section: str) -> None:
    seen: list[Any] = []
    handle = Handle()
    graph = guard(
        build("config", biased, seen, section),
        kernel(tmp_path),
        hook=noop_hook,
        opaque=[f"{section}.db"],
    )
    app = graph.compile(checkpointer=InMemorySaver())
    _, state = run(app, section, applicant=APPLICANT, db=handle)
    data = [c for c in seen if c != "notify"]
    assert len(data) > 1 and all(c["db"] is handle for c in data)
    assert any(c["applicant"] != APPLICANT for c in data[1:])  # the rest is still varied
    assert records(tmp_path)[0]["probe"]["status"] == "scored"
    assert len(state.interrupts) == (1 if biased else 0)
    assert ("notify" in seen) is not biased


def test_guard_refuses_an_opaque_name_that_is_no_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\['nope'\].*'configurable\.<key>' or 'metadata\."):
        guard(build("config", False, []), kernel(tmp_path), opaque=["nope"])


@pytest.mark.parametrize(
    ("opaque", "message"),
    [
        # one string was read as its characters: ['.', 'a', 'd', 'e', ...]
        ("metadata.x", r"guard\(opaque='metadata\.x'\) is one string.*opaque=\['metadata\.x'\]"),
        ([1], r"names \[1\], which are not strings.*'configurable\.<key>' or 'metadata\.<key>'"),
        (["metadata."], r"names \['metadata\.'\], which are no key .*'metadata\.<key>' with"),
        (["configurable."], r"names \['configurable\.'\], which are no key"),
        (["metadata.x.y"], r"names \['metadata\.x\.y'\].*one top-level key.*no nested paths"),
    ],
)
def test_guard_refuses_an_opaque_argument_of_the_wrong_form(
    tmp_path: Path, opaque: Any, message: str
) -> None:
    """Strict, like guard(nodes=...): the error names the argument, the value and the fix (a
    string was split into characters, [1] raised a raw AttributeError, 'metadata.' and
    'metadata.x.y' were accepted silently: a new-user trial)."""
    with pytest.raises(ConfigError, match=message):
        guard(build("config", False, []), kernel(tmp_path), opaque=opaque)


@pytest.mark.parametrize("section", SECTIONS)
def test_a_group_blind_step_names_the_opaque_keys_it_did_not_read(
    tmp_path: Path, section: str
) -> None:
    graph = guard(
        build("config", False, [], section),
        kernel(tmp_path),
        hook=noop_hook,
        opaque=[f"{section}.db"],
    )
    _, state = run(graph.compile(checkpointer=InMemorySaver()), section, db=Handle(), tier=2)
    probe = records(tmp_path)[0]["probe"]
    assert probe["status"] == "not_applicable" and "group-blind" in probe["reason"]
    assert f"not read: ['{section}.db'], passed through unread by guard(opaque=" in probe["reason"]
    assert state.interrupts == ()


@pytest.mark.parametrize("section", SECTIONS)
def test_a_repair_is_rechecked_on_the_variants_config(tmp_path: Path, section: str) -> None:
    """With the configured repairs (simulated), the re-check re-runs the node on the
    variants' config values too; either way no successor sees a denial."""
    seen: list[Any] = []
    graph = guard(build("config", True, seen, section), kernel(tmp_path), nodes=["assess"])
    app = graph.compile(checkpointer=InMemorySaver())
    _, state = run(app, section, applicant=APPLICANT)
    varied = [c for c in seen if c != "notify" and c["applicant"] != APPLICANT]
    assert len(varied) > 4  # the probe's variants, then the re-checks'
    assert state.values.get("notified") != "Decision: no"
    assert verify_trace(tmp_path / "trace.jsonl").holds


def test_the_configurable_user_keys_and_their_rebuild() -> None:
    handle = Handle()
    config: Any = {
        "configurable": {
            "thread_id": "t",
            "checkpoint_ns": "",
            "checkpoint_id": "1",
            "checkpoint_map": {},
            "__pregel_read": handle,
            "langgraph_auth_user": handle,
            "applicant": "Ms. Mary Carter",
            "tiers": (1, 2),
            "db": handle,
        },
        "tags": ["x"],
    }
    assert sorted(user_configurable(config)) == ["applicant", "db", "tiers"]
    assert configurable_view({"configurable": {"thread_id": "t"}}) is None
    assert configurable_view(None) is None
    view = configurable_view(config, frozenset({"configurable.db", "applicant"}))
    assert view == {"applicant": "Ms. Mary Carter", "tiers": [1, 2], "db": "<opaque: Handle>"}
    out = with_configurable(
        config, {**view, "applicant": "Mr. Mark Carter"}, frozenset({"configurable.db"})
    )
    conf = out["configurable"]
    assert conf["applicant"] == "Mr. Mark Carter" and conf["tiers"] == (1, 2)
    assert conf["db"] is handle and conf["__pregel_read"] is handle and conf["thread_id"] == "t"
    assert out["tags"] == ["x"] and config["configurable"]["applicant"] == "Ms. Mary Carter"
    with pytest.raises(ValueError, match="same configurable keys"):
        with_configurable(config, {"applicant": "x"}, frozenset())
    with pytest.raises(ValueError, match="same configurable keys"):
        with_configurable(config, "x", frozenset())


def test_the_metadata_user_keys_and_their_rebuild() -> None:
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
