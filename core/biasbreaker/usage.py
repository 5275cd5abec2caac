"""Who spent which LLM calls and tokens: the role of each call, and a tally per role.

A call's **role** says what part of biasbreaker it served:

* ``agent``: a guarded node's own call;
* ``probe``: a call made inside the probe's re-runs of a guarded step (its counterfactuals
  and resamples), whatever the request's ``purpose``;
* ``re-check``: a call made inside the re-check of a repair (the probe run on the repaired
  step);
* ``skeptic``: a skeptic's verdict (``purpose = "skeptic"``);
* ``MADERA``: the MADERA diagnoser or editor (``purpose = "diagnoser"`` or ``"editor"``);
* ``other``: anything else.

The probe and the re-check mark their re-runs with :func:`phase` (a context variable, copied
into their tasks and worker threads); a client wrapper reads :func:`role_of` when it records a
reply in a :class:`UsageTally`, and in the tally of the block in progress too
(:func:`tallied`: one input's run, say, for its line of ``results.jsonl``). Tokens come from
:class:`~biasbreaker.llm.LLMResponse`: the endpoint's ``usage`` where it reports one, else the
client's estimate, tallied apart.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Literal, Protocol

from biasbreaker.llm import LLMResponse

Phase = Literal["probe", "re-check"]
ROLES = ("agent", "probe", "re-check", "skeptic", "MADERA", "other")
"""Every role, in the order reports list them."""

_PHASE: contextvars.ContextVar[Phase | None] = contextvars.ContextVar(
    "biasbreaker_usage_phase", default=None
)
_BY_PURPOSE = {"agent": "agent", "skeptic": "skeptic", "diagnoser": "MADERA", "editor": "MADERA"}


@contextlib.contextmanager
def phase(name: Phase) -> Iterator[None]:
    """Mark the calls made inside the block as the probe's or the re-check's.

    An outer phase wins: the probe a re-check runs keeps its calls ``re-check``.
    """
    if _PHASE.get() is not None:
        yield
        return
    token = _PHASE.set(name)
    try:
        yield
    finally:
        _PHASE.reset(token)


class Meter(Protocol):
    """What :func:`charge_tokens` charges (a :class:`~biasbreaker.probe.budget.ProbeBudget`)."""

    def charge(self, tokens: int) -> None:
        """Charge ``tokens``."""
        ...


_METER: contextvars.ContextVar[Meter | None] = contextvars.ContextVar(
    "biasbreaker_usage_meter", default=None
)


@contextlib.contextmanager
def metered(meter: Meter | None) -> Iterator[None]:
    """Charge the tokens of the LLM calls made inside the block to ``meter`` (``None``: none).

    The block's tasks and the worker threads started with its context (``asyncio.to_thread``,
    the adapters' pools) are inside it too.
    """
    token = _METER.set(meter)
    try:
        yield
    finally:
        _METER.reset(token)


def charge_tokens(tokens: int) -> None:
    """Charge ``tokens`` to the meter of the block in progress (none outside one).

    Every shipped client calls it with ``reply.total_tokens`` after each reply (the
    ``openai-compatible`` and ``fake`` clients); a client you write should too, or the probe's
    ``[probe] max_tokens_per_run`` cannot see its tokens.
    """
    meter = _METER.get()
    if meter is not None and tokens > 0:
        meter.charge(tokens)


def role_of(purpose: str) -> str:
    """The role of a call with ``purpose`` made here (module docstring)."""
    current = _PHASE.get()
    if current is not None:
        return current
    return _BY_PURPOSE.get(purpose, "other")


@dataclass
class RoleUsage:
    """One role's calls and tokens.

    Args:
        calls: Calls made (failed ones included).
        prompt_tokens: Prompt tokens of the replies.
        completion_tokens: Completion tokens of the replies.
        estimated_tokens: How many of those tokens (prompt and completion) the client
            estimated because the endpoint reported no usage.
    """

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated_tokens: int = 0

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


class UsageTally:
    """Calls and tokens per role; thread-safe (skeptics and MADERA call from worker threads)."""

    def __init__(self) -> None:
        self._roles: dict[str, RoleUsage] = {}
        self._lock = threading.Lock()

    def call(self, role: str) -> None:
        """Count one call of ``role`` (before it is answered: a failed call counts too)."""
        with self._lock:
            self._roles.setdefault(role, RoleUsage()).calls += 1

    def reply(self, role: str, response: LLMResponse) -> None:
        """Add the tokens of ``response`` to ``role``."""
        with self._lock:
            usage = self._roles.setdefault(role, RoleUsage())
            usage.prompt_tokens += response.prompt_tokens
            usage.completion_tokens += response.completion_tokens
            if response.usage_estimated:
                usage.estimated_tokens += response.total_tokens

    def by_role(self) -> dict[str, RoleUsage]:
        """A copy of the tally, roles in :data:`ROLES` order (unknown ones after)."""
        with self._lock:
            order = [r for r in ROLES if r in self._roles]
            order += sorted(set(self._roles) - set(ROLES))
            return {r: RoleUsage(**asdict(self._roles[r])) for r in order}

    def to_json(self) -> dict[str, dict[str, int]]:
        """``{role: {calls, prompt_tokens, completion_tokens, estimated_tokens}}``."""
        return {r: asdict(u) for r, u in self.by_role().items()}


_TALLY: contextvars.ContextVar[UsageTally | None] = contextvars.ContextVar(
    "biasbreaker_usage_tally", default=None
)


@contextlib.contextmanager
def tallied(tally: UsageTally) -> Iterator[UsageTally]:
    """Also count the LLM calls made inside the block in ``tally`` (:func:`current_tally`).

    Like :func:`phase`, the block's tasks and the worker threads started with its context are
    inside it, so the tally of one input's run holds its agents', probes', re-checks',
    skeptics' and MADERA's calls whatever else runs at the same time. An inner block replaces
    the outer one's tally for its duration.
    """
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


def current_tally() -> UsageTally | None:
    """The tally of the :func:`tallied` block in progress, or ``None`` outside one."""
    return _TALLY.get()


UsageJSON = dict[str, dict[str, int]]
"""``{role: {calls, prompt_tokens, completion_tokens, estimated_tokens}}``, as
:meth:`UsageTally.to_json` gives it."""


def combine_usage(*usages: Mapping[str, Mapping[str, int]]) -> UsageJSON:
    """The sum of several tallies (say, of a phase's worker processes), roles in order."""
    total: dict[str, dict[str, int]] = {}
    for usage in usages:
        for role, counts in usage.items():
            into = total.setdefault(role, dict.fromkeys(counts, 0))
            for key, value in counts.items():
                into[key] = into.get(key, 0) + value
    order = [r for r in ROLES if r in total] + sorted(set(total) - set(ROLES))
    return {r: total[r] for r in order}


def usage_since(
    after: Mapping[str, Mapping[str, int]], before: Mapping[str, Mapping[str, int]]
) -> UsageJSON:
    """What a tally added between two :meth:`UsageTally.to_json` snapshots (roles that moved)."""
    spent: dict[str, dict[str, int]] = {}
    for role, counts in after.items():
        was = before.get(role, {})
        moved = {key: value - was.get(key, 0) for key, value in counts.items()}
        if any(moved.values()):
            spent[role] = moved
    return spent


def describe_usage(usage: Mapping[str, Mapping[str, int]]) -> str:
    """One line: ``agent 12 calls, 3400 tokens (1200 estimated); probe ...``.

    Args:
        usage: :meth:`UsageTally.to_json` output.
    """
    if not usage:
        return "no LLM calls"
    parts = []
    for role, u in usage.items():
        tokens = u["prompt_tokens"] + u["completion_tokens"]
        estimated = f" ({u['estimated_tokens']} estimated)" if u["estimated_tokens"] else ""
        parts.append(f"{role} {u['calls']} calls, {tokens} tokens{estimated}")
    return "; ".join(parts)


__all__ = [
    "ROLES",
    "Meter",
    "Phase",
    "RoleUsage",
    "UsageJSON",
    "UsageTally",
    "charge_tokens",
    "combine_usage",
    "current_tally",
    "describe_usage",
    "metered",
    "phase",
    "role_of",
    "tallied",
    "usage_since",
]
