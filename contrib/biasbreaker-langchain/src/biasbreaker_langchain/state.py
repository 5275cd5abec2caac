"""The agent state the middleware adds: its private keys, and the machine's snapshot as shown.

Each key is a channel of the agent's graph (a ``state_schema`` extension, so checkpointers
persist it); LangGraph reads, copies and checkpoints every channel at each step of the agent,
so a middleware adds only the keys it can write (:class:`UnprobedBiasGuardState` where no
call is probed). The snapshot the state keeps stands the frozen reply and the latest repair
in as their digests (:func:`shown_snapshot`): every stream mode shows the state.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any

from langchain.agents.middleware.types import AgentState, PrivateStateAttr
from typing_extensions import NotRequired

from biasbreaker.machine import ControlMachine
from biasbreaker.types import FrozenPayload


class UnprobedBiasGuardState(AgentState[Any]):
    """The agent state keys of a middleware that never probes (``[probe] probe_rate = 0``).

    Private (not in the input/output schema). ``bb_breaker``: the control machine's snapshot
    (``ControlMachine.snapshot()``), or absent before the thread's first guarded call.
    ``bb_network_ewma``: the fast and slow EWMAs of B_net (``NetworkEwma.to_dict()``).
    ``bb_reviews``: one record per answered review (``{"step", "action", "sha256",
    "reason"}``), appended. Each key is a channel of the agent's graph, which LangGraph reads,
    copies and checkpoints at every step of the agent (a model or a tool call): a middleware
    adds only the keys it can write.
    """

    bb_breaker: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    bb_network_ewma: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    bb_reviews: NotRequired[Annotated[list[dict[str, Any]], operator.add, PrivateStateAttr]]


class BiasGuardState(UnprobedBiasGuardState):
    """The agent state keys the middleware adds (private: not in the input/output schema).

    Those of :class:`UnprobedBiasGuardState`, and ``bb_probe_coverage``: the probe's
    covering-rotation state of the model node, axis -> position (``ProbeResult.coverage``;
    docs/detection.md, "Every group covered"), written by probed calls only, so a middleware
    at ``[probe] probe_rate = 0`` has the unprobed schema instead.
    """

    bb_probe_coverage: NotRequired[Annotated[dict[str, int] | None, PrivateStateAttr]]


def _stand_in(sha256: Any) -> dict[str, Any]:
    """A frozen payload that names a withheld one by its digest (``FrozenPayload.to_json``)."""
    return FrozenPayload.of({"withheld": {"sha256": str(sha256)}}).to_json()


def shown_snapshot(machine: ControlMachine) -> tuple[dict[str, Any], bool]:
    """The machine's snapshot as the agent state keeps it: no reply and no repair in it.

    The state is streamed (``values``, ``updates``, ``debug``, ``tasks``, ``checkpoints``,
    ``astream_events``), so the frozen reply and the latest intervention's repair stand in
    as their digests and its trail is left out; the reply itself is in the review request
    (and the store until answered), its digest in the trace. The machine restored from it
    steps as the full one would: the frozen payload is read only by a repair within the
    model call that froze it, and every later step freezes its own reply.

    Returns:
        The snapshot, and whether it is the machine's own (nothing stood in or left out:
        no frozen reply, no intervention result), which ``ControlMachine.restore`` rebuilds
        exactly into this machine (then the machine may be kept: :class:`MachineCache`).
    """
    snapshot = machine.snapshot()  # a new dict (its "config" shared, never changed here)
    exact = True
    frozen = snapshot.get("frozen_payload")
    if isinstance(frozen, Mapping):
        snapshot["frozen_payload"] = _stand_in(frozen["sha256"])
        exact = False
    result = snapshot.get("result")
    if isinstance(result, Mapping):
        shown_result = dict(result)
        repaired = shown_result.get("repaired")
        if isinstance(repaired, Mapping):
            shown_result["repaired"] = _stand_in(repaired["sha256"])
        shown_result["trail"] = []
        snapshot["result"] = shown_result
        exact = False
    return snapshot, exact


__all__ = ["BiasGuardState", "UnprobedBiasGuardState", "shown_snapshot"]
