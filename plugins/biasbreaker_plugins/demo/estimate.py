"""``biasbreaker estimate``: a run's LLM calls and tokens, predicted before anything is called.

Two subjects:

* **a user's graph** (``--graph MODULE:FACTORY --inputs FILE``, as ``biasbreaker run`` takes
  them): the factory is called (with a client that refuses every call, if it takes ``llm``),
  never the graph. Every node is guarded, as ``run`` guards them; a node marked
  ``@guard_node(probe=False)`` is not probed. The steps of one input are the nodes of the
  graph's one path from ``START`` to ``END`` when its edges form one (no conditional edges, no
  fan-out, no ``Command`` jump), else the ones ``--steps`` lists. Each node makes one LLM call
  per run unless ``--calls NODE=N`` says otherwise. The probe's re-runs of a step are drawn
  from the input line itself (:func:`biasbreaker.estimate.reruns`): the estimate assumes that
  each node's input names the persons and groups the graph's input names (true where the
  nodes pass the input on; a node that adds or drops names changes its count).
* **the hiring demo** (``--demo``, ``--quick``): its phases, postings, graph and agents are
  known, so every step's calls, re-runs and prompts are (:func:`estimate_hiring`).

Nothing here builds the configured LLM client, the skeptics or MADERA: the probe is built
with the ``decision`` scorer only (scorers do not change what is re-run), so no model, not
even an embedding model, is loaded.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biasbreaker.errors import ConfigError, InputError, LLMError
from biasbreaker.estimate import Draw, Prediction, Repairs, Step, draw, predict, reruns
from biasbreaker.llm import LLMRequest, LLMResponse, estimate_tokens
from biasbreaker.probe import Probe, build_probe
from biasbreaker_plugins.demo.agents import DemoKernel
from biasbreaker_plugins.demo.phases import RECORD_ONLY, RunConfig, phase_kernel
from biasbreaker_plugins.demo.run_graph import checked_inputs, load_factory, takes_llm

ESTIMATE_SETTINGS: dict[str, Any] = {"probe": {"scorers": ["decision"]}}
"""Over the user's settings while estimating: the cheap ``decision`` scorer (what the probe
re-runs does not depend on the scorers; a semantic scorer would load its model)."""


class NoCallClient:
    """The ``llm`` a graph factory gets from ``estimate``: any call is an error.

    The estimate builds the graph, never runs it; a factory that calls the model while it
    builds would make the estimate call a model, so that call fails with a message saying so.
    """

    model = "no-call (biasbreaker estimate)"

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Refuse the call."""
        raise LLMError(
            "biasbreaker estimate calls no model, but the graph factory called its llm while "
            "building the graph; build the graph without calling the model"
        )

    async def aclose(self) -> None:
        """Nothing to close."""


@dataclass
class Estimate:
    """What ``estimate`` predicts, and what it assumed.

    Args:
        subject: ``"graph MODULE:FACTORY on FILE"`` or ``"demo hiring (quick)"``.
        phases: The prediction per phase (a user's run has one, ``"run"``).
        assumptions: One sentence per assumption the figures rest on.
        held: The inputs the probe would hold for review, each ``{"line", "node", "held",
            "reason"}``: the input's line, the node where its run pauses, why
            (:attr:`biasbreaker.estimate.Draw.held`) and the probe's reason.
    """

    subject: str
    phases: dict[str, Prediction]
    assumptions: list[str] = field(default_factory=list)
    held: list[dict[str, Any]] = field(default_factory=list)

    @property
    def total(self) -> Prediction:
        """Every phase together."""
        total = Prediction(trip_rate=next(iter(self.phases.values())).trip_rate)
        for prediction in self.phases.values():
            total = total.add(prediction)
        return total

    def to_json(self) -> dict[str, Any]:
        """The JSON of ``estimate --json``."""
        return {
            "subject": self.subject,
            "total": self.total.to_json(),
            "phases": {name: p.to_json() for name, p in self.phases.items()},
            "held": [dict(h) for h in self.held],
            "assumptions": list(self.assumptions),
        }


def _probe(kernel: DemoKernel) -> Probe:
    return build_probe(kernel)


def _repairs(kernel: DemoKernel, *, record_only: bool = False) -> Repairs:
    if record_only:
        return Repairs(frozenset())
    settings = kernel.settings.intervention
    routes = frozenset(r for r in kernel.repair_routes() if r in ("skeptics", "madera"))
    return Repairs(routes, panel=len(settings.skeptics), max_rewrites=settings.max_rewrites)


COMMON_ASSUMPTIONS = (
    "calls without repairs (agent, probe) are exact for these steps: each probed step re-runs "
    "its node once per distinct counterfactual variant, joint variant, per-person variant "
    "and resample the probe draws for its input (none when the input names no protected "
    "group; a step the probe would hold runs its node and pauses the run), times [probe] "
    "probe_rate",
    "repairs (re-check, skeptic, MADERA) depend on trips, which depend on the replies: given "
    "as a range from no trip to every guarded step tripping once at the costliest route "
    "(skeptics: the panel, one retry each for an unparseable verdict, and a re-check that "
    "re-runs the node and the panel per re-run; MADERA: max_rewrites rounds of diagnoser, "
    "editor and re-check); the expectation needs --trip-rate",
    "tokens: prompt tokens counted as ceil(characters / 4) (biasbreaker.llm.estimate_tokens, "
    "the rule for replies whose endpoint reports no usage); completion tokens are not "
    "predicted unless given (a reply's length is unknown before it is written); a client "
    "that counts otherwise (the fake counts words) reports other numbers",
    "[probe] max_tokens_per_run is not modelled (the estimate assumes it is not reached)",
)

ADAPTIVE_ASSUMPTION = (
    "[probe] adaptive = true: the probe re-runs are counted as the full probe's, an upper "
    "bound; a step whose first stage is clean makes only the first stage's re-runs "
    "(docs/detection.md, 'Adaptive probing'), so the run makes fewer calls than predicted"
)
"""The assumption added when adaptive probing is on: the estimate counts the full draw."""


# ---------------------------------------------------------------------------------- a graph


def linear_steps(builder: Any) -> list[str]:
    """The nodes of a graph whose edges form one path from ``START`` to ``END``.

    Raises:
        ConfigError: The graph branches, fans out, waits on several nodes, or has a node
            without an outgoing edge (a ``Command`` jump); the message says to give
            ``--steps``.
    """
    from langgraph.graph import END, START

    fix = (
        "; give the nodes one input passes through with --steps, e.g. --steps "
        "screen,rank,decide (a node repeated in a loop is listed each time)"
    )
    if builder.branches:
        raise ConfigError(
            f"the graph has conditional edges (from {sorted(builder.branches)}), so the steps "
            f"of an input depend on its replies{fix}"
        )
    if builder.waiting_edges:
        raise ConfigError(f"the graph has a node that waits for several others{fix}")
    out: dict[str, list[str]] = {}
    for start, end in builder.edges:
        out.setdefault(start, []).append(end)
    path: list[str] = []
    node = START
    while True:
        nexts = out.get(node, [])
        if len(nexts) != 1:
            what = "no outgoing edge" if not nexts else f"edges to {sorted(nexts)}"
            raise ConfigError(f"node {node!r} has {what}, not one path to END{fix}")
        node = nexts[0]
        if node == END:
            return path
        if node in path:
            raise ConfigError(f"the graph loops back to {node!r}{fix}")
        path.append(node)


def probed_nodes(builder: Any) -> dict[str, bool]:
    """Each node of the builder: whether ``run`` probes it (``@guard_node(probe=False)``: no)."""
    from biasbreaker_plugins.langgraph._internals import node_function
    from biasbreaker_plugins.langgraph.node import NODE_OPTIONS_ATTR, NodeOptions

    probed = {}
    for name, spec in builder.nodes.items():
        fn = node_function(spec.runnable)
        marks = getattr(fn, NODE_OPTIONS_ATTR, NodeOptions()) if fn is not None else NodeOptions()
        probed[name] = bool(marks.probe)
    return probed


def parse_calls(values: Sequence[str]) -> dict[str, int]:
    """``--calls NODE=N`` options as ``{node: N}``.

    Raises:
        ConfigError: A value is not ``NODE=N`` with N a whole number >= 0, or a node is given
            twice (named, with both values: which one is meant cannot be guessed).
    """
    calls: dict[str, int] = {}
    given: dict[str, str] = {}
    for value in values:
        node, sep, number = value.partition("=")
        try:
            n = int(number)
        except ValueError:
            n = -1
        if not sep or not node or n < 0:
            raise ConfigError(
                f"--calls {value!r} is not NODE=N with N a whole number >= 0 (the LLM calls one "
                "run of the node makes); e.g. --calls screen=8, or --calls tools=0"
            )
        if node in given:
            raise ConfigError(
                f"--calls names node {node!r} twice, {given[node]!r} and {value!r}: give each "
                f"node once, with the LLM calls one run of it makes (e.g. --calls {value})"
            )
        given[node] = value
        calls[node] = n
    return calls


def repeatable(builder: Any) -> set[str] | None:
    """The nodes one input may run more than once, or ``None``: any node may.

    A node may run again when its edges lead back to it (a loop of plain edges, or of a node
    waiting on several others). A conditional edge (it may loop or ``Send`` a node many times)
    or a node declaring ``Command`` destinations makes the routes depend on the replies:
    ``None``. As :func:`linear_steps`, a node with a plain outgoing edge and no declared
    ``Command`` destination is taken not to jump.
    """
    from langgraph.graph import END

    if builder.branches or any(spec.ends for spec in builder.nodes.values()):
        return None
    out: dict[str, set[str]] = {}
    for start, end in builder.edges:
        out.setdefault(start, set()).add(end)
    for starts, end in builder.waiting_edges:
        for start in starts:
            out.setdefault(start, set()).add(end)
    again = set()
    for node in builder.nodes:
        seen: set[str] = set()
        todo = list(out.get(node, ()))
        while todo:
            nxt = todo.pop()
            if nxt == node:
                again.add(node)
                break
            if nxt in seen or nxt == END:
                continue
            seen.add(nxt)
            todo.extend(out.get(nxt, ()))
    return again


def estimate_graph(
    config: RunConfig,
    spec: str,
    inputs: Path,
    *,
    steps: Sequence[str] | None = None,
    calls: Mapping[str, int] | None = None,
    trip_rate: float | None = None,
) -> Estimate:
    """Predict ``biasbreaker run --graph spec --inputs inputs`` with this configuration.

    Args:
        config: The run's configuration.
        spec: ``MODULE:FACTORY``.
        inputs: The JSON Lines inputs file.
        steps: The nodes one input passes through, in order (``--steps``), or ``None`` to
            walk a linear graph (:func:`linear_steps`).
        calls: LLM calls one run of a node makes, by node (default 1 each).
        trip_rate: Share of guarded steps that trip, for the expectation, or ``None``.

    Raises:
        ConfigError: Bad configuration, ``--graph``, ``--steps`` or ``--calls`` (named, with
            the fix).
        InputError: The inputs file cannot be read, holds no input, or has a line
            ``biasbreaker run`` would fail before any call (not JSON, not an object, a key the
            graph's input state lacks: :func:`~biasbreaker_plugins.demo.run_graph.checked_inputs`,
            the messages ``run`` gives, each naming its line).
    """
    from langgraph.graph import StateGraph

    kernel = phase_kernel(config, traces=None, extra=ESTIMATE_SETTINGS)
    factory = load_factory(spec, cwd=config.cwd)
    try:
        builder = factory(llm=NoCallClient()) if takes_llm(factory) else factory()
    except Exception as exc:
        raise ConfigError(
            f"--graph {spec!r}: the factory raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(builder, StateGraph):
        raise ConfigError(
            f"--graph {spec!r} returned {type(builder).__name__}, not a langgraph StateGraph "
            "builder (return it before .compile())"
        )
    probed = probed_nodes(builder)
    calls = dict(calls or {})
    unknown = sorted(set(calls) - set(probed))
    if unknown:
        raise ConfigError(
            f"--calls names {unknown}, which are not nodes of the graph; its nodes: "
            f"{sorted(probed)}"
        )
    if steps is None:
        path = linear_steps(builder)
        walked = "walked from the graph's edges (one path from START to END)"
    else:
        path = [s for s in steps if s]
        bad = sorted({s for s in path} - set(probed))
        if bad or not path:
            raise ConfigError(
                f"--steps {','.join(steps)!r}: "
                + (f"{bad} are not nodes of the graph" if bad else "names no node")
                + f"; its nodes: {sorted(probed)}"
            )
        listed = Counter(path)
        loops = repeatable(builder)
        once = {n: c for n, c in listed.items() if c > 1 and loops is not None and n not in loops}
        if once:
            node, times = next(iter(once.items()))
            raise ConfigError(
                f"--steps {','.join(steps)!r} lists node {node!r} {times} times, but the graph "
                "runs it at most once per input (no edge leads from it back to it, and no "
                "conditional edge or Command can send it again); list each node as often as "
                f"one input runs it, e.g. --steps {','.join(dict.fromkeys(path))}"
            )
        walked = "as --steps gives them"
    probe = _probe(kernel)
    cfg = kernel.settings.probe
    lines = checked_inputs(inputs, builder)
    bad = [line.error["message"] for line in lines if line.error is not None]
    if bad:
        raise InputError(
            f"--inputs {inputs}: {len(bad)} of {len(lines)} line(s) are no input biasbreaker "
            "run can run (it would fail them before any call); fix them and estimate again: "
            + "; ".join(bad)
        )
    runs: list[list[Step]] = []
    held: list[dict[str, Any]] = []
    first = next((n for n in path if probed[n]), None)
    for line in lines:
        assert line.state is not None  # every bad line was refused above
        tokens = estimate_tokens(json.dumps(line.state, ensure_ascii=False))
        # every node is drawn from the line, so the same re-runs, or hold: drawn once per line
        drawn = Draw(0) if first is None else draw(probe, first, line.state)
        if drawn.held:  # the run pauses at its first probed step, for review
            held.append(
                {"line": line.number, "node": first, "held": drawn.held, "reason": drawn.reason}
            )
        runs.append(
            [
                Step(
                    node,
                    calls=calls.get(node, 1),
                    reruns=drawn.reruns if probed[node] else 0,
                    prompt_tokens=tokens * calls.get(node, 1),
                    held=drawn.held if probed[node] else "",
                )
                for node in path
            ]
        )
    prediction = predict(
        runs,
        _repairs(kernel),
        probe_rate=cfg.probe_rate,
        trip_rate=trip_rate,
        max_calls_per_run=cfg.max_calls_per_run,
    )
    assumptions = [
        f"steps of each input: {' -> '.join(path)}, {walked}; every node guarded, as "
        "biasbreaker run guards them"
        + (
            f"; not probed (@guard_node(probe=False)): {sorted(n for n in path if not probed[n])}"
            if not all(probed[n] for n in path)
            else ""
        ),
        "LLM calls per run of a node: "
        + ", ".join(f"{n} {calls.get(n, 1)}" for n in dict.fromkeys(path))
        + " (--calls NODE=N; default 1)",
        "each node's input names the persons and groups its input line names (the probe's "
        "re-runs are drawn from the line)",
        "prompt tokens: the input line's JSON per call (a lower bound: a node's prompt adds "
        "its own instructions)",
        "an input the probe would hold (an unsupported language, a mention it cannot vary, "
        "more re-runs than [probe] max_calls_per_step) runs up to its first probed step and "
        "pauses there for review, as biasbreaker run reports it (status review): nothing "
        "re-run, no repair, no later step (a reviewer's resume is not counted)",
        *COMMON_ASSUMPTIONS,
        *((ADAPTIVE_ASSUMPTION,) if cfg.adaptive else ()),
    ]
    return Estimate(f"graph {spec} on {inputs}", {"run": prediction}, assumptions, held)


# ---------------------------------------------------------------------------- the demo


def hiring_steps(
    posting: Any, shortlist: int, count: Any, *, guarded: bool, short: bool = False
) -> list[Step]:
    """The four steps of one posting: screen (one call per applicant), ranker, reviewer, decider.

    Args:
        posting: The :class:`~biasbreaker_plugins.demo.hiring.Posting`.
        shortlist: ``[demo] shortlist``.
        count: ``(node, input) -> re-runs`` (:func:`biasbreaker.estimate.reruns` with the
            phase's probe), used when ``guarded``.
        guarded: Whether the phase guards the pipeline.
        short: ``[demo] prompts = "short"`` (the prompts the agents then send).
    """
    from biasbreaker_plugins.demo.hiring import jobs
    from biasbreaker_plugins.demo.hiring_graph import (
        decide_request,
        ranking_request,
        review_request,
        screen_request,
    )

    job = jobs()[posting.job]
    state = posting.graph_input()
    names = [c["name"] for c in state["candidates"]]
    prompts = {
        "screen": sum(
            estimate_tokens(screen_request(job, c, short=short).prompt) for c in state["candidates"]
        ),
        # before the screens are in (their verdict words are a few characters each)
        "ranker": estimate_tokens(ranking_request(job, state, short=short).prompt),
        "reviewer": estimate_tokens(review_request(job, names, short=short).prompt),
        "decider": estimate_tokens(decide_request(job, names[:shortlist], [], short=short).prompt),
    }
    own = {"screen": len(names), "ranker": 1, "reviewer": 1, "decider": 1}
    # every node is drawn from the same input, so the same re-runs: drawn once
    again = count("screen", state) if guarded else 0
    return [
        Step(node, calls=own[node], reruns=again, guarded=guarded, prompt_tokens=prompts[node])
        for node in own
    ]


def estimate_hiring(
    config: RunConfig, sizes: Any, seed: int, *, trip_rate: float | None = None
) -> Estimate:
    """Predict ``biasbreaker demo --scenario hiring`` with these sizes, phase by phase.

    Args:
        config: The demo's configuration (the user's, with the demo's defaults where silent).
        sizes: The :class:`~biasbreaker_plugins.demo.hiring_demo.Sizes` of the run.
        seed: The run's seed (the postings are drawn from it).
        trip_rate: Share of guarded steps that trip in the guarded and fresh-control phases,
            for the expectation, or ``None``.
    """
    from biasbreaker_plugins.demo.hiring import make_postings

    kernel = phase_kernel(config, traces=None, extra=ESTIMATE_SETTINGS)
    settings = kernel.settings
    probe = _probe(kernel)
    shortlist = settings.demo.shortlist
    short = settings.demo.prompts == "short"

    def count(node: str, state: Any) -> int:
        return reruns(probe, node, state)

    def phase(postings: Sequence[Any], *, guarded: bool, repairs: Repairs) -> Prediction:
        runs = [hiring_steps(p, shortlist, count, guarded=guarded, short=short) for p in postings]
        return predict(
            runs,
            repairs,
            probe_rate=settings.probe.probe_rate,
            trip_rate=trip_rate,  # a phase that cannot repair adds nothing at any rate
            max_calls_per_run=settings.probe.max_calls_per_run,
        )

    control = make_postings("control", sizes.control_runs, seed)
    postings = make_postings("posting", sizes.postings, seed)
    fresh = make_postings("fresh", sizes.fresh_control_runs, seed)
    repairs = _repairs(kernel)
    none = Repairs(frozenset())
    phases = {"calibration": phase(control, guarded=True, repairs=none)}
    if settings.llm.client == "fake":
        phases["reference"] = phase(postings, guarded=False, repairs=none)
    phases["unguarded"] = phase(postings, guarded=False, repairs=none)
    phases["guarded"] = phase(postings, guarded=True, repairs=repairs)
    phases["fresh-control"] = phase(fresh, guarded=True, repairs=repairs)
    recording = ", ".join(f"{k} = {v}" for k, v in RECORD_ONLY.items())
    assumptions = [
        "the demo's phases and graph: screen (one call per applicant) -> ranker -> reviewer "
        "-> decider, every node guarded in the calibration, guarded and fresh-control phases; "
        f"the calibration's breaker records only ({recording}), "
        "so it never repairs",
        "each node's input names the posting's applicants (the re-runs are drawn from the "
        "posting's input)",
        "prompt tokens: the agents' own prompts, before the screens and the ranking are in",
        *COMMON_ASSUMPTIONS,
        *((ADAPTIVE_ASSUMPTION,) if settings.probe.adaptive else ()),
    ]
    quick = " (quick)" if tuple(vars(sizes).values()) == _quick() else ""
    return Estimate(f"demo hiring{quick}, seed {seed}", phases, assumptions)


def _quick() -> tuple[int, ...]:
    from biasbreaker_plugins.demo.hiring_demo import QUICK_SIZES

    return tuple(QUICK_SIZES)


__all__ = [
    "ADAPTIVE_ASSUMPTION",
    "COMMON_ASSUMPTIONS",
    "ESTIMATE_SETTINGS",
    "Estimate",
    "NoCallClient",
    "estimate_graph",
    "estimate_hiring",
    "hiring_steps",
    "linear_steps",
    "parse_calls",
    "probed_nodes",
    "repeatable",
]
