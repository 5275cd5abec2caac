"""The run trace: one JSON Lines record per guarded step, written for later verification.

A trace file is UTF-8 JSON Lines. Line 1 is a header (``"kind": "header"``) carrying the
schema name and version and the run's control configuration (thresholds, cool-down, retry
budget, calibration window, seed). Every further line is one step (``"kind": "step"``), in step
order with no gaps. Each line is canonical JSON (sorted keys, no spaces), so the same seed and
inputs give byte-identical files.

Writing appends and flushes one whole line per record (``fsync`` optional), so a crash loses
at most the line being written. Reading accepts a file whose last line was cut mid-way: it
returns the records up to the last whole line and warns (:class:`TraceTruncatedWarning`). A
last line that lacks only its newline (an editor or another tool dropped it) is a whole record
and is read; appending to such a file first adds the newline. Any other malformed line is a
:class:`~biasbreaker.errors.TraceError` naming the file and line.

Source:
    ``ARCHITECTURE.md`` §6 "Run trace and properties"; ``docs/control.md`` (schema).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any, Final

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
SCHEMA_VERSION: Final = 1


class TraceTruncatedWarning(UserWarning):
    """A trace's last line was cut mid-way (a crash while writing); it was ignored."""


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

    Raises:
        TraceError: If ``max_history`` and ``control`` are not both set or both ``None``, a
            counter is out of range, or ``node_trip`` is not a bool.
    """

    thresholds: Thresholds
    cooldown_steps: int
    max_retries: int
    max_history: int | None
    control: ControlStatistics | None
    seed: int
    meta: Mapping[str, JSONValue] = field(default_factory=dict)
    node_trip: bool = False

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
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TraceError(f"trace header: seed={self.seed!r} must be an int")
        if not isinstance(self.node_trip, bool):
            raise TraceError(f"trace header: node_trip={self.node_trip!r} must be true or false")
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
        if data.get("version") != SCHEMA_VERSION:
            raise TraceError(
                f"trace schema version {data.get('version')!r} is not supported; "
                f"this biasbreaker reads version {SCHEMA_VERSION}"
            )
        try:
            control = data["control"]
            return cls(
                thresholds=Thresholds.from_json(data["thresholds"]),
                cooldown_steps=data["cooldown_steps"],
                max_retries=data["max_retries"],
                max_history=data["max_history"],
                control=None if control is None else ControlStatistics.from_json(control),
                seed=data["seed"],
                meta=data.get("meta", {}),
                node_trip=data.get("node_trip", False),
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

    def to_json(self) -> dict[str, JSONValue]:
        """Return the record's JSON object (``"kind": "step"``)."""
        return {
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
            )
        except KeyError as exc:
            raise TraceError(f"step record is missing the field {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            if isinstance(exc, TraceError):
                raise
            raise TraceError(f"step record is invalid: {exc}") from exc
        if record.action not in ALLOWED_ACTIONS[record.state]:
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


def _scores(value: object) -> Mapping[str, float]:
    if not isinstance(value, dict):
        raise TraceError(f"scores must be an object of node -> score, got {type(value).__name__}")
    return {str(node): _score(score, f"scores[{node!r}]") for node, score in value.items()}


def record_line(record: Mapping[str, JSONValue]) -> str:
    """Return one trace line, canonical JSON and a newline, for a header or step object."""
    return canonical_json(record) + "\n"


class TraceWriter:
    """Append run-trace records to a JSON Lines file, one flushed line per record.

    Use it as a context manager, and pass it (or its :meth:`write`) as the control machine's
    ``recorder``.

    Args:
        path: The trace file, or an open text stream (e.g. ``sys.stdout``; it is flushed per
            record but not closed, and ``fsync`` and ``append`` do not apply).
        header: The run's header, written as line 1 of a new file.
        fsync: Also ``os.fsync`` after every record (durable against power loss; slower).
        append: Continue an existing trace (e.g. after restoring a machine from a snapshot):
            its header must equal ``header``; a last line cut by a crash is removed, a whole
            last line without its newline gets one; the next record must continue the step
            numbering. Without ``append`` an existing file is
            overwritten.

    Raises:
        TraceError: With ``append``, if the existing file is not a trace or its header
            differs.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | IO[str],
        header: TraceHeader,
        *,
        fsync: bool = False,
        append: bool = False,
    ) -> None:
        self.header = header
        self._next_step = 0
        self._closed = False
        self._owned = not hasattr(path, "write")
        if not self._owned:
            self.path = Path(getattr(path, "name", "<stream>"))
            self._fsync = False
            self._file: IO[str] = path  # type: ignore[assignment]
            self._emit(record_line(header.to_json()))
            return
        self.path = Path(path)  # type: ignore[arg-type]
        self._fsync = fsync
        if append and self.path.exists() and self.path.stat().st_size > 0:
            existing = read_trace(self.path, warn=False)
            if existing.header != header:
                raise TraceError(
                    f"{self.path}: cannot append, its header differs from this "
                    "run's (different thresholds, window or seed)"
                )
            with self.path.open("r+b") as raw:
                raw.truncate(existing.whole_bytes)
                if existing.newline_missing:
                    raw.seek(existing.whole_bytes)
                    raw.write(b"\n")
            self._next_step = existing.records[-1].step + 1 if existing.records else 0
            self._file = self.path.open("a", encoding="utf-8", newline="\n")
        else:
            self._file = self.path.open("w", encoding="utf-8", newline="\n")
            self._emit(record_line(header.to_json()))

    def _emit(self, line: str) -> None:
        self._file.write(line)
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())

    def write(self, record: StepRecord) -> None:
        """Append one step record and flush it.

        Raises:
            TraceError: If the record's step is not the next one (steps are consecutive from
                0), or the writer is closed.
        """
        if self._closed:
            raise TraceError(f"{self.path}: the trace writer is closed")
        if record.step != self._next_step:
            raise TraceError(
                f"{self.path}: step {record.step} written out of order; expected "
                f"step {self._next_step}"
            )
        self._emit(record_line(record.to_json()))
        self._next_step += 1

    __call__ = write

    def close(self) -> None:
        """Close the file (idempotent); a stream passed in is flushed, not closed."""
        self._closed = True
        if self._owned:
            self._file.close()
        else:
            self._file.flush()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class TraceReader:
    """Stream a run trace record by record, in O(1) memory.

    The header is read on construction. Iterating yields the step records in order (once);
    afterwards :attr:`sha256` (of the file's bytes, including a cut last line),
    :attr:`truncated`, :attr:`whole_bytes`, :attr:`newline_missing` and :attr:`n_records` are
    set. A last line without its newline is a whole record if it parses as a JSON object (a
    proper prefix of a one-line JSON object never does), and cut otherwise.

    Args:
        path: The trace file.
        warn: Emit :class:`TraceTruncatedWarning` if the last line was cut mid-record.

    Raises:
        TraceError: If the file cannot be read or has no valid header; while iterating, if a
            line (other than a cut last line) is malformed, has an unknown kind, or breaks the
            step order. Messages name the file and line.
    """

    def __init__(self, path: str | os.PathLike[str], *, warn: bool = True) -> None:
        self.path = Path(path)
        self._warn = warn
        self._hash = hashlib.sha256()
        self.truncated = False
        self.newline_missing = False
        self.whole_bytes = 0
        self.n_records = 0
        self._done = False
        try:
            self._file: IO[bytes] = self.path.open("rb")
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot read the trace: {exc}") from exc
        self._line_number = 0
        first = self._next_object()
        if first is None:
            self._file.close()
            raise TraceError(
                f"{self.path}: empty trace, or its header line is cut; nothing to read"
            )
        try:
            self.header = TraceHeader.from_json(first)
        except TraceError as exc:
            self._file.close()
            raise TraceError(f"{self.path}:1: {exc}") from exc

    @property
    def sha256(self) -> str:
        """SHA-256 hex digest of the file's bytes; complete once iteration has finished."""
        if not self._done:
            raise TraceError(f"{self.path}: the digest is known only after reading every record")
        return self._hash.hexdigest()

    def _next_object(self) -> dict[str, Any] | None:
        raw = self._file.readline()
        if not raw:
            return None
        self._hash.update(raw)
        self._line_number += 1
        if not raw.endswith(b"\n"):
            # The writer emits each record and its newline in one write, so a line without its
            # newline was either being written when the process died (cut: not a JSON object)
            # or lost only its newline afterwards (whole: a JSON object).
            try:
                whole = json.loads(raw)
            except ValueError:
                whole = None
            if isinstance(whole, dict):
                self.newline_missing = True
                self.whole_bytes += len(raw)
                return whole
            self.truncated = True
            if self._warn:
                warnings.warn(
                    f"{self.path}:{self._line_number}: the last line is cut mid-record (the "
                    f"writer crashed?); read the {self._line_number - 1} whole lines before it",
                    TraceTruncatedWarning,
                    stacklevel=3,
                )
            return None
        try:
            parsed = json.loads(raw)
        except ValueError as exc:
            raise TraceError(f"{self.path}:{self._line_number}: not valid JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise TraceError(f"{self.path}:{self._line_number}: a trace line must be a JSON object")
        self.whole_bytes += len(raw)
        return parsed

    def __iter__(self) -> Iterator[StepRecord]:
        try:
            while True:
                parsed = self._next_object()
                if parsed is None:
                    break
                try:
                    record = StepRecord.from_json(parsed)
                except TraceError as exc:
                    raise TraceError(f"{self.path}:{self._line_number}: {exc}") from exc
                if record.step != self.n_records:
                    raise TraceError(
                        f"{self.path}:{self._line_number}: step {record.step} is "
                        f"out of order; expected step {self.n_records}"
                    )
                self.n_records += 1
                yield record
            self._done = True
        finally:
            self._file.close()


@dataclass(frozen=True, slots=True)
class Trace:
    """A trace read into memory (see :func:`read_trace`).

    Args:
        path: The file.
        sha256: SHA-256 hex digest of the file's bytes as read (including any cut last line).
        header: The header.
        records: The whole step records, in order.
        truncated: Whether a cut last line was dropped.
        whole_bytes: Length in bytes of the file up to the end of its last whole line.
        newline_missing: Whether the last whole line lacks its newline.
    """

    path: Path
    sha256: str
    header: TraceHeader
    records: tuple[StepRecord, ...]
    truncated: bool
    whole_bytes: int
    newline_missing: bool = False


def read_trace(path: str | os.PathLike[str], *, warn: bool = True) -> Trace:
    """Read and validate a whole run trace into memory (use :class:`TraceReader` to stream).

    Args:
        path: The trace file.
        warn: Emit :class:`TraceTruncatedWarning` if the last line was cut mid-record.

    Returns:
        The trace, with every whole record.

    Raises:
        TraceError: As :class:`TraceReader`.
    """
    reader = TraceReader(path, warn=warn)
    records = tuple(reader)
    return Trace(
        reader.path,
        reader.sha256,
        reader.header,
        records,
        reader.truncated,
        reader.whole_bytes,
        reader.newline_missing,
    )


__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "StepRecord",
    "Trace",
    "TraceHeader",
    "TraceReader",
    "TraceTruncatedWarning",
    "TraceWriter",
    "read_trace",
    "record_line",
]
