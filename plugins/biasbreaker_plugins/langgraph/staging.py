"""The staging buffer: held outputs, and their promotion with the rest of their super-step.

A guarded node's output that the breaker has not let through is *staged*: written to
``bb_unverified_output`` under its key (``"<node>@<super-step>[#push]"``) as an entry
(:func:`entry`), never to the application's keys. An entry's ``status`` says what it waits
for: ``"queued"`` (a parallel branch's output, checked by ``bb_breaker`` in order),
``"tripped"`` (its step starts an intervention), ``"held"`` (re-stepped until let through),
``"fanout"`` (its Send panel runs), ``"escalated"`` (human review) or ``"cleared"`` (let
through, waiting for its super-step).

Outputs let through are *cleared* and *promoted* together once every output of the same
super-step is cleared (:meth:`Work.result`), so their successors run together, as without the
guard: a join still runs once, and a batch is promoted only when *all* its members cleared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, Send

from biasbreaker.errors import ConfigError
from biasbreaker.types import BreakerAction, BreakerDecision
from biasbreaker_plugins.langgraph._internals import Promote, task_of, trace_key
from biasbreaker_plugins.langgraph.names import BREAKER, REVIEW
from biasbreaker_plugins.langgraph.probing import Call
from biasbreaker_plugins.langgraph.state import BB_KEYS


def goto_json(node: str, goto: Sequence[Any]) -> list[Any]:
    """``Command`` destinations as JSON (a ``Send`` as ``{"send": node, "arg": arg}``).

    Raises:
        ConfigError: A destination is neither a node name nor a ``Send``.
    """
    out: list[Any] = []
    for target in goto:
        if isinstance(target, str):
            out.append(target)
        elif isinstance(target, Send):
            out.append({"send": target.node, "arg": target.arg})
        else:
            raise ConfigError(f"guarded node {node!r}: Command goto {target!r} is not supported")
    return out


def goto_from_json(goto: Sequence[Any]) -> list[Any]:
    """Inverse of :func:`goto_json`."""
    return [t if isinstance(t, str) else Send(t["send"], t["arg"]) for t in goto]


def entry(call: Call, status: str, opaque: frozenset[str], **extra: Any) -> dict[str, Any]:
    """The staged entry of ``call``'s output with ``status``.

    Fields: ``node``, ``key``, ``order`` (super-step, key), ``status``, ``update`` (the
    node's update as it returned it, for promotion), ``view`` (its JSON view: what the breaker
    stepped and froze), ``goto``, ``input`` (the input's JSON view, or ``None``), ``template``
    (the input values a re-check rebuilds counterfactual states onto, or ``None`` for plain
    JSON), ``sampled``, ``score``, ``probe`` (the probe's summary), ``outcome`` (what the
    probe made of the call), ``hold`` (why it cannot be checked, or ``None``), ``step`` (the
    breaker step it waits for: fast, slow, scores) and ``reason``.
    """
    staged_input, template = call.staged_input(opaque)
    staged: dict[str, Any] = {
        "node": call.node.name,
        "key": call.key,
        "order": [call.lg_step, call.key],
        "status": status,
        "update": call.update,
        "view": call.view,
        "goto": goto_json(call.node.name, call.goto),
        "input": staged_input,
        "template": template,
        "sampled": call.sampled,
        "score": call.score,
        "probe": call.probe_summary,
        "outcome": dict(call.outcome),
        "hold": call.hold,
        "step": None,
        "reason": "",
    }
    if call.not_json is not None:
        staged["update"] = call.view
        staged["not_json"] = call.not_json
    staged.update(extra)
    return staged


def hold_event(staged: Mapping[str, Any]) -> dict[str, Any]:
    """The audit event of an output held because it could not be checked.

    ``"not-json"`` (the probe cannot read the output), ``"unreadable"`` (nor the input),
    ``"probe-failed"`` or ``"unsupported-language"``, with the key and the reason.
    """
    status = (staged.get("outcome") or {}).get("status")
    if staged.get("not_json"):
        event = "not-json"
    elif status == "failed":
        event = "probe-failed"
    elif status == "unsupported_language":
        event = "unsupported-language"
    else:
        event = "unreadable"
    return {"event": event, "key": staged["key"], "error": staged.get("hold")}


def order(staged: Mapping[str, Any]) -> tuple[int, str]:
    """The sort key of a staged entry: its super-step, then its key."""
    return int(staged["order"][0]), str(staged["order"][1])


def held_status(decision: BreakerDecision) -> str:
    """The status of an output the decision did not let through."""
    # `is` -> `==` or `<=` are equivalent mutants: the action is a BreakerAction (a str enum
    # checked by BreakerDecision) and "escalate" sorts before "halt", "proceed", "reroute"
    return "escalated" if decision.action is BreakerAction.ESCALATE else "held"  # pragma: no mutate


def route_for(decision: BreakerDecision) -> str:
    """Where an output the decision did not let through goes next."""
    # `is` -> `==` or `<=` are equivalent mutants: the action is a BreakerAction (a str enum
    # checked by BreakerDecision) and "escalate" sorts before "halt", "proceed", "reroute"
    return REVIEW if decision.action is BreakerAction.ESCALATE else BREAKER  # pragma: no mutate


def staged_with(state: Mapping[str, Any], *statuses: str) -> list[dict[str, Any]]:
    """The staged outputs of ``state`` with one of ``statuses``, earliest first."""
    staged = state.get("bb_unverified_output") or {}
    return sorted((e for e in staged.values() if e["status"] in statuses), key=order)


_REPLACED = ("bb_breaker", "bb_network_ewma", "bb_katz_weights")


def coalesce(pairs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Merge repeated writes of the ``bb_`` mapping keys (one write per key per task).

    Reducer keys accept several writes in one task, but the breaker's own reducer rejects
    two snapshots in one step, so every ``bb_`` key is written once with the merged value
    (mappings merged in order, lists concatenated, otherwise the last value).
    """
    merged: dict[str, Any] = {}
    names: list[str] = []
    rest: list[tuple[str, Any]] = []
    for name, value in pairs:
        if name not in BB_KEYS:
            rest.append((name, value))
            continue
        if name not in merged:
            names.append(name)
            merged[name] = value
        elif isinstance(value, dict) and isinstance(merged[name], dict) and name not in _REPLACED:
            merged[name] = {**merged[name], **value}
        elif isinstance(value, list) and isinstance(merged[name], list):
            merged[name] = merged[name] + value
        else:
            merged[name] = value
    return rest + [(name, merged[name]) for name in names]


class Work:
    """The writes one breaker-node task accumulates, over a working copy of the buffer.

    Outputs let through are *cleared* (status ``"cleared"``, final update kept) and promoted
    together once no output of the same super-step (``order[0]``) is still undecided.
    """

    def __init__(self, state: Mapping[str, Any], config: RunnableConfig) -> None:
        self.state = state
        self.thread = trace_key(config)
        self.lg_step, _ = task_of(config)
        self.staged: dict[str, dict[str, Any]] = dict(state.get("bb_unverified_output") or {})
        self.breaker: Mapping[str, Any] | None = state.get("bb_breaker")
        self.pairs: list[tuple[str, Any]] = []
        self.promoted: list[dict[str, Any]] = []
        """The entries :meth:`result` promoted, in order."""
        self.rejected: list[dict[str, Any]] = []
        """The entries a reviewer rejected in this task."""

    def entries(self, *statuses: str) -> list[dict[str, Any]]:
        """The staged outputs with one of ``statuses``, earliest first."""
        return sorted((e for e in self.staged.values() if e["status"] in statuses), key=order)

    def frozen(self, key: str) -> Mapping[str, Any]:
        """The frozen record of ``key`` as written so far (this task's writes included)."""
        record: Mapping[str, Any] = (self.state.get("bb_frozen") or {}).get(key) or {}
        for name, value in self.pairs:
            if name == "bb_frozen" and key in value:
                record = value[key]
        return record

    def set_breaker(self, value: Mapping[str, Any]) -> None:
        """Write the machine's new snapshot."""
        self.breaker = value
        self.pairs.append(("bb_breaker", value))

    def extend(self, pairs: Any) -> None:
        """Add writes."""
        self.pairs.extend(pairs)

    def put(self, staged: dict[str, Any]) -> None:
        """Stage (or re-stage) an entry."""
        self.staged[staged["key"]] = staged
        self.pairs.append(("bb_unverified_output", {staged["key"]: staged}))

    def drop(self, key: str) -> None:
        """Remove an entry from the buffer."""
        self.staged.pop(key, None)
        self.pairs.append(("bb_unverified_output", {key: None}))

    def clear(
        self, staged: Mapping[str, Any], update: Mapping[str, Any], how: str = "released"
    ) -> None:
        """Let ``staged`` through with ``update`` (promoted with the rest of its super-step).

        Args:
            staged: The entry.
            update: What is promoted: the node's own update, a repair or a reviewer's edit.
            how: ``"released"`` (the node's own update), ``"repaired"`` or ``"edited"``.
        """
        self.put({**staged, "status": "cleared", "final": dict(update), "how": how})

    # `*` -> `/` is an equivalent mutant: every call passes `sends` by keyword
    def result(self, *, sends: Sequence[Send] = ()) -> Any:  # pragma: no mutate
        """The task's return value: promotions, writes and where to go next."""
        promoted: list[str] = []
        goto: list[Any] = list(sends)
        batches = sorted({order(e)[0] for e in self.staged.values()})
        for batch in batches:
            members = [e for e in self.staged.values() if order(e)[0] == batch]
            # `==` -> `<=` is an equivalent mutant: "cleared" sorts before every other status
            # ("escalated", "fanout", "held", "queued", "tripped")
            if not all(e["status"] == "cleared" for e in members):  # pragma: no mutate
                continue
            for staged in sorted(members, key=order):
                self.pairs.extend(staged["final"].items())
                self.drop(staged["key"])
                promoted.append(staged["node"])
                self.promoted.append(staged)
                goto.extend(goto_from_json(staged["goto"]))
        if not sends:
            if self.entries("tripped", "held", "queued"):
                goto.append(BREAKER)
            elif self.entries("escalated"):
                goto.append(REVIEW)
        pairs = coalesce(self.pairs)
        if promoted:
            return Promote(update=pairs, goto=goto, promoted=tuple(dict.fromkeys(promoted)))
        return Command(update=pairs, goto=goto)


__all__ = [
    "Work",
    "coalesce",
    "entry",
    "goto_from_json",
    "goto_json",
    "held_status",
    "hold_event",
    "order",
    "route_for",
    "staged_with",
]
