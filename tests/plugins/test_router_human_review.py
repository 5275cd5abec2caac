"""The ``human-review`` router, and routers' ``routes``: only the strategies routed to are built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from biasbreaker.errors import ConfigError, PluginError
from biasbreaker.intervention.router import possible_routes
from biasbreaker.kernel import Kernel
from biasbreaker_plugins.router_heuristic import HeuristicRouter
from biasbreaker_plugins.router_human_review import HumanReviewRouter


def test_human_review_routes_every_trip_to_none_and_says_so() -> None:
    router = HumanReviewRouter()
    assert router.route(None) == "none"  # type: ignore[arg-type]  # the context is not read
    assert possible_routes(router, name="human-review") == {"none"}


def test_the_heuristic_declares_the_routes_its_options_allow() -> None:
    assert possible_routes(HeuristicRouter(), name="heuristic") == {"skeptics", "madera", "none"}
    panel_only = HeuristicRouter(persistent_route="skeptics")
    assert possible_routes(panel_only, name="heuristic") == {"skeptics", "none"}


@pytest.mark.parametrize(
    ("routes", "message"),
    [("none", "must be a collection"), (["none", "retry"], r"unknown route\(s\) \['retry'\]")],
)
def test_a_router_declaring_bad_routes_is_a_plugin_error(routes: Any, message: str) -> None:
    class Router:
        def route(self, context: Any) -> str:
            return "none"

    router = Router()
    router.routes = routes  # type: ignore[attr-defined]
    with pytest.raises(PluginError, match=message):
        possible_routes(router, name="mine")
    del router.routes  # type: ignore[attr-defined]
    assert possible_routes(router, name="mine") == {"skeptics", "madera", "none"}  # fail closed


def test_human_review_needs_no_llm_client(tmp_path: Path) -> None:
    kernel = Kernel.load(cwd=tmp_path, overrides={"intervention": {"router": "human-review"}})
    assert kernel.check_build() == []
    assert kernel.repair_routes() == {"none"}
    with pytest.raises(ConfigError, match="client is not set"):
        kernel.llm()  # nothing asked for it; asking is still the error with the choices


def test_with_the_panel_only_madera_is_not_built(tmp_path: Path) -> None:
    """MADERA's retriever is not built (its corpus not read) when no route leads to MADERA."""
    missing = str(tmp_path / "missing.jsonl")
    settings: dict[str, Any] = {
        "llm": {"client": "fake"},
        "plugin": {"heuristic": {"persistent_route": "skeptics"}, "keyword": {"corpus": missing}},
    }
    assert Kernel.load(cwd=tmp_path, overrides=settings).check_build() == []
    settings["plugin"] = {"keyword": {"corpus": missing}}  # the default routes to MADERA
    (problem,) = Kernel.load(cwd=tmp_path, overrides=settings).check_build()
    assert "missing.jsonl" in problem


def test_with_no_repair_the_first_trip_escalates_to_review(tmp_path: Path) -> None:
    """It used to retry max_retries times with nothing to repair (trip, cool-down, retry,
    cool-down, escalate: 8 held re-steps) and say "2 intervention(s) made"."""
    import sys

    from langgraph.checkpoint.memory import InMemorySaver

    from biasbreaker.trace import read_trace
    from biasbreaker.verify import verify_trace
    from biasbreaker_plugins.langgraph import guard

    sys.path.insert(0, str(Path(__file__).parent))
    from langgraph_pipelines import SETTINGS, Received, screening_graph

    trace = tmp_path / "{thread_id}.jsonl"
    settings = {
        **SETTINGS,
        "intervention": {"router": "human-review"},
        "plugin": {"langgraph": {"trace_path": str(trace)}},
    }
    kernel = Kernel.load(cwd=tmp_path, overrides=settings)
    assert kernel.settings.breaker.max_retries == 2 and kernel.settings.breaker.cooldown_steps == 1
    received = Received("answer")
    graph = guard(screening_graph(1.0, received), kernel).compile(checkpointer=InMemorySaver())
    run = {"configurable": {"thread_id": "t"}}
    out = graph.invoke({"case": "airport"}, run, durability="sync")
    request = out["__interrupt__"][0].value
    assert request["node"] == "screener" and request["breaker_state"] == "escalated"
    assert received.guarded_call == []  # nothing downstream ran
    records = read_trace(tmp_path / "t.jsonl").records
    transitions = [r.transition for r in records if r.node == "screener"]
    assert transitions[-3:] == ["trip", "recover-start", "escalate"], transitions
    assert transitions.count("trip") == 1 and "retry" not in transitions
    assert records[-1].reason.startswith("escalate: no repair was made (1 attempt(s)")
    assert "intervention(s) made" not in records[-1].reason
    header = read_trace(tmp_path / "t.jsonl").header
    assert (header.max_retries, header.cooldown_steps) == (1, 0)  # what the machine ran with
    report = verify_trace(tmp_path / "t.jsonl")
    assert report.holds, report
