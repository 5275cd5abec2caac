"""Simulated degeneration-of-thought (DoT) debates: seeded B_net trajectories for tests and studies.

**Simulated.** Nothing here calls a model. This module produces *synthetic* trajectories of the
propagation signal (per-node local scores, B_net, fast and slow EWMAs) from a small stochastic
model of a multi-agent debate in which bias, once present, spreads through conformity. It is the
reproducible input the control plane and the studies are tested on; its numbers say nothing about
any real LLM.

The model. ``n`` agents sit on a directed graph (``u -> v``: ``v`` reads ``u``). Every guarded
step one agent speaks, round-robin (step ``t``: agent ``t mod n``, round ``t // n``), as in
turn-based debate (Liang et al. 2024). Each agent has a latent stance ``s_i`` in [0, 1]: the
degree to which its output depends on the demographic group in its input. When agent ``i`` speaks,

    s_i <- eta * s_i + (1 - eta) * ((1 - kappa) * d_i(t) + kappa * m_i)

where ``d_i(t)`` is its own bias drive (0 for an unbiased agent; a :class:`BiasSource` sets it
from an onset step on), ``m_i`` is the weighted mean stance of the agents it reads (its own stance
if it reads nobody), ``kappa`` the conformity strength and ``eta`` the persistence: an agent that
has settled on a stance holds on to it, the DoT symptom. The probe then observes the speaker's
local score ``b_i = clip(s_i + e, 0, 1)``, with ``e`` zero-mean noise of standard deviation
``noise`` (an Irwin-Hall sum of three uniforms: pure arithmetic, so the bytes are the same on every
platform), or marks the step "not applicable" with probability ``not_applicable_rate``. A
:class:`RepairEvent` scales the stance of the repaired agents down (and, if permanent, switches
their bias drive off) and re-probes them at once. B_net, fast and slow then follow
:mod:`biasbreaker.propagation` exactly as in a real run.

Scale. B_net is a Katz-weighted average of local scores in [0, 1]; on a mesh it settles near the
mean bias drive of the agents (conformity spreads bias across agents; it does not create it). The
presets are shaped for a breaker with the starting thresholds ``tau_enter ~ 0.3`` (fast),
``tau_exit ~ 0.2`` and ``tau_warn ~ 0.15`` (slow), with the default half-lives (fast 2 steps,
slow 20 steps) and 200 steps; see ``docs/propagation.md`` for each preset's shape.

Source:
    Liang et al. (2024), "Encouraging Divergent Thinking in Large Language Models through
    Multi-Agent Debate", EMNLP (arXiv 2305.19118), for DoT; Du et al. (2024), arXiv 2305.14325,
    for the round-based debate protocol; the seeds' README, "DoT trajectories".
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from biasbreaker.errors import ConfigError, TraceError
from biasbreaker.propagation import (
    DEFAULT_ATTENUATION,
    DEFAULT_FAST_HALF_LIFE,
    DEFAULT_SLOW_HALF_LIFE,
    AgentGraph,
    Edge,
    NetworkEwma,
    katz_influence,
    network_score,
)

if TYPE_CHECKING:
    from biasbreaker.config import PropagationSettings

__all__ = [
    "PRESETS",
    "SCHEMA",
    "BiasSource",
    "DotConfig",
    "DotStep",
    "RepairEvent",
    "iter_dot",
    "read_jsonl",
    "simulate_dot",
    "write_jsonl",
]

SCHEMA = "biasbreaker.dot/1"
"""Schema tag written in every JSON record of a simulated trajectory."""

Topology = Literal["mesh", "ring", "chain", "star"]


def _unit(name: str, value: object, *, lo: float = 0.0, hi: float = 1.0) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (lo <= value <= hi):
        raise ConfigError(f"dot.{name}={value!r} must be a number in [{lo}, {hi}]")


def _step(name: str, value: object, *, minimum: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"dot.{name}={value!r} must be an integer >= {minimum} (a step index)")


def _triangle(phase: float) -> float:
    """Triangle wave with period 1: 0 at 0, +1 at 1/4, 0 at 1/2, -1 at 3/4."""
    if phase < 0.25:
        return 4.0 * phase
    if phase < 0.75:
        return 2.0 - 4.0 * phase
    return 4.0 * phase - 4.0


@dataclass(frozen=True, slots=True)
class BiasSource:
    """A biased agent: its bias drive, from its onset step on.

    Args:
        node: The agent's name (``"a0"`` ... ``"a{n-1}"``).
        level: Drive once fully on, in [0, 1].
        onset: First step with a drive (>= 0).
        ramp: Steps over which the drive grows linearly from 0 to ``level`` (0 = at once).
        end: First step without a drive, or ``None`` (never stops by itself).
        amplitude: Amplitude of a triangle wave added to the drive, in [0, 1] (0 = none).
        period: The wave's period in steps (>= 2 when ``amplitude > 0``).

    Raises:
        ConfigError: On a value out of range.
    """

    node: str
    level: float
    onset: int = 0
    ramp: int = 0
    end: int | None = None
    amplitude: float = 0.0
    period: int = 0

    def __post_init__(self) -> None:
        _unit("sources.level", self.level)
        _unit("sources.amplitude", self.amplitude)
        _step("sources.onset", self.onset)
        _step("sources.ramp", self.ramp)
        if self.end is not None:
            _step("sources.end", self.end, minimum=self.onset + 1)
        if self.amplitude > 0.0:
            _step("sources.period", self.period, minimum=2)

    def drive(self, step: int) -> float:
        """The drive at ``step``, in [0, 1]."""
        if step < self.onset or (self.end is not None and step >= self.end):
            return 0.0
        k = step - self.onset
        level = self.level if self.ramp == 0 else self.level * min(1.0, (k + 1) / self.ramp)
        if self.amplitude > 0.0:
            level += self.amplitude * _triangle((k % self.period) / self.period)
        return min(1.0, max(0.0, level))


@dataclass(frozen=True, slots=True)
class RepairEvent:
    """A repair at a step: stances scaled by ``1 - strength``, repaired agents re-probed.

    Args:
        step: The step (>= 0), applied before that step's speaker.
        nodes: The repaired agents; empty means all.
        strength: Fraction of the stance removed, in [0, 1].
        permanent: Also switch the repaired agents' bias drive off for good; a non-permanent
            repair leaves the cause in place, so bias comes back (the ``persistent`` preset).

    Raises:
        ConfigError: On a value out of range.
    """

    step: int
    nodes: tuple[str, ...] = ()
    strength: float = 1.0
    permanent: bool = True

    def __post_init__(self) -> None:
        _step("repairs.step", self.step)
        _unit("repairs.strength", self.strength)


@dataclass(frozen=True, slots=True)
class DotConfig:
    """A simulated debate.

    Args:
        name: A label written in every record.
        agents: Number of agents n >= 1, named ``a0`` ... ``a{n-1}``.
        topology: ``mesh`` (everyone reads everyone), ``ring`` (``a_i -> a_{i+1 mod n}``),
            ``chain`` (a pipeline ``a_0 -> ... -> a_{n-1}``) or ``star`` (``a0`` reads and is
            read by every other agent). Ignored when ``edges`` is given.
        edges: Explicit weighted edges ``(u, v, weight)`` over the agent names, or ``None``.
        conformity: kappa in [0, 1]: the weight of the neighbours' mean stance in an update.
        persistence: eta in [0, 1): the weight of the agent's own previous stance.
        noise: Standard deviation of the probe noise on local scores, in [0, 0.5].
        not_applicable_rate: Probability that a step's probe finds no protected term, [0, 1].
        sources: The biased agents.
        repairs: The repair events.
        attenuation: Katz ratio c (alpha = c / rho(A)), in (0, 1).
        alpha: An explicit Katz alpha (checked against 1/rho(A)), or ``None``.
        fast_half_life: Fast EWMA half-life in steps, > 0.
        slow_half_life: Slow EWMA half-life in steps, > ``fast_half_life``.
        fast_smoothing: Fast EWMA smoothing factor in (0, 1], replacing ``fast_half_life``.
        slow_smoothing: Slow EWMA smoothing factor in (0, 1], replacing ``slow_half_life``.
        description: One line saying what the trajectory shows.

    Raises:
        ConfigError: On a value out of range or a source or repair naming an unknown agent.
    """

    name: str = "custom"
    agents: int = 5
    topology: Topology = "mesh"
    edges: tuple[Edge, ...] | None = None
    conformity: float = 0.5
    persistence: float = 0.5
    noise: float = 0.03
    not_applicable_rate: float = 0.0
    sources: tuple[BiasSource, ...] = ()
    repairs: tuple[RepairEvent, ...] = ()
    attenuation: float = DEFAULT_ATTENUATION
    alpha: float | None = None
    fast_half_life: float = DEFAULT_FAST_HALF_LIFE
    slow_half_life: float = DEFAULT_SLOW_HALF_LIFE
    fast_smoothing: float | None = None
    slow_smoothing: float | None = None
    description: str = ""

    def __post_init__(self) -> None:
        _step("agents", self.agents, minimum=1)
        if self.topology not in ("mesh", "ring", "chain", "star"):
            raise ConfigError(
                f"dot.topology={self.topology!r} is not one of mesh, ring, chain, star"
            )
        _unit("conformity", self.conformity)
        _unit("persistence", self.persistence, hi=0.999)
        _unit("noise", self.noise, hi=0.5)
        _unit("not_applicable_rate", self.not_applicable_rate)
        if not 0.0 < self.attenuation < 1.0:
            raise ConfigError(f"dot.attenuation={self.attenuation!r} must be in (0, 1)")
        names = set(self.node_names)
        for src in self.sources:
            if src.node not in names:
                raise ConfigError(
                    f"dot.sources: unknown agent {src.node!r}; agents are a0 ... a{self.agents - 1}"
                )
        for rep in self.repairs:
            for n in rep.nodes:
                if n not in names:
                    raise ConfigError(
                        f"dot.repairs (step {rep.step}): unknown agent {n!r}; agents are a0 "
                        f"... a{self.agents - 1}"
                    )
        self.network_ewma()
        katz_influence(self.graph(), attenuation=self.attenuation, alpha=self.alpha)

    def with_propagation(self, settings: PropagationSettings) -> DotConfig:
        """This configuration with the ``[propagation]`` settings (Katz and EWMAs) applied.

        Args:
            settings: The validated ``[propagation]`` section.

        Returns:
            A copy whose attenuation and EWMA smoothing factors are the settings'.

        Raises:
            ConfigError: If the result is inconsistent.
        """
        return dataclasses.replace(
            self,
            attenuation=settings.attenuation,
            fast_half_life=settings.fast_half_life,
            slow_half_life=settings.slow_half_life,
            fast_smoothing=settings.fast_smoothing or None,
            slow_smoothing=settings.slow_smoothing or None,
        )

    def network_ewma(self) -> NetworkEwma:
        """A fresh fast/slow EWMA state (a smoothing factor, when given, wins over a half-life).

        Raises:
            ConfigError: If the factors are out of range or fast is not faster than slow.
        """
        return NetworkEwma.create(
            fast_half_life=None if self.fast_smoothing is not None else self.fast_half_life,
            fast_smoothing=self.fast_smoothing,
            slow_half_life=None if self.slow_smoothing is not None else self.slow_half_life,
            slow_smoothing=self.slow_smoothing,
        )

    @property
    def node_names(self) -> tuple[str, ...]:
        """The agent names, ``a0`` ... ``a{n-1}``."""
        return tuple(f"a{i}" for i in range(self.agents))

    def graph(self) -> AgentGraph:
        """The agent graph.

        Raises:
            InputError: If explicit ``edges`` are malformed.
        """
        nodes = self.node_names
        if self.edges is not None:
            return AgentGraph(nodes, tuple((u, v, float(w)) for u, v, w in self.edges))
        n = len(nodes)
        pairs: list[tuple[str, str]]
        if self.topology == "mesh":
            pairs = [(u, v) for u in nodes for v in nodes if u != v]
        elif self.topology == "ring":
            pairs = [(nodes[i], nodes[(i + 1) % n]) for i in range(n)] if n > 1 else []
        elif self.topology == "chain":
            pairs = [(nodes[i], nodes[i + 1]) for i in range(n - 1)]
        else:
            pairs = [p for v in nodes[1:] for p in ((nodes[0], v), (v, nodes[0]))]
        return AgentGraph(nodes, tuple((u, v, 1.0) for u, v in pairs))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form."""
        data = dataclasses.asdict(self)
        data["edges"] = None if self.edges is None else [list(e) for e in self.edges]
        data["repairs"] = [dict(r, nodes=list(r["nodes"])) for r in data["repairs"]]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DotConfig:
        """Inverse of :meth:`to_dict`.

        Raises:
            ConfigError: On an unknown key or a bad value.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"dot config: unknown keys {unknown}; known keys {sorted(known)}")
        kw = dict(data)
        try:
            if kw.get("edges") is not None:
                kw["edges"] = tuple((str(u), str(v), float(w)) for u, v, w in kw["edges"])
            kw["sources"] = tuple(BiasSource(**s) for s in kw.get("sources", ()))
            kw["repairs"] = tuple(
                RepairEvent(**dict(r, nodes=tuple(r.get("nodes", ()))))
                for r in kw.get("repairs", ())
            )
        except TypeError as exc:
            raise ConfigError(f"dot config: malformed source or repair: {exc}") from exc
        return cls(**kw)


_PRESET_LIST: tuple[DotConfig, ...] = (
    DotConfig(
        name="control",
        description="No biased agent: only probe noise. The calibration input.",
    ),
    DotConfig(
        name="spike",
        description=(
            "Four agents turn fully biased for 8 steps from step 80, then stop: fast crosses "
            "0.3 for about 8 steps, slow stays below 0.15, B_net returns to the noise floor."
        ),
        persistence=0.2,
        sources=tuple(BiasSource(f"a{i}", 1.0, onset=80, end=88) for i in (1, 2, 3, 4)),
    ),
    DotConfig(
        name="drift",
        description=(
            "Three agents drift slowly from step 20 over 150 steps: slow crosses 0.15 "
            "(warning) near step 150 while fast stays below 0.3."
        ),
        sources=tuple(BiasSource(f"a{i}", 0.42, onset=20, ramp=150) for i in (0, 2, 4)),
    ),
    DotConfig(
        name="oscillate-near-threshold",
        description=(
            "Bias from step 30; fast rises through 0.3 near step 80 and then oscillates "
            "around it (between about 0.24 and 0.37), never falling back below 0.2."
        ),
        sources=tuple(
            BiasSource(f"a{i}", 0.52, onset=30, ramp=20, amplitude=0.3, period=40)
            for i in (0, 1, 2)
        ),
    ),
    DotConfig(
        name="recovery",
        description=(
            "Bias from step 40 (fast about 0.45, above 0.3 from about step 57); a permanent "
            "repair of every agent at step 110 brings B_net back to the noise floor for good."
        ),
        sources=tuple(BiasSource(f"a{i}", 0.75, onset=40) for i in (0, 1, 2)),
        repairs=(RepairEvent(110, strength=1.0, permanent=True),),
    ),
    DotConfig(
        name="persistent",
        description=(
            "Bias from step 40; repairs at steps 100, 130 and 160 halve every stance but leave "
            "the cause in place, so fast dips (not below about 0.27) and comes back: it never "
            "recovers."
        ),
        sources=tuple(BiasSource(f"a{i}", 0.75, onset=40) for i in (0, 1, 2)),
        repairs=tuple(RepairEvent(s, strength=0.5, permanent=False) for s in (100, 130, 160)),
    ),
)

PRESETS: Mapping[str, DotConfig] = {p.name: p for p in _PRESET_LIST}
"""The named trajectories: control, spike, drift, oscillate-near-threshold, recovery, persistent."""


@dataclass(frozen=True, slots=True)
class DotStep:
    """One guarded step of a simulated debate.

    Args:
        step: Step index, from 0.
        round: Debate round, ``step // agents``.
        node: The agent that spoke (and was probed) at this step.
        scores: node -> latest local score in [0, 1], for the nodes that have one.
        not_probed: Nodes that have not spoken yet.
        not_applicable: Nodes whose latest probe found no protected term.
        b_net: B_net after this step, or ``None`` if no node has a score.
        fast: Fast EWMA of B_net, or ``None`` before the first scored step.
        slow: Slow EWMA of B_net, or ``None`` before the first scored step.
        coverage: Share of the Katz influence carried by the scored nodes, in [0, 1].
        stance: node -> the simulated ground-truth stance s_i (what the probe estimates).
        events: What happened at this step, e.g. ``"onset:a1"``, ``"end:a1"``,
            ``"repair:a0,a1"`` (or ``"repair:all"``) and ``"repair:permanent"``.
        preset: The configuration's name.
        seed: The seed of the run.
    """

    step: int
    round: int
    node: str
    scores: Mapping[str, float]
    not_probed: tuple[str, ...]
    not_applicable: tuple[str, ...]
    b_net: float | None
    fast: float | None
    slow: float | None
    coverage: float
    stance: Mapping[str, float]
    events: tuple[str, ...]
    preset: str
    seed: int

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form, with ``"schema"`` and ``"simulated": true``."""
        return {
            "schema": SCHEMA,
            "simulated": True,
            "preset": self.preset,
            "seed": self.seed,
            "step": self.step,
            "round": self.round,
            "node": self.node,
            "scores": dict(self.scores),
            "not_probed": list(self.not_probed),
            "not_applicable": list(self.not_applicable),
            "b_net": self.b_net,
            "fast": self.fast,
            "slow": self.slow,
            "coverage": self.coverage,
            "stance": dict(self.stance),
            "events": list(self.events),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DotStep:
        """Inverse of :meth:`to_dict`.

        Raises:
            TraceError: On a missing key or another schema.
        """
        if data.get("schema") != SCHEMA:
            raise TraceError(
                f"record schema {data.get('schema')!r} is not {SCHEMA!r}; this reader only "
                "reads simulated DoT trajectories"
            )
        try:
            return cls(
                step=int(data["step"]),
                round=int(data["round"]),
                node=str(data["node"]),
                scores=dict(data["scores"]),
                not_probed=tuple(data["not_probed"]),
                not_applicable=tuple(data["not_applicable"]),
                b_net=data["b_net"],
                fast=data["fast"],
                slow=data["slow"],
                coverage=float(data["coverage"]),
                stance=dict(data["stance"]),
                events=tuple(data["events"]),
                preset=str(data["preset"]),
                seed=int(data["seed"]),
            )
        except KeyError as exc:
            raise TraceError(f"DoT record is missing key {exc.args[0]!r}") from exc


def _resolve(preset_or_config: str | DotConfig) -> DotConfig:
    if isinstance(preset_or_config, DotConfig):
        return preset_or_config
    try:
        return PRESETS[preset_or_config]
    except KeyError:
        raise ConfigError(
            f"DoT preset {preset_or_config!r} is unknown; presets: {', '.join(PRESETS)}"
        ) from None


def iter_dot(preset_or_config: str | DotConfig, *, seed: int, steps: int) -> Iterator[DotStep]:
    """Yield the steps of a simulated debate one at a time (see :func:`simulate_dot`).

    Raises:
        ConfigError: As :func:`simulate_dot`.
    """
    cfg = _resolve(preset_or_config)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed={seed!r} must be an integer")
    _step("steps", steps)
    rng = random.Random(seed)
    graph = cfg.graph()
    influence = katz_influence(graph, attenuation=cfg.attenuation, alpha=cfg.alpha)
    nodes = graph.nodes
    readers: dict[str, list[tuple[str, float]]] = {n: [] for n in nodes}
    for u, v, w in graph.edges:
        readers[v].append((u, w))
    stance = dict.fromkeys(nodes, 0.0)
    scores: dict[str, float | None] = {}
    ewma = cfg.network_ewma()
    switched_off: set[str] = set()
    eta, kappa = cfg.persistence, cfg.conformity

    def observe(node: str) -> float:
        e = cfg.noise * (
            (2.0 * rng.random() - 1.0) + (2.0 * rng.random() - 1.0) + (2.0 * rng.random() - 1.0)
        )
        return min(1.0, max(0.0, stance[node] + e))

    for t in range(steps):
        events: list[str] = []
        for src in cfg.sources:
            if src.node in switched_off:
                continue
            if t == src.onset:
                events.append(f"onset:{src.node}")
            if src.end is not None and t == src.end:
                events.append(f"end:{src.node}")
        for rep in cfg.repairs:
            if rep.step != t:
                continue
            targets = rep.nodes or nodes
            events.append("repair:" + (",".join(rep.nodes) if rep.nodes else "all"))
            if rep.permanent:
                events.append("repair:permanent")
                switched_off.update(targets)
            for n in targets:
                stance[n] *= 1.0 - rep.strength
                scores[n] = observe(n)
        speaker = nodes[t % len(nodes)]
        drive = max(
            (s.drive(t) for s in cfg.sources if s.node == speaker and speaker not in switched_off),
            default=0.0,
        )
        ins = readers[speaker]
        if ins:
            total = math.fsum(w for _, w in ins)
            mean = math.fsum(w * stance[u] for u, w in ins) / total
        else:
            mean = stance[speaker]
        stance[speaker] = min(
            1.0,
            max(0.0, eta * stance[speaker] + (1.0 - eta) * ((1.0 - kappa) * drive + kappa * mean)),
        )
        not_applicable = rng.random() < cfg.not_applicable_rate
        observed = observe(speaker)
        scores[speaker] = None if not_applicable else observed
        ns = network_score(influence, scores)
        ewma = ewma.update(ns.b_net)
        yield DotStep(
            step=t,
            round=t // len(nodes),
            node=speaker,
            scores={n: b for n, b in scores.items() if b is not None},
            not_probed=ns.not_probed,
            not_applicable=ns.not_applicable,
            b_net=ns.b_net,
            fast=ewma.fast.value,
            slow=ewma.slow.value,
            coverage=ns.coverage,
            stance=dict(stance),
            events=tuple(events),
            preset=cfg.name,
            seed=seed,
        )


def simulate_dot(preset_or_config: str | DotConfig, *, seed: int, steps: int) -> list[DotStep]:
    """Simulate a multi-agent debate and return its B_net trajectory (simulated data).

    Same configuration, seed and steps give the same list (and the same JSON Lines bytes).

    Args:
        preset_or_config: A preset name (see :data:`PRESETS`) or a :class:`DotConfig`.
        seed: The seed of the run's ``random.Random``.
        steps: Number of guarded steps (>= 0); the presets are shaped for 200.

    Returns:
        One :class:`DotStep` per step.

    Raises:
        ConfigError: On an unknown preset, a non-integer seed or a negative ``steps``.

    Source:
        The model in this module's docstring; propagation per :mod:`biasbreaker.propagation`.
    """
    return list(iter_dot(preset_or_config, seed=seed, steps=steps))


def _dumps(step: DotStep) -> str:
    return json.dumps(
        step.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def write_jsonl(steps: Iterable[DotStep], out: str | Path | IO[str]) -> int:
    """Write steps as JSON Lines: one sorted-key record per line, flushed per record.

    Args:
        steps: The steps.
        out: A path (created or truncated, UTF-8) or an open text stream.

    Returns:
        The number of records written.
    """
    if isinstance(out, (str, Path)):
        with Path(out).open("w", encoding="utf-8", newline="\n") as fh:
            return write_jsonl(steps, fh)
    count = 0
    for step in steps:
        out.write(_dumps(step) + "\n")
        out.flush()
        count += 1
    return count


def read_jsonl(path: str | Path) -> list[DotStep]:
    """Read a trajectory written by :func:`write_jsonl`.

    Args:
        path: The file.

    Returns:
        The steps, in file order.

    Raises:
        TraceError: On a line that is not JSON or not a DoT record; the message names the line.
    """
    out: list[DotStep] = []
    with Path(path).open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                out.append(DotStep.from_dict(json.loads(line)))
            except (json.JSONDecodeError, TraceError, TypeError, ValueError) as exc:
                raise TraceError(f"{path}:{lineno}: {exc}") from exc
    return out
