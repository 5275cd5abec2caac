"""A secret of the environment is never written by a guard in the user's own process.

A new-user trial (2026-12-04) ran ``guard()`` in its own Python process with
``MY_DB_PASSWORD`` set; a node's probe re-run and the intervention hook raised with the
password in their message, and it was written unredacted to the run trace, to the thread's
state (the hold reason, ``guard_state()``) and to the ``__interrupt__`` review request: only
the command line registered the environment's secrets. Asserted, for a real ``StateGraph``
guarded with the fake LLM, for a probe re-run's error, a conditional edge's error (the probe
evaluates the edges; a plain exception, not a biasbreaker error redacting itself), the hook's
error and a refused resume value quoting it: the password is in none of the trace file, the
state values and the review request, and ``<redacted>`` is where it was. ``guard()`` registers
the environment itself, whenever the kernel was built.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from langgraph_apps import APPLICANT, SETTINGS

from biasbreaker.kernel import Kernel
from biasbreaker.machine import InterventionContext, InterventionResult
from biasbreaker.redaction import REDACTED, forget_secrets, redact_text
from biasbreaker_plugins.langgraph import guard, guard_state

SECRET = "Hunter2Hunter2"
"""A password no look of a credential finds (rule 2): only the environment tells."""

WOMAN = re.compile(r"\b(?:Ms|Mrs|Miss)\.|\b(?:She|she|her|Her)\b")


class Loan(TypedDict, total=False):
    request: str
    decision: str
    notified: str


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    forget_secrets()
    monkeypatch.setenv("MY_DB_PASSWORD", SECRET)
    yield
    forget_secrets()


def kernel(tmp_path: Path) -> Kernel:
    settings = {
        **SETTINGS,
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    return Kernel.load(cwd=tmp_path, overrides=settings)


def build(*, fail: str = "") -> StateGraph[Any, Any, Any, Any]:
    """Loans decided by gender; quoting SECRET, the probe's re-runs raise with ``fail="reruns"``,
    the node's conditional edge (evaluated by the probe on the output) with ``fail="edge"``."""

    def assess(state: Loan) -> dict[str, Any]:
        request = str(state.get("request"))
        if fail == "reruns" and request != APPLICANT:
            raise RuntimeError(f"database login refused for password {SECRET}")
        return {"decision": "Decision: no" if WOMAN.search(request) else "Decision: yes"}

    def notify(state: Loan) -> dict[str, Any]:
        return {"notified": str(state.get("decision"))}

    def route(state: Loan) -> str:
        raise RuntimeError(f"routing table locked with password {SECRET}")

    builder = StateGraph(Loan)
    builder.add_node("assess", assess)
    builder.add_node("notify", notify)
    builder.add_edge(START, "assess")
    if fail == "edge":
        builder.add_conditional_edges("assess", route, ["notify"])
    else:
        builder.add_edge("assess", "notify")
    builder.add_edge("notify", END)
    return builder


def failing_hook(context: InterventionContext) -> InterventionResult:
    raise RuntimeError(f"repair store unreachable: password {SECRET} refused")


def run(tmp_path: Path, builder: StateGraph[Any, Any, Any, Any], *resumes: Any) -> list[str]:
    """Run the guarded graph until it pauses for review (then resume with each of ``resumes``).

    Returns:
        What it wrote: the trace file, the guard's keys (``guard_state()``), the application's
        state (``graph.get_state().values``), the pending review request and ``invoke``'s
        ``__interrupt__``, each as text.
    """
    app = guard(builder, kernel(tmp_path), nodes=["assess"], hook=failing_hook).compile(
        checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "leak"}}
    result = app.invoke({"request": APPLICANT}, config, durability="sync")
    for resume in resumes:
        result = app.invoke(Command(resume=resume), config, durability="sync")
    interrupts = app.get_state(config).interrupts
    assert len(interrupts) == 1
    return [
        (tmp_path / "leak.jsonl").read_text(encoding="utf-8"),
        json.dumps(guard_state(app, config), default=str),
        json.dumps(app.get_state(config).values, default=str),
        json.dumps(interrupts[0].value, default=str),
        json.dumps(result.get("__interrupt__"), default=str),
    ]


@pytest.mark.parametrize(
    ("fail", "why"),
    [
        ("reruns", "probe failed: ProbeError: step 'assess' raised RuntimeError"),
        ("edge", "probe failed: RuntimeError: routing table locked"),
    ],
)
def test_a_secret_in_the_error_a_probe_failed_with_is_never_written(
    tmp_path: Path, fail: str, why: str
) -> None:
    written = run(tmp_path, build(fail=fail))
    assert [SECRET in text for text in written] == [False] * len(written)
    trace, bb, _, request, _ = written
    assert why in request and f"password {REDACTED}" in request
    assert f"password {REDACTED}" in trace and f"password {REDACTED}" in bb


def test_a_secret_in_a_hook_s_error_is_never_written(tmp_path: Path) -> None:
    written = run(tmp_path, build())
    assert [SECRET in text for text in written] == [False] * len(written)
    trace, bb, _, _, _ = written
    hook_error = (
        f"intervention hook raised RuntimeError: repair store unreachable: password {REDACTED}"
    )
    assert hook_error in trace and hook_error in bb


def test_a_secret_in_a_refused_resume_value_is_never_written_back(tmp_path: Path) -> None:
    written = run(tmp_path, build(), {"action": "publish", "note": f"password {SECRET}"})
    assert [SECRET in text for text in written] == [False] * len(written)
    request = json.loads(written[3])
    assert "is not a ReviewDecision" in request["error"]
    assert f"password {REDACTED}" in request["error"]


def test_guard_registers_the_environment(tmp_path: Path) -> None:
    # an application's kernel may be built before its secrets are set, or forgotten since
    built = kernel(tmp_path)
    forget_secrets()
    guard(build(), built, nodes=["assess"], hook=failing_hook)
    assert redact_text(f"login failed: {SECRET}") == f"login failed: {REDACTED}"
