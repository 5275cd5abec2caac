"""The phases of a guarded run: kernels per phase, guarded and unguarded runs, calibration.

A *phase* is one pass of a graph over a list of inputs with one configuration: the control runs
recorded for calibration, the unguarded baseline, the guarded run, the fresh control runs. Each
phase gets its own kernel, loaded from the user's configuration with a few explicit settings on
top (:func:`phase_kernel`): the trace path of the phase, and the thresholds the phase runs with.

Calibration (:func:`calibrate_from_traces`) reads the control runs' traces and hands their
``(fast, slow)`` trajectories to :func:`biasbreaker.calibration.calibrate` (the report form of
:func:`~biasbreaker.calibration.calibrate_thresholds`: the same thresholds, plus the control
statistics of the calibration window). Control runs are recorded with the breaker at
``tau_enter = 1`` (:data:`RECORD_ONLY`): B_net never exceeds 1, so a recording run trips only
when fast B_net reaches 1 (every scored agent at a local score of 1: in the bbq scenario, a
replayed answer that flips on the run's first step), and its fast maximum, 1, is recorded
exactly whatever the intervention does afterwards. Until such a trip the B_net trajectory is
exactly what a guarded run would see.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasbreaker.calibration import CalibrationReport, calibrate
from biasbreaker.config import LoadedSettings, load_settings
from biasbreaker.config.advice import ConfigAdviceWarning
from biasbreaker.errors import ConfigError
from biasbreaker.kernel import Kernel
from biasbreaker.trace import Trace, read_trace
from biasbreaker.trace.sink import FILE_SINK
from biasbreaker_plugins.demo.agents import DemoKernel
from biasbreaker_plugins.demo.output import write_atomic

RECORD_ONLY: dict[str, float] = {"tau_enter": 1.0, "tau_exit": 0.7, "tau_warn": 1.0}
"""Breaker thresholds of a recording run: it records B_net and never trips (see above)."""


def nested(path: str, value: Any) -> dict[str, Any]:
    """``nested("a.b.c", 1)`` -> ``{"a": {"b": {"c": 1}}}``."""
    out: dict[str, Any] = {}
    node = out
    parts = path.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge two nested mappings, ``extra`` winning."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def defaults_where_silent(loaded: LoadedSettings, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The demo's own defaults for the dotted keys the user's configuration leaves unset.

    Args:
        loaded: The user's configuration with provenance.
        defaults: Dotted key -> value the demo prefers (``"probe.scorers": ["decision"]``). A
            key may name alternatives with ``|`` (``"propagation.fast_smoothing|
            propagation.fast_half_life"``): the value goes to the first, and only when the
            user set none of them.

    Returns:
        Nested overrides for the keys whose source is the built-in default.
    """
    out: dict[str, Any] = {}
    for keys, value in defaults.items():
        names = keys.split("|")
        if all(loaded.source_of(name) == "default" for name in names):
            out = merge(out, nested(names[0], value))
    return out


@dataclass(frozen=True)
class RunConfig:
    """Where a run's configuration comes from.

    Args:
        config_file: ``--config FILE`` or ``None``.
        cwd: Directory searched for ``biasbreaker.toml`` and ``pyproject.toml``.
        overrides: Explicit settings (``--seed``, the demo's defaults where the user is
            silent), nested like the TOML.
    """

    config_file: Path | None
    cwd: Path
    overrides: Mapping[str, Any]

    def load(self, extra: Mapping[str, Any] | None = None) -> LoadedSettings:
        """The settings with ``extra`` on top (first validation pass)."""
        return load_settings(
            self.config_file, cwd=self.cwd, overrides=merge(self.overrides, extra or {})
        )

    def kernel(self, extra: Mapping[str, Any] | None = None, *, check: bool = True) -> DemoKernel:
        """A counting kernel for one phase, validated (both passes).

        Args:
            extra: Further settings for this kernel.
            check: Run the second validation pass (:meth:`Kernel.check`); ``False`` lets the
                caller report the plugin host's failures before it.

        Raises:
            ConfigError: The configuration is invalid.
        """
        kernel = Kernel.load(
            self.config_file, cwd=self.cwd, overrides=merge(self.overrides, extra or {})
        )
        demo = DemoKernel.wrap(kernel)
        if check:
            demo.check()
        return demo


def recording(config: RunConfig) -> dict[str, Any]:
    """The settings control runs are recorded with, over the user's.

    The breaker at :data:`RECORD_ONLY`, and with ``[probe] adaptive = true`` the full probe
    (``adaptive = false``): a control run's steps are scored on every re-run of the draw, so the
    thresholds calibrated on them are the full probe's, and an adaptive guard runs with the
    same thresholds as a full one. An adaptive guarded step scores either 0 (a first stage
    with no excess stops it; at ``adaptive_stop = 0``) or its own full probe's score: the
    first stage only replaces a full probe's score by 0, so the full probe's thresholds are
    crossed no more readily (in distribution; a stopped probe moves the rotation less); control
    runs probed adaptively would calibrate on mostly first-stage zeros and set a lower
    ``tau_enter`` (the full demo: 0.1251 against 0.1876). Without adaptive probing the
    settings are the breaker's alone, so recordings keep their bytes.

    Returns:
        Nested overrides: ``{"breaker": RECORD_ONLY}``, plus ``{"probe": {"adaptive":
        False}}`` when the configuration turns adaptive probing on.
    """
    settings: dict[str, Any] = {"breaker": dict(RECORD_ONLY)}
    if config.load().settings.probe.adaptive:
        settings["probe"] = {"adaptive": False}
    return settings


@contextmanager
def deliberate() -> Iterator[None]:
    """Silence ``guard()``'s :class:`~biasbreaker.config.advice.ConfigAdviceWarning` inside.

    For the phases that set such values on purpose (a recording phase's ``tau_enter = 1``:
    its runs are recorded to calibrate, never tripped on a fast B_net); a user's own
    configuration still gets the advice from ``biasbreaker config``.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConfigAdviceWarning)
        yield


def phase_kernel(
    config: RunConfig,
    *,
    traces: Path | None,
    thresholds: Mapping[str, float] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> DemoKernel:
    """The kernel of one phase.

    Args:
        config: The run's configuration.
        traces: Folder of the phase's traces (one ``<thread>.jsonl`` each), or ``None``.
        thresholds: ``tau_enter``/``tau_exit``/``tau_warn`` to run with, or ``None`` for the
            configured ones.
        extra: Further settings for this phase.

    Returns:
        The kernel.
    """
    overrides: dict[str, Any] = dict(extra or {})
    if traces is not None:
        template = os.fspath(traces / "{thread_id}.jsonl")
        overrides = merge(overrides, {"plugin": {"langgraph": {"trace_path": template}}})
    if thresholds is not None:
        overrides = merge(overrides, {"breaker": dict(thresholds)})
    kernel = config.kernel(overrides)
    if traces is not None:
        refuse_store_sink(kernel.settings.trace.sink, traces)
    return kernel


def refuse_store_sink(sink: str, traces: Path) -> None:
    """Refuse a database trace sink for a command that writes its traces as files.

    The demo and ``run`` read their traces back from their output folder (report,
    verification, manifest), so a ``[trace] sink`` other than ``file`` is refused — by the
    commands before anything in ``--out`` is written, and again by each phase's kernel.

    Args:
        sink: The configured ``[trace] sink``.
        traces: The folder the command writes its traces to (named in the message).

    Raises:
        ConfigError: ``sink`` is not the file sink.
    """
    if sink != FILE_SINK:
        raise ConfigError(
            f"[trace] sink = {sink!r} is configured, but this command writes its traces as files "
            f"in its output folder ({traces}), where its report and verification read them: "
            "unset [trace] sink and url for it (biasbreaker.toml, or BIASBREAKER_TRACE__SINK and "
            "BIASBREAKER_TRACE__URL), or guard your own graph to record into the store "
            "(docs/langgraph.md §6)"
        )


def read_traces(folder: Path, threads: Sequence[str]) -> list[Trace]:
    """The traces of ``threads`` in ``folder`` (``<thread>.jsonl``), in that order.

    A thread whose graph never stepped the breaker has no file and is skipped.
    """
    out = []
    for thread in threads:
        path = folder / f"{thread}.jsonl"
        if path.exists():
            out.append(read_trace(path))
    return out


def calibrate_from_traces(traces: Sequence[Trace], kernel: Kernel) -> CalibrationReport:
    """Calibrate thresholds and window statistics on recorded control runs.

    Args:
        traces: One trace per control run.
        kernel: The kernel whose ``[calibration]`` settings and calibrator to use.

    Returns:
        The calibration report.

    Raises:
        ThresholdError: Too few runs for the target, or control runs that reach the top of the
            scale. (Control runs that never move calibrate to ``[calibration] zero_floor``,
            with a :class:`~biasbreaker.calibration.CalibrationWarning`.)
    """
    # each step's own score too: with node trips on, the statistic that trips a run is the
    # larger of fast B_net and the guarded step's own score, so that is what is calibrated
    runs = [
        [(r.fast, r.slow, None if r.node is None else r.scores.get(r.node)) for r in trace.records]
        for trace in traces
        if trace.records
    ]
    return calibrate(runs, kernel=kernel)


def concatenate(traces: Sequence[Trace], path: Path) -> str:
    """Write ``traces`` one after another into ``path``; return the file's sha256.

    Concatenated traces are a layout ``biasbreaker calibrate`` reads (a header starts a run).
    """
    import hashlib

    digest = hashlib.sha256()

    def write(tmp: Path) -> None:
        with tmp.open("wb") as out:
            for trace in traces:
                data = trace.path.read_bytes()[: trace.whole_bytes]
                out.write(data)
                digest.update(data)

    write_atomic(path, write)  # whole or not at all, even when the run is interrupted
    return digest.hexdigest()


def tripped(trace: Trace) -> bool:
    """Whether the breaker tripped at least once in the run (any step left NORMAL/WARNING)."""
    return any(r.state.value not in ("normal", "warning") for r in trace.records)


Progress = Callable[[int], None]
"""Advance a progress display by ``n`` finished inputs."""


__all__ = [
    "RECORD_ONLY",
    "Progress",
    "RunConfig",
    "calibrate_from_traces",
    "concatenate",
    "defaults_where_silent",
    "merge",
    "nested",
    "phase_kernel",
    "read_traces",
    "recording",
    "tripped",
]
