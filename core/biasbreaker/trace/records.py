"""The run trace's records: the header (line 1), one step record per guarded step, and seals.

Each record converts to and from its JSON object (``to_json`` / ``from_json``); ``from_json``
validates every field, so a malformed line is a :class:`~biasbreaker.errors.TraceError` that
names the field. Schema version 2 adds what a verifier needs to replay the run (the machine's
probation mode and EWMA smoothing in the header, the Katz weights on the steps where they
change) and the hash chain (:mod:`biasbreaker.trace.chain`): every line after the header
carries ``prev``, the digest of the line before it, and :class:`SealRecord` lines close a
stretch of the trace at each pause for review and at the end of a run.

Source:
    ``ARCHITECTURE.md`` §6 "Run trace and properties"; ``docs/control.md`` §6 (schema).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

import rfc8785

from biasbreaker.errors import BiasbreakerError, TraceError
from biasbreaker.types import (
    ALLOWED_ACTIONS,
    BreakerAction,
    BreakerState,
    ControlStatistics,
    JSONValue,
    Thresholds,
    WindowCounts,
    canonical_json,
)

SCHEMA: Final = "biasbreaker.trace"
SCHEMA_VERSION: Final = 2
"""The version this biasbreaker writes (it reads 1 and 2; version 1 has no chain)."""
READABLE_VERSIONS: Final = (1, 2)
PROBATION_MODES: Final = ("hold", "half-open")
JSON_INT_LIMIT: Final = 2**53 - 1
"""RFC 8785 (I-JSON) numbers are IEEE doubles: integers beyond this are not exact."""


_V1_HEADER_KEYS: Final = frozenset(
    {
        "kind",
        "schema",
        "version",
        "thresholds",
        "cooldown_steps",
        "max_retries",
        "max_history",
        "control",
        "seed",
        "meta",
        "node_trip",
    }
)
_HEADER_KEYS: Final = {1: _V1_HEADER_KEYS, 2: _V1_HEADER_KEYS | {"probation", "ewma"}}


@dataclass(frozen=True, slots=True)
class TraceHeader:
    """The first line of a trace: schema and the run's control configuration.

    Args:
        thresholds: The breaker's thresholds.
        cooldown_steps: Steps the machine stays in RECOVERY before it may recover, >= 0.
        max_retries: Interventions an episode may make before it escalates, >= 1.
        max_history: Calibration window length W, or ``None`` if the run had no window.
        control: Control statistics defining the window's 3σ/5σ bands, or ``None``.
        seed: The run's seed.
        meta: Free-form plain-JSON description of the run (e.g. the preset), default empty.
        node_trip: Whether the run's machine also tripped on a step's own local score
            (``MachineConfig.node_trip``); a header without the key means ``False``.
        probation: The machine's probation mode, ``"hold"`` or ``"half-open"``
            (``MachineConfig.probation``), or ``None`` when unknown (version-1 headers).
        ewma: The smoothing factors ``(fast, slow)`` of the EWMAs that produced each step's
            fast and slow B_net, each in (0, 1], or ``None`` when the writer did not know them
            (then ``verify`` cannot re-derive fast and slow from the local scores).
        version: The schema version the header was read with (written: always
            :data:`SCHEMA_VERSION`).

    Raises:
        TraceError: If ``max_history`` and ``control`` are not both set or both ``None``, a
            counter is out of range, ``node_trip`` is not a bool, ``probation`` or ``ewma`` is
            invalid, or ``seed`` is beyond ±(2**53 - 1) (RFC 8785 numbers are doubles).
    """

    thresholds: Thresholds
    cooldown_steps: int
    max_retries: int
    max_history: int | None
    control: ControlStatistics | None
    seed: int
    meta: Mapping[str, JSONValue] = field(default_factory=dict)
    node_trip: bool = False
    probation: str | None = None
    ewma: tuple[float, float] | None = None
    version: int = field(default=SCHEMA_VERSION, compare=False)

    def __post_init__(self) -> None:
        if (self.max_history is None) != (self.control is None):
            raise TraceError(
                "trace header: max_history and control must both be set (the run "
                "had a calibration window) or both be null"
            )
        for name, minimum in (("cooldown_steps", 0), ("max_retries", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise TraceError(f"trace header: {name}={value!r} must be an int >= {minimum}")
        if self.max_history is not None and (
            isinstance(self.max_history, bool)
            or not isinstance(self.max_history, int)
            or self.max_history < 1
        ):
            raise TraceError(f"trace header: max_history={self.max_history!r} must be an int >= 1")
        if (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, int)
            or abs(self.seed) > JSON_INT_LIMIT
        ):
            raise TraceError(
                f"trace header: seed={self.seed!r} must be an int within ±(2**53 - 1), the "
                "integers an RFC 8785 (JSON double) number holds exactly"
            )
        if not isinstance(self.node_trip, bool):
            raise TraceError(f"trace header: node_trip={self.node_trip!r} must be true or false")
        if self.probation is not None and self.probation not in PROBATION_MODES:
            raise TraceError(
                f"trace header: probation={self.probation!r} must be 'hold' or 'half-open'"
            )
        if self.ewma is not None:
            pair = tuple(self.ewma)
            if len(pair) != 2 or not all(
                not isinstance(a, bool) and isinstance(a, (int, float)) and 0.0 < a <= 1.0
                for a in pair
            ):
                raise TraceError(
                    f"trace header: ewma={self.ewma!r} must be the (fast, slow) smoothing "
                    "factors, each in (0, 1]"
                )
            object.__setattr__(self, "ewma", (float(pair[0]), float(pair[1])))
        object.__setattr__(self, "meta", MappingProxyType(json.loads(canonical_json(self.meta))))

    def to_json(self) -> dict[str, JSONValue]:
        """Return the header line's JSON object."""
        return {
            "kind": "header",
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "thresholds": self.thresholds.to_json(),
            "cooldown_steps": self.cooldown_steps,
            "max_retries": self.max_retries,
            "max_history": self.max_history,
            "control": None if self.control is None else self.control.to_json(),
            "seed": self.seed,
            "meta": dict(self.meta),
            "node_trip": self.node_trip,
            "probation": self.probation,
            "ewma": None if self.ewma is None else {"fast": self.ewma[0], "slow": self.ewma[1]},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TraceHeader:
        """Parse a header object.

        Raises:
            TraceError: On a wrong schema or version, or a missing or invalid field.
        """
        if data.get("kind") != "header" or data.get("schema") != SCHEMA:
            raise TraceError(
                f"not a biasbreaker trace header (expected kind 'header' and schema {SCHEMA!r})"
            )
        version = data.get("version")
        if isinstance(version, bool) or version not in READABLE_VERSIONS:
            raise TraceError(
                f"trace schema version {version!r} is not supported; this biasbreaker reads "
                f"versions {', '.join(map(str, READABLE_VERSIONS))}"
            )
        known = _HEADER_KEYS[version]
        unknown = sorted(set(data) - known)
        if unknown:
            raise TraceError(
                f"trace header has unknown field(s) {', '.join(map(repr, unknown))} for schema "
                f"version {version}"
            )
        try:
            control = data["control"]
            ewma = data.get("ewma") if version >= 2 else None
            if ewma is not None and (not isinstance(ewma, dict) or set(ewma) != {"fast", "slow"}):
                raise TraceError("trace header: ewma must be null or {fast, slow}")
            return cls(
                thresholds=Thresholds.from_json(data["thresholds"]),
                cooldown_steps=data["cooldown_steps"],
                max_retries=data["max_retries"],
                max_history=data["max_history"],
                control=None if control is None else ControlStatistics.from_json(control),
                seed=data["seed"],
                meta=data.get("meta", {}),
                node_trip=data.get("node_trip", False),
                probation=data["probation"] if version >= 2 else None,
                ewma=None if ewma is None else (ewma["fast"], ewma["slow"]),
                version=version,
            )
        except KeyError as exc:
            raise TraceError(f"trace header is missing the field {exc.args[0]!r}") from None
        except (BiasbreakerError, TypeError, ValueError) as exc:
            if isinstance(exc, TraceError):
                raise
            raise TraceError(f"trace header is invalid: {exc}") from exc


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One guarded step as recorded in the trace.

    Args:
        step: Step index, 0-based, consecutive.
        node: The guarded node of this step, or ``None``.
        scores: Per-node local scores ``b_i`` at this step (node -> float >= 0).
        fast: Fast-scale B_net, finite >= 0.
        slow: Slow-scale B_net, finite >= 0.
        window: Calibration-window counts after this step, or ``None`` without a window.
        state: State after the step.
        action: Action of the step's decision.
        mixing_ratio: Advisory severity in [0, 1].
        reason: The decision's reason.
        transition: Name of the transition taken (see ``biasbreaker.machine.TRANSITIONS``), or
            ``"hold"`` when the state did not change.
        episode: Intervention episodes started so far in the run (0 before the first).
        attempt: Interventions made in the current episode (0 outside an episode).
        payload_sha256: Digest of the decision's frozen payload, or ``None``.
        intervention: Summary of the intervention run at this step (see
            :meth:`biasbreaker.types.InterventionResult.summary`), or ``None``.
        weights: The Katz weights (node -> weight, summing to 1) the step's B_net was
            computed with, recorded on the first step that has them and on every step where
            they change (a topology change); ``None`` on the others (unchanged). An empty
            mapping records that the weights became unknown.
        probe: What the probe made of the step, ``{"status": str, "reason": str}``, or
            ``None`` when the writer does not probe (the field is then left out of the line).
    """

    step: int
    node: str | None
    scores: Mapping[str, float]
    fast: float
    slow: float
    window: WindowCounts | None
    state: BreakerState
    action: BreakerAction
    mixing_ratio: float
    reason: str
    transition: str
    episode: int
    attempt: int
    payload_sha256: str | None
    intervention: Mapping[str, JSONValue] | None
    weights: Mapping[str, float] | None = None
    probe: Mapping[str, str] | None = None

    def to_json(self) -> dict[str, JSONValue]:
        """Return the record's JSON object (``"kind": "step"``; ``weights``, ``probe`` when set)."""
        data: dict[str, JSONValue] = {
            "kind": "step",
            "step": self.step,
            "node": self.node,
            "scores": dict(self.scores),
            "fast": self.fast,
            "slow": self.slow,
            "window": None
            if self.window is None
            else {
                "size": self.window.size,
                "beyond_3": self.window.beyond_3,
                "beyond_5": self.window.beyond_5,
            },
            "state": self.state.value,
            "action": self.action.value,
            "mixing_ratio": self.mixing_ratio,
            "reason": self.reason,
            "transition": self.transition,
            "episode": self.episode,
            "attempt": self.attempt,
            "payload_sha256": self.payload_sha256,
            "intervention": None if self.intervention is None else dict(self.intervention),
        }
        if self.weights is not None:
            data["weights"] = dict(self.weights)
        if self.probe is not None:
            data["probe"] = dict(self.probe)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StepRecord:
        """Parse and validate a step object.

        Raises:
            TraceError: On a missing field or a value of the wrong type or range (the caller
                adds file and line).
        """
        try:
            if data["kind"] == "header":
                raise TraceError(
                    "expected a step record, got a second header: the file holds several traces "
                    "one after another (as a calibration input such as the demo's "
                    "control-runs.jsonl does); verify each run's own trace file, or their folder"
                )
            if data["kind"] != "step":
                raise TraceError(f"expected a step record, got kind {data['kind']!r}")
            window = data["window"]
            record = cls(
                step=_int(data["step"], "step"),
                node=data["node"],
                scores=_scores(data["scores"]),
                fast=_score(data["fast"], "fast"),
                slow=_score(data["slow"], "slow"),
                window=None
                if window is None
                else WindowCounts(
                    _int(window["size"], "window.size"),
                    _int(window["beyond_3"], "window.beyond_3"),
                    _int(window["beyond_5"], "window.beyond_5"),
                ),
                state=BreakerState(data["state"]),
                action=BreakerAction(data["action"]),
                mixing_ratio=_score(data["mixing_ratio"], "mixing_ratio"),
                reason=data["reason"],
                transition=data["transition"],
                episode=_int(data["episode"], "episode"),
                attempt=_int(data["attempt"], "attempt"),
                payload_sha256=data["payload_sha256"],
                intervention=data["intervention"],
                weights=None
                if data.get("weights") is None
                else _scores(data["weights"], "weights"),
                probe=_probe(data.get("probe")),
            )
        except KeyError as exc:
            raise TraceError(f"step record is missing the field {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            if isinstance(exc, TraceError):
                raise
            raise TraceError(f"step record is invalid: {exc}") from exc
        held = record.transition == HELD_FOR_REVIEW and record.action is BreakerAction.ESCALATE
        if record.action not in ALLOWED_ACTIONS[record.state] and not held:
            raise TraceError(
                f"step record has action {record.action.value!r}, inconsistent "
                f"with state {record.state.value!r}"
            )
        if record.mixing_ratio > 1.0:
            raise TraceError(f"step record mixing_ratio={record.mixing_ratio!r} is above 1")
        if record.node is not None and not isinstance(record.node, str):
            raise TraceError(f"step record node={record.node!r} must be a str or null")
        if not isinstance(record.reason, str) or not isinstance(record.transition, str):
            raise TraceError("step record reason and transition must be str")
        if record.payload_sha256 is not None and not isinstance(record.payload_sha256, str):
            raise TraceError("step record payload_sha256 must be a str or null")
        if record.intervention is not None and not isinstance(record.intervention, dict):
            raise TraceError("step record intervention must be an object or null")
        return record


HELD_FOR_REVIEW: Final = "held-for-review"
"""The transition of a held step (its output could not be checked): action ``escalate`` in
any state (``ControlMachine.step(hold=...)``)."""

UNSUPPORTED_LANGUAGE: Final = "unsupported_language"
"""The probe outcome of a step whose input is in a language the term lists do not cover
(``docs/detection.md``, "Languages"); its reason starts with :data:`UNSUPPORTED_HELD` or
:data:`UNSUPPORTED_PROCEEDED`, as ``[probe] unsupported_language`` chose."""
UNSUPPORTED_HELD: Final = "unsupported language (held for review): "
"""The reason's category of an unsupported-language step held for review (the default)."""
UNSUPPORTED_PROCEEDED: Final = "unsupported language (proceeding unprobed): "
"""The reason's category of an unsupported-language step let through unprobed, as
``[probe] unsupported_language = "proceed"`` asks; any other reason of that outcome holds."""


def _probe(value: object) -> Mapping[str, str] | None:
    if value is None:
        return None
    if (
        not isinstance(value, dict)
        or set(value) != {"status", "reason"}
        or not all(isinstance(v, str) for v in value.values())
    ):
        raise TraceError(f"probe={value!r} must be an object {{status: str, reason: str}}")
    return {"status": value["status"], "reason": value["reason"]}


def _int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TraceError(f"{name}={value!r} must be an int >= 0")
    return value


def _score(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TraceError(f"{name}={value!r} must be a finite number >= 0")
    try:
        as_float = float(value)
    except OverflowError:  # an int beyond the float range
        raise TraceError(
            f"{name}=<an integer beyond the float range> must be a finite number >= 0"
        ) from None
    if not 0.0 <= as_float < math.inf:
        raise TraceError(f"{name}={value!r} must be a finite number >= 0")
    return as_float


def _scores(value: object, name: str = "scores") -> Mapping[str, float]:
    if not isinstance(value, dict):
        raise TraceError(f"{name} must be an object of node -> number, got {type(value).__name__}")
    return {str(node): _score(score, f"{name}[{node!r}]") for node, score in value.items()}


@dataclass(frozen=True, slots=True)
class Signature:
    """An Ed25519 signature of a seal (see :mod:`biasbreaker.trace.signing`).

    Args:
        key: The signer's public key, the 32 raw bytes in standard base64.
        sig: The 64-byte signature of the seal's message
            (:func:`biasbreaker.trace.chain.seal_message`), in standard base64.
    """

    key: str
    sig: str

    def to_json(self) -> dict[str, JSONValue]:
        """Return the signature's JSON object."""
        return {"key": self.key, "sig": self.sig}


@dataclass(frozen=True, slots=True)
class SealRecord:
    """A seal: the chain head and the step count at a pause for review or the end of a run.

    A trace that does not end with a seal was cut (a crash, or records deleted), which
    ``verify`` reports. A seal has no free field: everything in it follows from the lines
    before it (and the signer's key), so an edit of the last seal is detected like an edit of
    any other line.

    Args:
        steps: Step records written before the seal, >= 0.
        head: The chain head: the digest of the line before the seal (its ``prev``).
        signature: The Ed25519 signature of the seal, or ``None`` (unsigned).
    """

    steps: int
    head: str
    signature: Signature | None = None

    def to_json(self) -> dict[str, JSONValue]:
        """Return the seal's JSON object (``"kind": "seal"``; ``prev`` is the head)."""
        data: dict[str, JSONValue] = {"kind": "seal", "prev": self.head, "steps": self.steps}
        if self.signature is not None:
            data["signature"] = self.signature.to_json()
        return data


def record_line(record: Mapping[str, JSONValue]) -> str:
    """Return one trace line: the object's RFC 8785 canonical JSON and a newline.

    RFC 8785 (the JSON Canonicalization Scheme) fixes key order, number and string forms, so
    the same record is the same bytes in any language that implements it, and a line's digest
    (:func:`biasbreaker.trace.chain.line_digest`) can be recomputed from the parsed record.

    Raises:
        TraceError: If the object has no RFC 8785 form (NaN, infinity, an integer beyond
            ±(2**53 - 1), a string that is not valid Unicode).
    """
    try:
        return rfc8785.dumps(record).decode("utf-8") + "\n"
    except rfc8785.CanonicalizationError as exc:
        raise TraceError(f"record cannot be written as RFC 8785 JSON: {exc}") from exc


__all__ = [
    "HELD_FOR_REVIEW",
    "JSON_INT_LIMIT",
    "PROBATION_MODES",
    "READABLE_VERSIONS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "UNSUPPORTED_HELD",
    "UNSUPPORTED_LANGUAGE",
    "UNSUPPORTED_PROCEEDED",
    "SealRecord",
    "Signature",
    "StepRecord",
    "TraceHeader",
    "record_line",
]
