"""Control-plane types: breaker states and actions, decisions, frozen payloads, intervention I/O.

Every type here is immutable, validates itself on construction, and converts to and from plain
JSON (``to_json`` / ``from_json``), so a decision, an intervention context or a machine
snapshot can live in a framework's checkpointed state and in the run trace.

:class:`BreakerDecision` is on the hot path of :meth:`biasbreaker.breaker.CircuitBreaker.check`,
so it is a validated named tuple (construction costs about a third of a slotted frozen
dataclass's; see ``benchmarks/test_bench_control.py``). The other types are slotted frozen
dataclasses.

Source:
    Phase 3 design (M3), WP1 "Control types"; ``docs/control.md``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Final, Literal, NamedTuple, Union, cast

from biasbreaker.errors import InputError, ScoreError, ThresholdError

JSONValue = Union[  # noqa: UP007 (a recursive alias must stay evaluable on Python 3.10)
    None, bool, int, float, str, list["JSONValue"], dict[str, "JSONValue"]
]
"""A plain JSON value as :func:`json.loads` returns it."""

FrozenJSON = Union[  # noqa: UP007 (as above)
    None, bool, int, float, str, tuple["FrozenJSON", ...], Mapping[str, "FrozenJSON"]
]
"""A deep-immutable JSON value: arrays are tuples, objects are read-only mappings."""

Route = Literal["skeptics", "madera", "none"]
"""The mitigation strategies a router may choose (seed R7)."""

ROUTES: Final[tuple[Route, ...]] = ("skeptics", "madera", "none")


def canonical_json(value: Any) -> str:
    """Serialise a JSON value canonically: sorted keys, no spaces, UTF-8 text, no NaN/inf.

    The same value always gives the same text (Python's float ``repr`` is the shortest
    round-tripping form and does not depend on the platform), so digests of it and files
    written with it are byte-identical across runs.

    Args:
        value: A JSON value (dicts with ``str`` keys, lists/tuples, str, int, finite float,
            bool, ``None``).

    Returns:
        The canonical JSON text.

    Raises:
        ValueError: On NaN or infinity.
        TypeError: On a value JSON cannot represent.
    """
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def sha256_hex(text: str) -> str:
    """Return the SHA-256 hex digest (64 lowercase hex characters) of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_score(name: str, value: object) -> float:
    """Validate a score: a finite real number >= 0 (``bool`` is not a score).

    Args:
        name: The field's name, used in the error message.
        value: The candidate score.

    Returns:
        ``value`` as a float.

    Raises:
        ScoreError: If ``value`` is not a number, is NaN or infinite, or is negative.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScoreError(
            f"{name}={value!r} is not a score: expected a finite number >= 0, got "
            f"{type(value).__name__}"
        )
    try:
        as_float = float(value)
    except OverflowError:  # an int beyond the float range: far outside any score's range
        raise ScoreError(
            f"{name}=<an integer beyond the float range> is not a valid score: scores must be "
            "finite and >= 0"
        ) from None
    if not 0.0 <= as_float < math.inf:
        raise ScoreError(
            f"{name}={value!r} is not a valid score: scores must be finite and >= 0 "
            "(a NaN or negative B_net means the probe or propagation step is broken; fix it "
            "upstream rather than clamping here)"
        )
    return as_float


def check_unit_score(name: str, value: object) -> float:
    """Validate a B_net value or a local score: a finite real number in [0, 1].

    Local scores ``b_i`` lie in [0, 1] (the probe clips its estimate there) and B_net, fast and
    slow are weighted averages of them, so a value above 1 means the writer is broken, exactly
    like a NaN: it is refused, never clamped.

    Args:
        name: The field's name (with its place, e.g. ``"local_scores['a']"``).
        value: The candidate.

    Returns:
        ``value`` as a float.

    Raises:
        ScoreError: If ``value`` is not a number (``bool`` included), is NaN, infinite,
            negative, or above 1; the message names the field and the value.
    """
    score = check_score(name, value)
    if score > 1.0:
        raise ScoreError(
            f"{name}={value!r} is above 1: B_net and local bias scores lie in [0, 1]; check "
            "what wrote this value (a probe or propagation step that does not clip)"
        )
    return score


def _check_int(name: str, value: object, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{name}={value!r} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise InputError(f"{name}={value!r} must be >= {minimum}")
    return value


class BreakerState(str, Enum):
    """States of the control machine (seed R3).

    ``NORMAL`` and ``WARNING`` are *closed* (outputs proceed); ``INTERVENTION``, ``RECOVERY``
    and ``ESCALATED`` are *tripped* (outputs are held). ``ESCALATED`` is terminal.
    """

    NORMAL = "normal"
    WARNING = "warning"
    INTERVENTION = "intervention"
    RECOVERY = "recovery"
    ESCALATED = "escalated"

    @property
    def tripped(self) -> bool:
        """Whether outputs are held in this state (INTERVENTION, RECOVERY, ESCALATED)."""
        return self in _TRIPPED


_TRIPPED: Final = frozenset(
    {BreakerState.INTERVENTION, BreakerState.RECOVERY, BreakerState.ESCALATED}
)


class BreakerAction(str, Enum):
    """What the caller must do with the guarded node's output.

    ``PROCEED``: promote the output (or, on recovery, the repaired payload) to the main state.
    ``HALT``: keep the output staged; nothing downstream sees it.
    ``REROUTE``: keep the output staged and hand it to a mitigation strategy.
    ``ESCALATE``: stop and hand the frozen payload to human review.
    """

    PROCEED = "proceed"
    HALT = "halt"
    REROUTE = "reroute"
    ESCALATE = "escalate"


ALLOWED_ACTIONS: Final[Mapping[BreakerState, frozenset[BreakerAction]]] = MappingProxyType(
    {
        BreakerState.NORMAL: frozenset({BreakerAction.PROCEED}),
        BreakerState.WARNING: frozenset({BreakerAction.PROCEED}),
        BreakerState.INTERVENTION: frozenset({BreakerAction.HALT, BreakerAction.REROUTE}),
        BreakerState.RECOVERY: frozenset({BreakerAction.HALT, BreakerAction.PROCEED}),
        BreakerState.ESCALATED: frozenset({BreakerAction.ESCALATE}),
    }
)
"""The actions consistent with each state; :class:`BreakerDecision` rejects any other pair,
except ``ESCALATE`` with a frozen payload in any state: a *held* step, whose output could not
be checked (``ControlMachine.step(hold=...)``), goes to human review whatever the state."""


def _enum_from_json(
    enum_type: type[BreakerState] | type[BreakerAction], name: str, raw: object
) -> Any:
    try:
        return enum_type(raw)
    except ValueError:
        allowed = ", ".join(repr(member.value) for member in enum_type)
        raise InputError(f"{name}={raw!r} is not one of {allowed}") from None


def _field(data: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise InputError(f"{where} must be a JSON object, got {type(data).__name__}")
    if key not in data:
        raise InputError(f"{where} is missing the field {key!r}")
    return data[key]


# --------------------------------------------------------------------------------------------
# Thresholds
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Thresholds:
    """The breaker's thresholds, validated together.

    Args:
        tau_enter: Fast-scale B_net at or above which the breaker trips, > ``tau_exit``.
        tau_exit: Fast-scale B_net below which a tripped breaker may clear, > 0. The interval
            ``[tau_exit, tau_enter)`` is the dead-band in which the breaker never changes
            between closed and tripped.
        tau_warn: Slow-scale B_net at or above which the machine warns of drift, > 0.
        kappa: Width of the sigmoid giving the mixing ratio, > 0, in B_net units.

    Raises:
        ThresholdError: If a value is not a finite number, ``tau_exit`` or ``tau_warn`` or
            ``kappa`` is not positive, or ``tau_enter <= tau_exit``.
    """

    tau_enter: float
    tau_exit: float
    tau_warn: float
    kappa: float

    def __post_init__(self) -> None:
        for name in ("tau_enter", "tau_exit", "tau_warn", "kappa"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
            ):
                raise ThresholdError(f"{name}={value!r} must be a finite number")
            object.__setattr__(self, name, float(value))
        for name in ("tau_exit", "tau_warn"):
            if getattr(self, name) <= 0.0:
                raise ThresholdError(
                    f"{name}={getattr(self, name)!r} must be > 0: B_net is >= 0, so a threshold "
                    "at or below 0 can never be crossed downwards"
                )
        if self.kappa <= 0.0:
            raise ThresholdError(
                f"kappa={self.kappa!r} must be > 0: it is the width (in B_net units) of the "
                "sigmoid that turns B_net into the mixing ratio; try (tau_enter - tau_exit) / 4"
            )
        if self.tau_enter <= self.tau_exit:
            raise ThresholdError(
                f"tau_enter={self.tau_enter!r} must be greater than tau_exit={self.tau_exit!r}: "
                "the gap between them is the dead-band that stops the breaker thrashing; lower "
                "tau_exit (e.g. to 0.7 x tau_enter) or raise tau_enter"
            )

    def to_json(self) -> dict[str, JSONValue]:
        """Return the thresholds as a plain JSON object."""
        return {
            "tau_enter": self.tau_enter,
            "tau_exit": self.tau_exit,
            "tau_warn": self.tau_warn,
            "kappa": self.kappa,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Thresholds:
        """Rebuild thresholds from :meth:`to_json` output.

        Raises:
            InputError: If a field is missing.
            ThresholdError: If the values are inconsistent.
        """
        return cls(
            *(
                _field(data, key, "thresholds")
                for key in ("tau_enter", "tau_exit", "tau_warn", "kappa")
            )
        )


# --------------------------------------------------------------------------------------------
# Control statistics and the calibration window's counts (shared by the machine, the trace,
# the calibration and the verifiers)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControlStatistics:
    """Mean and standard deviation of fast B_net over every step of the control runs.

    Args:
        mean: Mean fast B_net, finite and >= 0.
        std: Sample standard deviation (n - 1 denominator), finite and > 0.
        n_steps: Number of steps it was estimated from, >= 2.

    Raises:
        ThresholdError: If ``std`` is 0 (the control runs never move, so "beyond kσ" is
            undefined) or a value is out of range.
    """

    mean: float
    std: float
    n_steps: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", check_score("control mean", self.mean))
        object.__setattr__(self, "std", check_score("control std", self.std))
        if self.std <= 0.0:
            raise ThresholdError(
                "control std is 0: fast B_net never varies in the control runs, so the "
                "calibration window's 3σ/5σ bands are undefined; record control runs that "
                "exercise the pipeline (different inputs and seeds). A model that answers the "
                "same whatever the names (temperature 0 and no prompt sensitivity, e.g. the "
                "fake with prompt_sensitivity = 0) never moves B_net: sample at temperature > 0 "
                "(docs/demo.md §3.3)"
            )
        if isinstance(self.n_steps, bool) or not isinstance(self.n_steps, int) or self.n_steps < 2:
            raise ThresholdError(f"control n_steps={self.n_steps!r} must be an int >= 2")

    def bound(self, sigmas: float) -> float:
        """Return ``mean + sigmas * std``, the level above which an observation counts."""
        return self.mean + sigmas * self.std

    def to_json(self) -> dict[str, JSONValue]:
        """Return the statistics as plain JSON."""
        return {"mean": self.mean, "std": self.std, "n_steps": self.n_steps}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ControlStatistics:
        """Rebuild from :meth:`to_json` output.

        Raises:
            InputError: On a missing field.
            ThresholdError: On an invalid value.
        """
        if not isinstance(data, Mapping) or not {"mean", "std", "n_steps"} <= set(data):
            raise InputError("control statistics need 'mean', 'std' and 'n_steps'")
        return cls(data["mean"], data["std"], data["n_steps"])


class WindowCounts(NamedTuple):
    """The calibration window after one observation.

    Attributes:
        size: Observations in the window, 1..W.
        beyond_3: How many are above ``mean + 3·std`` (including those above 5σ).
        beyond_5: How many are above ``mean + 5·std``.
    """

    size: int
    beyond_3: int
    beyond_5: int

    @property
    def dirty(self) -> bool:
        """Whether the window holds an outlier (``beyond_3 + beyond_5 > 0``)."""
        return self.beyond_3 + self.beyond_5 > 0


# --------------------------------------------------------------------------------------------
# Frozen payloads
# --------------------------------------------------------------------------------------------


def _path(parent: str, key: object) -> str:
    return f"{parent}[{key!r}]"


def _freeze(value: object, path: str, active: set[int]) -> tuple[JSONValue, FrozenJSON]:
    """Validate a JSON-like value, returning a private plain copy and an immutable view."""
    if value is None or value is True or value is False:
        return value, value
    if isinstance(value, str):
        plain_str = str.__str__(value)
        return plain_str, plain_str
    if isinstance(value, int) and not isinstance(value, bool):
        plain_int = int(value)
        return plain_int, plain_int
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(
                f"payload value at {path} is {value!r}: JSON has no NaN or infinity; replace it "
                "with null or a finite number"
            )
        plain_float = float(value)
        return plain_float, plain_float
    if isinstance(value, (Mapping, list, tuple)):
        if id(value) in active:
            raise InputError(f"payload value at {path} contains itself (a reference cycle)")
        active.add(id(value))
        try:
            if isinstance(value, Mapping):
                plain_obj: dict[str, JSONValue] = {}
                view_obj: dict[str, FrozenJSON] = {}
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise InputError(
                            f"payload key {key!r} at {path} is a {type(key).__name__}; JSON "
                            "object keys must be str"
                        )
                    key_str = str.__str__(key)
                    plain_obj[key_str], view_obj[key_str] = _freeze(
                        item, _path(path, key_str), active
                    )
                return plain_obj, MappingProxyType(view_obj)
            plain_list: list[JSONValue] = []
            view_items: list[FrozenJSON] = []
            for index, item in enumerate(value):
                plain_item, view_item = _freeze(item, _path(path, index), active)
                plain_list.append(plain_item)
                view_items.append(view_item)
            return plain_list, tuple(view_items)
        finally:
            active.discard(id(value))
    raise InputError(
        f"payload value at {path} has type {type(value).__name__}, which is not JSON; convert "
        "it to str, int, float, bool, None, a list or a dict with str keys before freezing"
    )


class LazyPayload:
    """A payload built only if it is frozen (for :meth:`ControlMachine.step`'s ``payload``).

    A step freezes its payload only when it starts an intervention episode, escalates or
    holds; most steps never read it. A caller whose payload is costly to build (the JSON view
    of a node's output) passes one of these, and :meth:`FrozenPayload.of` builds it then.

    Args:
        build: ``() -> payload``: the JSON-like value, as :func:`biasbreaker.breaker.freeze`
            takes it. Called at most once, on the first read of :attr:`value`; what it raises
            propagates from there (and it is called again on the next read).
    """

    __slots__ = ("_build", "_value")

    _UNBUILT: Final = object()

    def __init__(self, build: Callable[[], object]) -> None:
        self._build = build
        self._value: object = LazyPayload._UNBUILT

    @property
    def built(self) -> bool:
        """Whether :attr:`value` has been built."""
        return self._value is not LazyPayload._UNBUILT

    @property
    def value(self) -> object:
        """The payload, built on the first read."""
        if self._value is LazyPayload._UNBUILT:
            self._value = self._build()
        return self._value


@dataclass(frozen=True, slots=True, eq=False)
class FrozenPayload:
    """An immutable deep snapshot of a JSON-like payload, with its content digest.

    Build one with :func:`biasbreaker.breaker.freeze` (or :meth:`FrozenPayload.of`). The
    snapshot owns a private copy taken at freezing time, so later mutation of the original
    cannot reach it. :attr:`value` is a deep read-only view (tuples and read-only mappings);
    :meth:`thaw` returns a fresh mutable copy each call. Two frozen payloads are equal when
    their canonical JSON is equal.

    Args:
        canonical: The payload's canonical JSON text (see :func:`canonical_json`).
        sha256: SHA-256 hex digest of ``canonical`` in UTF-8; checked on construction.

    Raises:
        InputError: If ``canonical`` is not canonical JSON or ``sha256`` does not match it.
    """

    canonical: str
    sha256: str
    _view: FrozenJSON = field(init=False, repr=False)

    def __post_init__(self) -> None:
        try:
            parsed = json.loads(self.canonical)
        except (TypeError, ValueError) as exc:
            raise InputError(f"frozen payload text is not JSON: {exc}") from exc
        plain, view = _freeze(parsed, "payload", set())
        if canonical_json(plain) != self.canonical:
            raise InputError("frozen payload text is not in canonical form; build it with freeze()")
        if sha256_hex(self.canonical) != self.sha256:
            raise InputError(
                f"frozen payload digest {self.sha256!r} does not match its content (sha256 "
                f"{sha256_hex(self.canonical)!r}): the payload was altered after freezing"
            )
        object.__setattr__(self, "_view", view)

    @classmethod
    def of(cls, payload: object) -> FrozenPayload:
        """Freeze ``payload`` (a :class:`LazyPayload` is built); see :func:`.breaker.freeze`."""
        if type(payload) is LazyPayload:
            payload = payload.value
        plain, _ = _freeze(payload, "payload", set())
        text = canonical_json(plain)
        return cls(text, sha256_hex(text))

    @property
    def value(self) -> FrozenJSON:
        """The payload as a deep read-only view (arrays as tuples, objects as mappings)."""
        return self._view

    def thaw(self) -> JSONValue:
        """Return a fresh, mutable, independent copy of the payload (lists and dicts)."""
        return cast(JSONValue, json.loads(self.canonical))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FrozenPayload):
            return NotImplemented
        return self.sha256 == other.sha256 and self.canonical == other.canonical

    def __hash__(self) -> int:
        return hash(self.sha256)

    def __reduce__(self) -> tuple[Any, ...]:
        # The read-only view cannot be pickled; rebuild it from the canonical text.
        return (FrozenPayload, (self.canonical, self.sha256))

    def to_json(self) -> dict[str, JSONValue]:
        """Return ``{"sha256": digest, "value": payload}`` as plain JSON."""
        return {"sha256": self.sha256, "value": self.thaw()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FrozenPayload:
        """Rebuild a frozen payload from :meth:`to_json` output, checking its digest.

        Raises:
            InputError: If a field is missing, the value is not JSON-like, or the digest does
                not match the value (the payload was altered).
        """
        frozen = cls.of(_field(data, "value", "frozen payload"))
        digest = _field(data, "sha256", "frozen payload")
        if digest != frozen.sha256:
            raise InputError(
                f"frozen payload digest {digest!r} does not match its value (sha256 "
                f"{frozen.sha256!r}): the payload was altered after freezing"
            )
        return frozen


# --------------------------------------------------------------------------------------------
# Decisions
# --------------------------------------------------------------------------------------------


_DecisionTuple = tuple[BreakerState, BreakerAction, float, float, str, FrozenPayload | None]


class BreakerDecision(_DecisionTuple):
    """One control decision: the state after the step and what to do with the output.

    An immutable, validated tuple subclass with named read-only fields (``state, action,
    mixing_ratio, b_net, reason, frozen_payload``, in that order). A tuple rather than a frozen
    dataclass because :meth:`~biasbreaker.breaker.CircuitBreaker.check` builds one per call and
    tuple construction is about three times cheaper.

    Args:
        state: The machine's (or breaker's) state after this step.
        action: What the caller must do; must be allowed for ``state`` (see
            :data:`ALLOWED_ACTIONS`), or ``ESCALATE`` with a ``frozen_payload`` (a held step).
        mixing_ratio: Advisory severity in [0, 1], ``sigmoid((b_net - tau_enter) / kappa)``;
            M4 uses it to blend the original and the corrected output.
        b_net: The fast-scale B_net the decision was taken on, finite and >= 0.
        reason: A short human-readable explanation, non-empty.
        frozen_payload: The frozen output this decision refers to (held, routed, escalated,
            or — on the step that recovers — the repaired payload to promote), or ``None``.
            While ESCALATED, a step's own output when the step carried one.

    Raises:
        InputError: If ``state``/``action`` are not members, the pair is inconsistent, or
            ``reason`` is empty.
        ScoreError: If ``mixing_ratio`` is outside [0, 1] or ``b_net`` is not a valid score.
    """

    __slots__ = ()

    def __new__(
        cls,
        state: BreakerState,
        action: BreakerAction,
        mixing_ratio: float,
        b_net: float,
        reason: str,
        frozen_payload: FrozenPayload | None = None,
    ) -> BreakerDecision:
        """Validate the fields and build the decision (see the class docstring)."""
        if not isinstance(state, BreakerState):
            raise InputError(f"BreakerDecision.state={state!r} is not a BreakerState")
        if not isinstance(action, BreakerAction):
            raise InputError(f"BreakerDecision.action={action!r} is not a BreakerAction")
        held = action is BreakerAction.ESCALATE and frozen_payload is not None
        if action not in ALLOWED_ACTIONS[state] and not held:
            allowed = ", ".join(sorted(a.name for a in ALLOWED_ACTIONS[state]))
            raise InputError(
                f"BreakerDecision action {action.name} is inconsistent with state {state.name}; "
                f"allowed: {allowed}"
            )
        if (
            isinstance(mixing_ratio, bool)
            or not isinstance(mixing_ratio, (int, float))
            or not 0.0 <= mixing_ratio <= 1.0
        ):
            raise ScoreError(f"BreakerDecision.mixing_ratio={mixing_ratio!r} must be in [0, 1]")
        b_net = check_unit_score("BreakerDecision.b_net", b_net)
        if not isinstance(reason, str) or not reason:
            raise InputError(f"BreakerDecision.reason={reason!r} must be a non-empty str")
        if frozen_payload is not None and not isinstance(frozen_payload, FrozenPayload):
            raise InputError(
                f"BreakerDecision.frozen_payload must be a FrozenPayload or None, got "
                f"{type(frozen_payload).__name__}; build it with freeze()"
            )
        return tuple.__new__(
            cls, (state, action, float(mixing_ratio), b_net, reason, frozen_payload)
        )

    def __getnewargs__(self) -> _DecisionTuple:
        return tuple(self)  # type: ignore[return-value]

    @property
    def state(self) -> BreakerState:
        """The state after this step."""
        return self[0]

    @property
    def action(self) -> BreakerAction:
        """What the caller must do with the output."""
        return self[1]

    @property
    def mixing_ratio(self) -> float:
        """Advisory severity in [0, 1]."""
        return self[2]

    @property
    def b_net(self) -> float:
        """The fast-scale B_net the decision was taken on."""
        return self[3]

    @property
    def reason(self) -> str:
        """Why the machine decided this."""
        return self[4]

    @property
    def frozen_payload(self) -> FrozenPayload | None:
        """The frozen output this decision refers to, or ``None``."""
        return self[5]

    def __repr__(self) -> str:
        return (
            f"BreakerDecision(state={self.state.name}, action={self.action.name}, "
            f"mixing_ratio={self.mixing_ratio!r}, b_net={self.b_net!r}, "
            f"reason={self.reason!r}, frozen_payload={self.frozen_payload!r})"
        )

    def to_json(self) -> dict[str, JSONValue]:
        """Return the decision as a plain JSON object (enums as their string values)."""
        return {
            "state": self.state.value,
            "action": self.action.value,
            "mixing_ratio": self.mixing_ratio,
            "b_net": self.b_net,
            "reason": self.reason,
            "frozen_payload": None
            if self.frozen_payload is None
            else self.frozen_payload.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BreakerDecision:
        """Rebuild a decision from :meth:`to_json` output, validating every field.

        Raises:
            InputError: On a missing field or a bad state/action.
            ScoreError: On a bad mixing ratio or B_net.
        """
        payload = _field(data, "frozen_payload", "decision")
        return cls(
            _enum_from_json(BreakerState, "decision.state", _field(data, "state", "decision")),
            _enum_from_json(BreakerAction, "decision.action", _field(data, "action", "decision")),
            _field(data, "mixing_ratio", "decision"),
            _field(data, "b_net", "decision"),
            _field(data, "reason", "decision"),
            None if payload is None else FrozenPayload.from_json(payload),
        )


# --------------------------------------------------------------------------------------------
# Intervention input and output
# --------------------------------------------------------------------------------------------


def _score_map(
    name: str, raw: Mapping[str, Any], check: Callable[[str, object], float] = check_unit_score
) -> Mapping[str, float]:
    if not isinstance(raw, Mapping):
        raise InputError(
            f"{name} must be a mapping of node name to score, got {type(raw).__name__}"
        )
    out: dict[str, float] = {}
    for node in sorted(raw):
        if not isinstance(node, str) or not node:
            raise InputError(f"{name} has a node key {node!r}; node names are non-empty str")
        out[node] = check(f"{name}[{node!r}]", raw[node])
    return MappingProxyType(out)


def _history_map(raw: Mapping[str, Any]) -> Mapping[str, tuple[float, ...]]:
    if not isinstance(raw, Mapping):
        raise InputError(
            f"history must be a mapping of node name to scores, got {type(raw).__name__}"
        )
    out: dict[str, tuple[float, ...]] = {}
    for node in sorted(raw):
        if not isinstance(node, str) or not node:
            raise InputError(f"history has a node key {node!r}; node names are non-empty str")
        scores = raw[node]
        if isinstance(scores, (str, bytes)) or not isinstance(scores, Iterable):
            raise InputError(f"history[{node!r}] must be a sequence of scores, oldest first")
        out[node] = tuple(
            check_unit_score(f"history[{node!r}][{i}]", s) for i, s in enumerate(scores)
        )
    return MappingProxyType(out)


@dataclass(frozen=True, slots=True, eq=False)
class InterventionContext:
    """Everything a mitigation hook (router, skeptic panel, MADERA) may use, frozen.

    Args:
        step: Index of the guarded step that triggered the intervention, >= 0.
        node: The guarded node whose output tripped the breaker, or ``None`` if unknown.
        state: The state the machine left to intervene: NORMAL or WARNING for the first
            attempt of an episode, RECOVERY for a retry.
        fast: Fast-scale B_net at the trip, finite and >= 0.
        slow: Slow-scale B_net at the trip, finite and >= 0.
        mixing_ratio: Advisory severity in [0, 1] at the trip: ``sigmoid((s - tau_enter) /
            kappa)`` of the statistic ``s`` that trips, fast B_net or, with node trips on and
            a score for ``node``, ``max(fast, own score)``; so ``>= 0.5`` at any trip.
        thresholds: The breaker's thresholds (the repair must bring its re-check below
            ``thresholds.tau_exit`` for the machine to recover).
        local_scores: Per-node local bias score ``b_i`` at this step, node -> float >= 0.
        weights: Per-node Katz weight ``w_i`` (summing to 1 over the graph), node -> float >= 0.
        history: Per-node recent local scores, oldest first, ending with this step's
            (node -> tuple of floats >= 0); the router's "persistently high node" signal.
        attempt: Attempt number within the episode, 1 for the first intervention.
        frozen_payload: The frozen output to repair, or ``None`` if the caller passed none.
        step_input: The frozen input of the step whose output was frozen (what the agent was
            asked), or ``None``: skeptics need the task, and the repair's re-check re-runs the
            node on counterfactual variants of it. Optional in JSON (older records lack it).
        seed: Seed for any randomness the hook uses (derived from the machine's seed, the
            episode and the attempt, so a replay gives the same seed).

    Raises:
        InputError: On a bad field (negative step, attempt < 1, wrong state, bad node name).
        ScoreError: On a non-finite or negative score or weight.
    """

    step: int
    node: str | None
    state: BreakerState
    fast: float
    slow: float
    mixing_ratio: float
    thresholds: Thresholds
    local_scores: Mapping[str, float] = field(default_factory=dict)
    weights: Mapping[str, float] = field(default_factory=dict)
    history: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    attempt: int = 1
    frozen_payload: FrozenPayload | None = None
    seed: int = 0
    step_input: FrozenPayload | None = None

    def __post_init__(self) -> None:
        _check_int("InterventionContext.step", self.step, minimum=0)
        _check_int("InterventionContext.attempt", self.attempt, minimum=1)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise InputError(f"InterventionContext.seed={self.seed!r} must be an int")
        if self.node is not None and (not isinstance(self.node, str) or not self.node):
            raise InputError(
                f"InterventionContext.node={self.node!r} must be a non-empty str or None"
            )
        if self.state not in (BreakerState.NORMAL, BreakerState.WARNING, BreakerState.RECOVERY):
            raise InputError(
                f"InterventionContext.state={self.state!r} must be NORMAL, WARNING or RECOVERY "
                "(the state the machine left to intervene)"
            )
        if not isinstance(self.thresholds, Thresholds):
            raise InputError("InterventionContext.thresholds must be a Thresholds instance")
        object.__setattr__(self, "fast", check_unit_score("InterventionContext.fast", self.fast))
        object.__setattr__(self, "slow", check_unit_score("InterventionContext.slow", self.slow))
        ratio = self.mixing_ratio
        if (
            isinstance(ratio, bool)
            or not isinstance(ratio, (int, float))
            or not 0.0 <= ratio <= 1.0
        ):
            raise ScoreError(f"InterventionContext.mixing_ratio={ratio!r} must be in [0, 1]")
        object.__setattr__(self, "mixing_ratio", float(ratio))
        object.__setattr__(self, "local_scores", _score_map("local_scores", self.local_scores))
        object.__setattr__(self, "weights", _score_map("weights", self.weights, check_score))
        object.__setattr__(self, "history", _history_map(self.history))
        if self.frozen_payload is not None and not isinstance(self.frozen_payload, FrozenPayload):
            raise InputError("InterventionContext.frozen_payload must be a FrozenPayload or None")
        if self.step_input is not None and not isinstance(self.step_input, FrozenPayload):
            raise InputError("InterventionContext.step_input must be a FrozenPayload or None")

    def __reduce__(self) -> tuple[Any, ...]:
        return (InterventionContext.from_json, (self.to_json(),))

    @property
    def magnitudes(self) -> Mapping[str, float]:
        """Per-node contribution ``w_i * b_i`` to B_net, for nodes with a score and a weight."""
        return MappingProxyType(
            {
                node: self.weights[node] * score
                for node, score in self.local_scores.items()
                if node in self.weights
            }
        )

    def to_json(self) -> dict[str, JSONValue]:
        """Return the context as plain JSON (``magnitudes`` included for readers)."""
        return {
            "step": self.step,
            "node": self.node,
            "state": self.state.value,
            "fast": self.fast,
            "slow": self.slow,
            "mixing_ratio": self.mixing_ratio,
            "thresholds": self.thresholds.to_json(),
            "local_scores": dict(self.local_scores),
            "weights": dict(self.weights),
            "magnitudes": dict(self.magnitudes),
            "history": {node: list(scores) for node, scores in self.history.items()},
            "attempt": self.attempt,
            "frozen_payload": None
            if self.frozen_payload is None
            else self.frozen_payload.to_json(),
            "seed": self.seed,
            "step_input": None if self.step_input is None else self.step_input.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> InterventionContext:
        """Rebuild a context from :meth:`to_json` output (``magnitudes`` is recomputed).

        Raises:
            InputError: On a missing or malformed field.
            ScoreError: On a bad score.
            ThresholdError: On inconsistent thresholds.
        """
        where = "intervention context"
        payload = _field(data, "frozen_payload", where)
        step_input = data.get("step_input")
        return cls(
            step=_field(data, "step", where),
            node=_field(data, "node", where),
            state=_enum_from_json(BreakerState, "context.state", _field(data, "state", where)),
            fast=_field(data, "fast", where),
            slow=_field(data, "slow", where),
            mixing_ratio=_field(data, "mixing_ratio", where),
            thresholds=Thresholds.from_json(_field(data, "thresholds", where)),
            local_scores=_field(data, "local_scores", where),
            weights=_field(data, "weights", where),
            history=_field(data, "history", where),
            attempt=_field(data, "attempt", where),
            frozen_payload=None if payload is None else FrozenPayload.from_json(payload),
            seed=_field(data, "seed", where),
            step_input=None if step_input is None else FrozenPayload.from_json(step_input),
        )


def _trail(raw: object) -> tuple[Mapping[str, FrozenJSON], ...]:
    if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Iterable):
        raise InputError("InterventionResult.trail must be a sequence of JSON objects (events)")
    events: list[Mapping[str, FrozenJSON]] = []
    for index, event in enumerate(raw):
        if not isinstance(event, Mapping):
            raise InputError(
                f"InterventionResult.trail[{index}] must be a JSON object, got "
                f"{type(event).__name__}"
            )
        _, view = _freeze(event, f"trail[{index}]", set())
        events.append(cast(Mapping[str, FrozenJSON], view))
    return tuple(events)


def _thaw_view(value: FrozenJSON) -> JSONValue:
    if isinstance(value, tuple):
        return [_thaw_view(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _thaw_view(item) for key, item in value.items()}
    return value


@dataclass(frozen=True, slots=True, eq=False)
class InterventionResult:
    """What a mitigation hook returns to the control machine.

    Args:
        repaired: The repaired payload, frozen, or ``None`` if there is none.
        converged: Whether the strategy finished with a result it stands behind. A converged
            result must carry ``repaired`` and ``recheck_score`` and no ``error``.
        strategy: ``"skeptics"``, ``"madera"`` or ``"none"``.
        trail: Events of the intervention, each a JSON object, oldest first (stored deep
            read-only).
        recheck_score: B_net contribution of the repaired output when re-scored, finite and
            >= 0, or ``None`` if it was not re-scored. RECOVERY -> NORMAL needs it below
            ``tau_exit``.
        error: Why the hook failed (``"TypeName: message"``), or ``None``. A failed result
            never converges.

    Raises:
        InputError: On an unknown strategy, a malformed trail, or inconsistent fields.
        ScoreError: On a bad ``recheck_score``.
    """

    repaired: FrozenPayload | None = None
    converged: bool = False
    strategy: Route = "none"
    trail: tuple[Mapping[str, FrozenJSON], ...] = ()
    recheck_score: float | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if self.strategy not in ROUTES:
            raise InputError(
                f"InterventionResult.strategy={self.strategy!r} is not one of "
                f"{', '.join(map(repr, ROUTES))}"
            )
        if not isinstance(self.converged, bool):
            raise InputError(f"InterventionResult.converged={self.converged!r} must be a bool")
        if self.repaired is not None and not isinstance(self.repaired, FrozenPayload):
            raise InputError(
                "InterventionResult.repaired must be a FrozenPayload or None; "
                "build it with freeze()"
            )
        if self.recheck_score is not None:
            object.__setattr__(
                self,
                "recheck_score",
                check_score("InterventionResult.recheck_score", self.recheck_score),
            )
        if self.error is not None and (not isinstance(self.error, str) or not self.error):
            raise InputError(
                f"InterventionResult.error={self.error!r} must be a non-empty str or None"
            )
        if self.converged and (
            self.repaired is None or self.recheck_score is None or self.error is not None
        ):
            raise InputError(
                "InterventionResult.converged=True needs a repaired payload and a "
                "recheck_score, and no error"
            )
        object.__setattr__(self, "trail", _trail(self.trail))

    def __reduce__(self) -> tuple[Any, ...]:
        return (InterventionResult.from_json, (self.to_json(),))

    @classmethod
    def noop(cls) -> InterventionResult:
        """The default hook's result: nothing repaired, not converged, strategy ``"none"``."""
        return cls()

    @classmethod
    def failed(cls, error: str, *, strategy: Route = "none") -> InterventionResult:
        """A result recording a failed hook (``error`` is ``"TypeName: message"``)."""
        return cls(strategy=strategy, error=error)

    def recheck_passes(self, tau_exit: float) -> bool:
        """Whether the repair converged and its re-check scored below ``tau_exit``."""
        return (
            self.converged
            and self.error is None
            and self.recheck_score is not None
            and self.recheck_score < tau_exit
        )

    def summary(self) -> dict[str, JSONValue]:
        """A short JSON summary for the run trace (no payload content, no full trail)."""
        return {
            "strategy": self.strategy,
            "converged": self.converged,
            "recheck_score": self.recheck_score,
            "error": self.error,
            "events": len(self.trail),
            "repaired_sha256": None if self.repaired is None else self.repaired.sha256,
        }

    def to_json(self) -> dict[str, JSONValue]:
        """Return the result as plain JSON, including the repaired payload and the trail."""
        return {
            "repaired": None if self.repaired is None else self.repaired.to_json(),
            "converged": self.converged,
            "strategy": self.strategy,
            "trail": [_thaw_view(event) for event in self.trail],
            "recheck_score": self.recheck_score,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> InterventionResult:
        """Rebuild a result from :meth:`to_json` output, validating every field.

        Raises:
            InputError: On a missing or malformed field.
            ScoreError: On a bad ``recheck_score``.
        """
        where = "intervention result"
        repaired = _field(data, "repaired", where)
        return cls(
            repaired=None if repaired is None else FrozenPayload.from_json(repaired),
            converged=_field(data, "converged", where),
            strategy=_field(data, "strategy", where),
            trail=_field(data, "trail", where),
            recheck_score=_field(data, "recheck_score", where),
            error=_field(data, "error", where),
        )


__all__ = [
    "ALLOWED_ACTIONS",
    "ROUTES",
    "BreakerAction",
    "BreakerDecision",
    "BreakerState",
    "ControlStatistics",
    "FrozenJSON",
    "FrozenPayload",
    "InterventionContext",
    "InterventionResult",
    "JSONValue",
    "LazyPayload",
    "Route",
    "Thresholds",
    "WindowCounts",
    "canonical_json",
    "check_score",
    "check_unit_score",
    "sha256_hex",
]
