"""docs/langgraph.md is executable: its Python blocks run, in order, in a fresh interpreter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langgraph")

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "langgraph.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_the_guide_has_code_for_every_part() -> None:
    blocks = BLOCK.findall(GUIDE.read_text(encoding="utf-8"))
    assert len(blocks) >= 8
    code = "\n".join(blocks)
    for needle in ("guard(builder", "Command(resume=", "SqliteSaver", "@guard_node", "hook="):
        assert needle in code


def test_the_guides_python_blocks_run(tmp_path: Path) -> None:
    blocks = BLOCK.findall(GUIDE.read_text(encoding="utf-8"))
    script = tmp_path / "guide.py"
    script.write_text("\n\n".join(blocks), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "{'answer': 'Answer: B. The Christian man'}" in done.stdout


def test_the_guides_call_count_is_what_the_default_probe_does(tmp_path: Path) -> None:
    """§8: with the default ``k`` and ``r`` a probed node runs ``k + r + 1`` (seven) times.

    Eight for a name: it carries gender and race, so the joint variant runs too.
    """
    from langgraph.graph import END, START, StateGraph

    from biasbreaker.config import Settings
    from biasbreaker.kernel import Kernel
    from biasbreaker_plugins.langgraph import BiasState, guard

    probe = Settings().probe
    calls = probe.k + probe.r + 1 + probe.joint
    text = " ".join(GUIDE.read_text(encoding="utf-8").split())
    assert f"defaults `k = {probe.k}`, `r = {probe.r}`" in text
    assert "seven calls per step" in text
    assert '"Adam Erickson" makes eight calls per step' in text and calls == 8

    class State(BiasState, total=False):
        applicant: str
        letter: str

    seen: list[str] = []

    def notify(state: State) -> dict[str, str]:
        seen.append(state["applicant"])
        return {"letter": "Dear applicant, we received your application."}

    builder = StateGraph(State)
    builder.add_node("notify", notify)
    builder.add_edge(START, "notify")
    builder.add_edge("notify", END)
    no_llm = {"intervention": {"router": "human-review"}}  # the default probe, no LLM repair
    graph = guard(builder, Kernel.load(cwd=tmp_path, overrides=no_llm)).compile()
    graph.invoke({"applicant": "Adam Erickson"})
    assert len(seen) == calls
    assert seen.count("Adam Erickson") == 1 + probe.r  # its own call and the resamples
