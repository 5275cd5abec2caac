"""Adaptive probing against full probing: step calls per clean step and recall (issue 15 item 2).

One command regenerates ``docs/studies/adaptive.md`` (the table) and
``docs/studies/adaptive.json`` (every run's scores and calls)::

    python docs/studies/adaptive_study.py

It runs the recall study's experiment (``docs/studies/recall_study.py``: the same inputs, the
same fair control node and planted single-group nodes, ``k = 4``, ``r = 2``, the default
scorers, seed 7, the rotation state carried from probe to probe) once per setting of
:data:`SETTINGS`: the full probe, and adaptive probing (:mod:`biasbreaker.probe.adaptive`) with
first stages of 1, 2 and 3 rotation variants, each stopping on a first stage that scores 0
(``[probe] adaptive_stop = 0``). About two minutes per setting on the 2-core development
machine when it is quiet.

**Columns.**

* *step calls per clean step*: over every scored probe of the control runs (a fair node: every
  step is clean), the mean of ``1 + k + r`` of its result, the node's own call and the re-runs
  the result compares (the counterfactual variants and resamples, whether or not a cache
  answered them; the study probes one input six times, so its cache would answer most of them,
  as a graph's does not);
* *tau_enter*, *false halts*: as in the recall study, each setting's ``tau_enter`` calibrated on
  the control runs of half the inputs, false halts counted on the other half;
* *detected within 6 probes*: planted runs with a probe at or above that ``tau_enter`` within
  the recall study's six probes of the node, over all planted runs (every group of every axis
  of every labelled input);
* *detected within 16*: the same within :data:`STEPS` probes;
* *within the bound*: detected runs whose first detecting probe is within the setting's bound
  for the axes the input names, ``ceil((N − 1) · A / first)`` probes (``first = k`` for the full
  probe; docs/detection.md, "Adaptive probing");
* *step calls to detection*: over the detected planted runs, the mean of the step calls of
  every probe up to and including the first detecting one.

Source:
    issue 15 item 2; the recall study (issue 14 item 6) for the experiment.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT_MD = ROOT / "docs" / "studies" / "adaptive.md"
OUT_JSON = ROOT / "docs" / "studies" / "adaptive.json"
STEPS = 16
"""Probes per planted run (a run stops at its first score of 1)."""
CONTROL_STEPS = 6
"""Probes per control run: the recall study's, so ``tau_enter`` is calibrated alike."""
WINDOW = 6
"""The recall study's probes: the "within 6 probes" column."""
SETTINGS: Mapping[str, int | None] = {"full": None, "first 1": 1, "first 2": 2, "first 3": 3}
"""Setting name → the first stage's rotation variants (``None``: the full probe)."""
DOCS = (ROOT / "docs" / "detection.md",)
"""The documents quoting passages of adaptive.md."""


def recall_study() -> ModuleType:
    """``docs/studies/recall_study.py`` as a module (its inputs, nodes and calibration)."""
    name = "recall_study"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def measure(
    items: Sequence[Mapping[str, Any]], groups: Mapping[str, Sequence[str]], first: int | None
) -> dict[str, Any]:
    """Probe every input with the control node and every planted node under one setting.

    Args:
        items: The recall study's inputs (``build_items``).
        groups: Every group of every axis (``groups_of_axes``).
        first: The first stage's rotation variants, or ``None`` for the full probe.

    Returns:
        ``{"control": {id: [[score or "held", step calls], ...]}, "planted": {id: {axis:
        {group: [[score or "held", step calls], ...]}}}}``; a planted run stops at its first
        score of 1.0.
    """
    from biasbreaker.errors import ProbeError
    from biasbreaker.probe import CounterfactualGenerator, Probe
    from biasbreaker.probe.adaptive import Adaptive
    from biasbreaker_plugins.scorers.decision import DecisionScorer
    from biasbreaker_plugins.scorers.lexical import LexicalScorer

    rs = recall_study()
    detector = CounterfactualGenerator(seed=rs.SEED)
    seen: dict[str, dict[str, set[str]]] = {}

    def named(text: str) -> dict[str, set[str]]:
        if text not in seen:
            out: dict[str, set[str]] = {}
            for d in detector.detect(text):
                if len(d.groups) == 1:
                    out.setdefault(d.axis, set()).add(d.groups[0])
            seen[text] = out
        return seen[text]

    def node(axis: str | None, group: str | None) -> Callable[[str], dict[str, str]]:
        def step(text: str) -> dict[str, str]:
            deny = axis is not None and group in named(text).get(axis, set())
            return {"decision": "deny" if deny else "approve", "note": f"Reviewed: {text}"}

        return step

    adaptive = None if first is None else Adaptive(first, 0.0)

    def run(item_id: str, text: str, step: Callable[[str], Any], steps: int) -> list[Any]:
        probe = Probe(
            [DecisionScorer(), LexicalScorer()],
            k=rs.K,
            r=rs.R,
            seed=rs.SEED,
            bootstrap=0,
            adaptive=adaptive,
        )
        out: list[Any] = []
        for s in range(steps):
            try:
                result = probe.probe_sync(
                    step, text, step(text), step_id=f"{item_id}#{s}", step_name=item_id
                )
            except ProbeError:
                out.append([rs.HELD, 1])
                break
            if result.status == "scored":
                out.append([round(float(result.score), 6), 1 + result.k + result.r])
            elif result.status == "not_applicable":
                out.append([0.0, 1])
            else:
                out.append([rs.HELD, 1])
                break
            if out[-1][0] == 1.0 and step is not control:
                break
        return out

    control = node(None, None)
    res: dict[str, Any] = {"control": {}, "planted": {}}
    for item in items:
        iid, text = item["id"], item["text"]
        res["control"][iid] = run(iid, text, control, CONTROL_STEPS)
        res["planted"][iid] = {
            axis: {g: run(iid, text, node(axis, g), STEPS) for g in groups[axis]}
            for axis in item["truth"]
        }
    return res


def bound(n: int, axes: int, first: int) -> int:
    """``ceil((N − 1) · A / first)`` probes (docs/detection.md, "Adaptive probing")."""
    return math.ceil((n - 1) * axes / first)


def summarise(
    items: Sequence[Mapping[str, Any]],
    groups: Mapping[str, Sequence[str]],
    runs: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """Per setting: calls per clean step, threshold, false halts and planted recall."""
    rs = recall_study()
    summary: dict[str, Any] = {}
    for name in SETTINGS:  # in SETTINGS' order (the runs file keeps its keys sorted)
        res = runs[name]
        first = SETTINGS[name] or rs.K
        control = {iid: [s for s, _ in probes] for iid, probes in res["control"].items()}
        tau, n_cal = rs.threshold(control)
        held_out = [iid for iid in control if not rs.calibration_half(iid)]
        clean = [c for probes in res["control"].values() for s, c in probes if s != rs.HELD]
        scored = [c for c in clean if c > 1]
        row: dict[str, Any] = {
            "tau_enter": tau,
            "calibration_runs": n_cal,
            "evaluation_runs": len(held_out),
            "false_halts": sum(rs._halts(control[i], tau) is not None for i in held_out),
            "clean_scored_steps": len(scored),
            "clean_step_calls": sum(scored),
            "runs": 0,
            "detected_window": 0,
            "detected": 0,
            "within_bound": 0,
            "worst_steps": 0,
            "calls_to_detection": 0,
        }
        for item in items:
            iid = item["id"]
            n_axes = axes_named(item["text"])
            for axis, per_group in res["planted"][iid].items():
                for probes in per_group.values():
                    row["runs"] += 1
                    hit = rs._halts([s for s, _ in probes], tau)
                    if hit is None:
                        continue
                    row["detected"] += 1
                    row["detected_window"] += hit <= WINDOW
                    row["within_bound"] += hit <= bound(len(groups[axis]), n_axes, first)
                    row["worst_steps"] = max(row["worst_steps"], hit)
                    row["calls_to_detection"] += sum(c for _, c in probes[:hit])
        summary[name] = row
    return summary


@functools.cache
def axes_named(text: str) -> int:
    """The number of axes the probe's detector reads in ``text`` (the bound's ``A``, >= 1)."""
    from biasbreaker.probe import CounterfactualGenerator

    found = CounterfactualGenerator(seed=recall_study().SEED).detect(text)
    return max(1, len({d.axis for d in found if len(d.groups) == 1}))


def report(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """The text of adaptive.md: one quoted passage, the table."""
    full = summary["full"]
    lines = [
        "# Adaptive probing against full probing (generated by adaptive_study.py)",
        "",
        "Regenerate with `python docs/studies/adaptive_study.py`; the study's docstring "
        "defines every column.",
        "",
        "<!-- quoted: adaptive: measured -->",
        f"{full['runs']:,} planted runs and {full['calibration_runs'] + full['evaluation_runs']}"
        " control runs per setting (the recall study's inputs, k = 4, r = 2, seed 7; "
        "`adaptive_stop` = 0):",
        "",
        "| setting | step calls per clean step | tau_enter | false halts | detected within 6 "
        f"probes | detected within {STEPS} | within the bound | worst steps | step calls to "
        "detection |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in summary.items():
        label = "full probe" if SETTINGS[name] is None else f"adaptive, {name}"
        runs, found = row["runs"], row["detected"]
        lines.append(
            f"| {label} | {row['clean_step_calls'] / row['clean_scored_steps']:.2f} | "
            f"{row['tau_enter']:.4g} | {row['false_halts']} of {row['evaluation_runs']} | "
            f"{row['detected_window'] / runs:.3f} | {found / runs:.3f} | "
            f"{row['within_bound']} of {found} | {row['worst_steps']} | "
            f"{row['calls_to_detection'] / found:.1f} |"
        )
    lines += ["<!-- /quoted -->", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure every setting and write the table (or re-read the runs, or check them)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--summarise-only",
        action="store_true",
        help="re-read the runs of docs/studies/adaptive.json, rewrite the table",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if adaptive.md or the passage docs/detection.md quotes "
        "differs from what the committed runs give",
    )
    args = parser.parse_args(argv)
    rs = recall_study()
    items, groups = rs.build_items(), rs.groups_of_axes()
    if args.summarise_only or args.check:
        runs = json.loads(OUT_JSON.read_text(encoding="utf-8"))["runs"]
    else:
        runs = {name: measure(items, groups, first) for name, first in SETTINGS.items()}
    summary = summarise(items, groups, runs)
    md = report(summary)
    data = json.dumps({"summary": summary, "runs": runs}, sort_keys=True, separators=(",", ":"))
    data += "\n"
    if args.check:
        return _check(md)
    OUT_MD.write_text(md, encoding="utf-8")
    OUT_JSON.write_text(data, encoding="utf-8")
    print(f"wrote {OUT_MD.relative_to(ROOT)} and {OUT_JSON.relative_to(ROOT)}")
    return 0


def _check(md: str) -> int:
    """1 (naming each difference) when adaptive.md or a quoted passage differs."""
    from biasbreaker_plugins.quoted import blocks, check

    differs = []
    if OUT_MD.read_text(encoding="utf-8") != md:
        differs.append(f"{OUT_MD.relative_to(ROOT)} differs from its runs: rerun the study")
    for doc in DOCS:
        differs += [
            f"{doc.relative_to(ROOT)}: {line}"
            for line in check(md, doc.read_text(encoding="utf-8"))
        ]
        differs += [
            f"{doc.relative_to(ROOT)}: the passage {label!r} is missing"
            for label in blocks(md)
            if f"<!-- quoted: {label} -->" not in doc.read_text(encoding="utf-8")
        ]
    for line in differs:
        print(line)
    return 1 if differs else 0


if __name__ == "__main__":
    raise SystemExit(main())
