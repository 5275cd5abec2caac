"""The probe's call and token budget: what one run may spend on re-running its guarded steps.

A probed step re-runs its node ``k + r`` times (one more for a joint variant). ``[probe]
max_calls_per_step``, ``max_calls_per_run`` and ``max_tokens_per_run`` bound that spending
(0: no bound). A step the budget cannot pay for is **held for review**, never let through
unprobed: :meth:`ProbeBudget.reserve` raises :class:`BudgetExceeded`, a
:class:`~biasbreaker.errors.ProbeError`, which every adapter already turns into a hold with the
reason recorded in the trace (``probe failed: BudgetExceeded: ...``).

What counts:

* **calls**: the distinct re-runs the probe would make for the step (cached re-runs of the same
  input and sample are free), reserved before any of them starts, so concurrent steps of one
  run cannot overspend together;
* **tokens**: the prompt and completion tokens of LLM calls made *inside* the probe's re-runs,
  charged by the client through :func:`biasbreaker.usage.charge_tokens` (the shipped
  ``openai-compatible`` and ``fake`` clients do, and the adapters charge what a LangChain chat
  model's reply reports in ``usage_metadata``; a model that reports nothing is not metered,
  and the first probed step of each node whose re-runs charged nothing warns,
  :class:`UnmeteredWarning`, once per guard and process whatever the warnings filter). Tokens
  are known only after the replies, so the token bound is checked when a step's probe
  starts: the step that crosses it finishes, every later probed step of the run is held.

A :class:`ProbeBudget` is one run's account. The LangGraph guard and the LangChain middleware
keep one per thread id (:class:`RunBudgets`) in memory, not in the checkpoint: a process that
resumes a thread from its checkpointer starts that thread's count again at 0
(docs/configuration.md says so).
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from biasbreaker.errors import ProbeError
from biasbreaker.probe_reruns import RerunCount
from biasbreaker.usage import charge_tokens, metered, phase


class BudgetExceeded(ProbeError):
    """A probed step the run's budget cannot pay for; the message names the bound and the fix."""


class UnmeteredWarning(UserWarning):
    """``max_tokens_per_run`` is set, but a probed step's re-runs charged no tokens.

    Their model reports no usage (or its client does not call
    :func:`biasbreaker.usage.charge_tokens`), so the token bound cannot see them; the call
    bounds still hold. Warned the first time per step name, for the budget and every
    account made from it by :meth:`ProbeBudget.fresh` (one guard's runs, in one process),
    whatever the warnings filter (``"always"`` too): not once per step of every run.
    """


@dataclass(frozen=True)
class BudgetLimits:
    """The bounds, each 0 for none.

    Args:
        max_calls_per_step: Re-runs one probed step may make.
        max_calls_per_run: Re-runs all probed steps of one run may make together.
        max_tokens_per_run: Tokens (prompt + completion) the LLM calls inside one run's
            re-runs may use together.
    """

    max_calls_per_step: int = 0
    max_calls_per_run: int = 0
    max_tokens_per_run: int = 0

    def __post_init__(self) -> None:
        for name in ("max_calls_per_step", "max_calls_per_run", "max_tokens_per_run"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"BudgetLimits.{name}={value!r} must be an integer >= 0")

    @property
    def bounded(self) -> bool:
        """Whether any bound is set."""
        return bool(self.max_calls_per_step or self.max_calls_per_run or self.max_tokens_per_run)


class ProbeBudget:
    """One run's account against :class:`BudgetLimits`; thread-safe.

    Args:
        limits: The bounds.
        calls: Re-runs already spent (to continue a run).
        tokens: Tokens already spent.
    """

    def __init__(self, limits: BudgetLimits, *, calls: int = 0, tokens: int = 0) -> None:
        self.limits = limits
        self._calls = calls
        self._tokens = tokens
        self._lock = threading.Lock()
        self._unmetered = _FirstTime()

    def fresh(self) -> ProbeBudget:
        """A new account with the same bounds and nothing spent (a new run).

        It shares this budget's record of the steps already warned unmetered
        (:class:`UnmeteredWarning` is warned once per step name across the runs).
        """
        budget = ProbeBudget(self.limits)
        budget._unmetered = self._unmetered
        return budget

    def first_unmetered(self, step: str) -> bool:
        """Whether step ``step`` is reported unmetered for the first time (then recorded)."""
        return self._unmetered.first(step)

    @property
    def calls(self) -> int:
        """Re-runs spent (reserved) so far."""
        with self._lock:
            return self._calls

    @property
    def tokens(self) -> int:
        """Tokens charged so far."""
        with self._lock:
            return self._tokens

    def reserve(
        self,
        step: str,
        step_id: str,
        calls: int,
        drawn: RerunCount | None = None,
        *,
        whole: int | None = None,
    ) -> None:
        """Reserve ``calls`` re-runs for step ``step`` (occurrence ``step_id``), or refuse.

        Args:
            step: The step's node name.
            step_id: The step's occurrence.
            calls: The re-runs reserved now (distinct, not answered by the cache).
            drawn: What the probe drew, by kind (:class:`~biasbreaker.probe_reruns.RerunCount`),
                named in the message of a step over ``max_calls_per_step``; ``None``: not named.
            whole: The re-runs the step's probe may make in all, checked against
                ``max_calls_per_step`` (default ``calls``): an adaptive probe reserves its
                first stage, then its second, and is held at the first when its full draw
                would not fit (:mod:`biasbreaker.probe.adaptive`).

        Raises:
            BudgetExceeded: The step needs more than ``max_calls_per_step``, the run's
                re-runs would pass ``max_calls_per_run``, or its tokens have reached
                ``max_tokens_per_run``; nothing is reserved then.
        """
        lim = self.limits
        held = f"step {step!r} ({step_id}) is held for review unprobed"
        needs = calls if whole is None else whole
        with self._lock:
            if lim.max_calls_per_step and needs > lim.max_calls_per_step:
                kinds = (
                    "k + r, one more for a joint variant, one more per person for per-person "
                    "variants"
                    if drawn is None
                    else drawn.describe()
                    + (
                        ""
                        if drawn.total == needs
                        else f", {drawn.total - needs} answered once or from the cache"
                    )
                )
                raise BudgetExceeded(
                    f"{held}: its probe needs {needs} re-runs ({kinds}), above [probe] "
                    f"max_calls_per_step = {lim.max_calls_per_step}; raise max_calls_per_step "
                    f"to at least {needs}, or lower k or r"
                )
            if lim.max_calls_per_run and self._calls + calls > lim.max_calls_per_run:
                raise BudgetExceeded(
                    f"{held}: the run has spent {self._calls} of its [probe] "
                    f"max_calls_per_run = {lim.max_calls_per_run} probe re-runs and this "
                    f"step needs {calls} more; raise max_calls_per_run, lower probe_rate, k "
                    "or r, or review the held steps"
                )
            if lim.max_tokens_per_run and self._tokens >= lim.max_tokens_per_run:
                raise BudgetExceeded(
                    f"{held}: the run's probe re-runs have used {self._tokens} tokens, "
                    f"reaching [probe] max_tokens_per_run = {lim.max_tokens_per_run}; raise "
                    "max_tokens_per_run, lower probe_rate, k or r, or review the held steps"
                )
            self._calls += calls

    def charge(self, tokens: int) -> None:
        """Charge ``tokens`` (prompt + completion) to the run."""
        if tokens > 0:
            with self._lock:
                self._tokens += tokens


class _FirstTime:
    """Names seen so far, thread-safe: :meth:`first` is true once per name."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def first(self, name: str) -> bool:
        """Whether ``name`` is new (it is recorded)."""
        with self._lock:
            if name in self._seen:
                return False
            self._seen.add(name)
            return True


class StepMeter:
    """The tokens one probed step's re-runs charge, passed on to the run's account.

    Args:
        budget: The run's account (:class:`ProbeBudget`).
    """

    def __init__(self, budget: ProbeBudget) -> None:
        self.budget = budget
        self.tokens = 0
        self._lock = threading.Lock()

    def charge(self, tokens: int) -> None:
        """Charge ``tokens`` to the step and to the run."""
        if tokens > 0:
            with self._lock:
                self.tokens += tokens
            self.budget.charge(tokens)

    def check(self, step: str, calls: int) -> None:
        """Warn (:class:`UnmeteredWarning`) if the step's re-runs charged nothing under a bound.

        Only the first such step of each name warns (:meth:`ProbeBudget.first_unmetered`),
        whatever the warnings filter.

        Args:
            step: The probed step's node name.
            calls: Re-runs it made (0: nothing to meter, no warning).
        """
        bound = self.budget.limits.max_tokens_per_run
        if bound and calls and not self.tokens and self.budget.first_unmetered(step):
            warnings.warn(
                UnmeteredWarning(
                    f"[probe] max_tokens_per_run = {bound} cannot see the re-runs of step "
                    f"{step!r}: they charged no tokens (their model reports no usage, or its "
                    "client does not call biasbreaker.usage.charge_tokens), so only "
                    "max_calls_per_step and max_calls_per_run bound them"
                ),
                stacklevel=2,
            )


MAX_RUNS = 10_000
"""Runs whose account a :class:`RunBudgets` keeps (the least recently used is dropped)."""


class RunBudgets:
    """One :class:`ProbeBudget` per run key (an adapter's thread id), made on first use.

    Kept in memory, the :data:`MAX_RUNS` most recently used: a run whose account was dropped,
    or that a new process resumes from a checkpoint, starts its count again at 0.

    Args:
        template: The configured budget (its bounds are copied), or ``None`` for no bound.
        max_runs: Accounts kept, >= 1.
    """

    def __init__(self, template: ProbeBudget | None, *, max_runs: int = MAX_RUNS) -> None:
        self.template = template
        self.max_runs = max_runs
        self._runs: OrderedDict[str, ProbeBudget] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, run: str) -> ProbeBudget | None:
        """The account of run ``run``, or ``None`` when no bound is configured."""
        if self.template is None:
            return None
        with self._lock:
            budget = self._runs.get(run)
            if budget is None:
                budget = self._runs[run] = self.template.fresh()
            self._runs.move_to_end(run)
            while len(self._runs) > self.max_runs:
                self._runs.popitem(last=False)
            return budget


@contextlib.contextmanager
def metering(budget: ProbeBudget | StepMeter | None) -> Iterator[None]:
    """Charge the tokens of LLM calls made inside the block (the probe's re-runs) to ``budget``.

    The probe's tasks and the worker threads the adapters run sync re-runs in copy the context,
    so calls made there are charged too. ``None`` charges nothing. Either way the block's calls
    are the probe's in the usage tally (:func:`biasbreaker.usage.phase`).
    """
    with metered(budget), phase("probe"):
        yield


__all__ = [
    "BudgetExceeded",
    "BudgetLimits",
    "ProbeBudget",
    "RunBudgets",
    "StepMeter",
    "UnmeteredWarning",
    "charge_tokens",
    "metering",
]
