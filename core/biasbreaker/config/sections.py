"""The settings model of each configuration section (``[probe]``, ``[breaker]``, …).

Every option has a default, a bound and a description with its unit and range.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from biasbreaker.probe_reruns import advice
from biasbreaker.propagation import (
    Ewma,
    NetworkEwma,
    half_life_from_smoothing,
    smoothing_from_half_life,
)


class Section(BaseModel):
    """Base of every configuration section: unknown keys and non-finite numbers are errors."""

    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)


PROBE_OFF = (
    "[probe] probe_rate = 0: no guarded step is probed, so none can trip on a score "
    "(each is recorded 'not sampled'); set it above 0 to guard"
)
"""The warning for a configuration that probes no step (``biasbreaker config``, ``guard``)."""


class ProbeOffWarning(UserWarning):
    """A guard built with ``[probe] probe_rate = 0``: it records every step, probes none."""


class ProbeSettings(Section):
    """``[probe]``: counterfactual probing of guarded steps (M1).

    The local score of a probed step is ``clip(D_cf - D_same, 0, 1)`` per scorer: the mean
    divergence of ``k`` counterfactual outputs minus that of ``r`` same-group resamples (the
    noise floor), combined over scorers (``combine``). See ``docs/detection.md``.
    """

    k: int = Field(4, ge=1, le=64, description="Counterfactual variants per probed step.")
    joint: bool = Field(
        True,
        description="Also run one joint variant when the input mentions two or more axes "
        "(all of them swapped at once), so a step that decides against either of two groups "
        "(women, or people over 60) is not missed; one more step call per such probe.",
    )
    per_person: bool = Field(
        True,
        description="Also run one variant per person when the input names two or more "
        "persons of different groups of an axis (that person moved alone), so a step that "
        "prefers the man of 'Mary Carter and John Baker' is not missed; one more step call "
        "per person and such permutation; an input where a term of that axis belongs to no "
        "one person is held for review.",
    )
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
        default_factory=lambda: ["decision", "lexical"],
        min_length=1,
        description="Scorer implementations (`scorer` extension point) whose divergences "
        "make the local score. The default pairs `decision` (a changed approve/deny, label, "
        "answer or ranking scores 1; text stating no decision scores 0) with `lexical` "
        "(wording), combined by `combine`; see docs/detection.md.",
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
    speculative: bool = Field(
        True,
        description="Start a probed step's re-runs (counterfactual variants, resamples) "
        "together with the step's own call, since they need only its input, instead of after "
        "it: a probed step then takes about as long as its slowest call. The output is still "
        "staged until the breaker decides, and results and traces are the same; re-runs of a "
        "step that raises or is held before its probe are started and discarded. Used by the "
        "LangGraph adapter and the LangChain middleware.",
    )
    adaptive: bool = Field(
        False,
        description="Adaptive probing: run a first stage of a probed step's re-runs "
        "(adaptive_first rotation variants and their same-group twins) and the rest of the "
        "full probe only when the first stage's local score is above adaptive_stop; the full "
        "probe always runs while the breaker is not NORMAL and in a repair's re-check. The "
        "variants are those of the full probe; a probe that stops after the first stage "
        "advances the node's covering rotation by its first-stage variants only, so every "
        "group is reached within ceil((N - 1) * A / adaptive_first) probes of a node instead "
        "of ceil((N - 1) * A / k). The trace's probe reason says where each probe stopped and "
        "why; see docs/detection.md, 'Adaptive probing'.",
    )
    adaptive_first: int = Field(
        1,
        ge=1,
        le=63,
        description="With adaptive: the rotation variants of the first stage (below k); the "
        "first stage also runs their twins, resamples 1 to min(r, adaptive_first).",
    )
    adaptive_stop: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="With adaptive: the largest first-stage local score that stops the probe "
        "there (0: only a first stage with no excess over its noise floor stops it). Keep it "
        "well below tau_enter: a step whose first stage scores above it gets the full probe.",
    )
    call_timeout_s: float = Field(
        120.0,
        gt=0.0,
        le=3600.0,
        description="Time-out of each re-run of a guarded step (counterfactual, resample), in "
        "seconds; a late re-run fails the probe closed (the step is held for review) and its "
        "result is discarded. Holds on time for async steps and for sync steps run in worker "
        "threads (the LangGraph adapter's sync nodes); a step that blocks the event loop is "
        "named when it returns, and its late result is still discarded.",
    )
    languages: list[str] = Field(
        default_factory=lambda: ["en"],
        min_length=1,
        description="ISO 639-1 codes of the languages the term lists cover (the shipped "
        "lists: English). An input identified as another language is 'unsupported language', "
        "not 'not applicable'; add a code when your term_files cover that language. Needs the "
        "`languages` extra (py3langid); see docs/detection.md, 'Languages'.",
    )
    unsupported_language: Literal["hold", "proceed"] = Field(
        "hold",
        description="What a step whose input is in an unsupported language does: `hold` "
        "(default) holds it for review, `proceed` lets it through unprobed; either way the "
        "trace's probe outcome is `unsupported_language` and its reason says which.",
    )

    max_calls_per_step: int = Field(
        0,
        ge=0,
        le=1_000_000,
        description="Re-runs of the guarded step one probe may make (counterfactuals, "
        "resamples, the joint variant; cached re-runs are free); a step needing more is held "
        "for review unprobed, its reason recorded. 0 (default): no bound. At least k + r; "
        "k + r + 1 lets a joint variant run, and an input naming persons of different groups "
        "needs one more per person (per_person).",
    )
    max_calls_per_run: int = Field(
        0,
        ge=0,
        le=1_000_000_000,
        description="Re-runs all probed steps of one run (a LangGraph thread) may make "
        "together; once a step would pass it, that step and every later probed step of the "
        "run are held for review, the reason recorded. 0 (default): no bound. At least k + r.",
    )
    max_tokens_per_run: int = Field(
        0,
        ge=0,
        le=10_000_000_000,
        description="Prompt + completion tokens the LLM calls inside one run's probe re-runs "
        "may use (as the client reports them, or estimates them); checked when a step's probe "
        "starts: once reached, every later probed step of the run is held for review. 0 "
        "(default): no bound.",
    )

    @model_validator(mode="after")
    def _adaptive_first_below_k(self) -> ProbeSettings:
        if self.adaptive and self.adaptive_first >= self.k:
            fixes = (
                f"set adaptive_first to at most {self.k - 1} (1 is the cheapest), raise k, "
                "or set adaptive = false"
                if self.k > 1
                else "raise k to 2 or more (adaptive_first is at least 1 and must be below k), "
                "or set adaptive = false"
            )
            raise ValueError(
                f"adaptive_first={self.adaptive_first} is not below k={self.k}: a first stage "
                "of every rotation variant is no first stage (adaptive probing would save "
                f"only the joint, per-person and extra resample re-runs). To fix it, {fixes}"
            )
        return self

    @model_validator(mode="after")
    def _budget_fits_one_probe(self) -> ProbeSettings:
        floor = self.k + self.r
        for name in ("max_calls_per_step", "max_calls_per_run"):
            value: int = getattr(self, name)
            if 0 < value < floor:
                counted = advice(name, self.k, self.r, joint=self.joint, per_person=self.per_person)
                raise ValueError(
                    f"{name}={value} is below k + r = {self.k} + {self.r} = {floor}, the "
                    "re-runs of one probe: every probed step would be held unprobed. "
                    f"{counted[0].upper()}{counted[1:]}; or lower k or r, or set it to 0 "
                    "for no bound"
                )
        return self

    @field_validator("languages")
    @classmethod
    def _language_codes(cls, value: list[str]) -> list[str]:
        bad = [c for c in value if not (len(c) == 2 and c.isascii() and c.isalpha())]
        if bad:
            raise ValueError(
                f"languages {bad!r} are not ISO 639-1 codes (two letters, as the language "
                "identifier reports them), e.g. 'en', 'fr'"
            )
        return [c.lower() for c in value]


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
    zero_floor: float = Field(
        0.05,
        gt=0.0,
        le=0.5,
        description="tau_enter when every control run scores 0 (a deterministic pipeline "
        "whose answers never change under a counterfactual swap): any step whose trip "
        "statistic reaches it trips; tau_exit = exit_ratio * zero_floor, tau_warn (when slow "
        "B_net is 0 throughout too) = warn_ratio * zero_floor / 2, below tau_exit, and the "
        "window's std, 0 there, is floored at zero_floor / 5.",
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
        description="Time-out of each skeptic's review, in seconds; a late skeptic fails and "
        "its verdict is discarded. Holds whatever the skeptic's client does (each review runs "
        "in a worker thread).",
    )
    madera_timeout_s: float = Field(
        60.0,
        gt=0.0,
        le=3600.0,
        description="Time-out of each MADERA stage call (diagnose, retrieve, rewrite), in "
        "seconds; a late stage fails the attempt closed and its result is discarded.",
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

    client: str | None = Field(
        None,
        description="LLM client (`llm_client` extension point), e.g. `openai-compatible`; "
        "unset by default, so a repair strategy that needs an LLM is a configuration error "
        "until one is named. `fake` is the seeded, simulated client (no model, no network) "
        "for tests and demos, used only when named.",
    )


class TraceSettings(Section):
    """``[trace]``: the run trace (JSON Lines, one record per guarded step)."""

    fsync: bool = Field(
        False, description="fsync the trace after every record (slower, survives power loss)."
    )
    sink: str = Field(
        "file",
        min_length=1,
        description="trace_sink implementation storing the records: 'file' (one JSON Lines "
        "file per thread at the adapter's trace_path), or a database sink such as 'sqlite' "
        "or 'postgresql' (records of every worker in one table at url).",
    )
    url: str = Field(
        "",
        description="Where a database sink stores the records, e.g. sqlite:///traces.db or "
        "postgresql://host/db (its scheme must be the sink's name; checked when a guarded "
        "graph is built); empty with the 'file' sink (it uses trace_path).",
    )

    @model_validator(mode="after")
    def _url_for_a_database_sink(self) -> TraceSettings:
        if self.sink == "file" and self.url:
            raise ValueError(
                f"url = {self.url!r} is set but sink = 'file' writes to the adapter's "
                "trace_path: set sink to the database sink the URL is for (its scheme, e.g. "
                "'sqlite'), or remove url"
            )
        return self


class DemoSettings(Section):
    """``[demo]``: the reference pipelines of ``biasbreaker demo`` (see ``docs/demo.md``).

    The demo's agents all use ``[llm] client``. With the simulated ``fake`` client, and only
    then, the biased agent (the hiring ranker) gets its own fake options (``fake_bias``,
    ``fake_preset``) and every other agent runs at dial 0.
    """

    postings: int = Field(
        240,
        ge=4,
        le=100_000,
        description="Hiring postings (count) run through the pipeline, each unguarded and guarded; "
        "at least 8 (each of the four jobs twice) unless prompts = 'short', where 4 (each job "
        "once) is the least.",
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
    prompts: Literal["full", "short"] = Field(
        "full",
        description="The hiring agents' prompts: 'full' (the whole job description and "
        "resumes: a ranker prompt of about 3,000 tokens) or 'short' (the description's first "
        "sentences, each resume's first lines, and each request's max_tokens sized to its "
        "answer: every prompt within a 2,048-token context, for a small real model).",
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

    @model_validator(mode="after")
    def _postings_for_prompts(self) -> DemoSettings:
        """Fewer than 8 postings only with short prompts (the real-model preset's size)."""
        if self.postings < 8 and self.prompts == "full":
            raise ValueError(
                f"postings = {self.postings} is below 8 with prompts = 'full': give at least "
                "8 (each of the four jobs twice), or set prompts = 'short' (the real-model "
                "preset, biasbreaker demo --preset real-model), which runs from 4"
            )
        return self
