"""Configuration: one pydantic-settings model tree, six sources, and where each value came from.

Sources, highest precedence first (ARCHITECTURE §4):

1. explicit arguments (``load_settings(overrides=...)``, CLI flags);
2. environment variables ``BIASBREAKER_<SECTION>__<KEY>`` (nested with ``__``; values arrive
   as strings and are coerced; lists as JSON, e.g. ``'["lexical", "sentiment"]'``);
3. the file given with ``--config FILE``;
4. ``./biasbreaker.toml``;
5. the ``[tool.biasbreaker]`` table of ``./pyproject.toml``;
6. the defaults below.

Validation runs in two passes. The first (:func:`load_settings`) validates the static tree:
types, bounds, unknown keys (always errors, never ignored). The second
(:func:`resolve_selection`, run once plugins are loaded) looks every chosen implementation up
in the registry and validates each ``[plugin.<name>]`` table with the options model that
implementation declared. Every error names the source (file, environment variable or
argument), the key path, the bad value and what is allowed.

Thresholds shipped as defaults are starting points that need calibration
(``biasbreaker calibrate``), never validated constants.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import date, datetime, time
from functools import lru_cache
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from biasbreaker.errors import ConfigError, DuplicateImplementationError
from biasbreaker.propagation import (
    Ewma,
    NetworkEwma,
    half_life_from_smoothing,
    smoothing_from_half_life,
)
from biasbreaker.registry import EXTENSION_POINTS, PointName, Registry

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ENV_PREFIX = "BIASBREAKER_"
ENV_DELIMITER = "__"
CONFIG_FILE_NAME = "biasbreaker.toml"
PYPROJECT_TABLE = ("tool", "biasbreaker")
NON_SETTINGS_ENV = frozenset(
    {"BIASBREAKER_DISABLE_PLUGINS", "BIASBREAKER_TRACE_PLUGINS", "BIASBREAKER_SIGNING_KEY_FILE"}
)
"""``BIASBREAKER_*`` variables that are not settings (read by the plugin host, and by
:mod:`biasbreaker.trace.signing`: the signing key is a file, never a setting)."""

DEFAULT_SOURCE = "default"

SECRET_KEY = re.compile(
    r"(?:.*[_-])?(?:api[_-]?key|token|secret|password|passwd|credentials?)", re.IGNORECASE
)
"""Option names whose values ``biasbreaker config`` never prints."""
REDACTED = "<redacted>"


def plugin_table_name(name: str) -> str:
    """The canonical ``[plugin.<name>]`` key: implementation names are lower-kebab."""
    return name.replace("_", "-").lower()


def _canonical_path(key: str) -> str:
    parts = key.split(".")
    if len(parts) >= 2 and parts[0] == "plugin":
        parts[1] = plugin_table_name(parts[1])
    return ".".join(parts)


class Section(BaseModel):
    """Base of every configuration section: unknown keys and non-finite numbers are errors."""

    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)


class ProbeSettings(Section):
    """``[probe]``: counterfactual probing of guarded steps (M1).

    The local score of a probed step is ``clip(D_cf - D_same, 0, 1)`` per scorer: the mean
    divergence of ``k`` counterfactual outputs minus that of ``r`` same-group resamples (the
    noise floor), combined over scorers (``combine``). See ``docs/detection.md``.
    """

    k: int = Field(4, ge=1, le=64, description="Counterfactual variants per probed step.")
    r: int = Field(
        2,
        ge=0,
        le=64,
        description="Same-group resamples per probed step (the noise floor); 0 only for "
        "deterministic steps.",
    )
    probe_rate: float = Field(
        1.0, ge=0.0, le=1.0, description="Share of guarded steps probed, sampled from the seed."
    )
    scorers: list[str] = Field(
        default_factory=lambda: ["lexical"],
        min_length=1,
        description="Scorer implementations (`scorer` extension point) whose divergences "
        "make the local score.",
    )
    combine: Literal["max", "mean"] = Field(
        "max",
        description="How several scorers' local scores combine: the largest (fail-safe) or "
        "the mean.",
    )
    axes: list[str] = Field(
        default_factory=lambda: [
            "gender",
            "race",
            "age",
            "religion",
            "sexual-orientation",
            "disability",
            "nationality",
        ],
        min_length=1,
        description="Demographic axes swapped, in the order variants are drawn; an axis added "
        "by a term file must be listed here to be used.",
    )
    term_files: list[Path] = Field(
        default_factory=list,
        description="Extra term files (JSON, schema in biasbreaker.probe.terms) extending an "
        "axis, adding one, or adding person words.",
    )
    extra_terms: dict[str, list[dict[str, str]]] = Field(
        default_factory=dict,
        description="Inline extra rows per axis, e.g. {gender = [{male = 'knight', "
        "female = 'dame'}]}.",
    )
    groups: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Restrict an axis to some of its groups, e.g. {religion = ['christian', "
        "'muslim', 'jewish']}; the other groups' words are neither detected nor written.",
    )
    names: bool = Field(
        True, description="Swap first and full names by gender and race (shipped name lists)."
    )
    bootstrap: int = Field(
        1000,
        ge=0,
        le=100_000,
        description="Bootstrap replicates for the local score's interval (0 disables it).",
    )
    confidence: float = Field(
        0.95, gt=0.0, lt=1.0, description="Two-sided level of the bootstrap interval."
    )
    max_concurrency: int = Field(
        8, ge=1, le=1024, description="Step calls of one probe in flight at once."
    )


class PropagationSettings(Section):
    """``[propagation]``: Katz-weighted network score and its EWMAs (M2).

    Each EWMA is configured by a half-life in steps or by a smoothing factor in (0, 1), related
    by ``a = 1 - 2^(-1/h)``. A smoothing factor above 0 wins: the half-life is then derived from
    it, and an explicitly set half-life that disagrees is an error. (TOML has no null, so 0
    means "not set".) See ``docs/propagation.md``.
    """

    attenuation: float = Field(
        0.85,
        gt=0.0,
        lt=1.0,
        description="Katz attenuation c in (0, 1) as a fraction of 1/spectral radius: "
        "alpha = c/rho(A) (c/w_max on a graph without cycles).",
    )
    fast_half_life: float = Field(
        2.0,
        gt=0.0,
        le=10_000,
        description="Half-life of the fast EWMA of B_net (spikes), in steps, (0, 10000].",
    )
    fast_smoothing: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Smoothing factor of the fast EWMA in (0, 1) instead of fast_half_life; "
        "0 = derive it from fast_half_life.",
    )
    slow_half_life: float = Field(
        20.0,
        gt=0.0,
        le=10_000,
        description="Half-life of the slow EWMA of B_net (drift), in steps, (0, 10000].",
    )
    slow_smoothing: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Smoothing factor of the slow EWMA in (0, 1) instead of slow_half_life; "
        "0 = derive it from slow_half_life.",
    )

    @model_validator(mode="after")
    def _one_form_per_scale(self) -> PropagationSettings:
        for scale in ("fast", "slow"):
            h_key, a_key = f"{scale}_half_life", f"{scale}_smoothing"
            a: float = getattr(self, a_key)
            if a == 0.0:
                continue
            derived = half_life_from_smoothing(a)
            given: float = getattr(self, h_key)
            if h_key in self.model_fields_set and abs(given - derived) > 1e-9 * max(1.0, derived):
                raise ValueError(
                    f"{h_key}={given} and {a_key}={a} (half-life {derived:.6g} steps) disagree; "
                    "give one of them"
                )
            setattr(self, h_key, derived)
        if self.smoothing("fast") <= self.smoothing("slow"):
            raise ValueError(
                f"the fast EWMA (smoothing {self.smoothing('fast'):.4g}) must react faster than "
                f"the slow one (smoothing {self.smoothing('slow'):.4g}): shorten fast_half_life "
                "or lengthen slow_half_life"
            )
        return self

    def smoothing(self, scale: Literal["fast", "slow"]) -> float:
        """The effective smoothing factor of the ``"fast"`` or ``"slow"`` EWMA, in (0, 1)."""
        a: float = getattr(self, f"{scale}_smoothing")
        if a > 0.0:
            return a
        h: float = getattr(self, f"{scale}_half_life")
        return smoothing_from_half_life(h)

    def network_ewma(self) -> NetworkEwma:
        """A fresh fast/slow EWMA state with these settings."""
        return NetworkEwma(Ewma(self.smoothing("fast")), Ewma(self.smoothing("slow")))


class BreakerSettings(Section):
    """``[breaker]``: hysteresis thresholds and the control machine (M3).

    The defaults are starting points that need calibration on the deployment's own control
    runs (``biasbreaker calibrate``); B_net's scale depends on the graph and the scorers.
    """

    tau_enter: float = Field(
        0.30,
        gt=0.0,
        le=1.0,
        description="Fast B_net (in [0, 1]) at or above which the breaker trips. A starting "
        "point: calibrate it.",
    )
    tau_exit: float = Field(
        0.20,
        gt=0.0,
        le=1.0,
        description="Fast B_net (in [0, 1]) below which a recovery may complete; below "
        "tau_enter. A starting point: calibrate it.",
    )
    tau_warn: float = Field(
        0.15,
        gt=0.0,
        le=1.0,
        description="Slow B_net (in [0, 1]) at or above which the state is WARNING. A "
        "starting point: calibrate it.",
    )
    kappa: float = Field(
        0.05, gt=0.0, le=1.0, description="Width of the sigmoid mixing ratio, in B_net units."
    )
    cooldown_steps: int = Field(
        3,
        ge=0,
        le=10_000,
        description="Steps spent in RECOVERY before NORMAL is possible (at least one is "
        "always spent).",
    )
    max_retries: int = Field(
        2,
        ge=1,
        le=100,
        description="Interventions an episode may make; when the last one fails its re-check "
        "the machine escalates (ESCALATED, terminal).",
    )
    probation: Literal["half-open", "hold"] = Field(
        "half-open",
        description="What RECOVERY does with new outputs after a repair passed its re-check: "
        "'half-open' lets an output through when its own local score is below tau_exit and "
        "intervenes on it otherwise (guarded pipelines need this); 'hold' holds every output "
        "until the machine is NORMAL again (a stream whose held outputs are dropped).",
    )
    node_trip: bool = Field(
        True,
        description="Also trip when the guarded step's own local score (in [0, 1]) reaches "
        "tau_enter, not only when fast B_net does: B_net averages over the nodes, so one "
        "biased node among clean ones may never move it to tau_enter (guarded pipelines need "
        "this); false: only fast B_net trips (the seed's literal machine). Calibrate with the "
        "same setting.",
    )
    history_steps: int = Field(
        8,
        ge=1,
        le=10_000,
        description="Per-node local-score history kept for the router, in steps.",
    )

    @model_validator(mode="after")
    def _dead_band(self) -> BreakerSettings:
        if not self.tau_enter > self.tau_exit:
            raise ValueError(
                f"tau_enter={self.tau_enter} must be greater than tau_exit={self.tau_exit} "
                "(the gap is the hysteresis dead-band)"
            )
        return self


class ControlWindowSettings(Section):
    """``[calibration.control]``: fast-B_net statistics of the control runs (the window's bands).

    Written by ``biasbreaker calibrate``. The calibration window counts observations above
    ``mean + 3·std`` and ``mean + 5·std``.
    """

    mean: float = Field(ge=0.0, le=1.0, description="Mean fast B_net over the control steps.")
    std: float = Field(
        gt=0.0, le=1.0, description="Standard deviation of fast B_net over the control steps."
    )
    n_steps: int = Field(ge=2, description="Control steps the statistics come from (count).")


class CalibrationSettings(Section):
    """``[calibration]``: threshold calibration and the online calibration window."""

    calibrator: str = Field(
        "percentile", description="Calibrator implementation (`calibrator` extension point)."
    )
    target_false_halt_rate: float = Field(
        0.05,
        gt=0.0,
        lt=1.0,
        description="Target share of control runs whose fast B_net ever reaches tau_enter.",
    )
    exit_ratio: float = Field(0.7, ge=0.6, le=0.8, description="tau_exit = exit_ratio * tau_enter.")
    warn_ratio: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description="tau_warn = warn_ratio * the slow-scale bound at the same target rate "
        "(1: drift warnings on control runs at most as often as the target).",
    )
    max_history: int = Field(32, ge=1, le=100_000, description="Calibration window W, in steps.")
    control: ControlWindowSettings | None = Field(
        None,
        description="Control statistics for the calibration window; without them the machine "
        "runs without a window (RECOVERY -> NORMAL does not wait for a clean window).",
    )
    calibrated_on: date | None = Field(
        None, description="Date the thresholds were calibrated (set by `biasbreaker calibrate`)."
    )
    source_sha256: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 of the control trajectories the thresholds were calibrated on.",
    )


class InterventionSettings(Section):
    """``[intervention]``: which repair parts run (M4)."""

    router: str = Field("heuristic", description="Router (`classify_route` extension point).")
    skeptics: list[str] = Field(
        default_factory=lambda: ["empirical-auditor", "devils-advocate", "diversity-champion"],
        description="Skeptic panel (`skeptic` extension point), at least two distinct kinds.",
    )
    aggregator: str = Field(
        "uniform", description="Verdict aggregator (`aggregator` extension point)."
    )
    diagnoser: str = Field("llm", description="MADERA diagnoser (`diagnoser` extension point).")
    retriever: str = Field("keyword", description="MADERA retriever (`retriever` extension point).")
    editor: str = Field("llm", description="MADERA editor (`editor` extension point).")
    max_rewrites: int = Field(
        3, ge=1, le=50, description="MADERA rewrite rounds per intervention attempt."
    )
    evidence_top_k: int = Field(
        3, ge=1, le=100, description="Counter-evidence items MADERA's editor gets per round."
    )
    skeptic_timeout_s: float = Field(
        30.0,
        gt=0.0,
        le=3600.0,
        description="Time-out of each skeptic's review, in seconds; a late skeptic fails.",
    )
    overconfidence: float = Field(
        0.9,
        gt=0.5,
        le=1.0,
        description="Certainty at or above which an evidence-free verdict is overconfident "
        "(the only ground on which an aggregator may prune it), in (0.5, 1].",
    )

    @field_validator("skeptics")
    @classmethod
    def _panel(cls, names: list[str]) -> list[str]:
        if len(names) < 2:
            raise ValueError(
                f"a skeptic panel needs at least 2 skeptics of distinct kinds, got {names!r}; "
                'e.g. ["empirical-auditor", "devils-advocate", "diversity-champion"]'
            )
        if len(set(names)) != len(names):
            raise ValueError(f"skeptics {names!r} lists a skeptic twice; list each once")
        return names


class AdapterSettings(Section):
    """``[adapter]``: the agent-framework adapter."""

    framework: str = Field(
        "langgraph", description="Framework adapter (`framework_adapter` extension point)."
    )


class LLMSettings(Section):
    """``[llm]``: the LLM client every LLM-backed part uses."""

    client: str = Field(
        "fake",
        description="LLM client (`llm_client` extension point); the default `fake` is the "
        "seeded, simulated client (no model, no network).",
    )


class TraceSettings(Section):
    """``[trace]``: the run trace (JSON Lines, one record per guarded step)."""

    fsync: bool = Field(
        False, description="fsync the trace after every record (slower, survives power loss)."
    )


class DemoSettings(Section):
    """``[demo]``: the reference pipelines of ``biasbreaker demo`` (see ``docs/demo.md``).

    The demo's agents all use ``[llm] client``. With the simulated ``fake`` client, and only
    then, the biased agent (the hiring ranker) gets its own fake options (``fake_bias``,
    ``fake_preset``) and every other agent runs at dial 0.
    """

    postings: int = Field(
        240,
        ge=8,
        le=100_000,
        description="Hiring postings (count) run through the pipeline, each unguarded and guarded.",
    )
    control_runs: int = Field(
        40,
        ge=2,
        le=100_000,
        description="Control postings (count; every agent at dial 0) recorded to calibrate "
        "tau_enter/tau_exit/tau_warn; the per-run target needs at least (1 - rate)/rate.",
    )
    fresh_control_runs: int = Field(
        40,
        ge=1,
        le=100_000,
        description="Further control postings (count; other postings, other fake seed) on "
        "which the calibrated breaker's false-halt rate is measured.",
    )
    shortlist: int = Field(
        2,
        ge=1,
        le=7,
        description="Candidates (count) the decider shortlists from the top of the ranking.",
    )
    bbq_items: int = Field(
        240,
        ge=2,
        le=2064,
        description="BBQ items (count) the question-answering panel answers in the bbq "
        "scenario, half Religion, half Sexual orientation.",
    )
    bbq_control_runs: int = Field(
        400,
        ge=2,
        le=100_000,
        description="Control runs (count) of the bbq scenario, for calibration and again, "
        "fresh, after it: the panel on disambiguated items, which rarely moves, so it needs "
        "more runs than hiring.",
    )
    workers: int = Field(
        0,
        ge=0,
        le=64,
        description="Processes that run postings in parallel (count; 0 = one per CPU core, at "
        "most 4; 1 = no extra process). The outputs are the same bytes for any count.",
    )
    fake_bias: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="Bias dial in [0, 1] of the demo's biased agent (the ranker) when [llm] "
        "client is the simulated fake; every other agent runs at dial 0.",
    )
    fake_preset: str = Field(
        "bloomberg-gpt35",
        pattern=r"^bloomberg-gpt(35|4)$",
        description="Measured preference of the biased agent (fake only): 'bloomberg-gpt35' "
        "or 'bloomberg-gpt4'; the posting's job is appended (bloomberg-gpt35-retail).",
    )


@dataclass(frozen=True)
class _LoadContext:
    """The layers of one :func:`load_settings` call, read once.

    Args:
        env: The environment's settings, nested and decoded (see :func:`_decode_env`).
        files: The file layers, highest precedence first, as (label, data).
    """

    env: dict[str, Any]
    files: tuple[tuple[str, dict[str, Any]], ...]


_LOAD_CONTEXT: ContextVar[_LoadContext | None] = ContextVar("_LOAD_CONTEXT", default=None)


class Settings(BaseSettings):
    """The whole configuration tree.

    Build it with :func:`load_settings` (which records where each value came from); calling
    ``Settings()`` directly reads the environment, ``./biasbreaker.toml`` and
    ``./pyproject.toml`` of the current directory.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_DELIMITER,
        extra="forbid",
        validate_default=True,
    )

    seed: int = Field(0, ge=0, description="Seed of every random choice in a run.")
    probe: ProbeSettings = Field(default_factory=ProbeSettings)
    propagation: PropagationSettings = Field(default_factory=PropagationSettings)
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    calibration: CalibrationSettings = Field(default_factory=CalibrationSettings)
    intervention: InterventionSettings = Field(default_factory=InterventionSettings)
    adapter: AdapterSettings = Field(default_factory=AdapterSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    trace: TraceSettings = Field(default_factory=TraceSettings)
    demo: DemoSettings = Field(default_factory=DemoSettings)
    plugin: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Options per implementation name, validated by that plugin's own model.",
    )

    @field_validator("plugin", mode="before")
    @classmethod
    def _kebab_plugin_names(cls, value: Any) -> Any:
        """Accept ``plugin.openai_compatible`` for ``plugin.openai-compatible``.

        Implementation names are lower-kebab, so an underscore in a table name can only mean a
        hyphen — the only spelling a shell can export (``BIASBREAKER_PLUGIN__OPENAI_COMPATIBLE__
        MODEL``). :func:`load_settings` renames the tables of each source before the sources
        merge (so they merge key by key); this covers ``Settings(...)`` built directly. Two
        spellings of one name in one mapping are an error.
        """
        if not isinstance(value, Mapping):
            return value
        out: dict[Any, Any] = {}
        spelled: dict[Any, Any] = {}
        for key, table in value.items():
            name = plugin_table_name(key) if isinstance(key, str) else key
            if name in out:
                raise ValueError(
                    f"[plugin.{name}] is given twice (as {spelled[name]!r} and {key!r}); keep one"
                )
            out[name], spelled[name] = table, key
        return out

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Order the sources: arguments, environment, --config, ./biasbreaker.toml, pyproject.

        The environment is read by :func:`_env_layer` and decoded by :func:`_decode_env` rather
        than by pydantic-settings' own source, so a malformed value is a :class:`ConfigError`
        naming the variable, and lists may be written comma-separated.
        """
        ctx = _LOAD_CONTEXT.get()
        if ctx is None:
            ctx = _LoadContext(_decode_env(_env_layer()), tuple(_file_layers(None, Path.cwd())))
        files = [InitSettingsSource(settings_cls, init_kwargs=data) for _, data in ctx.files]
        env = InitSettingsSource(settings_cls, init_kwargs=ctx.env)
        return (init_settings, env, *files)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path}: invalid TOML: {exc}. Fix the syntax at that line (strings need quotes, "
            "tables look like [breaker])."
        ) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path}: {exc}") from exc


def _file_layers(config_file: Path | None, cwd: Path) -> list[tuple[str, dict[str, Any]]]:
    """The file sources, highest precedence first, as (label, data)."""
    layers: list[tuple[str, dict[str, Any]]] = []
    if config_file is not None:
        if not config_file.is_file():
            raise ConfigError(f"--config {config_file}: no such file; pass the path of a TOML file")
        layers.append((str(config_file), _read_toml(config_file)))
    local = cwd / CONFIG_FILE_NAME
    if local.is_file() and (config_file is None or local.resolve() != config_file.resolve()):
        layers.append((CONFIG_FILE_NAME, _read_toml(local)))
    pyproject = cwd / "pyproject.toml"
    if pyproject.is_file():
        data: Any = _read_toml(pyproject)
        for key in PYPROJECT_TABLE:
            data = data.get(key, {}) if isinstance(data, dict) else {}
        if data:
            if not isinstance(data, dict):
                raise ConfigError(
                    f"pyproject.toml: [tool.biasbreaker] must be a table, got {data!r}"
                )
            layers.append(("pyproject.toml [tool.biasbreaker]", data))
    return [(label, _kebab_plugin_tables(data, label)) for label, data in layers]


def _leaves(data: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    for key, value in data.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, path)
        else:
            yield ".".join(path), value


def _env_layer(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The settings found in the environment, nested by ``__``, values as raw strings.

    See :func:`_scan_env`, which also says which variable set each value.
    """
    return _scan_env(environ)[0]


def _scan_env(
    environ: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """The environment's settings and the variable that set each of them.

    Names are matched case-insensitively; a plugin name may be written with ``_`` or ``-``
    for its hyphens (``BIASBREAKER_PLUGIN__OPENAI_COMPATIBLE__MODEL`` and
    ``BIASBREAKER_PLUGIN__OPENAI-COMPATIBLE__MODEL`` both set ``plugin.openai-compatible.model``),
    so the table is keyed by its canonical lower-kebab name and merges key by key with the same
    table from a file.

    Returns:
        The settings nested by ``__`` (values as raw strings), and dotted canonical key path →
        the name of the variable that set it.

    Raises:
        ConfigError: A variable sets a key below another variable's value
            (``BIASBREAKER_PROBE='{...}'`` together with ``BIASBREAKER_PROBE__K=3``), or two
            variables set the same key (two spellings or letter cases of one name).
    """
    env = os.environ if environ is None else environ
    nested: dict[str, Any] = {}
    owner: dict[tuple[str, ...], str] = {}
    found = [
        (var, _canonical_parts(var[len(ENV_PREFIX) :].lower().split(ENV_DELIMITER)), raw)
        for var, raw in env.items()
        if var.upper().startswith(ENV_PREFIX) and var.upper() not in NON_SETTINGS_ENV
    ]
    for var, parts, raw in sorted(found, key=lambda f: (len(f[1]), f[1], f[0])):
        node = nested
        for depth, part in enumerate(parts[:-1], 1):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(
                    f"environment variables {owner[parts[:depth]]} and {var} both set "
                    f"{'.'.join(parts[:depth])}; keep one of them"
                )
            node = child
        if parts in owner:
            raise ConfigError(
                f"environment variables {owner[parts]} and {var} both set {'.'.join(parts)} "
                f"(two spellings of one name); keep one of them, e.g. {_env_var('.'.join(parts))}"
            )
        node[parts[-1]] = raw
        owner[parts] = var
    return nested, {".".join(parts): var for parts, var in owner.items()}


def _canonical_parts(parts: Sequence[str]) -> tuple[str, ...]:
    """A key path with its plugin table name (``plugin.<name>...``) in lower-kebab form."""
    out = list(parts)
    if len(out) >= 2 and out[0] == "plugin":
        out[1] = plugin_table_name(out[1])
    return tuple(out)


def _kebab_plugin_tables(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``data`` with its ``[plugin.<name>]`` tables keyed by their lower-kebab names.

    Done per source before the sources merge, so ``[plugin.openai_compatible]`` in one source
    and ``[plugin.openai-compatible]`` in another are one table, merged key by key.

    Raises:
        ConfigError: One source gives a table under two spellings of one name.
    """
    plugin = data.get("plugin")
    if not isinstance(plugin, Mapping):
        return dict(data)
    tables: dict[Any, Any] = {}
    spelled: dict[Any, Any] = {}
    for key, table in plugin.items():
        name = plugin_table_name(key) if isinstance(key, str) else key
        if name in tables:
            raise ConfigError(
                f"{where}: [plugin.{name}] is given twice (as {spelled[name]!r} and {key!r}); "
                "keep one"
            )
        tables[name], spelled[name] = table, key
    return {**data, "plugin": tables}


def _env_var(path: str) -> str:
    """The variable that sets dotted ``path``, as documented (hyphens written ``_``)."""
    return ENV_PREFIX + ENV_DELIMITER.join(p.upper().replace("-", "_") for p in path.split("."))


def _members(annotation: Any) -> tuple[Any, ...]:
    """The members of a union (``X | None`` → ``(X,)``), or ``(annotation,)``."""
    if get_origin(annotation) in (Union, UnionType):
        return tuple(a for a in get_args(annotation) if a is not type(None))
    return (annotation,)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model ``annotation`` is (or is optionally), else ``None``."""
    for member in _members(annotation):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return member
    return None


def _child_annotation(annotation: Any, key: str) -> Any:
    """The annotation of ``key`` inside a value of type ``annotation``; ``None`` if unknown."""
    model = _model_in(annotation)
    if model is not None:
        info = model.model_fields.get(key)
        return info.annotation if info is not None else None
    for member in _members(annotation):
        if get_origin(member) in (dict, Mapping) and len(get_args(member)) == 2:
            return get_args(member)[1]
    return None


_SEQUENCES = (list, tuple, set, frozenset, Sequence)
_SCALARS = (str, int, float, Path)


def _decode_env_value(annotation: Any, raw: str, path: str, var: str | None = None) -> Any:
    """Decode one environment string for a field of type ``annotation``.

    Scalars stay strings (pydantic coerces them). A list of scalars is a JSON list or
    comma-separated values (``lexical,sentiment``); a table or a list of tables is JSON.
    ``var`` is the variable that set it, named in errors (default: the documented spelling).

    Raises:
        ConfigError: The value is not the JSON the field needs; the message names the
            variable, the value and the expected form.
    """
    kinds = _members(annotation)
    sequence = next((k for k in kinds if get_origin(k) in _SEQUENCES), None)
    table = next(
        (k for k in kinds if get_origin(k) in (dict, Mapping) or _model_in(k) is not None),
        None,
    )
    var = var or _env_var(path)
    if sequence is not None:
        args = get_args(sequence)
        scalar_items = bool(args) and all(
            a is Ellipsis or (isinstance(a, type) and issubclass(a, _SCALARS)) for a in args
        )
        text = raw.strip()
        if scalar_items and not text.startswith("["):
            return [part.strip() for part in text.split(",") if part.strip()]
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            form = "a JSON list or comma-separated values" if scalar_items else "a JSON list"
            raise ConfigError(
                f"{var}={raw!r} ({path}): not valid JSON ({exc.msg} at column {exc.colno}); "
                f"{path} is a list: write {form}, e.g. "
                + (f"{var}=lexical,sentiment or " if scalar_items else "")
                + f'{var}=\'["lexical", "sentiment"]\''
            ) from exc
        if not isinstance(value, list):
            raise ConfigError(f"{var}={raw!r} ({path}): expected a JSON list, got {value!r}")
        return value
    if table is not None:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{var}={raw!r} ({path}): not valid JSON ({exc.msg} at column {exc.colno}); "
                f'{path} is a table: write a JSON object such as \'{{"key": "value"}}\', '
                f"or set its keys one by one ({var}{ENV_DELIMITER}KEY=...)"
            ) from exc
        if not isinstance(value, dict):
            raise ConfigError(f"{var}={raw!r} ({path}): expected a JSON object, got {value!r}")
        return value
    return raw


def _decode_env(
    raw: Mapping[str, Any], annotation: Any = None, prefix: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Decode the raw environment layer against the settings tree (lists, tables)."""
    here = annotation if prefix else Settings
    out: dict[str, Any] = {}
    for key, value in raw.items():
        child = _child_annotation(here, key)
        path = (*prefix, key)
        if isinstance(value, Mapping):
            out[key] = _decode_env(value, child, path)
        elif child is None:
            out[key] = value
        else:
            out[key] = _decode_env_value(child, value, ".".join(path))
    return out


def _toml(value: Any) -> str:
    """A value as TOML-like text for messages: ``true``, ``"0.4"``, ``[1, 2]``."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:
        return repr(value)


_KIND_NAMES: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "a table"),
)


def _kind(value: Any) -> str:
    for kind, label in _KIND_NAMES:
        if isinstance(value, kind):
            return label
    return f"a {type(value).__name__}"


def _expected(annotation: Any) -> str:
    """Plain words for the type a configuration field expects."""
    members = _members(annotation)
    if len(members) > 1:
        return " or ".join(_expected(m) for m in members)
    ann = members[0]
    origin = get_origin(ann)
    if origin is Literal:
        return "one of " + ", ".join(_toml(a) for a in get_args(ann))
    if origin in _SEQUENCES:
        args = get_args(ann)
        return (
            f"a list of {_expected(args[0]).removeprefix('a ').removeprefix('an ')}s"
            if args
            else "a list"
        )
    if origin in (dict, Mapping):
        return "a table"
    if ann is bool:
        return "true or false"
    if ann is int:
        return "an integer"
    if ann is float:
        return "a number"
    if ann is str:
        return "a string"
    if ann is Path:
        return "a string (a path)"
    if ann is date:
        return "a date (YYYY-MM-DD)"
    return getattr(ann, "__name__", str(ann))


@lru_cache(maxsize=256)
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


def _json_default(value: Any) -> Any:
    if isinstance(value, (date, datetime, time)):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not a TOML value")


def _strict_type_error(annotation: Any, value: Any) -> str | None:
    """Why ``value`` (from a TOML file) does not have the type ``annotation``, or ``None``.

    The check is pydantic's strict mode on the value as JSON would carry it: a number is not a
    string, a boolean is not a number, an integer field takes no float; nothing is converted.
    Bounds and cross-field rules are checked afterwards by the ordinary validation.
    """
    try:
        text = json.dumps(value, default=_json_default)
        _adapter(annotation).validate_json(text, strict=True)
    except ValidationError as exc:
        details = []
        for err in exc.errors():
            if not err["type"].endswith("_type"):
                continue  # a right-typed value out of bounds: the ordinary validation says so
            at = ".".join(str(p) for p in err["loc"])
            details.append(f"at {at}: {err['msg']}" if at else err["msg"])
        if not details:
            return None
        got = "" if len(details) > 1 or "at " in details[0] else f", got {_kind(value)}"
        where = f" ({'; '.join(details)})" if got == "" else ""
        return (
            f"expected {_expected(annotation)}{got}{where}; values in a file are not converted "
            "(write numbers without quotes, true/false only for yes/no options)"
        )
    except (TypeError, ValueError, RecursionError):
        return None
    return None


def _typed_values(
    data: Mapping[str, Any], annotation: Any, prefix: tuple[str, ...]
) -> Iterator[tuple[str, Any, Any]]:
    """(dotted path, value, annotation) for every field value in ``data``, by model field.

    Descends into nested models key by key (a file may give only some keys of a table);
    keys that name no field are skipped (the ordinary validation reports them).
    """
    for key, value in data.items():
        child = _child_annotation(annotation, str(key))
        path = (*prefix, str(key))
        if child is None:
            continue
        if _model_in(child) is not None and isinstance(value, Mapping):
            yield from _typed_values(value, child, path)
        else:
            yield ".".join(path), value, child


def _file_type_problems(
    data: Mapping[str, Any],
    annotation: Any,
    prefix: tuple[str, ...],
    provenance: Mapping[str, str],
    files: Iterable[str],
    label: str | None = None,
) -> list[tuple[str, str]]:
    """Type errors of values that came from a file: (dotted path, message line).

    Args:
        data: The values (a file's layer, or a merged plugin table).
        annotation: The type of ``data`` (a model class).
        prefix: The dotted path of ``data``.
        provenance: Where every leaf came from.
        files: The labels of file sources.
        label: Only check values whose source is this label (``None``: any file).
    """
    file_labels = set(files)
    problems = []
    for path, value, ann in _typed_values(data, annotation, prefix):
        key = _canonical_path(path)
        source = _source_for(key, provenance)
        if source not in file_labels or (label is not None and source != label):
            continue
        error = _strict_type_error(ann, value)
        if error is not None:
            problems.append((key, f"{key} = {_toml(value)} ({source}): {error}"))
    return problems


@dataclass(frozen=True)
class LoadedSettings:
    """Validated settings and the source of every value.

    Args:
        settings: The validated tree.
        provenance: Dotted key path → source label, for every value not left at its default
            (``"argument"``, ``"env BIASBREAKER_…"``, a file name, or
            ``"pyproject.toml [tool.biasbreaker]"``).
        files: The labels of the file sources that were read, highest precedence first; values
            from them must have their option's type (nothing is converted).
    """

    settings: Settings
    provenance: Mapping[str, str] = field(default_factory=dict)
    files: tuple[str, ...] = ()

    def source_of(self, path: str) -> str:
        """Where the value at dotted ``path`` came from (``"default"`` if nowhere)."""
        return _source_for(path, self.provenance)

    def rows(
        self, typed: Mapping[str, Mapping[str, Any]] | None = None
    ) -> list[tuple[str, Any, str]]:
        """Every effective leaf value as (dotted key, value, source), sorted by key.

        Args:
            typed: Plugin name → option values as its plugin's options model validated them
                (:func:`typed_plugin_tables`); they replace the raw values of those keys, so an
                option set from the environment shows as ``6``, not ``"6"``.
        """
        dumped = self.settings.model_dump(mode="json")
        for name, values in (typed or {}).items():
            table = dumped.get("plugin", {}).get(name)
            if isinstance(table, dict):
                table.update({k: v for k, v in values.items() if k in table})
        rows = []
        for key, value in _leaves(dumped):
            if key == "plugin" and value == {}:
                continue
            rows.append((key, value, self.source_of(key)))
        shown = {r[0] for r in rows}
        for key, source in self.provenance.items():
            # a plugin option the settings do not model (its plugin validates it); a table set
            # as a whole (e.g. from one environment variable) is shown by its leaves already
            if (
                key.startswith("plugin.")
                and key not in shown
                and not any(k.startswith(f"{key}.") for k in shown)
            ):
                rows.append((key, _lookup(dumped, key), source))
        return sorted(
            ((k, _redact(k, v), s) for k, v, s in rows),
            key=lambda r: r[0],
        )


def _redact(key: str, value: Any) -> Any:
    """Hide the value of any option whose name looks like a secret (``api_key``, ``token``…)."""
    if SECRET_KEY.fullmatch(key.rpartition(".")[2]) and value not in (None, ""):
        return REDACTED
    if isinstance(value, Mapping):
        return {k: _redact(f"{key}.{k}", v) for k, v in value.items()}
    return value


def _lookup(data: Mapping[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    *,
    cwd: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> LoadedSettings:
    """Load and validate the configuration from all six sources (first pass).

    Args:
        config_file: The ``--config FILE`` path, or ``None``.
        cwd: Directory searched for ``biasbreaker.toml`` and ``pyproject.toml``; default ``.``.
        overrides: Explicit arguments, nested like the TOML (``{"breaker": {"tau_enter": 0.4}}``);
            they win over every other source.

    Returns:
        The settings with the source of every value.

    Raises:
        ConfigError: On a TOML syntax error (with line and column), an unknown key, an unknown
            ``BIASBREAKER_*`` environment variable, or a value out of range; the message names
            the source, key path, value and what is allowed.
    """
    files = _file_layers(
        Path(config_file) if config_file is not None else None,
        Path(cwd) if cwd is not None else Path.cwd(),
    )
    args = _kebab_plugin_tables(overrides or {}, "argument")
    env, variables = _scan_env()
    layers: list[tuple[str, dict[str, Any]]] = [("argument", args), ("env", env), *files]
    provenance: dict[str, str] = {}
    for label, data in reversed(layers):
        for key, _ in _leaves(data):
            source = f"env {variables[key]}" if label == "env" else label
            provenance[_canonical_path(key)] = source
    _check_env_names(env, variables)
    ctx = _LoadContext(env=_decode_env(env), files=tuple(files))
    labels = tuple(label for label, _ in files)
    typed: list[tuple[str, str]] = []
    for label, data in files:
        typed += _file_type_problems(data, Settings, (), provenance, labels, label)
    token = _LOAD_CONTEXT.set(ctx)
    try:
        settings = Settings(**args)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, provenance, typed)) from exc
    except SettingsError as exc:
        raise ConfigError(f"cannot read the configuration: {exc}") from exc
    finally:
        _LOAD_CONTEXT.reset(token)
    if typed:
        raise ConfigError(_describe(None, provenance, typed))
    return LoadedSettings(settings, provenance, labels)


def _check_env_names(env: Mapping[str, Any], variables: Mapping[str, str]) -> None:
    known = set(Settings.model_fields)
    for key in env:
        if key not in known:
            var = min(
                (v for k, v in variables.items() if k == key or k.startswith(key + ".")),
                default=_env_var(key),
            )
            raise ConfigError(
                f"unknown environment variable {var}: no setting {key!r}; "
                f"settings are {', '.join(sorted(known))} (nest keys with '__', e.g. "
                "BIASBREAKER_BREAKER__TAU_ENTER)"
            )


def _allowed_keys(path: tuple[str | int, ...]) -> list[str]:
    model: type[BaseModel] | None = Settings
    for part in path[:-1]:
        if model is None or not isinstance(part, str) or part not in model.model_fields:
            return []
        annotation = model.model_fields[part].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        else:
            model = None
    return sorted(model.model_fields) if model is not None else []


def _describe(
    exc: ValidationError | None,
    provenance: Mapping[str, str],
    typed: Sequence[tuple[str, str]] = (),
) -> str:
    """One message for every problem: file type errors first, then pydantic's, once per key."""
    lines = [line for _, line in typed]
    seen = {path for path, _ in typed}
    for err in exc.errors() if exc is not None else []:
        loc = tuple(err["loc"])
        path = ".".join(str(p) for p in loc)
        if _covered(path, seen):
            continue
        source = _source_for(path, provenance)
        value = err.get("input")
        if err["type"] == "extra_forbidden":
            allowed = _allowed_keys(loc)
            hint = f"; allowed keys here: {', '.join(allowed)}" if allowed else ""
            lines.append(f"unknown key {path} = {value!r} ({source}){hint}")
        elif err["type"] == "missing":
            lines.append(_missing(path, _source_for(path.rpartition(".")[0], provenance)))
        elif err["type"] == "value_error" and isinstance(value, Mapping):
            lines.append(f"[{path}] ({source}): {err['msg'].removeprefix('Value error, ')}")
        else:
            lines.append(f"{path} = {value!r} ({source}): {err['msg']}")
    return "invalid configuration:\n  " + "\n  ".join(lines)


def _covered(path: str, reported: Iterable[str]) -> bool:
    """Whether ``path`` is, or lies inside, a key already reported."""
    return any(path == r or path.startswith(r + ".") for r in reported)


def _missing(path: str, source: str) -> str:
    """The message for a required key that no source sets."""
    table, _, key = path.rpartition(".")
    where = f" (the rest of [{table}] comes from {source})" if source != DEFAULT_SOURCE else ""
    return (
        f"{path} is required and has no default{where}: set {key} = ... under [{table}] in "
        f"the configuration file, or set {_env_var(path)}"
    )


def _source_for(path: str, provenance: Mapping[str, str]) -> str:
    """The source of ``path``: its own, else its sub-keys' sources, else its nearest parent's."""
    if path in provenance:
        return provenance[path]
    under = sorted({v for k, v in provenance.items() if k.startswith(path + ".")})
    if under:
        return ", ".join(under)
    probe = path.rpartition(".")[0]
    while probe:
        if probe in provenance:
            return provenance[probe]
        probe = probe.rpartition(".")[0]
    return DEFAULT_SOURCE


def selection(settings: Settings, point: PointName) -> list[str]:
    """The implementation names the configuration selects for ``point``, in order."""
    spec = next(p for p in EXTENSION_POINTS if p.name == point)
    section, key = spec.selected_by.split(".")
    value = getattr(getattr(settings, section), key)
    return list(value) if spec.multiple else [value]


def resolve_selection(
    loaded: LoadedSettings,
    registry: Registry,
    points: Iterable[PointName] | None = None,
) -> dict[tuple[str, str], BaseModel]:
    """Second validation pass, once plugins are loaded.

    Checks that every selected implementation of ``points`` is installed and validates its
    ``[plugin.<name>]`` table (or its defaults) with the options model it declared. With
    ``points=None`` it checks every extension point and also every ``[plugin.<name>]`` table,
    selected or not.

    Args:
        loaded: The first-pass settings with their provenance.
        registry: The registry filled by the plugin host.
        points: The extension points to resolve; ``None`` for all, plus every plugin table.

    Returns:
        ``(point, name) -> options instance`` for every selected implementation resolved.

    Raises:
        UnknownImplementationError: The only problem is a selected name that is not
            installed; the message lists what is installed, with distributions.
        ConfigError: A selected name is registered twice, a ``[plugin.<name>]`` table matches
            no installed implementation or fails its plugin's options model (key path, value
            and reason); several problems are reported together in one error.
    """
    resolved, problems = selection_problems(loaded, registry, points)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise ConfigError(
            f"{len(problems)} configuration problems:\n- " + "\n- ".join(str(p) for p in problems)
        )
    return resolved


def selection_problems(
    loaded: LoadedSettings,
    registry: Registry,
    points: Iterable[PointName] | None = None,
) -> tuple[dict[tuple[str, str], BaseModel], list[ConfigError]]:
    """:func:`resolve_selection` without raising: what resolved, and every distinct problem.

    Args:
        loaded: The first-pass settings with their provenance.
        registry: The registry filled by the plugin host.
        points: The extension points to resolve; ``None`` for all, plus every plugin table.

    Returns:
        ``(point, name) -> options instance`` for every selected implementation resolved, and
        one error per distinct problem (an :class:`UnknownImplementationError` for a selected
        name that is not installed), in the order found.
    """
    settings = loaded.settings
    resolved: dict[tuple[str, str], BaseModel] = {}
    attempted: set[tuple[str, str]] = set()
    problems: list[ConfigError] = []
    wanted = set(points) if points is not None else {p.name for p in EXTENSION_POINTS}
    for point in EXTENSION_POINTS:
        if point.name not in wanted:
            continue
        names = selection(settings, point.name)
        if point.multiple and len(set(names)) != len(names):
            problems.append(
                ConfigError(
                    f"{point.selected_by} = {names!r} ({loaded.source_of(point.selected_by)}) "
                    "lists an implementation twice; list each once"
                )
            )
        for name in names:
            attempted.add((point.name, name))
            try:
                impl = registry.get(
                    point.name,
                    name,
                    where=f"{loaded.source_of(point.selected_by)}: {point.selected_by}",
                )
                resolved[(point.name, name)] = _validate_options(
                    loaded, impl.point, name, impl.options, impl.origin
                )
            except ConfigError as exc:
                problems.append(exc)
            except DuplicateImplementationError as exc:
                problems.append(ConfigError(str(exc)))
    if points is None:
        problems += _check_plugin_tables(loaded, registry, attempted)
    unique: dict[str, ConfigError] = {}
    for problem in problems:
        unique.setdefault(str(problem), problem)
    return resolved, list(unique.values())


def _check_plugin_tables(
    loaded: LoadedSettings,
    registry: Registry,
    attempted: set[tuple[str, str]],
) -> list[ConfigError]:
    """Validate every ``[plugin.<name>]`` table not already validated as part of the selection."""
    problems: list[ConfigError] = []
    for name, table in loaded.settings.plugin.items():
        impls = registry.by_name(name)
        if not impls:
            installed = sorted({impl.name for impl in registry})
            problems.append(
                ConfigError(
                    f"[plugin.{name}] ({loaded.source_of('plugin.' + name)}) configures no "
                    f"installed implementation; installed names: {', '.join(installed) or 'none'}."
                    " Check the spelling or install the plugin."
                )
            )
        for impl in impls:
            if (impl.point, name) not in attempted:
                try:
                    _validate_options(loaded, impl.point, name, impl.options, impl.origin, table)
                except ConfigError as exc:
                    problems.append(exc)
    return problems


def typed_plugin_tables(loaded: LoadedSettings, registry: Registry) -> dict[str, dict[str, Any]]:
    """Each ``[plugin.<name>]`` table's values as its plugin's options model types them.

    A table whose name matches no installed implementation, or that fails validation, is left
    out (its raw values stand; ``biasbreaker config --check`` reports why).

    Args:
        loaded: The first-pass settings with their provenance.
        registry: The registry filled by the plugin host.

    Returns:
        Plugin name → {option: validated value in JSON form} for the options the table sets.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, table in loaded.settings.plugin.items():
        for impl in registry.by_name(name):
            try:
                options = _validate_options(loaded, impl.point, name, impl.options, impl.origin)
            except ConfigError:
                continue
            values = options.model_dump(mode="json")
            out[name] = {k: values[k] for k in table if k in values}
            break
    return out


def _validate_options(
    loaded: LoadedSettings,
    point: str,
    name: str,
    model: type[BaseModel],
    origin: str,
    table: Mapping[str, Any] | None = None,
) -> BaseModel:
    """Validate ``[plugin.<name>]`` with the plugin's options model.

    Values from the environment are strings: those of list or table options are decoded first
    (JSON, or comma-separated for a list of scalars), and pydantic coerces the rest. Values from
    a TOML file must already have the option's type (pydantic strict mode on that value).
    """
    data = dict(loaded.settings.plugin.get(name, {}) if table is None else table)
    prefix = ("plugin", name)
    for key, value in list(data.items()):
        source = _source_for(".".join((*prefix, str(key))), loaded.provenance)
        annotation = _child_annotation(model, str(key))
        if isinstance(value, str) and source.startswith("env ") and annotation is not None:
            data[key] = _decode_env_value(
                annotation, value, ".".join((*prefix, str(key))), source.removeprefix("env ")
            )
    typed = _file_type_problems(data, model, prefix, loaded.provenance, loaded.files)
    problems = [line for _, line in typed]
    seen = {path for path, _ in typed}
    try:
        options = model.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            key = ".".join([*prefix, *(str(p) for p in err["loc"])])
            if _covered(key, seen):
                continue
            source = _source_for(key, loaded.provenance)
            if err["type"] == "extra_forbidden":
                allowed = ", ".join(sorted(model.model_fields)) or "none"
                problems.append(
                    f"unknown key {key} = {err.get('input')!r} ({source}); allowed: {allowed}"
                )
            elif err["type"] == "missing":
                problems.append(
                    _missing(key, _source_for(key.rpartition(".")[0], loaded.provenance))
                )
            else:
                problems.append(f"{key} = {err.get('input')!r} ({source}): {err['msg']}")
        raise ConfigError(
            f"{point} {name!r} ({origin}) options invalid:\n  " + "\n  ".join(problems)
        ) from exc
    if problems:
        raise ConfigError(
            f"{point} {name!r} ({origin}) options invalid:\n  " + "\n  ".join(problems)
        )
    return options


def dump_value(value: Any) -> str:
    """Render a configuration value the way TOML would write it (for ``biasbreaker config``)."""
    return json.dumps(value, ensure_ascii=False)
