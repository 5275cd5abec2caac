"""Reading control runs from a JSON Lines file: run traces, step records, DoT harness records.

Source:
    ``docs/control.md`` §5 (the TRAJECTORIES.jsonl layouts).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from biasbreaker.calibration.runs import ControlStep, unit_score
from biasbreaker.dot import SCHEMA as DOT_SCHEMA
from biasbreaker.errors import InputError, ScoreError, TraceError
from biasbreaker.trace import StepRecord, TraceHeader, TraceTruncatedWarning

STEP_RECORD_KEYS: Final = ("fast", "own", "run", "seed", "slow")
"""The keys a step record (a line of a control-trajectory file without ``"kind"``) may have."""


@dataclass(frozen=True, slots=True)
class ControlRuns:
    """Control runs read from a file.

    Args:
        runs: One tuple of :class:`ControlStep` per run, in order of first appearance.
        names: Each run's name: ``trace N`` for the N-th run trace, ``run=<value>`` or
            ``seed=<value>`` for step records (the value as JSON, so ``run=3`` and
            ``run="3"`` are different runs), ``dot <preset> seed=<seed>`` for DoT records.
        sha256: SHA-256 of the file's bytes.
        skipped: Steps skipped because they had no score yet (``fast`` or ``slow`` null).
        truncated: Whether a cut last line (no newline, not valid JSON) was ignored.
        files: The files read, in order (one for :func:`read_control_trajectories`).
    """

    runs: tuple[tuple[ControlStep, ...], ...]
    names: tuple[str, ...]
    sha256: str
    skipped: int
    truncated: bool = False
    files: tuple[Path, ...] = ()


HEADER_CONFIGURATION: Final = (
    "thresholds",
    "cooldown_steps",
    "max_retries",
    "max_history",
    "control",
    "node_trip",
    "probation",
    "ewma",
)
"""The run-trace header fields that must agree between the control runs of one calibration.

They describe the machine that recorded the run (its thresholds and window decide whether and
when it intervened, the EWMA factors what fast and slow B_net are); the seed, the free-form
``meta`` (the thread, the preset) and the schema version may differ. The scorers and the graph
are not in the header, so a mix of those cannot be seen here."""


def _flatten(value: object, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


class _Configurations:
    """The run traces read so far, across files: the first one's configuration, every digest."""

    def __init__(self) -> None:
        self.first: tuple[dict[str, object], str] | None = None
        self.digests: dict[str, str] = {}

    def once(self, digest: str, where: str) -> str | None:
        """``None`` the first time a trace's digest is seen, else where it was seen first."""
        first = self.digests.get(digest)
        if first is None:
            self.digests[digest] = where
        return first

    def check(self, header: TraceHeader, where: str) -> str | None:
        """``None`` if ``header`` agrees with the first one, else what differs, for a message."""
        data = header.to_json()
        config = _flatten({key: data[key] for key in HEADER_CONFIGURATION})
        if self.first is None:
            self.first = (config, where)
            return None
        first, there = self.first
        differs = [
            f"{key} {config.get(key)!r} here, {first.get(key)!r} in {there}"
            for key in sorted(set(config) | set(first))
            if config.get(key) != first.get(key)
        ]
        if not differs:
            return None
        return (
            f"this run trace was recorded with another configuration than the one at {there}: "
            f"{'; '.join(differs)}. Calibrate control runs recorded by one machine "
            "configuration (e.g. all by `biasbreaker run --control` with the same settings), "
            "or calibrate each set on its own"
        )


class _FileRuns:
    """The state of one pass over a control-trajectory file (see read_control_trajectories)."""

    def __init__(self, file: Path, configurations: _Configurations | None = None) -> None:
        self.file = file
        self.configurations = _Configurations() if configurations is None else configurations
        self.trace_digest: tuple[Any, int] | None = None  # (sha256 so far, header line)
        self.runs: dict[str, list[ControlStep]] = {}
        self.trace: str | None = None  # the run trace whose steps follow, if any
        self.next_step = 0
        self.traces = 0
        self.skipped = 0
        self.run_key: tuple[str, int] | None = None  # ("run" or "seed", first line)
        self.dot_steps: dict[str, tuple[int, int]] = {}  # DoT run -> (last step, its line)

    def fail(self, number: int, message: str) -> InputError:
        return InputError(f"{self.file}:{number}: {message}")

    def value(self, number: int, name: str, value: object) -> float:
        try:
            return unit_score(name, value)
        except ScoreError as exc:
            raise self.fail(number, str(exc)) from None

    def finish_trace(self) -> None:
        """The trace being read ended (a new header, or the end of the file): once only."""
        if self.trace_digest is None:
            return
        digest, start = self.trace_digest
        self.trace_digest = None
        where = f"{self.file}:{start}"
        first = self.configurations.once(digest.hexdigest(), where)
        if first is not None:
            raise self.fail(
                start,
                f"this run trace is the one at {first} again, byte for byte: the same run "
                "twice (a traces folder and the control-runs.jsonl made from it, or a file "
                "given twice under two names?) would count it twice; give each run once",
            )

    def record(self, number: int, record: dict[str, Any], raw: bytes = b"") -> None:
        kind = record.get("kind")
        if kind == "header":
            self.finish_trace()
            self.trace_digest = (hashlib.sha256(), number)
        if self.trace_digest is not None and kind in ("header", "step", "seal"):
            self.trace_digest[0].update(raw.rstrip(b"\r") + b"\n")
        if kind == "header":
            self.header(number, record)
        elif kind == "step":
            self.trace_step(number, record)
        elif kind == "seal":
            if self.trace is None:
                raise self.fail(number, "a run-trace seal before any header line")
        elif kind is not None:
            raise self.fail(
                number,
                f"unknown kind {kind!r}; a run trace has 'header', 'step' and 'seal' lines",
            )
        elif record.get("schema") == DOT_SCHEMA:
            self.dot_step(number, record)
        else:
            self.step_record(number, record)

    def header(self, number: int, record: dict[str, Any]) -> None:
        try:
            header = TraceHeader.from_json(record)
        except TraceError as exc:
            raise self.fail(number, str(exc)) from None
        mixed = self.configurations.check(header, f"{self.file}:{number}")
        if mixed is not None:
            raise self.fail(number, mixed)
        self.traces += 1
        self.trace = f"trace {self.traces}"
        self.runs[self.trace] = []
        self.next_step = 0

    def trace_step(self, number: int, record: dict[str, Any]) -> None:
        if self.trace is None:
            raise self.fail(
                number, "a run-trace step before any header line; put each trace's header first"
            )
        try:
            step = StepRecord.from_json(record)
        except TraceError as exc:
            raise self.fail(number, str(exc)) from None
        if step.step != self.next_step:
            raise self.fail(
                number,
                f"step {step.step} of {self.trace} is out of order; expected step "
                f"{self.next_step} (is a trace cut short before the next header?)",
            )
        self.next_step += 1
        for node, score in step.scores.items():
            self.value(number, f"scores[{node!r}]", score)
        own = None if step.node is None else step.scores.get(step.node)
        self.runs[self.trace].append(
            ControlStep(
                self.value(number, "fast", step.fast), self.value(number, "slow", step.slow), own
            )
        )

    def dot_step(self, number: int, record: dict[str, Any]) -> None:
        seed, preset, node, scores = (record.get(k) for k in ("seed", "preset", "node", "scores"))
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise self.fail(number, f"DoT record seed={seed!r} must be an integer")
        if not isinstance(preset, str) or not isinstance(node, str):
            raise self.fail(number, "DoT record needs a string 'preset' and 'node'")
        if not isinstance(scores, dict):
            raise self.fail(number, "DoT record needs 'scores', an object of node -> score")
        checked = {n: self.value(number, f"scores[{n!r}]", v) for n, v in scores.items()}
        name = f"dot {preset} seed={seed}"
        step = record.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise self.fail(number, f"DoT record step={step!r} must be an integer >= 0")
        last = self.dot_steps.get(name)
        if last is not None and step <= last[0]:
            raise self.fail(
                number,
                f"DoT record {preset!r} seed {seed} step {step} follows step {last[0]} (line "
                f"{last[1]}) of the same run: the file holds one simulation twice, or two with "
                "the same preset and seed; give each simulation its own --seed",
            )
        self.dot_steps[name] = (step, number)
        self.add(number, name, record, checked.get(node))

    def step_record(self, number: int, record: dict[str, Any]) -> None:
        unknown = sorted(set(record) - set(STEP_RECORD_KEYS))
        if unknown:
            raise self.fail(
                number,
                f"unknown key(s) {', '.join(map(repr, unknown))} in a step record; allowed: "
                f"{', '.join(STEP_RECORD_KEYS)} ('run' or 'seed' names the run, 'own' is the "
                "guarded step's own local score, optional); run traces start with a header line",
            )
        keys = [key for key in ("run", "seed") if key in record]
        if not keys:
            raise self.fail(
                number,
                "a step without a run: add a 'run' (or 'seed') key, or put the steps of each "
                "run after its run-trace header",
            )
        if len(keys) == 2:
            raise self.fail(
                number, "a step record has both 'run' and 'seed'; name its run with one of them"
            )
        [key] = keys
        if self.run_key is None:
            self.run_key = (key, number)
        elif self.run_key[0] != key:
            first, line = self.run_key
            raise self.fail(
                number,
                f"this step record names its run by {key!r}, but line {line} named its run by "
                f"{first!r}; a file names runs one way (run 3 and seed 3 are not the same run): "
                "rename the key, or split the file",
            )
        value = record[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, str))
            or (key == "seed" and not isinstance(value, int))
        ):
            allowed = "an integer" if key == "seed" else "a string or an integer"
            raise self.fail(number, f"{key}={value!r} must be {allowed}")
        own = record.get("own")
        self.add(
            number,
            f"{key}={json.dumps(value)}",
            record,
            None if own is None else self.value(number, "own", own),
        )

    def add(self, number: int, name: str, record: dict[str, Any], own: float | None) -> None:
        fast, slow = record.get("fast"), record.get("slow")
        if fast is None or slow is None:
            if "fast" not in record or "slow" not in record:
                raise self.fail(number, "a step record needs 'fast' and 'slow' (null: not scored)")
            self.skipped += 1
            return
        step = ControlStep(self.value(number, "fast", fast), self.value(number, "slow", slow), own)
        self.runs.setdefault(name, []).append(step)


def read_control_trajectories(path: str | os.PathLike[str]) -> ControlRuns:
    """Read control runs from a JSON Lines file.

    Three layouts are accepted, and may be concatenated:

    - **run traces** (``biasbreaker simulate`` or a guarded run): a ``"kind": "header"`` line
      starts a new run; its ``"kind": "step"`` lines follow (validated as trace records, steps
      numbered from 0; its seals are skipped). A step's own score is ``scores[node]``. Every
      header must agree with the first on the machine configuration
      (:data:`HEADER_CONFIGURATION`): control runs recorded with other thresholds or another
      EWMA are not exchangeable with these, and are refused; so is a run trace that is byte for
      byte one read before (the same run twice);
    - **step records**: each line has ``fast``, ``slow``, a run key and optionally ``own`` (the
      guarded step's own local score, for node trips) and nothing else. The run key is
      ``run`` (a string or an integer) or ``seed`` (an integer), the same key throughout the
      file: a file mixing them is refused rather than merging ``run 3`` with ``seed 3``. Lines
      of different runs may interleave;
    - **DoT harness records** (``biasbreaker simulate --trajectory``, ``"schema":
      "biasbreaker.dot/1"``), one run per preset and seed; the own score is ``scores[node]``.
      A run's steps must increase: the same simulation twice (or two with the same preset and
      seed) is refused, not merged into one longer run.

    Steps whose ``fast`` or ``slow`` is ``null`` (nothing scored yet) are skipped and counted.
    Every value must be a finite number in [0, 1]. A last line without its newline that is not
    valid JSON was cut while being written: it is ignored with a
    :class:`~biasbreaker.trace.TraceTruncatedWarning` (``biasbreaker verify`` does the same).

    Args:
        path: The file.

    Returns:
        The runs and the file's digest.

    Raises:
        InputError: If the file cannot be read, a line is not a JSON object, a value is not a
            finite number in [0, 1], a step record has an unknown key or no run (or the file
            mixes ``run`` and ``seed``), a trace line is malformed or out of order, two run
            traces were recorded with different configurations or are the same run twice, or
            the
            file holds no scored step; the message names the file and line.
    """
    file = Path(path)
    data, state, truncated = _read_file(file, _Configurations())
    non_empty = {name: steps for name, steps in state.runs.items() if steps}
    if not non_empty:
        raise InputError(
            f"{file}: no scored step found; it should hold control runs (JSON "
            "Lines with fast and slow B_net)"
        )
    return ControlRuns(
        tuple(tuple(steps) for steps in non_empty.values()),
        tuple(non_empty),
        hashlib.sha256(data).hexdigest(),
        state.skipped,
        truncated,
        (file,),
    )


def read_control_runs(paths: Sequence[str | os.PathLike[str]]) -> ControlRuns:
    """Read control runs from files and folders: every ``*.jsonl`` below a folder, sorted.

    Files and folders are expanded as ``biasbreaker verify`` expands them
    (:func:`biasbreaker.verify.trace_files`: a folder gives every ``*.jsonl`` file below it,
    in sorted path order, none skipped), and each file is read as
    :func:`read_control_trajectories` reads one. The run traces among them must agree on the
    machine configuration that recorded them (:data:`HEADER_CONFIGURATION`): a mix is refused
    naming both files and what differs. A run trace read twice (byte for byte the same: a
    ``traces/`` folder given with the ``control-runs.jsonl`` made from it) is refused, naming
    both places, rather than counted twice.

    Args:
        paths: Files and folders, at least one.

    Returns:
        The runs of every file, in order. A run's name is prefixed with its file when there
        is more than one file (``o/traces/input-00001.jsonl: trace 1``). ``sha256`` is of the
        files' bytes one after another (for one file, that file's digest; for the traces of a
        ``run --control`` folder, the digest of its ``control-runs.jsonl``).

    Raises:
        InputError: A path does not exist, a folder holds no ``*.jsonl`` file, a file is not
            control runs (as :func:`read_control_trajectories`), two run traces were recorded
            with different configurations, or no file holds a scored step.
    """
    from biasbreaker.verify.traceset import trace_files

    if not paths:
        raise InputError("no control runs given; give files or folders of control runs")
    files = trace_files(paths)
    configurations = _Configurations()
    digest = hashlib.sha256()
    runs: list[tuple[ControlStep, ...]] = []
    names: list[str] = []
    skipped = 0
    truncated = False
    for file in files:
        data, state, cut = _read_file(file, configurations)
        digest.update(data)
        skipped += state.skipped
        truncated = truncated or cut
        for name, steps in state.runs.items():
            if steps:
                runs.append(tuple(steps))
                names.append(name if len(files) == 1 else f"{file}: {name}")
    if not runs:
        shown = ", ".join(map(str, files))
        raise InputError(
            f"{shown}: no scored step found; they should hold control runs (JSON Lines with "
            "fast and slow B_net)"
        )
    return ControlRuns(
        tuple(runs), tuple(names), digest.hexdigest(), skipped, truncated, tuple(files)
    )


def _read_file(file: Path, configurations: _Configurations) -> tuple[bytes, _FileRuns, bool]:
    """One file's bytes, its runs and whether its last line was cut (see the readers)."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise InputError(f"{file}: cannot read the control trajectories: {exc}") from exc
    state = _FileRuns(file, configurations)
    lines = data.split(b"\n")
    truncated = False
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:
            if number == len(lines):  # no newline after it: cut while being written
                truncated = True
                warnings.warn(
                    f"{file}:{number}: the last line is cut mid-record (the writer crashed?); "
                    f"read the {number - 1} whole lines before it",
                    TraceTruncatedWarning,
                    stacklevel=2,
                )
                break
            raise state.fail(number, f"not valid JSON: {exc}") from exc
        if not isinstance(record, dict):
            raise state.fail(number, "each line must be a JSON object")
        state.record(number, record, raw)
    state.finish_trace()
    return data, state, truncated


__all__ = [
    "HEADER_CONFIGURATION",
    "STEP_RECORD_KEYS",
    "ControlRuns",
    "read_control_runs",
    "read_control_trajectories",
]
