"""``read_channels`` reads the task's channels as ``ChannelRead.do_read`` does."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.pregel._read import ChannelRead

from biasbreaker_plugins.langgraph import BiasState
from biasbreaker_plugins.langgraph._internals import read_channels
from biasbreaker_plugins.langgraph.state import BB_KEYS


class S(BiasState, total=False):
    text: str


def test_read_channels_matches_do_read() -> None:
    seen: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def first(state: S) -> dict[str, Any]:
        return {"bb_frozen": {"k": {"x": 1}}, "text": "a"}

    def second(state: S, config: RunnableConfig) -> dict[str, Any]:
        keys = [*sorted(BB_KEYS), "text"]
        seen.append((read_channels(config, keys), dict(ChannelRead.do_read(config, select=keys))))
        return {}

    builder = StateGraph(S)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    builder.compile().invoke({"text": "q"})
    ours, theirs = seen[0]
    assert ours == theirs
    assert ours["bb_frozen"] == {"k": {"x": 1}} and ours["text"] == "a"
