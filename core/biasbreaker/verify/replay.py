"""Replay: re-derive every step of a trace from its header and its recorded inputs.

The replay is a second, independent implementation of the documented specification
(``docs/control.md`` §2 the breaker, §3 the transition table, §3a half-open probation, §3b node
trips, §5 the calibration window; ``docs/propagation.md`` for B_net and the EWMAs). It imports
neither :class:`~biasbreaker.machine.ControlMachine` nor
:class:`~biasbreaker.breaker.CircuitBreaker`, so a bug in the machine shows up as a violation
here instead of being reproduced. For every step it recomputes, from the header's configuration
and the step's recorded inputs (local scores, Katz weights, the intervention's summary):

- **B_net** ``= Σ w_i·b_i / Σ w_i`` over the scored nodes (exactly rounded sums, clamped to
  ``[min b_i, max b_i]``), and from it the **fast and slow EWMAs** ``a·B + (1 − a)·previous``
  (the first B_net sets both; a step with no score leaves them, recorded as 0 before any).
  A *re-step* — a held output stepped again with the same fast, slow and scores as its node's
  last fresh step (§3a) — leaves the EWMAs as they were. With the header's smoothing, every
  step is re-derived: the weights in force are the last recorded, and a step with scores and
  none in force (none recorded yet, or ``{}`` recorded last) is a violation (``weights``), the
  replay going on from its recorded fast and slow;
- the **window counts** ``(size, beyond_3, beyond_5)`` of the last W fast values against
  ``μ + 3σ`` and ``μ + 5σ``;
- the **trip statistic** ``max(fast, own score)`` with node trips, else fast, and the
  **mixing ratio** ``sigmoid((trip statistic − tau_enter) / kappa)``;
- the **transition** of the table (first row whose guard holds), hence the **state**, the
  **action**, the **episode** and **attempt** counters and the **reason's category**;
- the consistency of what cannot be recomputed: an intervention summary exactly on the steps
  that enter INTERVENTION, well formed (a converged repair has a digest and a re-check score and
  no error), the re-check it implies (``converged``, no error, ``recheck_score < tau_exit``),
  and the payload digests (the episode's frozen payload on its tripped steps, the repair's
  digest on a hold-mode recovery, none on closed steps).

A **held step** (transition ``"held-for-review"``: the adapter's probe could not read the
step's input or output, or failed; ``ControlMachine.step(hold=...)``) takes no transition: its
state, episode and attempt counters are the previous step's, it does not count as a recovery
step, its action is ``escalate`` with the output's digest and its reason ``"held for review: "``
and the probe's reason. A step whose recorded probe outcome is ``unreadable`` or ``failed`` must
be held, and a held step must say why (a probe outcome that is not a reading one). An
``unsupported_language`` outcome (the input's language is not one the term lists cover) is read
by its reason's category: :data:`~biasbreaker.trace.records.UNSUPPORTED_PROCEEDED` (``[probe]
unsupported_language = "proceed"``) leaves the decision to the table, any other reason
(:data:`~biasbreaker.trace.records.UNSUPPORTED_HELD`, the default) must be held.

Each difference is a violation naming the step, the field, the recorded and the recomputed
value; the replay then continues from what was recorded, so one wrong value is reported once.

Float comparisons are exact for B_net, fast and slow (IEEE-754 double arithmetic, correctly
rounded sums: :func:`math.fsum`), and within :data:`RATIO_TOLERANCE` for the mixing ratio
(``exp`` may differ in its last bit between platforms).

Source:
    ``docs/control.md`` §2, §3, §3a, §3b, §5; ``docs/propagation.md``; Phase 3 design (M3).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from operator import mul
from typing import Any, Final

from biasbreaker.trace.lines import ProbeLine, StepLineV1
from biasbreaker.trace.records import (
    HELD_FOR_REVIEW,
    UNSUPPORTED_LANGUAGE,
    UNSUPPORTED_PROCEEDED,
    TraceHeader,
)
from biasbreaker.types import BreakerAction, BreakerState
from biasbreaker.verify.report import PropertyReport, ViolationLog

RATIO_TOLERANCE: Final = 1e-12
"""How far a recorded mixing ratio may be from the replayed one (``exp`` is libm's)."""

WEIGHT_SUM_TOLERANCE: Final = 1e-6
"""How far recorded Katz weights may sum from 1 (as the machine accepts them)."""

SUMMARY_KEYS: Final = frozenset(
    {"strategy", "converged", "recheck_score", "error", "events", "repaired_sha256"}
)
STRATEGIES: Final = ("skeptics", "madera", "none")

_N, _W, _I, _R, _E = (
    BreakerState.NORMAL,
    BreakerState.WARNING,
    BreakerState.INTERVENTION,
    BreakerState.RECOVERY,
    BreakerState.ESCALATED,
)
_CLOSED: Final = frozenset({_N, _W})
fsum, exp = math.fsum, math.exp
HOLDING_STATUSES: Final = frozenset({"unreadable", "failed"})
"""Probe outcomes whose step must be held for review (the output could not be checked)."""
READING_STATUSES: Final = frozenset({"scored", "not_applicable", "not_sampled", "not_probed"})
"""Probe outcomes that leave the decision to the table (the step was read as it is)."""


def must_hold(probe: ProbeLine | None) -> bool:
    """Whether a step with this probe outcome must be held for review.

    ``unreadable`` and ``failed``, and ``unsupported_language`` unless its reason starts with
    :data:`~biasbreaker.trace.records.UNSUPPORTED_PROCEEDED` (fails closed on any other).
    """
    if probe is None:
        return False
    if probe.status == UNSUPPORTED_LANGUAGE:
        return not probe.reason.startswith(UNSUPPORTED_PROCEEDED)
    return probe.status in HOLDING_STATUSES


def reads(probe: ProbeLine | None) -> bool:
    """Whether this probe outcome leaves the decision to the table (none recorded: yes)."""
    if probe is None:
        return True
    if probe.status == UNSUPPORTED_LANGUAGE:
        return probe.reason.startswith(UNSUPPORTED_PROCEEDED)
    return probe.status in READING_STATUSES


def sigmoid_ratio(statistic: float, tau_enter: float, kappa: float) -> float:
    """``1 / (1 + e^-x)`` with ``x = (statistic − tau_enter) / kappa``, without overflow (§2)."""
    x = (statistic - tau_enter) / kappa
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def b_net(
    weights: Mapping[str, float], scores: Mapping[str, float], weight_sum: float | None = None
) -> float:
    """B_net of one step: the weighted average of the scored nodes' local scores.

    Args:
        weights: node -> Katz weight, covering every node of ``scores``.
        scores: node -> local score, non-empty.
        weight_sum: ``fsum`` of the scored nodes' weights, if already known.

    Returns:
        ``fsum(w_i·b_i) / fsum(w_i)`` over ``scores``, clamped to ``[min b_i, max b_i]``.

    Raises:
        KeyError: A scored node has no weight.
    """
    total = math.fsum([weights[node] * score for node, score in scores.items()])
    if weight_sum is None:
        weight_sum = math.fsum([weights[node] for node in scores])
    value = total / weight_sum
    low, high = min(scores.values()), max(scores.values())
    return low if value < low else high if value > high else value


class Replay:
    """Streaming replay of one trace against the specification (see the module docstring).

    Args:
        header: The trace's header (thresholds, cool-down, retry budget, window, node trips,
            probation mode, EWMA smoothing).
        probation: The probation mode to replay with; default the header's (a version-1
            header records none: pass one).
    """

    name = "replay"
    version = "v1"

    def __init__(self, header: TraceHeader, *, probation: str | None = None) -> None:
        th = header.thresholds
        self._enter, self._exit, self._warn, self._kappa = (
            th.tau_enter,
            th.tau_exit,
            th.tau_warn,
            th.kappa,
        )
        self._cooldown = max(header.cooldown_steps, 1)
        self._max_retries = header.max_retries
        self._node_trip = header.node_trip
        self.probation = probation or header.probation or "hold"
        self._half_open = self.probation == "half-open"
        self._ewma = header.ewma
        control, window = header.control, header.max_history
        self._windowed = control is not None and window is not None
        self._beyond_3 = math.inf if control is None else control.mean + 3.0 * control.std
        self._beyond_5 = math.inf if control is None else control.mean + 5.0 * control.std
        self._levels: deque[int] = deque(maxlen=window or 1)
        self._n3 = self._n5 = 0
        self._dirty = False  # the window after the step being replayed
        # the machine's state, as the specification defines it
        self._state = _N
        self._attempts = 0
        self._recovery_steps = 0
        self._recheck_ok = False
        self._episode = 0
        self._frozen: str | None = None
        self._repaired: str | None = None
        # the propagation's state
        self._weights: dict[str, float] | None = None
        # per scored nodes (in order): the fsum of their weights, and the weights
        self._weight_sums: dict[tuple[str, ...], tuple[float, tuple[float, ...]]] = {}
        self._fast: float | None = None
        self._slow: float | None = None
        self._fresh: dict[str | None, tuple[float, float, dict[str, float]]] = {}
        # counts
        self._steps = 0
        self._derived = 0
        self._resteps = 0
        self._log = ViolationLog()

    def resume_weights(self, weights: Mapping[str, float]) -> None:
        """Take the Katz weights recorded before the first step this replay observes.

        For a replay that starts in the middle of a trace (:mod:`biasbreaker.verify.split`):
        what a step recording ``weights`` sets, without checking them (the replay of that
        step checks them).
        """
        self._weights = dict(weights) if weights else None
        self._weight_sums.clear()

    @property
    def violations(self) -> int:
        """Violations so far."""
        return self._log.count

    def observe(self, records: Sequence[StepLineV1]) -> None:
        """Replay the next records (in step order).

        Each step's inputs are re-derived (:meth:`_inputs`), then its decision
        (:meth:`_decide`). Two shortcuts keep a long trace fast, each deriving exactly what
        the general path derives and falling back to it on any difference:

        - a *fresh* step — one that records no new weights, has at least one score, whose
          fast and slow are the EWMAs of its B_net (not a re-step), whose window counts and
          mixing ratio are the replayed ones — is re-derived here, with nothing to log (it
          needs the EWMAs' smoothing and a calibration window in the header); any other
          step, or any difference, goes through :meth:`_inputs` before anything is changed;
        - the two commonest decisions — a NORMAL step that holds NORMAL (the *calm* step), an
          ESCALATED step that holds ESCALATED — are compared here directly with what
          :meth:`_decide` would derive for them (the same rows of the table, specialised);
          anything else, or any difference, goes through :meth:`_decide`.

        While the records are replayed, the state the shortcuts read and write is held in
        local variables, written back before :meth:`_inputs` or :meth:`_decide` runs and
        read again after it (and written back at the end, whatever happens).
        """
        normal, escalated = _N, _E
        proceed, escalate = BreakerAction.PROCEED, BreakerAction.ESCALATE
        enter, warn, node_trip, kappa = self._enter, self._warn, self._node_trip, self._kappa
        beyond_3, beyond_5 = self._beyond_3, self._beyond_5
        ewma = self._ewma
        shortcut = ewma is not None and self._windowed
        a_fast, a_slow = ewma if ewma is not None else (0.0, 0.0)
        b_fast, b_slow = 1.0 - a_fast, 1.0 - a_slow
        levels, fresh, sums = self._levels, self._fresh, self._weight_sums
        full, append = levels.maxlen, levels.append
        inputs, decide = self._inputs, self._decide
        weights, last_fast, last_slow = self._weights, self._fast, self._slow
        n3, n5, dirty = self._n3, self._n5, self._dirty
        state, episode, attempts = self._state, self._episode, self._attempts
        derived = 0  # fresh steps re-derived here (each also a step replayed)
        try:
            for r in records:
                # -- the fresh step's inputs (as _inputs, _propagate and b_net) ----------------
                derive = True
                scores = r.scores
                if (
                    shortcut
                    and scores
                    and r.weights is None
                    and weights is not None
                    and last_fast is not None
                    and last_slow is not None
                ):
                    cached = sums.get(tuple(scores))
                    if cached is not None:
                        weight_sum, node_weights = cached
                        value = fsum(map(mul, node_weights, scores.values())) / weight_sum
                        values = scores.values()
                        low = min(values)
                        if value < low:
                            value = low
                        else:
                            high = max(values)
                            if value > high:
                                value = high
                        fast, slow, window = r.fast, r.slow, r.window
                        level = 5 if fast > beyond_5 else 3 if fast > beyond_3 else 0
                        size, m3, m5 = len(levels), n3, n5
                        if size == full:
                            oldest = levels[0]
                            m3 -= oldest >= 3
                            m5 -= oldest == 5
                        else:
                            size += 1
                        m3 += level >= 3
                        m5 += level == 5
                        node = r.node
                        mine = None if node is None else scores.get(node)
                        statistic = mine if node_trip and mine is not None and mine > fast else fast
                        x = (statistic - enter) / kappa
                        if x >= 0.0:
                            ratio = 1.0 / (1.0 + exp(-x))
                        else:
                            e = exp(x)
                            ratio = e / (1.0 + e)
                        if (
                            fast == a_fast * value + b_fast * last_fast
                            and slow == a_slow * value + b_slow * last_slow
                            and window is not None
                            and window.size == size
                            and window.beyond_3 == m3
                            and window.beyond_5 == m5
                            and abs(r.mixing_ratio - ratio) <= RATIO_TOLERANCE
                        ):
                            derive = False
                            derived += 1
                            if r.probe is not None and node is not None:  # as _inputs
                                self._check_own_score(r.step, r.probe.status, mine)
                            own = mine
                            last_fast, last_slow = fast, slow
                            fresh[node] = (fast, slow, scores)
                            append(level)
                            n3, n5 = m3, m5
                            dirty = m3 + m5 > 0
                if derive:
                    self._fast, self._slow, self._n3, self._n5 = last_fast, last_slow, n3, n5
                    own = inputs(r)
                    weights, last_fast, last_slow = self._weights, self._fast, self._slow
                    n3, n5, dirty = self._n3, self._n5, self._dirty
                # -- the calm and the escalated step's decision (as _decide) -------------------
                if state is normal:
                    if (
                        r.state is normal
                        and r.fast < enter
                        and r.slow < warn
                        and not (node_trip and own is not None and own >= enter)
                        and r.action is proceed
                        and r.reason == "normal"
                        and r.transition == "hold"
                        and r.intervention is None
                        and r.payload_sha256 is None
                        and r.episode == episode
                        and r.attempt == attempts
                        and ((probe := r.probe) is None or not must_hold(probe))
                    ):
                        continue
                elif (
                    state is escalated
                    and r.state is escalated
                    and r.action is escalate
                    and r.transition == "hold"
                    and r.intervention is None
                    and r.episode == episode
                    and r.attempt == attempts
                    and r.reason.startswith("escalated: terminal")
                    and (r.payload_sha256 is not None or self._frozen is None)
                    and not must_hold(r.probe)
                ):
                    continue
                self._fast, self._slow, self._n3, self._n5 = last_fast, last_slow, n3, n5
                self._dirty = dirty
                decide(r, own)
                state, episode, attempts = self._state, self._episode, self._attempts
        finally:
            self._fast, self._slow, self._n3, self._n5 = last_fast, last_slow, n3, n5
            self._dirty = dirty
            self._steps += derived
            self._derived += derived

    def _check_own_score(self, step: int, status: str, own: float | None) -> None:
        """A step's probe outcome agrees with its own node's score in ``scores``.

        A ``scored`` step has one (the probe measured it); a ``not_applicable`` step has
        none (the adapter drops the node's score: the input named no group). The other
        outcomes keep the node's earlier score, if any, so they say nothing here. A record
        edited to say "not applicable" beside the score it tripped on contradicts itself.
        """
        if status == "scored" and own is None:
            self._bad(step, "probe", status, "not_applicable", "the step's node has no score")
        elif status == "not_applicable" and own is not None:
            self._bad(step, "probe", status, "scored", f"the step's node scores {own!r}")

    def _bad(
        self, step: int, field: str, recorded: object, replayed: object, why: str = ""
    ) -> None:
        detail = f" ({why})" if why else ""
        self._log.add(step, f"{field}: recorded {recorded!r}, replayed {replayed!r}{detail}")

    def _inputs(self, r: StepLineV1) -> float | None:
        """Re-derive a step's inputs: weights, B_net and the EWMAs, the window, the ratio.

        Returns:
            The step's own score (``scores[node]``), or ``None``.
        """
        step = r.step
        fast, slow, node, scores = r.fast, r.slow, r.node, r.scores
        self._steps += 1
        if r.probe is not None and node is not None:
            self._check_own_score(step, r.probe.status, scores.get(node))

        # -- Katz weights (recorded where they change) -------------------------------------
        weights = r.weights
        if weights is not None:
            if weights and abs(math.fsum(weights.values()) - 1.0) > WEIGHT_SUM_TOLERANCE:
                self._bad(step, "weights", math.fsum(weights.values()), 1.0, "their sum")
            self._weights = dict(weights) if weights else None
            self._weight_sums.clear()

        # -- B_net and the two EWMAs (on every step: the header's smoothing says fast and
        # slow follow from the scores, so a step that cannot be re-derived is a violation) --
        if self._ewma is not None:
            if scores and self._weights is None:
                self._unweighted(r)
            else:
                self._propagate(step, node, fast, slow, scores)

        # -- the calibration window --------------------------------------------------------
        dirty = False
        window = r.window
        if self._windowed:
            level = 5 if fast > self._beyond_5 else 3 if fast > self._beyond_3 else 0
            levels = self._levels
            n3, n5 = self._n3, self._n5
            if len(levels) == levels.maxlen:
                oldest = levels[0]
                n3 -= oldest >= 3
                n5 -= oldest == 5
            levels.append(level)
            n3 += level >= 3
            n5 += level == 5
            self._n3, self._n5 = n3, n5
            if (
                window is None
                or window.size != len(levels)
                or window.beyond_3 != n3
                or window.beyond_5 != n5
            ):
                shown = None if window is None else (window.size, window.beyond_3, window.beyond_5)
                self._bad(step, "window (size, beyond_3, beyond_5)", shown, (len(levels), n3, n5))
            dirty = n3 + n5 > 0
        elif window is not None:
            self._bad(step, "window", "counts", None, "the header has no calibration window")

        # -- the trip statistic and the mixing ratio (§2, §3b) ------------------------------
        own = None if node is None else scores.get(node)
        statistic = own if self._node_trip and own is not None and own > fast else fast
        ratio = sigmoid_ratio(statistic, self._enter, self._kappa)
        if abs(r.mixing_ratio - ratio) > RATIO_TOLERANCE:
            self._bad(step, "mixing_ratio", r.mixing_ratio, ratio, f"trip statistic {statistic!r}")
        self._dirty = dirty
        return own

    def _held(self, r: StepLineV1) -> bool:
        """Check a step that is, or must be, held for review; ``True`` if it was one."""
        probe = r.probe
        must = must_hold(probe)
        if r.transition != HELD_FOR_REVIEW:
            if must:
                self._bad(
                    r.step,
                    "transition",
                    r.transition,
                    HELD_FOR_REVIEW,
                    "the probe could not check it",
                )
            return False
        step = r.step
        if probe is None or reads(probe):
            status = None if probe is None else probe.status
            self._bad(step, "probe", status, "a reason the output could not be checked", "held")
        elif r.reason != f"held for review: {probe.reason}":
            self._bad(step, "reason", r.reason, f"held for review: {probe.reason}")
        if r.state is not self._state:
            self._bad(step, "state", r.state.value, self._state.value, "a held step keeps it")
            self._resync(r, self._state)
        if r.action is not BreakerAction.ESCALATE:
            self._bad(step, "action", r.action.value, BreakerAction.ESCALATE.value, "held")
        if r.episode != self._episode:
            self._bad(step, "episode", r.episode, self._episode, "held")
        if r.attempt != self._attempts:
            self._bad(step, "attempt", r.attempt, self._attempts, "held")
        if r.payload_sha256 is None:
            self._bad(step, "payload_sha256", None, "the held output's digest")
        if r.intervention is not None:
            self._bad(step, "intervention", "a summary", None, "no hook runs on a held step")
        self._episode, self._attempts = r.episode, r.attempt
        return True

    # equivalent mutants: annotations are never evaluated (`from __future__ import annotations`)
    def _decide(self, r: StepLineV1, own: float | None) -> None:  # pragma: no mutate
        """Derive a step's decision by the table and compare it with the record's."""
        if self._held(r):
            return
        step, fast, slow, dirty = r.step, r.fast, r.slow, self._dirty
        # -- the transition table (§3, §3a) -------------------------------------------------
        before = self._state
        name, target = self._transition(before, fast, slow, own, dirty)
        intervention = r.intervention
        # equivalent mutant: reroute is read only when target is _I, which sets it below
        reroute = False  # pragma: no mutate
        if target is _I:
            self._episode += before in _CLOSED
            self._attempts = 1 if before in _CLOSED else self._attempts + 1
            # equivalent mutants: INTERVENTION never reads it, and the only row out of it
            # (recover-start) and _resync both set it before RECOVERY reads it
            self._recovery_steps = 0  # pragma: no mutate
            reroute, self._recheck_ok = self._hook_outcome(step, intervention)
        else:
            if intervention is not None:
                self._bad(step, "intervention", "a summary", None, f"no hook runs on {name!r}")
            if name == "recover-start":
                self._recovery_steps = 1
            elif name == "hold" and target is _R:
                self._recovery_steps += 1
            elif name == "recover":
                self._attempts = self._recovery_steps = 0
                self._recheck_ok = False

        # -- the action (§1) ----------------------------------------------------------------
        if target is _I:
            action = BreakerAction.REROUTE if reroute else BreakerAction.HALT
        elif target is _R:
            probation_ok = (
                self._half_open and self._recheck_ok and (own is None or own < self._exit)
            )
            action = BreakerAction.PROCEED if probation_ok else BreakerAction.HALT
        elif target is _E:
            action = BreakerAction.ESCALATE
        else:
            action = BreakerAction.PROCEED

        if r.transition != name:
            self._bad(step, "transition", r.transition, name, f"from {before.value}")
        if r.state is not target:
            self._bad(step, "state", r.state.value, target.value, f"{name!r} from {before.value}")
        if r.action is not action:
            self._bad(step, "action", r.action.value, action.value, f"in {target.value}")
        if r.episode != self._episode:
            self._bad(step, "episode", r.episode, self._episode)
        if r.attempt != self._attempts:
            self._bad(step, "attempt", r.attempt, self._attempts)
        self._check_payload(r, name, target, action)
        self._check_reason(r, name, target, action, fast, intervention)

        # -- continue from what was recorded when it differs ---------------------------------
        if r.state is not target or r.transition != name:
            self._resync(r, before)
        else:
            self._state = target
        self._episode, self._attempts = r.episode, r.attempt

    def _unweighted(self, r: StepLineV1) -> None:
        """A scored step with no Katz weights in force: B_net cannot be re-derived.

        None were recorded yet, or ``{}`` ("the weights became unknown") was recorded last. A
        violation, so that no stretch of steps escapes the re-derivation; the replay goes on
        from the recorded fast and slow.
        """
        self._bad(
            r.step,
            "weights",
            r.weights,
            f"the Katz weights of {sorted(r.scores)}",
            "no Katz weights in force: the header's EWMA smoothing says fast and slow follow "
            "from the scores, and B_net cannot be re-derived without them",
        )
        self._fast, self._slow = r.fast, r.slow
        self._fresh[r.node] = (r.fast, r.slow, r.scores)

    def _propagate(
        self, step: int, node: str | None, fast: float, slow: float, scores: dict[str, float]
    ) -> None:
        """Re-derive B_net (if the step has scores: weights are then in force) and the EWMAs."""
        weights, ewma = self._weights, self._ewma
        assert ewma is not None
        value: float | None = None
        if scores:
            assert weights is not None
            try:
                key = tuple(scores)
                cached = self._weight_sums.get(key)
                if cached is None:
                    node_weights = tuple([weights[n] for n in key])
                    cached = (math.fsum(node_weights), node_weights)
                    self._weight_sums[key] = cached
                value = b_net(weights, scores, cached[0])
            except KeyError as missing:
                self._bad(step, f"scores[{missing.args[0]!r}]", "a score", None, "no Katz weight")
                return
        if value is None:
            expect_fast = 0.0 if self._fast is None else self._fast
            expect_slow = 0.0 if self._slow is None else self._slow
        elif self._fast is None or self._slow is None:
            expect_fast = expect_slow = value
        else:
            a_fast, a_slow = ewma
            expect_fast = a_fast * value + (1.0 - a_fast) * self._fast
            expect_slow = a_slow * value + (1.0 - a_slow) * self._slow
        self._derived += 1
        if fast == expect_fast and slow == expect_slow:
            if value is not None:
                self._fast, self._slow = fast, slow
            self._fresh[node] = (fast, slow, scores)
            return
        if self._fresh.get(node) == (fast, slow, scores):
            self._resteps += 1  # a held output stepped again (§3a): the EWMAs do not move
            return
        why = "" if value is None else f"B_net {value!r} from the recorded scores and weights"
        if fast != expect_fast:
            self._bad(step, "fast", fast, expect_fast, why)
        if slow != expect_slow:
            self._bad(step, "slow", slow, expect_slow, why)
        if value is not None:
            self._fast, self._slow = fast, slow
        self._fresh[node] = (fast, slow, scores)

    def _transition(
        self,
        state: BreakerState,
        fast: float,
        slow: float,
        # equivalent mutants: annotations are never evaluated (`from __future__ import annotations`)
        own: float | None,  # pragma: no mutate
        dirty: bool,
    ) -> tuple[str, BreakerState]:
        """The first row of the table whose guard holds (§3), or ``("hold", state)``."""
        if state in _CLOSED:
            spike = fast >= self._enter or (
                self._node_trip and own is not None and own >= self._enter
            )
            if spike:
                return "trip", _I
            if state is _N and slow >= self._warn:
                return "warn", _W
            if state is _W and slow < self._warn:
                return "calm", _N
            return "hold", state
        if state is _I:
            return "recover-start", _R  # the hook always returns within its step
        if state is _R:
            elapsed = self._recovery_steps >= self._cooldown
            spent = self._attempts >= self._max_retries
            if elapsed and not self._recheck_ok:
                return ("escalate", _E) if spent else ("retry", _I)
            if self._half_open and self._recheck_ok and own is not None and own >= self._exit:
                return ("relapse-escalate", _E) if spent else ("relapse", _I)
            if elapsed and self._recheck_ok and fast < self._exit and not dirty:
                return "recover", _N
            return "hold", _R
        return "hold", _E  # ESCALATED is terminal

    def _hook_outcome(self, step: int, summary: dict[str, Any] | None) -> tuple[bool, bool]:
        """``(reroute, re-check passed)`` from the step's intervention summary, checked."""
        if summary is None:
            self._bad(step, "intervention", None, "a summary", "the step entered INTERVENTION")
            return False, False
        if set(summary) != SUMMARY_KEYS:
            self._bad(step, "intervention keys", sorted(summary), sorted(SUMMARY_KEYS))
            return False, False
        strategy, converged, score, error, repaired = (
            summary["strategy"],
            summary["converged"],
            summary["recheck_score"],
            summary["error"],
            summary["repaired_sha256"],
        )
        if strategy not in STRATEGIES:
            self._bad(step, "intervention.strategy", strategy, STRATEGIES)
        if not isinstance(converged, bool):
            self._bad(step, "intervention.converged", converged, "true or false")
            converged = False
        if score is not None and (
            isinstance(score, bool) or not isinstance(score, (int, float)) or not score >= 0.0
        ):
            self._bad(step, "intervention.recheck_score", score, "a number >= 0 or null")
            score = None
        if converged and (error is not None or repaired is None or score is None):
            self._bad(
                step,
                "intervention",
                {"error": error, "repaired_sha256": repaired, "recheck_score": score},
                "a converged repair: no error, a repaired digest and a re-check score",
            )
        self._repaired = repaired if isinstance(repaired, str) else None
        reroute = error is None and strategy != "none"
        passed = bool(converged) and error is None and score is not None and score < self._exit
        return reroute, passed

    def _check_payload(
        self, r: StepLineV1, name: str, target: BreakerState, action: BreakerAction
    ) -> None:
        digest = r.payload_sha256
        if target in _CLOSED:
            expected = self._repaired if name == "recover" and not self._half_open else None
            if digest != expected:
                self._bad(r.step, "payload_sha256", digest, expected, f"{name!r} to {target.value}")
            if name == "recover":
                self._frozen = self._repaired = None
        elif name in ("trip", "relapse", "relapse-escalate"):
            self._frozen = digest  # this step's output is frozen (or the episode's, if none)
        elif target is _E and name == "hold":
            if digest is None and self._frozen is not None:
                self._bad(r.step, "payload_sha256", None, "a digest", "escalated: held for review")
        elif target is _R and action is BreakerAction.PROCEED:
            if digest is not None:
                self._bad(r.step, "payload_sha256", digest, None, "on probation: output proceeds")
        elif digest != self._frozen:
            self._bad(r.step, "payload_sha256", digest, self._frozen, "the episode's frozen output")

    def _check_reason(
        self,
        r: StepLineV1,
        name: str,
        target: BreakerState,
        action: BreakerAction,
        fast: float,
        summary: dict[str, Any] | None,
    ) -> None:
        """The reason starts with its category (and counters), as the table gives it."""
        reason = r.reason
        if name == "hold":
            if target is _N:
                ok, category = reason == "normal", "normal"
            else:
                category = self._hold_category(target, action, fast)
                ok = reason.startswith(category)
        else:
            category = self._category(name, fast)
            ok = reason.startswith(category)
        if not ok:
            self._bad(r.step, "reason", reason[:60], category + "…", "its category")
        if target is _I and isinstance(summary, dict):
            failed = summary.get("error") is not None
            marker = "; intervention failed closed: " if failed else "; intervention strategy "
            if marker not in reason:
                self._bad(r.step, "reason", reason[:60], f"…{marker}…", "the hook's outcome")

    def _category(self, name: str, fast: float) -> str:
        if name == "trip":
            return "trip: " if fast >= self._enter else "trip (node): "
        if name in ("retry", "relapse"):
            return f"{name} {self._attempts}/{self._max_retries}: "
        return {
            "warn": "warn: ",
            "calm": "calm: ",
            "escalate": "escalate: ",
            "relapse-escalate": "escalate: on probation",
            "recover-start": "intervention returned; cool-down started",
            "recover": "recovered: ",
        }[name]

    def _hold_category(self, target: BreakerState, action: BreakerAction, fast: float) -> str:
        if target is _E:
            return "escalated: terminal"
        if target is _W:
            return "warning holds: "
        if action is BreakerAction.PROCEED:
            return "on probation: "
        if self._recovery_steps <= self._cooldown:
            return f"cooling down: {self._recovery_steps}/{self._cooldown} steps"
        if fast >= self._exit:
            return "recovery holds: fast "
        return "recovery holds: calibration window dirty"

    def _resync(self, r: StepLineV1, before: BreakerState) -> None:
        """Continue from the recorded state after a difference (each error reported once)."""
        state = r.state
        self._state = state
        if state is _R:
            self._recovery_steps = (
                1 if r.transition == "recover-start" or before is not _R else self._recovery_steps
            )
        elif state is _I:
            self._recovery_steps = 0
        elif state in _CLOSED:
            self._recovery_steps = 0
            self._recheck_ok = False

    def report(self) -> PropertyReport:
        """Return the verdict: every step replayed, and what was re-derived."""
        if self._ewma is None:
            inputs = "B_net and the EWMAs not re-derived: the header records no EWMA smoothing"
        elif self._derived < self._steps:
            inputs = (
                f"B_net and the EWMAs re-derived on {self._derived} of {self._steps} steps "
                "(the others, each a violation, had scores and no Katz weights in force)"
            )
        else:
            inputs = f"B_net and the EWMAs re-derived on every step ({self._resteps} re-steps)"
        checked = (
            f"{self._steps} step(s) replayed ({self.probation} probation): window, mixing "
            f"ratio, transition, state, action, counters, payload digests, reason; {inputs}"
        )
        return PropertyReport(
            self.name,
            self.version,
            self._steps,
            self._log.count,
            tuple(self._log.kept),
            what=checked,
            vacuous="the trace has no step" if self._steps == 0 else "",
        )


__all__ = ["RATIO_TOLERANCE", "Replay", "b_net", "sigmoid_ratio"]
