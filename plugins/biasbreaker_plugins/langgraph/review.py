"""Human review of an escalated output: what ``interrupt()`` shows and what resume accepts.

When the control machine escalates (``max_retries`` interventions failed, or the probe itself
failed), the held output goes to the review node, which calls LangGraph's ``interrupt()`` with
a :class:`ReviewRequest` (as plain JSON). The run pauses; resume it on the same thread with
``graph.invoke(Command(resume=ReviewDecision(...).model_dump()), config)`` (a plain dict with
the same fields works too):

* ``{"action": "approve", "sha256": request["sha256"]}`` promotes the held output as it is
  and releases its held stream events: approving names what is approved (the request's
  ``sha256``, of ``held`` and, when the node streamed while held, of ``stream`` with it), so an
  approval written for another output, or a stale one, or one naming the update alone, is
  refused;
* ``{"action": "edit", "update": {...}}`` promotes the given update instead (keys of the
  application's state only); the held stream events are dropped (they show the output the
  reviewer replaced) and the edit's messages are streamed whole;
* ``{"action": "reject"}`` drops the output and its held stream events: its successors never
  run, and the run ends at this branch.

A resume value that is not a valid decision pauses the run again, with the same request and
an ``error`` saying what was wrong; resume once more with a valid one. Invalid are: a value that
is not a mapping, an unknown ``action``, a missing or extra field (``approve`` without
``sha256``), a ``sha256`` that is not the request's, an ``edit`` whose update
writes a ``bb_`` key, a key the graph's state does not have, a value that is not JSON (NaN
and infinity included) or a value of another type than a plain key's annotation declares
(:func:`~biasbreaker_plugins.langgraph.state.annotation_problem`; complex annotations are not
checked), and ``approve`` of an output that was held because it is not JSON, or whose held
stream holds an event that is not JSON (it could not be shown). The
review node never raises on a bad resume value, so one bad value cannot jam the thread.
``Command(resume=None)`` and ``Command(resume={})`` never reach it (LangGraph raises
``UnboundLocalError`` for ``None`` before any node runs, and reads ``{}`` as an empty map of
interrupt ids that answers nothing: the same request pauses again); docs/langgraph.md §5.

Escalation is terminal for the control machine: after a review, every later guarded output of
the run goes to review too (with its own scores), until the thread is started afresh.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.last_value import LastValue
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from biasbreaker.redaction import redact_text
from biasbreaker.types import FrozenPayload
from biasbreaker_plugins.langgraph._internals import interrupt_in, read_channels, write_problem
from biasbreaker_plugins.langgraph.shared import Shared
from biasbreaker_plugins.langgraph.staging import Work
from biasbreaker_plugins.langgraph.state import BB_KEYS, annotation_problem, json_problem


class ReviewDecision(BaseModel):
    """A reviewer's decision on one held output (the ``Command(resume=...)`` value).

    Args:
        action: ``"approve"``, ``"edit"`` or ``"reject"``.
        update: The replacement update for ``"edit"`` (application keys only); must be absent
            otherwise.
        reviewer: Who decided (free text, recorded in ``bb_reviews``).
        note: Why (free text, recorded).
        sha256: The :class:`ReviewRequest`'s ``sha256`` (of what it shows): required to
            ``"approve"`` (the review node refuses an approval without it, or with another
            output's, and pauses again saying so); checked when given with another action.

    Raises:
        pydantic.ValidationError: On an unknown action, ``update`` missing for ``"edit"`` or
            given for another action, an ``update`` writing a ``bb_`` key, an ``update``
            value that is not JSON (a set, an object, NaN or infinity), or a ``sha256`` that is
            not 64 lowercase hex digits.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["approve", "edit", "reject"]
    update: dict[str, Any] | None = Field(
        None, description="Replacement update for 'edit': application state keys -> values."
    )
    reviewer: str = Field("", max_length=200, description="Who decided.")
    note: str = Field("", max_length=4000, description="Why.")
    sha256: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{64}$",
        description="The review request's sha256 (of the held output); required to approve.",
    )

    @field_validator("update", mode="before")
    @classmethod
    def _messages_as_json(cls, update: Any) -> Any:
        """LangChain messages in an edit are taken in their JSON form.

        What ``add_messages`` reads back into a message: ``{"messages": [AIMessage("...")]}``
        is an edit like ``{"messages": [{"type": "ai", "content": "..."}]}``.
        """
        return _json_messages(update)

    @field_validator("update")
    @classmethod
    def _application_json(cls, update: dict[str, Any] | None) -> dict[str, Any] | None:
        if update is None:
            return None
        bad = sorted(key for key in update if key in BB_KEYS)
        if bad:
            raise ValueError(
                f"an edit may not write the biasbreaker keys {bad}; give application keys only"
            )
        problem = json_problem(update, "update")
        if problem is not None:
            raise ValueError(f"the edit is not JSON: {problem}")
        return update

    @model_validator(mode="after")
    def _update_only_for_edit(self) -> ReviewDecision:
        if self.action == "edit" and self.update is None:
            raise ValueError("action 'edit' needs 'update': the replacement update (a dict)")
        if self.action == "edit" and not self.update:
            # an empty edit released nothing and ran the next nodes without the held keys
            raise ValueError(
                "action 'edit' with an empty 'update' would release nothing and run the next "
                "nodes without the held output; give the replacement values, or use 'reject'"
            )
        if self.action != "edit" and self.update is not None:
            raise ValueError(f"action {self.action!r} takes no 'update'; use action 'edit'")
        return self


def _json_messages(value: Any) -> Any:
    """``value`` with every LangChain message in it (in dicts and lists) as its JSON form.

    The form ``add_messages`` turns back into the message: ``{"type", "content"}``, and the
    message's ``name``, ``id``, ``tool_calls`` and ``tool_call_id`` where it has them.
    """
    if isinstance(value, BaseMessage):
        form: dict[str, Any] = {"type": value.type, "content": value.content}
        for attr in ("name", "id", "tool_calls", "tool_call_id"):
            given = getattr(value, attr, None)
            if given:
                form[attr] = given
        return form
    if isinstance(value, dict):
        return {key: _json_messages(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_messages(item) for item in value]
    return value


class ReviewRequest(BaseModel):
    """What the review interrupt carries (``interrupt(value)``'s ``value``, as JSON).

    Args:
        key: The held output's key in ``bb_unverified_output``.
        node: The guarded node that produced it.
        held: The held update, as the node returned it; a value that is not JSON is replaced by
            a marker text ``"<not JSON: TYPE REPR>"`` (and ``approve`` is refused for it).
        stream: What ``approve`` releases to the caller's stream besides the update, in order
            (:func:`~.streaming.held_view`): ``{"kind": "custom", "event"}`` for a custom event
            (``get_stream_writer()``), ``{"kind": "messages", "message"}`` for a streamed
            message (its tokens joined), ``{"kind", "event"}`` for another stream chunk; ``[]``
            when the caller did not stream or the node streamed nothing. An event that is not
            JSON is a marker text (and ``approve`` is refused).
        frozen: The frozen payload record (canonical JSON and sha256) when the machine froze
            it, else ``None``.
        reason: Why it is held (the machine's reason, or the probe's error).
        breaker_state: The control machine's state (``"escalated"``).
        local_scores: node -> latest local score (``None`` = not applicable).
        fast: Fast B_net at the step.
        slow: Slow B_net at the step.
        trail: The latest intervention's trail events, oldest first, when it ran on this
            output; empty otherwise (an output held after the escalation of another).
        repair_error: The latest intervention's error when it ran on this output and failed
            (``"ExceptionType: message"``, redacted: the repair's LLM raised, a skeptic panel
            failed closed, ...), else ``None``. Its ``failed`` trail event says the same.
        actions: The accepted ``action`` values.
        sha256: SHA-256 of the canonical JSON (RFC 8785) of ``held`` when ``stream`` is empty,
            else of ``{"held": held, "stream": stream}``: what an ``approve`` must name.
        error: Set when the previous resume value was not a valid :class:`ReviewDecision`:
            what was wrong (the run paused again; resume once more).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    node: str
    held: dict[str, Any]
    stream: list[dict[str, Any]] = Field(default_factory=list)
    frozen: dict[str, Any] | None
    reason: str
    breaker_state: str
    local_scores: dict[str, float | None]
    fast: float | None
    slow: float | None
    trail: list[dict[str, Any]]
    repair_error: str | None = None
    actions: list[str] = Field(default_factory=lambda: ["approve", "edit", "reject"])
    sha256: str = ""
    error: str | None = None


class ReviewNode(Shared):
    """``bb_review``: pause with ``interrupt()`` for the first escalated output.

    Args:
        channels: The graph's channels (``StateGraph.channels``, state key -> channel): a
            reviewer's update may write only the application's keys among them, with values
            their reducers accept. ``None``: only the ``bb_`` keys are refused.
        settle: Called with the task's work and config before it returns (streams the
            promoted outputs' held events).
        pause: Called with the task's config before the run pauses (seals the trace).
    """

    def __init__(
        self,
        channels: Mapping[str, Any] | None = None,
        settle: Callable[[Work, RunnableConfig], None] | None = None,
        pause: Callable[[RunnableConfig], None] | None = None,
    ) -> None:
        self.pause = pause
        self.channels = dict(channels or {})
        self.state_keys = None if channels is None else tuple(sorted(set(channels) - BB_KEYS))
        self.settle = settle

    def __call__(self, state: dict[str, Any], config: RunnableConfig) -> Any:
        """Pause for the first escalated output; apply the reviewer's decision on resume.

        Everything before ``interrupt()`` only reads the state, so re-running the node from its
        top on resume (LangGraph's rule) has no side effect. The node takes no input from the
        graph: it reads the guard's keys (and, to try an update on them, the keys the update
        writes) itself.
        """
        state = read_channels(config, BB_KEYS)
        work = Work(state, config)
        pending = work.entries("escalated")
        if not pending:
            return {}
        result = self._review(state, work, pending[0], config)
        if self.settle is not None:
            self.settle(work, config)
        return result

    def _review(
        self,
        state: Mapping[str, Any],
        work: Work,
        staged: Mapping[str, Any],
        config: RunnableConfig,
    ) -> Any:
        key = staged["key"]
        snapshot = (state.get("bb_breaker") or {}).get("machine") or {}
        step = staged.get("step") or {}
        # the machine's last intervention belongs to this output only if it was run on it: a
        # later output held while ESCALATED (or one escalated by a failed probation) has none
        result = (snapshot.get("result") or {}) if _last_intervened(state) == key else {}
        held = staged.get("view", staged["update"])
        stream = list(staged.get("stream") or [])
        request = ReviewRequest(
            key=key,
            node=staged["node"],
            held=held,
            stream=stream,
            frozen=work.frozen(key).get("payload"),
            reason=redact_text(str(staged.get("reason", ""))),
            breaker_state=str(snapshot.get("state", "normal")),
            local_scores=dict(state.get("bb_local_scores") or {}),
            fast=step.get("fast"),
            slow=step.get("slow"),
            trail=list(result.get("trail") or []),
            repair_error=_repair_error(result),
            sha256=approved_sha256(held, stream),
        )
        payload = request.model_dump(mode="json")
        if self.pause is not None:
            self.pause(config)  # seal the trace: the run may wait here for days
        answer = interrupt_in(payload, config)
        while True:
            decision, error = self._decision(config, staged, answer, request.sha256)
            if decision is not None:
                break
            # Ask again, never raise: LangGraph replays a thread's resume values into this
            # node's interrupts in order on every resume, so a raise here would repeat on
            # every later resume. The next resume value answers this second interrupt.
            # the error may quote the resume value or a reducer's message: never a secret
            answer = interrupt_in({**payload, "error": redact_text(error)}, config)
        record = {
            "key": key,
            "node": staged["node"],
            "action": decision.action,
            "reviewer": decision.reviewer,
            "note": decision.note,
        }
        work.pairs.append(("bb_reviews", [record]))
        work.pairs.append(("bb_audit_trail", [{"event": "review", **record}]))
        frozen = dict(work.frozen(key))
        if decision.action == "reject":
            work.drop(key)
            work.rejected.append(dict(staged))
            if frozen:
                work.pairs.append(("bb_frozen", {key: {**frozen, "status": "rejected"}}))
            return work.result()
        if decision.action == "approve":
            work.clear(staged, staged["update"])
        else:
            work.clear(staged, dict(decision.update or {}), "edited")
        if frozen:
            status = "approved" if decision.action == "approve" else "edited"
            work.pairs.append(("bb_frozen", {key: {**frozen, "status": status}}))
        return work.result()

    def _decision(
        self, config: RunnableConfig, staged: Mapping[str, Any], answer: Any, sha256: str
    ) -> tuple[ReviewDecision | None, str]:
        """The reviewer's decision on ``staged``, or ``None`` and what is wrong with ``answer``.

        Refused: a value that is not a :class:`ReviewDecision` (wrong action, missing or extra
        field, an edit writing ``bb_`` keys or values that are not JSON, NaN and infinity
        included), ``approve`` without ``sha256`` or any action with a ``sha256`` other than
        the held output's (``sha256``, the request's), an edit writing keys the graph's state
        does not have or a value of another type than a plain key's annotation declares
        (:meth:`_type_problem`), ``approve`` of an output that is not JSON (it was held for
        that reason; edit or reject it), and an update the state's reducers refuse (a list
        reducer given a number): LangGraph would fail the super-step after this node
        returned, again on every resume.
        """
        hint = "resume with {'action': 'approve' | 'edit' | 'reject', ...}"
        try:
            decision = ReviewDecision.model_validate(answer)
        except (ValueError, TypeError) as exc:
            return None, (
                f"the resume value {_short(answer)} is not a ReviewDecision: "
                f"{_first_error(exc)}; {hint}"
            )
        approve = f"{{'action': 'approve', 'sha256': '{sha256}'}}"
        if decision.action == "approve" and decision.sha256 is None:
            return None, (
                "approve is missing 'sha256': name the output you approve with this request's "
                f"sha256; resume with {approve}"
            )
        if decision.sha256 is not None and decision.sha256 != sha256:
            return None, (
                f"the sha256 {decision.sha256} is not this request's ({sha256}): it names another "
                "output, or the update without the held stream events the request shows, or is "
                f"mistyped; resume with {approve}, 'edit' or 'reject'"
            )
        if decision.action == "approve" and staged.get("not_json"):
            return None, (
                f"approve would promote the output of {staged['node']!r}, which is not JSON "
                f"({staged['not_json']}); resume with 'edit' and a JSON update, or 'reject'"
            )
        if decision.action == "approve" and staged.get("stream_not_json"):
            return None, (
                f"approve would release what {staged['node']!r} streamed, which holds an event "
                f"that is not JSON and could not be shown ({staged['stream_not_json']}); "
                "resume with 'edit' (the held events are dropped) or 'reject'"
            )
        if decision.action == "edit" and self.state_keys is not None:
            unknown = sorted(set(decision.update or {}) - set(self.state_keys))
            if unknown:
                return None, (
                    f"the edit writes {unknown}, which are not keys of the graph's state "
                    f"(keys: {list(self.state_keys)}); LangGraph would drop them silently"
                )
        if decision.action == "edit":
            mistyped = self._type_problem(decision.update or {})
            if mistyped is not None:
                return None, f"{mistyped}; give a value of that type"
        update = staged["update"] if decision.action == "approve" else decision.update
        if decision.action != "reject" and update:
            current = read_channels(config, [k for k in update if k in self.channels])
            refused = write_problem(self.channels, current, update)
            if refused is not None:
                return None, (
                    f"the state's reducer refuses the {decision.action}'s update ({refused}); "
                    + (
                        "resume with 'edit' and an update it accepts, or 'reject'"
                        if decision.action == "approve"
                        else "give a value of the key's type"
                    )
                )
        return decision, ""

    def _type_problem(self, update: Mapping[str, Any]) -> str | None:
        """The first value of ``update`` whose key's annotation says it has the wrong type.

        Only plain keys (LangGraph's ``LastValue`` channel, holding the key's annotation) are
        checked, with :func:`~biasbreaker_plugins.langgraph.state.annotation_problem`: a key
        with a reducer takes whatever its reducer accepts (checked by ``write_problem``).
        """
        for key, value in update.items():
            channel = self.channels.get(key)
            if isinstance(channel, LastValue):
                problem = annotation_problem(channel.typ, value, key)
                if problem is not None:
                    return problem
        return None


def approved_sha256(held: Any, stream: list[dict[str, Any]]) -> str:
    """What an approval must name: the SHA-256 of ``held``, and of ``stream`` with it.

    ``FrozenPayload.of(held).sha256`` when nothing streamed (``stream`` empty), else that of
    ``{"held": held, "stream": stream}``: an approval covers every event it releases.
    """
    return FrozenPayload.of({"held": held, "stream": stream} if stream else held).sha256


def _last_intervened(state: Mapping[str, Any]) -> str | None:
    """The key of the output the thread's latest intervention ran on, or ``None``."""
    for event in reversed(state.get("bb_audit_trail") or []):
        if event.get("event") == "intervention":
            return str(event.get("key"))
    return None


def _repair_error(result: Mapping[str, Any]) -> str | None:
    """The intervention result's ``error`` (already redacted by the runner), or ``None``."""
    error = result.get("error")
    return redact_text(str(error)) if error else None


def _first_error(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "value"
        return f"{where}: {first.get('msg', exc)}"
    return str(exc)


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


__all__ = ["ReviewDecision", "ReviewNode", "ReviewRequest", "approved_sha256"]
