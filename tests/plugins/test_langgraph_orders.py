"""Parallel guarded siblings in every order: a super-step is promoted only when all of it cleared.

Three shapes put two guarded siblings in one super-step — a static fan-out (``split -> first,
second -> join``), a ``Send`` map-reduce (``START -> Send(assess) x2 -> summarise``) and an
unguarded dispatcher returning ``Command(goto=[Send(first), Send(second)])`` — and each runs with
the siblings clean-clean (the control), clean-biased, biased-clean and biased-biased. The
breaker checks the queued siblings in key order (``first`` before ``second``; ``#0`` before
``#1`` for the map-reduce), so "clean-biased" is the order in which one sibling is let through
while the other is still to be decided.

The biased sibling is a :class:`~biasbreaker_plugins.llm_fake.chat_model.FakeChatModel` whose
decision depends on the applicant's gender (**simulated**, seeded); ``noop_hook`` repairs
nothing, so it escalates to review deterministically. Each sibling labels its output with its
own name, so "the biased output" is a string the test can search for: in every streamed chunk
(every stream mode at once), every input the downstream node received, and the final state.

Asserted for every shape and order (``docs/langgraph.md`` §3, "Parallel branches"):

* while any sibling is undecided or held, neither sibling's output is promoted: the clean one
  waits as ``"cleared"``, the downstream node has not run, the state has neither output;
* the biased output never reaches the downstream node, the final state or any chunk;
* when every sibling is let through they are promoted together: the downstream node runs once;
* a rejected sibling is dropped and the one let through is then promoted alone.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send
from langgraph_apps import APPLICANT, SETTINGS, Watch, flat, model, scrub

from biasbreaker.kernel import Kernel
from biasbreaker.machine import noop_hook
from biasbreaker.verify import verify_trace
from biasbreaker_plugins.langgraph import guard, guard_state

MODES = ["values", "updates", "messages", "custom", "debug", "tasks", "checkpoints"]
ORDERS = {
    "clean-clean": (False, False),
    "clean-biased": (False, True),
    "biased-clean": (True, False),
    "biased-biased": (True, True),
}


class Fork(TypedDict, total=False):
    application: str
    first: str
    second: str
    joined: str


class Batch(TypedDict, total=False):
    application: str
    decisions: Annotated[list[str], operator.add]
    summary: str


def answer(label: str, biased: bool, watch: Watch, application: str) -> str:
    """``"<label> <decision>"``: the sibling's output, unique to it."""
    return f"{label} {model(biased, watch).invoke(application).content}"


def static_fan_out(biased: tuple[bool, bool], watch: Watch, seen: list[dict[str, Any]]) -> Any:
    """``split -> (first, second) -> join``: two static edges out of one node, a join after."""

    def split(state: Fork) -> dict[str, Any]:
        return {}

    def first(state: Fork) -> dict[str, Any]:
        return {"first": answer("first", biased[0], watch, state["application"])}

    def second(state: Fork) -> dict[str, Any]:
        return {"second": answer("second", biased[1], watch, state["application"])}

    def join(state: Fork) -> dict[str, Any]:
        seen.append(dict(state))
        return {"joined": f"{state.get('first')} | {state.get('second')}"}

    builder = StateGraph(Fork)
    for fn in (split, first, second, join):
        builder.add_node(fn.__name__, fn)
    builder.add_edge(START, "split")
    builder.add_edge("split", "first")
    builder.add_edge("split", "second")
    builder.add_edge(["first", "second"], "join")
    builder.add_edge("join", END)
    return builder, {"nodes": ["first", "second"]}, ("first", "second"), True


def send_map_reduce(biased: tuple[bool, bool], watch: Watch, seen: list[dict[str, Any]]) -> Any:
    """``START -> Send("assess") per application -> summarise``: one node, two push tasks."""

    def fan_out(state: Batch) -> list[Send]:
        return [Send("assess", {"application": f"#{i} {state['application']}"}) for i in (0, 1)]

    def assess(state: Batch) -> dict[str, Any]:
        label, application = state["application"].split(" ", 1)
        return {"decisions": [answer(label, biased[int(label[1])], watch, application)]}

    def summarise(state: Batch) -> dict[str, Any]:
        seen.append(dict(state))
        return {"summary": "; ".join(sorted(state.get("decisions", [])))}

    builder = StateGraph(Batch)
    builder.add_node("assess", assess)
    builder.add_node("summarise", summarise)
    builder.add_conditional_edges(START, fan_out, ["assess"])
    builder.add_edge("assess", "summarise")
    builder.add_edge("summarise", END)
    return builder, {"nodes": ["assess"]}, ("#0", "#1"), False


def command_sends(biased: tuple[bool, bool], watch: Watch, seen: list[dict[str, Any]]) -> Any:
    """An unguarded dispatcher returns ``Command(goto=[Send(first), Send(second)])``."""

    def dispatch(state: Batch) -> Command[Any]:
        arg = {"application": state["application"]}
        return Command(goto=[Send("first", arg), Send("second", arg)])

    def first(state: Batch) -> dict[str, Any]:
        return {"decisions": [answer("first", biased[0], watch, state["application"])]}

    def second(state: Batch) -> dict[str, Any]:
        return {"decisions": [answer("second", biased[1], watch, state["application"])]}

    def summarise(state: Batch) -> dict[str, Any]:
        seen.append(dict(state))
        return {"summary": "; ".join(sorted(state.get("decisions", [])))}

    builder = StateGraph(Batch)
    builder.add_node("dispatch", dispatch)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_node("summarise", summarise)
    builder.add_edge(START, "dispatch")
    builder.add_edge("first", "summarise")
    builder.add_edge("second", "summarise")
    builder.add_edge("summarise", END)
    # a fan-out the edges do not show is declared (docs/langgraph.md §3)
    options = {"nodes": ["first", "second"], "concurrent": ["first", "second"]}
    return builder, options, ("first", "second"), False


SHAPES: dict[str, Callable[..., Any]] = {
    "static-fan-out": static_fan_out,
    "send-map-reduce": send_map_reduce,
    "command-sends": command_sends,
}


def kernel(tmp_path: Path) -> Kernel:
    settings = {
        **SETTINGS,
        "plugin": {"langgraph": {"trace_path": str(tmp_path / "{thread_id}.jsonl")}},
    }
    return Kernel.load(cwd=tmp_path, overrides=settings)


def app_values(values: dict[str, Any]) -> str:
    """The application's keys of a state (the guard's own ``bb_`` keys left out), as text."""
    return repr({k: v for k, v in values.items() if not k.startswith("bb_")})


class Run:
    """One guarded run of a shape, streamed in every mode, resumed by a reviewer."""

    def __init__(self, tmp_path: Path, shape: str, biased: tuple[bool, bool]) -> None:
        self.watch = Watch()
        self.seen: list[dict[str, Any]] = []
        builder, options, self.labels, self.barrier = SHAPES[shape](biased, self.watch, self.seen)
        self.graph = guard(builder, kernel(tmp_path), hook=noop_hook, **options).compile(
            checkpointer=InMemorySaver()
        )
        self.config: Any = {"configurable": {"thread_id": "orders"}}
        self.chunks: list[Any] = []
        self.outputs = {
            label: answer(label, flag, Watch(), APPLICANT)
            for label, flag in zip(self.labels, biased, strict=True)
        }
        self.trace = tmp_path / "orders.jsonl"

    def stream(self, value: Any) -> None:
        self.chunks.extend(
            self.graph.stream(value, self.config, stream_mode=MODES, durability="sync")
        )

    def start(self) -> None:
        self.stream({"application": APPLICANT})

    def staged(self) -> dict[str, str]:
        """Label -> status of each staged sibling."""
        buffer = guard_state(self.graph, self.config)["bb_unverified_output"]
        return {self._label(e): e["status"] for e in buffer.values()}

    def held(self) -> str:
        """The label of the sibling the pending review is about."""
        (pending,) = self.graph.get_state(self.config).interrupts
        return self._label(pending.value)

    def _label(self, entry: dict[str, Any]) -> str:
        text = flat([entry["held"] if "held" in entry else entry["view"]])
        matches = [label for label in self.labels if self.outputs[label] in text]
        assert len(matches) == 1, (text, self.outputs)
        return matches[0]

    def review(self, action: str) -> None:
        request = self.graph.get_state(self.config).interrupts[0].value
        self.stream(Command(resume={"action": action, "sha256": request["sha256"]}))

    def state(self) -> str:
        return app_values(self.graph.get_state(self.config).values)


def assert_never_seen(run: Run, output: str) -> None:
    """``output`` is in no streamed chunk, no input of the downstream node, not in the state."""
    assert output not in flat(scrub(run.chunks))
    assert all(output not in repr(state) for state in run.seen)
    assert output not in run.state()


def assert_waiting(run: Run) -> None:
    """Nothing of the super-step promoted: the join has not run, the state has neither output."""
    assert run.seen == []
    for output in run.outputs.values():
        assert_never_seen(run, output)


def assert_promoted_alone(run: Run, label: str) -> None:
    """``label``'s output is promoted without its rejected sibling's.

    A join edge (``add_edge([a, b], join)``) waits for both: it never runs once one was
    rejected. A plain edge runs its successor on the promoted output.
    """
    assert run.outputs[label] in run.state()
    if run.barrier:
        assert run.seen == []
    else:
        (state,) = run.seen
        assert run.outputs[label] in repr(state)


# the START fan-out hands every item on; it leaves bb_entry and is probed, and so is each branch
@pytest.mark.parametrize("order", list(ORDERS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_super_step_is_promoted_only_when_every_sibling_cleared(
    tmp_path: Path, shape: str, order: str
) -> None:
    biased = ORDERS[order]
    run = Run(tmp_path, shape, biased)
    one, two = run.labels
    run.start()
    if not any(biased):
        # the control: both let through, promoted together, the downstream node runs once
        (state,) = run.seen
        assert run.outputs[one] in repr(state) and run.outputs[two] in repr(state)
        assert run.staged() == {} and run.graph.get_state(run.config).interrupts == ()
        assert run.outputs[one] in run.state() and run.outputs[two] in run.state()
        assert verify_trace(run.trace).holds
        return

    if biased == (False, True):
        # the clean sibling was let through first and waits for its super-step
        assert run.staged() == {one: "cleared", two: "escalated"}
        assert run.held() == two
        assert_waiting(run)
        run.review("reject")
        # the biased sibling is dropped; the clean one is promoted alone
        assert_promoted_alone(run, one)
    elif biased == (True, False):
        # checked first, the biased sibling escalated the thread: ESCALATED is terminal, so
        # the clean one, checked next, waits for a reviewer too
        assert run.staged() == {one: "escalated", two: "escalated"}
        assert run.held() == one
        assert_waiting(run)
        run.review("reject")
        assert run.held() == two and run.staged() == {two: "escalated"}
        assert_waiting(run)
        run.review("approve")
        assert_promoted_alone(run, two)
    else:
        assert run.staged() == {one: "escalated", two: "escalated"}
        assert run.held() == one
        assert_waiting(run)
        run.review("reject")
        assert run.held() == two
        assert_waiting(run)
        run.review("reject")
        assert run.seen == []  # nothing was let through: the downstream node never ran

    for label, flag in zip(run.labels, biased, strict=True):
        if flag:
            assert_never_seen(run, run.outputs[label])
    variants = run.watch.variants(APPLICANT)
    assert variants and not any(v in flat(scrub(run.chunks)) for v in variants)
    assert run.staged() == {} and run.graph.get_state(run.config).interrupts == ()
    assert verify_trace(run.trace).holds


# the START fan-out hands every item on; it leaves bb_entry and is probed, and so is each branch
@pytest.mark.parametrize("shape", list(SHAPES))
def test_an_approved_biased_sibling_is_promoted_with_the_waiting_one(
    tmp_path: Path, shape: str
) -> None:
    """Clean-then-biased, the reviewer approves: both promoted in one task, joined once."""
    run = Run(tmp_path, shape, (False, True))
    one, two = run.labels
    run.start()
    assert_waiting(run)
    run.review("approve")
    (state,) = run.seen
    assert run.outputs[one] in repr(state) and run.outputs[two] in repr(state)
    assert run.staged() == {}
