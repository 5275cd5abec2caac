"""Review of a held reply: the request shown to the reviewer, the answer, and where the reply waits.

A reply the machine does not let through is **not** returned: the call keeps it
(:func:`hold_record`) in the agent's store, else this process's (:class:`LocalStore`), under
the model node's task (:func:`held_place`), and pauses in ``interrupt()`` with a
:class:`ReviewRequest` (:func:`answer_review`). On resume LangGraph re-runs the model node:
the held reply is found under the same key, the model is not called again, and the
:class:`ReviewAnswer` approves it, rejects it (:data:`WITHHELD` is returned instead) or
replaces its text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, messages_from_dict, messages_to_dict
from langgraph.store.base import BaseStore
from langgraph.types import Command, interrupt
from pydantic import BaseModel, ConfigDict, Field

from biasbreaker.errors import PluginError
from biasbreaker.types import FrozenPayload
from biasbreaker_langchain.call import Call
from biasbreaker_langchain.deciding import Held

WITHHELD = (
    "[biasbreaker] The model's reply was withheld: a reviewer rejected it ({reason}). None of "
    "its tool calls ran."
)
"""The text of the ``AIMessage`` that stands in for a rejected reply (``{reason}`` filled)."""


HELD_NAMESPACE = ("biasbreaker", "langchain", "held")
"""The store namespace of replies held for review (key: thread | checkpoint ns | checkpoint id)."""


class ReviewRequest(BaseModel):
    """What ``interrupt()`` hands the reviewer for a held model reply (``.model_dump()``).

    Fields: ``kind`` (always ``"biasbreaker-review"``), ``node``, ``step`` (the guarded call's
    id, ``"<node>@<machine step>"``), ``action`` and ``state`` (the machine's decision),
    ``reason``, ``b_net`` (fast-scale, >= 0), ``probe`` (``{"status", "reason"}``), ``reply``
    (the JSON view of the held messages: text and tool calls as ``{"name", "args"}``) and
    ``sha256`` (of ``reply``'s canonical JSON: echo it in the answer).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["biasbreaker-review"] = "biasbreaker-review"
    node: str
    step: str
    action: str
    state: str
    reason: str
    b_net: float
    probe: dict[str, str]
    reply: Any
    sha256: str
    trail: list[Any] = Field(default_factory=list)


class ReviewAnswer(BaseModel):
    """The resume value of a review: ``Command(resume={"action": ..., "sha256": ...})``.

    Args:
        action: ``"approve"`` (return the held reply as it is), ``"reject"`` (return a
            withheld notice without tool calls: the agent ends) or ``"edit"`` (return an
            ``AIMessage`` with ``content`` and no tool calls; not probed again).
        sha256: The ``sha256`` of the :class:`ReviewRequest` answered; a reply whose hash
            differs (the model answered differently when the node re-ran) is reviewed again.
        content: The replacement text, required for ``"edit"`` only.
        note: Free text kept in ``bb_reviews``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["approve", "reject", "edit"]
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    content: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Kept:
    """A record kept by :class:`LocalStore` (``.value``, as a store's ``Item``)."""

    value: dict[str, Any]


class LocalStore:
    """Where held replies wait for review in an agent without a store: this process's memory.

    The part of ``BaseStore`` the middleware uses (``get``, ``put``, ``delete`` and their
    async forms) over a dict: the lookup every model call makes for a held reply would run a
    batch of store operations in an ``InMemoryStore``. Pass ``create_agent(store=...)`` to
    resume a review in another process.
    """

    def __init__(self) -> None:
        self._kept: dict[tuple[tuple[str, ...], str], Kept] = {}

    def get(self, namespace: tuple[str, ...], key: str) -> Kept | None:
        """The record under ``key``, or ``None``."""
        return self._kept.get((namespace, key))

    def put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> None:
        """Keep ``value`` under ``key`` (replacing what was there)."""
        self._kept[(namespace, key)] = Kept(value)

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """Forget the record under ``key``, if any."""
        self._kept.pop((namespace, key), None)

    async def aget(self, namespace: tuple[str, ...], key: str) -> Kept | None:
        """:meth:`get`, awaitable."""
        return self.get(namespace, key)

    async def aput(self, namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> None:
        """:meth:`put`, awaitable."""
        self.put(namespace, key, value)

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        """:meth:`delete`, awaitable."""
        self.delete(namespace, key)


def held_place(
    request: ModelRequest[Any], local: LocalStore
) -> tuple[BaseStore | LocalStore, str | None]:  # pragma: no mutate (an annotation)
    """Where this call's held reply is kept: the agent's store (else this process's), key.

    The key is the model node's task as LangGraph re-runs it on resume: thread id,
    checkpoint namespace (the node's task id in it) and checkpoint id
    (``Runtime.execution_info``), the same on every re-run of that task and in a new
    process. ``None`` without execution info (then nothing can be held for a resume).
    """
    runtime = getattr(request, "runtime", None)
    store = getattr(runtime, "store", None)
    info = getattr(runtime, "execution_info", None)
    if not isinstance(store, BaseStore):
        store = local
    if info is None:
        return store, None
    return store, f"{info.thread_id}|{info.checkpoint_ns}|{info.checkpoint_id}"


def hold_record(node: str, call: Call, held: Held, key: str | None) -> dict[str, Any]:
    """The record of a reply held for review, as the store keeps it (plain JSON).

    Raises:
        PluginError: No key (LangGraph gave the model node no ``execution_info``): the
            reply could not be found again on resume.
    """
    if key is None:
        raise PluginError(
            "BiasGuardMiddleware holds a reply for review under the model node's "
            "Runtime.execution_info, which this LangGraph does not provide; install "
            "langgraph >= 1.1"
        )
    decision = held.decision
    sha256 = FrozenPayload.of(call.view).sha256
    request = ReviewRequest(
        node=node,
        step=held.step_id,
        action=decision.action.value,
        state=decision.state.value,
        reason=call.hold or decision.reason,
        b_net=decision.b_net,
        probe=call.outcome,
        reply=call.view,
        sha256=sha256,
        trail=held.trail,
    )
    inner = call.command
    update = inner.update if inner is not None else None
    response = call.response
    return {
        "request": request.model_dump(),
        "messages": messages_to_dict(list(response.result)),
        "structured": response.structured_response,
        "writes": held.writes,
        "inner": dict(update) if isinstance(update, Mapping) else None,
    }


def answer_review(record: Mapping[str, Any]) -> ExtendedModelResponse[Any]:
    """Pause in ``interrupt()`` until a reviewer answers for the held reply of ``record``.

    On resume LangGraph re-runs the model node and this runs again from the stored
    record: the model is not called again, the machine does not step again, and the
    answer applies to the very reply the reviewer saw.
    """
    request: dict[str, Any] = dict(record["request"])
    sha256 = str(request["sha256"])
    how = (
        'resume with Command(resume={"action": "approve" | "reject" | "edit", "sha256": '
        f'"{sha256}"[, "content": "..."]}})'
    )
    error: str | None = None
    while True:
        # a bad answer pauses again with the error (raising would replay the same bad
        # resume value into this interrupt() on every later resume: the thread would jam)
        shown_request = dict(request)
        if error is not None:
            shown_request["error"] = error
        raw = interrupt(shown_request)
        try:
            answer = ReviewAnswer.model_validate(raw)
        except ValueError as exc:
            error = f"the resume value of a biasbreaker review is invalid ({exc}); {how}"
            continue
        # `is` for `==` is an equivalent mutant: pydantic gives a validated Literal the
        # Literal's own constant, interned by CPython as this one is (docs/mutants.md,
        # 2026-12-04); the comparison's other operators are marked with it (per line)
        edit = answer.action == "edit"  # pragma: no mutate
        if edit and not answer.content:
            error = f'"edit" needs "content", the replacement text; {how}'
            continue
        if answer.sha256 == sha256:
            break
        error = f"the sha256 answered is not this reply's (it is mistyped or stale); {how}"
    review = {
        "step": request["step"],
        "action": answer.action,
        "sha256": sha256,
        "reason": request["reason"],
        "note": answer.note,
    }
    writes = {**record["writes"], "bb_reviews": [review]}
    inner = record.get("inner")
    if isinstance(inner, Mapping):
        writes = {**inner, **writes}
    match answer.action:  # one of the three (ReviewAnswer), compared by equality
        case "approve":
            messages = messages_from_dict(list(record["messages"]))
            structured = record.get("structured")
            response = ModelResponse(result=messages, structured_response=structured)
        case "edit":
            response = ModelResponse(result=[AIMessage(answer.content)])
        case _:
            withheld = WITHHELD.format(reason=request["reason"])
            response = ModelResponse(result=[AIMessage(withheld)])
    return ExtendedModelResponse(model_response=response, command=Command(update=writes))


__all__ = [
    "HELD_NAMESPACE",
    "WITHHELD",
    "LocalStore",
    "ReviewAnswer",
    "ReviewRequest",
    "answer_review",
    "held_place",
    "hold_record",
]
