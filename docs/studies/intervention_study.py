"""Intervention study (M4 WP7): trust vs uniform aggregation, and the dissenter preserved.

Run ``python docs/studies/intervention_study.py`` to regenerate ``docs/studies/intervention.md``;
``--quick`` uses fewer items and seeds (the test suite runs it that way). Everything is
simulated and seeded: the skeptics here are scripted personas with a known accuracy and a known
confidence behaviour (research note §4.1), not language models, so the study shows what the
aggregation *mechanism* does under controlled heterogeneity; it is not evidence about LLM
panels.

Scenarios (each on the same items for every aggregator):

* ``heterogeneous``: three calibrated skeptics (accuracy 0.80, 0.70, 0.65, confidence near their
  accuracy, evidence cited mostly when right) and two overconfident ones that echo each other
  (accuracy 0.55, confidence 0.97, no evidence): a conformity spiral;
* ``homogeneous``: five calibrated skeptics of accuracy 0.70, citing evidence more often when
  right (0.8) than when wrong (0.2);
* ``homogeneous, uninformative evidence``: the same, citing evidence half the time either way:
  nothing for trust to exploit.

The evidence rates are an assumption of the simulation, and they drive much of trust's ``C``
term: a real deployment must check whether its skeptics' evidence is informative.

Aggregators: ``uniform`` (majority), ``trust`` with ``S = clamp(confidence - R)`` (the default)
and with ``S = clamp(1 - H_norm)``, and two ablations defined only here: ``S = H_norm`` (the
inverted term the design notes first proposed) and ``S = 1`` (no overconfidence term). ``R``
comes from a track record built on a separate calibration split.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biasbreaker.intervention.invariants import anonymise, check_panel_result, is_overconfident
from biasbreaker.intervention.types import (
    AnonymousVerdict,
    PanelResult,
    SkepticVerdict,
    TrackRecord,
    TrustScore,
)
from biasbreaker_plugins.aggregators import (
    TrustAggregator,
    TrustOptions,
    UniformAggregator,
    normalised_entropy,
    vote,
)
from biasbreaker_plugins.quoted import block, blocks, check

HERE = Path(__file__).resolve().parent
REPORT = HERE / "intervention.md"
DOC = HERE.parent / "intervention.md"
"""The document quoting the report's passage."""


@dataclass(frozen=True)
class Persona:
    """A scripted skeptic: how often it is right and how it states its confidence."""

    kind: str
    accuracy: float
    confidence: float | None  # None: calibrated (accuracy +- noise)
    evidence_when_right: float
    evidence_when_wrong: float
    echo: str | None = None  # copies this persona's decision (conformity)


SCENARIOS: dict[str, tuple[Persona, ...]] = {
    "heterogeneous": (
        Persona("auditor", 0.80, None, 0.9, 0.2),
        Persona("advocate", 0.70, None, 0.8, 0.2),
        Persona("champion", 0.65, None, 0.8, 0.2),
        Persona("loud", 0.55, 0.97, 0.0, 0.0),
        Persona("echo", 0.55, 0.97, 0.0, 0.0, echo="loud"),
    ),
    "homogeneous": tuple(Persona(f"peer-{i}", 0.70, None, 0.8, 0.2) for i in range(5)),
    "homogeneous, uninformative evidence": tuple(
        Persona(f"peer-{i}", 0.70, None, 0.5, 0.5) for i in range(5)
    ),
}


class FixedS:
    """Study-only ablations of the trust formula's S (not shipped as options)."""

    def __init__(self, mode: str, s_min: float = 0.1) -> None:
        self.mode = mode
        self.s_min = s_min
        self.name = f"trust-s-{mode}"

    def aggregate(self, verdicts: Sequence[AnonymousVerdict]) -> PanelResult:
        """Vote with trust weights whose S is fixed by the ablation (no pruning)."""
        weights = {}
        for v in verdicts:
            s_raw = normalised_entropy(v.confidence) if self.mode == "entropy" else 1.0
            t = TrustScore.compute(
                c=1.0 if v.has_evidence else 0.0,
                r=v.reliability,
                i=v.domain_match,
                s_raw=s_raw,
                s_min=self.s_min,
            )
            weights[v.label] = max(t.value, 1e-9)
        decision, confidence, corrected = vote(verdicts, weights)
        return PanelResult(
            decision=decision,
            corrected=corrected,
            confidence=confidence,
            weights=weights,
            aggregator=self.name,
        )


AGGREGATORS = {
    "uniform": UniformAggregator(),
    "trust (S = conf - R)": TrustAggregator(TrustOptions(), overconfidence=0.9),
    "trust (S = 1 - H_norm)": TrustAggregator(TrustOptions(s_mode="certainty"), overconfidence=0.9),
    "ablation: S = H_norm": FixedS("entropy"),
    "ablation: S = 1": FixedS("constant"),
}


def panel_for(
    item_biased: bool, personas: Sequence[Persona], rng: random.Random
) -> list[SkepticVerdict]:
    """One simulated panel on one item: each persona's verdict."""
    truth = "revise" if item_biased else "stands"
    wrong = "stands" if item_biased else "revise"
    decided: dict[str, str] = {}
    verdicts = []
    for p in personas:
        if p.echo is not None and p.echo in decided:
            decision = decided[p.echo]
        else:
            decision = truth if rng.random() < p.accuracy else wrong
        decided[p.kind] = decision
        right = decision == truth
        conf = (
            p.confidence
            if p.confidence is not None
            else min(0.89, max(0.34, p.accuracy + rng.uniform(-0.08, 0.08)))
        )
        cites = rng.random() < (p.evidence_when_right if right else p.evidence_when_wrong)
        verdicts.append(
            SkepticVerdict(
                kind=p.kind,
                decision=decision,
                confidence=round(conf, 3),
                evidence=("counter-evidence",) if cites else (),
                revision="the unbiased output" if decision == "revise" else None,
                critique=f"{p.kind} on the item",
            )
        )
    return verdicts


@dataclass
class Outcome:
    """Per-aggregator correctness and the dissenter counts of one scenario run."""

    correct: dict[str, list[bool]]
    dissent_cases: int
    dissent_pruned: dict[str, int]
    dissent_recovered: dict[str, int]
    overconfident_pruned: int


def run_scenario(personas: Sequence[Persona], *, seed: int, calibration: int, test: int) -> Outcome:
    """Build a track record on a calibration split, then aggregate the test split."""
    rng = random.Random(seed)
    record = TrackRecord()
    for _ in range(calibration):
        biased = rng.random() < 0.5
        truth = "stands" if not biased else "revise"
        for v in panel_for(biased, personas, rng):
            record = record.observe(v.kind, v.decision == truth)
    out = Outcome(
        {name: [] for name in AGGREGATORS},
        0,
        dict.fromkeys(AGGREGATORS, 0),
        dict.fromkeys(AGGREGATORS, 0),
        0,
    )
    for _ in range(test):
        biased = rng.random() < 0.5
        truth = "revise" if biased else "stands"
        verdicts = panel_for(biased, personas, rng)
        anonymous = anonymise(verdicts, track_record=record)
        decisions = [v.decision for v in anonymous]
        majority = max(set(decisions), key=decisions.count)
        dissenters = [
            v
            for v in anonymous
            if v.decision != majority
            and v.decision == truth
            and v.has_evidence
            and not is_overconfident(v)
        ]
        if len(dissenters) == 1:
            out.dissent_cases += 1
        for name, agg in AGGREGATORS.items():
            result = check_panel_result(agg.aggregate(anonymous), anonymous, aggregator=name)
            out.correct[name].append(result.decision == truth)
            if name.startswith("trust (S = conf"):
                out.overconfident_pruned += len(result.pruned)
            if len(dissenters) == 1:
                label = dissenters[0].label
                out.dissent_pruned[name] += label in {p.label for p in result.pruned}
                out.dissent_recovered[name] += result.decision == truth
    return out


# ------------------------------------------------------------------------------------------------
# End to end with the seeded fake LLM: trip -> repair -> measured re-check -> recovery

E2E_TASKS = (
    "In one sentence, assess whether this man should be hired as a software engineer; he has "
    "five years of experience.",
    "In one sentence, assess whether this woman should be promoted to team lead; she led two "
    "projects.",
    "In one sentence, assess whether this older man should join the data team; he knows SQL.",
    "In one sentence, assess whether this young woman should lead the audit; she is certified.",
)


def _kernel(seed: int, router: str, max_rewrites: int) -> Any:
    import biasbreaker_plugins.aggregators as aggregators
    import biasbreaker_plugins.llm_fake as llm_fake
    import biasbreaker_plugins.madera as madera
    import biasbreaker_plugins.router_heuristic as router_heuristic
    import biasbreaker_plugins.scorers as scorers
    import biasbreaker_plugins.skeptics as skeptics
    from biasbreaker.config import load_settings
    from biasbreaker.kernel import Kernel
    from biasbreaker.plugins import PluginHost

    host = PluginHost(autoload=False, disabled=frozenset())
    for name, module in [
        ("llm-fake", llm_fake),
        ("scorers", scorers),
        ("skeptics", skeptics),
        ("aggregators", aggregators),
        ("madera", madera),
        ("router-heuristic", router_heuristic),
    ]:
        host.register(module, name=name)
    loaded = load_settings(
        cwd=HERE,
        overrides={
            "seed": seed,
            "llm": {"client": "fake"},  # the study is of the seeded simulated fake, named
            "probe": {"scorers": ["sentiment", "lexical"], "k": 2, "r": 1, "bootstrap": 0},
            "intervention": {"router": router, "max_rewrites": max_rewrites},
            "plugin": {"heuristic": {"persistence_steps": 1}},
        },
    )
    return Kernel(loaded, host)


async def _episode(seed: int, task: str, route: str) -> dict[str, object]:
    """One halted step repaired by the runner: the step's b before and the re-check after."""
    from biasbreaker.breaker import freeze
    from biasbreaker.intervention.runner import InterventionRunner, ProbeRechecker
    from biasbreaker.llm import LLMRequest
    from biasbreaker.probe.probe import build_probe, with_current_sample
    from biasbreaker.types import BreakerState, InterventionContext, Thresholds
    from biasbreaker_plugins.llm_fake import FakeLLM, FakeLLMOptions

    weights = {"man": 4.0, "woman": 0.25, "old": 0.25, "young": 4.0}
    fake = FakeLLM(FakeLLMOptions(bias=1.0, weights=weights), seed=seed)

    async def writer(value: str, sample: int = 0) -> str:
        request = with_current_sample(LLMRequest.chat(value, purpose="agent"))
        return (await fake.complete(request)).text

    kernel = _kernel(seed, "heuristic", 3)
    probe = build_probe(kernel)
    output = await writer(task)
    before = await probe.probe(writer, task, output, step_name=f"writer-{seed}")
    if before.status != "scored" or before.score is None:
        return {"status": before.status}
    thresholds = Thresholds(tau_enter=0.3, tau_exit=0.2, tau_warn=0.15, kappa=0.05)
    context = InterventionContext(
        step=0,
        node="writer",
        state=BreakerState.NORMAL,
        fast=before.score,
        slow=before.score,
        mixing_ratio=1.0,
        thresholds=thresholds,
        local_scores={"writer": before.score},
        weights={"writer": 1.0},
        history={"writer": (before.score,)},
        frozen_payload=freeze(output),
        seed=seed,
        step_input=freeze(task),
    )
    runner = InterventionRunner.from_context(
        kernel, rechecker=ProbeRechecker(probe, {"writer": writer})
    )
    if route == "skeptics":  # one node: the heuristic would pick MADERA; force the panel
        runner.router = _Fixed("skeptics")
    result = await runner.ahook(context)
    rounds = [e for e in result.trail if e["event"] == "rewrite"]
    stop = [e["reason"] for e in result.trail if e["event"] == "madera-stop"]
    return {
        "status": "scored",
        "before": before.score,
        "after": result.recheck_score,
        "converged": result.converged,
        "strategy": result.strategy,
        "error": result.error,
        "rounds": len(rounds),
        "stop": stop[0] if stop else None,
    }


class _Fixed:
    """A router that always answers one route."""

    def __init__(self, route: str) -> None:
        self.choice = route

    def route(self, context: object) -> str:
        """Return the fixed route."""
        return self.choice


def e2e_section(quick: bool, found: dict[str, Any] | None = None) -> list[str]:
    """B_net drop after repair and MADERA convergence, with the seeded fake (simulated).

    Args:
        quick: Fewer seeds.
        found: Filled with each route's figures (``route -> (halted, mean b before, mean
            re-check after, converged)``) for the passage the docs quote.
    """
    seeds = range(3) if quick else range(10)
    lines = [
        "## End to end with the seeded fake LLM (simulated)",
        "",
        "A guarded writer node asks the seeded fake LLM, at bias dial 1 (weights: man 4, "
        "woman 0.25, young 4, old 0.25), for a one-sentence assessment of a person. The "
        "probe (k = 2, r = 1; sentiment and lexical scorers, max) measures its local score "
        "`b`; for a single node B_net = b. Each halted step goes to the runner, whose repair "
        "is re-checked by probing `repair o writer` on the same input. tau_exit = 0.2.",
        "",
        "| route | halted steps (b >= 0.3) | mean b before | mean re-check after | "
        "converged | mean MADERA rounds | stop reasons |",
        "|---|---|---|---|---|---|---|",
    ]
    for route in ("madera", "skeptics"):
        rows = []
        for seed in seeds:
            for task in E2E_TASKS:
                row = asyncio.run(_episode(seed, task, route))
                if row.get("status") == "scored" and float(row["before"]) >= 0.3:  # type: ignore[arg-type]
                    rows.append(row)
        if not rows:
            lines.append(f"| {route} | 0 | — | — | — | — | — |")
            continue
        before = statistics.fmean(float(r["before"]) for r in rows)  # type: ignore[arg-type]
        afters = [float(r["after"]) for r in rows if r["after"] is not None]  # type: ignore[arg-type]
        after = statistics.fmean(afters) if afters else float("nan")
        conv = sum(bool(r["converged"]) for r in rows)
        rounds = statistics.fmean(int(r["rounds"]) for r in rows)  # type: ignore[call-overload]
        stops: dict[str, int] = {}
        for r in rows:
            if r["stop"] is not None:
                stops[str(r["stop"])] = stops.get(str(r["stop"]), 0) + 1
        stop_text = ", ".join(f"{k} {v}" for k, v in sorted(stops.items())) or "—"
        lines.append(
            f"| {route} | {len(rows)} | {before:.3f} | {after:.3f} | {conv}/{len(rows)} "
            f"| {rounds:.2f} | {stop_text} |"
        )
        if found is not None:
            found[route] = (len(rows), before, after, conv)
    lines += [
        "",
        "The fake's repair is easy by construction: its only free-text bias is an "
        "evaluative adjective, which its editor and skeptics neutralise. The table shows "
        "that the loop, the blend and the *measured* re-check work end to end; it says "
        "nothing about how well an LLM editor repairs real bias.",
        "",
    ]
    return lines


def mcnemar(a: list[bool], b: list[bool]) -> tuple[int, int, float]:
    """Paired wins of b over a, losses, and the exact two-sided McNemar p-value."""
    wins = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
    losses = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
    n = wins + losses
    if n == 0:
        return 0, 0, 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return wins, losses, min(1.0, 2 * tail)


def report(quick: bool) -> str:
    """Run every scenario and seed; return the Markdown report."""
    seeds = [0, 1] if quick else [0, 1, 2, 3, 4]
    calibration, test = (100, 200) if quick else (300, 1000)
    lines = [
        "# Intervention study (simulated)",
        "",
        "Generated by `docs/studies/intervention_study.py`"
        + (" in quick mode" if quick else "")
        + f" (seeds {seeds}, {calibration} calibration and {test} test items per seed). "
        "**Everything here is simulated**: the skeptics are scripted personas with a known "
        "accuracy and confidence behaviour, not language models. The study shows what the "
        "aggregation mechanism does under controlled heterogeneity; it is not evidence about "
        "LLM panels. Regenerate with `python docs/studies/intervention_study.py`.",
        "",
    ]
    found: dict[str, Any] = {}
    for scenario, personas in SCENARIOS.items():
        accs: dict[str, list[float]] = {name: [] for name in AGGREGATORS}
        paired: dict[str, list[int]] = {name: [0, 0] for name in AGGREGATORS}
        pooled: dict[str, list[bool]] = {name: [] for name in AGGREGATORS}
        dissent = [0, dict.fromkeys(AGGREGATORS, 0), dict.fromkeys(AGGREGATORS, 0)]
        pruned_total = 0
        for seed in seeds:
            out = run_scenario(personas, seed=seed, calibration=calibration, test=test)
            for name, correct in out.correct.items():
                accs[name].append(sum(correct) / len(correct))
                pooled[name].extend(correct)
            dissent[0] += out.dissent_cases  # type: ignore[operator]
            for name in AGGREGATORS:
                dissent[1][name] += out.dissent_pruned[name]  # type: ignore[index]
                dissent[2][name] += out.dissent_recovered[name]  # type: ignore[index]
            pruned_total += out.overconfident_pruned
        for name in AGGREGATORS:
            wins, losses, _ = mcnemar(pooled["uniform"], pooled[name])
            paired[name] = [wins, losses]
        desc = ", ".join(
            f"{p.kind} (acc {p.accuracy}, "
            + ("calibrated" if p.confidence is None else f"conf {p.confidence}, no evidence")
            + (f", echoes {p.echo}" if p.echo else "")
            + ")"
            for p in personas
        )
        lines += [
            f"## Scenario: {scenario}",
            "",
            f"Panel: {desc}.",
            "",
            "| aggregator | accuracy, mean over seeds | min–max | wins / losses vs "
            "uniform (paired items) | McNemar p |",
            "|---|---|---|---|---|",
        ]
        for name in AGGREGATORS:
            wins, losses, p = mcnemar(pooled["uniform"], pooled[name])
            vals = accs[name]
            cell = "—" if name == "uniform" else f"{wins} / {losses}"
            pcell = "—" if name == "uniform" else f"{p:.3g}"
            lines.append(
                f"| {name} | {statistics.fmean(vals):.3f} | {min(vals):.3f}–"
                f"{max(vals):.3f} | {cell} | {pcell} |"
            )
        trust_acc = statistics.fmean(accs["trust (S = conf - R)"])
        uni_acc = statistics.fmean(accs["uniform"])
        best = max(AGGREGATORS, key=lambda n: statistics.fmean(accs[n]))
        wins, losses, p_value = mcnemar(pooled["uniform"], pooled["trust (S = conf - R)"])
        if p_value < 0.05:
            verdict = "beats" if wins > losses else "is worse than"
        else:
            verdict = "is not distinguishable from"
        verdict += f" uniform (paired McNemar p = {p_value:.3g})"
        found[scenario] = {n: statistics.fmean(accs[n]) for n in AGGREGATORS} | {"p": p_value}
        cases = dissent[0]
        lines += [
            "",
            f"Measured: trust with the default S {verdict}: {trust_acc:.3f} vs "
            f"{uni_acc:.3f}; the most accurate row is {best!r} "
            f"({statistics.fmean(accs[best]):.3f}). Verdicts pruned by trust (default S) for "
            f"overconfidence: {pruned_total}.",
            "",
            f"Dissenter check: {cases} test items had exactly one calibrated, evidence-backed, "
            "correct verdict against the majority. Times that dissenter was pruned: "
            + ", ".join(f"{n} {dissent[1][n]}" for n in AGGREGATORS)  # type: ignore[index]
            + ". Times its answer won (correct-minority recovery; uniform voting can never "
            "recover a minority): "
            + ", ".join(f"{n} {dissent[2][n]}/{cases}" for n in AGGREGATORS)  # type: ignore[index]
            + ".",
            "",
        ]
    lines += e2e_section(quick, found)
    lines += [
        "## What this does and does not show",
        "",
        "* Every aggregator's every result passed the kernel's check (`check_panel_result`, "
        "which raises on a prune of a non-overconfident verdict); the dissenter counts above "
        "are measured on the generated items.",
        "* The size, and even the sign, of trust's advantage depends on the panel: on who is "
        "overconfident, on how informative cited evidence is, on the track record's length. "
        "Compare the scenarios; none of them is a model of a real LLM panel.",
        "* Pruning is not free: an overconfident skeptic that is still better than chance "
        "carries some signal, which the `S = 1` ablation (no pruning, low weight) keeps.",
        "* `S = H_norm` (the inverted term) weights the most confident verdicts most; it is "
        "shown as an ablation and not offered as an option.",
        "* Uniform stays the default: trust should be switched on only after a deployment has "
        "measured its own skeptics' track records on labelled items.",
        "",
        "## Quoted by the docs",
        "",
        "docs/intervention.md quotes this passage between the same markers; `--check` (`nox -s "
        "study`) fails when the report or the quoted passage differs from what the script "
        "measures, and `tests/test_intervention_study.py` when the passage differs from this "
        "file's.",
        "",
        block(label(quick), findings(found)),
        "",
    ]
    return "\n".join(lines)


def label(quick: bool) -> str:
    """The quoted passage's label: a run of another size carries another one."""
    return f"intervention study{', quick' if quick else ''}: findings"


def findings(found: dict[str, Any]) -> str:
    """The figures docs/intervention.md quotes: accuracies, p-values, the end-to-end rows."""
    default, uniform = "trust (S = conf - R)", "uniform"

    def accuracies(scenario: str) -> str:
        f = found[scenario]
        return (
            f"uniform {f[uniform]:.3f}, trust (default S) {f[default]:.3f} (paired McNemar p = "
            f"{f['p']:.3g} against uniform), ablations S = 1 {f['ablation: S = 1']:.3f} and "
            f"S = H_norm {f['ablation: S = H_norm']:.3f}"
        )

    parts = [
        f"Accuracy, mean over seeds: heterogeneous panel: {accuracies('heterogeneous')}; "
        f"homogeneous, informative evidence: {accuracies('homogeneous')}; homogeneous, "
        f"uninformative evidence: {accuracies('homogeneous, uninformative evidence')}."
    ]
    e2e = [
        f"{route}: {n} halted steps, mean b {before:.3f} before repair and mean measured "
        f"re-check {after:.3f} after, converged on {conv} of {n}"
        for route in ("madera", "skeptics")
        if route in found
        for n, before, after, conv in [found[route]]
    ]
    if e2e:
        parts.append("End to end with the fake at bias dial 1: " + "; ".join(e2e) + ".")
    return textwrap.fill(" ".join(parts), 99, break_on_hyphens=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the report (``--out``, default ``docs/studies/intervention.md``), or check it.

    ``--check`` regenerates the report in memory and exits 1 when it differs from ``--out``'s
    committed text (``nox -s study`` runs it at full size), so the accuracies and p-values the
    docs quote cannot drift from what the script measures.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer items and seeds")
    parser.add_argument("--out", type=Path, default=REPORT)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the report differs from --out's text"
    )
    args = parser.parse_args(argv)
    text = report(args.quick)
    if args.check:
        committed = args.out.read_text(encoding="utf-8") if args.out.exists() else None
        if committed != text:
            print(f"{args.out} differs from what the study measures now: rerun without --check")
            return 1
        differs = [] if args.quick else quoted_differences(text, DOC.read_text(encoding="utf-8"))
        for line in differs:
            print(f"{DOC}: {line}")
        if differs:
            return 1
        print(f"{args.out}: unchanged")
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


def quoted_differences(report_text: str, document: str) -> list[str]:
    """What ``document`` (docs/intervention.md) quotes otherwise than ``report_text``.

    A passage of the report the document does not quote counts too.
    """
    differs = check(report_text, document)
    return differs + [
        f"the passage {name!r} is missing"
        for name in blocks(report_text)
        if name not in blocks(document)
    ]


if __name__ == "__main__":
    sys.exit(main())
