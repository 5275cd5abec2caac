"""Human review of an escalated output: what ``interrupt()`` shows and what resume accepts.

When the control machine escalates (``max_retries`` interventions failed, or the probe itself
failed), the held output goes to the review node, which calls LangGraph's ``interrupt()`` with
a :class:`ReviewRequest` (as plain JSON). The run pauses; resume it on the same thread with
``graph.invoke(Command(resume=ReviewDecision(...).model_dump()), config)`` (a plain dict with
the same fields works too):

* ``{"action": "approve"}`` promotes the held output as it is;
* ``{"action": "edit", "update": {...}}`` promotes the given update instead (keys of the
  application's state only);
* ``{"action": "reject"}`` drops the output: its successors never run, and the run ends at
  this branch.

A resume value that is not a valid decision pauses the run again, with the same request and
an ``error`` saying what was wrong; resume once more with a valid one. Invalid are: a value that
is not a mapping, an unknown ``action``, a missing or extra field, an ``edit`` whose update
writes a ``bb_`` key, a key the graph's state does not have, a value that is not JSON (NaN
and infinity included) or a value of another type than a plain key's annotation declares
(:func:`~biasbreaker_plugins.langgraph.state.annotation_problem`; complex annotations are not
checked), and ``approve`` of an output that was held because it is not JSON. The
review node never raises on a bad resume value, so one bad value cannot jam the thread.
``Command(resume=None)`` and ``Command(resume={})`` never reach it (LangGraph raises
``UnboundLocalError`` for ``None`` before any node runs, and reads ``{}`` as an empty map of
interrupt ids that answers nothing: the same request pauses again); docs/langgraph.md §5.

Escalation is terminal for the control machine: after a review, every later guarded output of
the run goes to review too (with its own scores), until the thread is started afresh.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from biasbreaker_plugins.langgraph.state import BB_KEYS, json_problem


class ReviewDecision(BaseModel):
    """A reviewer's decision on one held output (the ``Command(resume=...)`` value).

    Args:
        action: ``"approve"``, ``"edit"`` or ``"reject"``.
        update: The replacement update for ``"edit"`` (application keys only); must be absent
            otherwise.
        reviewer: Who decided (free text, recorded in ``bb_reviews``).
        note: Why (free text, recorded).

    Raises:
        pydantic.ValidationError: On an unknown action, ``update`` missing for ``"edit"`` or
            given for another action, an ``update`` writing a ``bb_`` key, or an ``update``
            value that is not JSON (a set, an object, NaN or infinity).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["approve", "edit", "reject"]
    update: dict[str, Any] | None = Field(
        None, description="Replacement update for 'edit': application state keys -> values."
    )
    reviewer: str = Field("", max_length=200, description="Who decided.")
    note: str = Field("", max_length=4000, description="Why.")

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
        if self.action != "edit" and self.update is not None:
            raise ValueError(f"action {self.action!r} takes no 'update'; use action 'edit'")
        return self


class ReviewRequest(BaseModel):
    """What the review interrupt carries (``interrupt(value)``'s ``value``, as JSON).

    Args:
        key: The held output's key in ``bb_unverified_output``.
        node: The guarded node that produced it.
        held: The held update, as the node returned it; a value that is not JSON is replaced by
            a marker text ``"<not JSON: TYPE REPR>"`` (and ``approve`` is refused for it).
        frozen: The frozen payload record (canonical JSON and sha256) when the machine froze
            it, else ``None``.
        reason: Why it is held (the machine's reason, or the probe's error).
        breaker_state: The control machine's state (``"escalated"``).
        local_scores: node -> latest local score (``None`` = not applicable).
        fast: Fast B_net at the step.
        slow: Slow B_net at the step.
        trail: The latest intervention's trail events, oldest first, when it ran on this
            output; empty otherwise (an output held after the escalation of another).
        actions: The accepted ``action`` values.
        error: Set when the previous resume value was not a valid :class:`ReviewDecision`:
            what was wrong (the run paused again; resume once more).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    node: str
    held: dict[str, Any]
    frozen: dict[str, Any] | None
    reason: str
    breaker_state: str
    local_scores: dict[str, float | None]
    fast: float | None
    slow: float | None
    trail: list[dict[str, Any]]
    actions: list[str] = Field(default_factory=lambda: ["approve", "edit", "reject"])
    error: str | None = None


__all__ = ["ReviewDecision", "ReviewRequest"]
