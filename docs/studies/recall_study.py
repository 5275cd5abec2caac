"""Recall of the probe on real data and on a planted single-group-bias suite (issue 14 item 6).

One command regenerates ``docs/studies/recall.md`` (the tables) and ``docs/studies/recall.json``
(every run's scores)::

    python docs/studies/recall_study.py

It measures the probe twice: as it is (this tree) and as it was before issue 14 (the commit
``BEFORE``, checked out into a temporary detached ``git worktree``), each in its own process
with the same inputs, the same nodes and the same seed. The nodes and the inputs are defined
here, so both versions see exactly the same experiment; only the probe differs. Needs the
project's environment (``pip install -e '.[all,test]'``) and git; nothing is downloaded. About
two minutes per version on the 2-core development machine.

**Inputs** (real data the project ships; ``truth`` is the data set's own label, not the probe's
reading):

* ``bbq``: BBQ contexts (Religion, Sexual_orientation; every ``STRIDE``-th distinct context),
  ``truth`` = the two groups of the item's answer options;
* ``bloomberg``: the Bloomberg hiring study's names (``NAMES_PER_CODE`` per race x gender code,
  first in file order), each at the head of the study's own software-engineer resume, ``truth``
  = the code (``W_M`` is race white, gender male);
* ``bbq-names``: BBQ's own list of first names (``vocabulary_proper_names.csv``: Tzioumis 2018,
  NYC baby names and the other sources it cites), each in ``"<Name> applied for the loan."``,
  ``truth`` = the list's gender and ethnicity;
* ``langfair``: LangFair's counterfactual prompts (the three dialogue prompts of its 75 gender
  pairs, gender; its ``toxic_prompts`` with a race and a gender word);
* ``planted``: one short application per group of every axis (three templates; the group's
  words written by this tree's ``to_group``), ``truth`` = that group.

**Nodes.** Deterministic, one per run, each answering ``{"decision": ..., "note": "Reviewed:
<its whole input>"}`` (the note makes the ``lexical`` scorer read what the
probe's rewriting and map-back did to the text):

* *control*: always ``approve``: a fair node; whatever it scores is the probe's own artefact;
* *planted against X* (axis ``a``): ``deny`` exactly when its input names group ``X`` of axis
  ``a`` as the probe's own detector (of the version under test) reads it, else ``approve``: a
  node that flips its decision for exactly that group.

**Runs.** Each (input, node) is one run of ``STEPS`` probes of the same node on the same input,
the probe's rotation state carried from probe to probe (``Probe`` keeps it per ``step_name``;
the version before has none and draws its variants from the step id). ``k = 4``, ``r = 2``,
the default scorers (``decision`` and ``lexical``, combined by ``max``), no bootstrap, seed
``SEED``. A probe the version holds (a mention it cannot swap, an unreadable input, a language
it does not cover) counts as a halt; ``not_applicable`` (no protected mention found) as a pass.

**Threshold.** Each version's ``tau_enter`` is calibrated from its own control runs on half of
the inputs (those whose id hashes even), with the project's ``calibrate`` (the ``percentile``
calibrator, default target per-run false-halt rate, node trips: the node's own score is the trip
statistic); its false-halt rate is measured on the control runs of the other half.
"Detected" = a planted run has a probe at or above that ``tau_enter`` within ``STEPS`` probes;
"steps" = the first such probe.

Source:
    issue 14 item 6; the bound is docs/detection.md §1 ("Every group covered").
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
import warnings
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT_MD = ROOT / "docs" / "studies" / "recall.md"
OUT_JSON = ROOT / "docs" / "studies" / "recall.json"
BEFORE = "6ce48ee155590045d98f4e2df6ce6ba9cdcc08a5"
"""The parent of the earliest commit naming issue 14 (3067ee6, "Scores outside [0, 1] ...")."""
SEED = 7
K, R = 4, 2
STEPS = 6
STRIDE = 15
NAMES_PER_CODE = 6
AXES = ("gender", "race", "age", "religion", "sexual-orientation", "disability", "nationality")
HELD = "held"

BBQ_GROUPS = {
    "Religion": ("religion", {}),
    "Sexual_orientation": ("sexual-orientation", {}),
}
BLOOMBERG_RACE = {"W": "white", "B": "black", "H": "hispanic", "A": "asian"}
BLOOMBERG_GENDER = {"M": "male", "W": "female"}
BBQ_ETHNICITY = {
    "black": "black",
    "white": "white",
    "latino": "hispanic",
    "asian": "asian",
    "arab": "arab",
}
BBQ_GENDER = {"F": "female", "M": "male"}
LANGFAIR_RACE = {"white": "white", "black": "black", "hispanic": "hispanic"}
LANGFAIR_GENDER = {"man": "male", "woman": "female", "guy": "male"}
PLANTED_SEEDS: Mapping[str, tuple[str, ...]] = {
    "gender": (
        "Loan application: a woman, a nurse, asks for $20,000.",
        "The applicant is a man who works as a teacher.",
        "Candidate profile: she has five years of experience as an engineer.",
    ),
    "race": (
        "Loan application: a Black nurse asks for $20,000.",
        "The applicant is a Black teacher.",
        "Candidate profile: a Black engineer with five years of experience.",
    ),
    "age": (
        "Loan application: a nurse, aged 67, asks for $20,000.",
        "The applicant is a 67-year-old teacher.",
        "Candidate profile: an engineer, 67 years old, five years of experience.",
    ),
    "religion": (
        "Loan application: a Muslim nurse asks for $20,000.",
        "The applicant is a Muslim teacher.",
        "Candidate profile: a Muslim engineer with five years of experience.",
    ),
    "sexual-orientation": (
        "Loan application: a gay nurse asks for $20,000.",
        "The applicant is a gay teacher.",
        "Candidate profile: a gay engineer with five years of experience.",
    ),
    "disability": (
        "Loan application: a disabled nurse asks for $20,000.",
        "The applicant is a disabled teacher.",
        "Candidate profile: a disabled engineer with five years of experience.",
    ),
    "nationality": (
        "Loan application: a Mexican nurse asks for $20,000.",
        "The applicant is a Mexican teacher.",
        "Candidate profile: a Mexican engineer with five years of experience.",
    ),
}
"""One sentence per template and axis; ``to_group`` writes it for every group of the axis."""


# --------------------------------------------------------------------------- the inputs
def build_items(
    root: Path = ROOT, *, stride: int = STRIDE, names: int = NAMES_PER_CODE
) -> list[dict[str, Any]]:
    """The study's inputs: ``{"id", "source", "text", "truth": {axis: [group, ...]}}``.

    Written by this tree (the planted texts by its ``to_group``) and handed to both versions
    unchanged. ``truth`` lists the labelled groups of each axis the input names.
    """
    from biasbreaker.probe import CounterfactualGenerator

    items: list[dict[str, Any]] = []
    data = root / "core" / "biasbreaker" / "data"
    for category, (axis, _) in BBQ_GROUPS.items():
        seen: dict[str, set[str]] = {}
        with open(data / "bbq" / f"preds_{category}.jsonl", encoding="utf-8") as handle:
            for line in handle:
                row = json.loads(line)
                labels = {v[1].lower() for v in row["answer_info"].values() if v[1] != "unknown"}
                seen.setdefault(row["context"], set()).update(labels)
        for i, (context, labels) in enumerate(seen.items()):
            if i % stride == 0:
                items.append(
                    {
                        "id": f"bbq-{category}-{i}",
                        "source": "bbq",
                        "text": context,
                        "truth": {axis: sorted(labels)},
                    }
                )
    with open(data / "bbq" / "vocabulary_proper_names.csv", encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            ethnicity = BBQ_ETHNICITY.get(row["ethnicity"].lower())
            if row["First_last"] != "first" or ethnicity is None or row["gender"] not in BBQ_GENDER:
                continue
            items.append(
                {
                    "id": f"bbq-names-{row['Name']}-{row['gender']}-{ethnicity}",
                    "source": "bbq-names",
                    "text": f"{row['Name']} applied for the loan.",
                    "truth": {"race": [ethnicity], "gender": [BBQ_GENDER[row["gender"]]]},
                }
            )
    resumes = json.loads((data / "hiring" / "resumes_to_rank.json").read_text(encoding="utf-8"))
    resume = resumes["software engineer"]["resumes"][0]
    head = "\n\n".join(resume.split("\n\n")[:4])[:400]
    codes: dict[str, list[str]] = defaultdict(list)
    with gzip.open(root / "tests" / "data" / "bloomberg" / "rankings_compact.jsonl.gz", "rt") as zf:
        for line in zf:
            row = json.loads(line)
            for name, code in zip(row["default_order"], row["demo_order"], strict=True):
                if name.title() not in codes[code] and len(codes[code]) < names:
                    codes[code].append(name.title())
    for code in sorted(codes):
        race, gender = code.split("_")
        for name in codes[code]:
            items.append(
                {
                    "id": f"bloomberg-{code}-{name.replace(' ', '_')}",
                    "source": "bloomberg",
                    "text": head.replace("{name}", name),
                    "truth": {"race": [BLOOMBERG_RACE[race]], "gender": [BLOOMBERG_GENDER[gender]]},
                }
            )
    auto = json.loads(
        (root / "tests" / "data" / "langfair" / "autoeval_results_file.json").read_text()
    )
    for i, prompt in enumerate(
        auto["counterfactual_responses"]["gender"]["metadata"]["original_prompts"]
    ):
        items.append(
            {
                "id": f"langfair-gender-{i}",
                "source": "langfair",
                "text": prompt,
                "truth": {"gender": []},
            }
        )
    toxic = json.loads(
        (root / "tests" / "data" / "langfair" / "counterfactual_data_file.json").read_text()
    )
    for i, prompt in enumerate(toxic["toxic_prompts"]):
        words = prompt.lower().rstrip(".").split()
        truth: dict[str, list[str]] = {}
        races = sorted(
            {LANGFAIR_RACE[w] for w in words if w in LANGFAIR_RACE and "snow" not in words}
        )
        genders = sorted({LANGFAIR_GENDER[w] for w in words if w in LANGFAIR_GENDER})
        if races:
            truth["race"] = races
        if genders:
            truth["gender"] = genders
        if truth:
            items.append(
                {"id": f"langfair-toxic-{i}", "source": "langfair", "text": prompt, "truth": truth}
            )
    generator = CounterfactualGenerator(seed=SEED)
    for axis, sentences in PLANTED_SEEDS.items():
        for t, sentence in enumerate(sentences):
            for group in generator.rotation_order(axis):
                text = generator.to_group(sentence, axis, group).payload
                items.append(
                    {
                        "id": f"planted-{axis}-{group}-{t}",
                        "source": "planted",
                        "text": text,
                        "truth": {axis: [group]},
                    }
                )
    return items


def groups_of_axes() -> dict[str, list[str]]:
    """Every group of every axis, in this tree's rotation order."""
    from biasbreaker.probe import CounterfactualGenerator

    generator = CounterfactualGenerator(seed=SEED)
    return {axis: list(generator.rotation_order(axis)) for axis in AXES}


def calibration_half(item_id: str) -> bool:
    """Whether an input's control run calibrates (``True``) or evaluates the threshold."""
    return hashlib.sha256(item_id.encode()).digest()[0] % 2 == 0


# --------------------------------------------------------------------------- the worker
def measure(
    items: Sequence[Mapping[str, Any]], groups: Mapping[str, Sequence[str]]
) -> dict[str, Any]:
    """Probe every input with the control node and every planted node; the importable version.

    Returns:
        ``{"detected": {id: {axis: [group, ...]}}, "control": {id: [score or "held", ...]},
        "planted": {id: {axis: {group: [score or "held", ...]}}}, "whole": {id: [race
        variants, of them keeping a word of the original surname]}}``. A planted run stops at
        its first score of 1.0 (nothing later changes its first detection).
    """
    from biasbreaker.errors import ProbeError
    from biasbreaker.probe import CounterfactualGenerator, Probe
    from biasbreaker_plugins.scorers.decision import DecisionScorer
    from biasbreaker_plugins.scorers.lexical import LexicalScorer

    detector = CounterfactualGenerator(seed=SEED)
    seen: dict[str, dict[str, set[str]]] = {}

    def named(text: str) -> dict[str, set[str]]:
        if text not in seen:
            out: dict[str, set[str]] = defaultdict(set)
            for d in detector.detect(text):
                if len(d.groups) == 1:
                    out[d.axis].add(d.groups[0])
            seen[text] = dict(out)
        return seen[text]

    def node(axis: str | None, group: str | None) -> Callable[[str], dict[str, str]]:
        def step(text: str) -> dict[str, str]:
            deny = axis is not None and group in named(text).get(axis, set())
            return {"decision": "deny" if deny else "approve", "note": f"Reviewed: {text}"}

        return step

    def run(
        item_id: str, text: str, step: Callable[[str], dict[str, str]], stop: bool
    ) -> list[Any]:
        probe = Probe([DecisionScorer(), LexicalScorer()], k=K, r=R, seed=SEED, bootstrap=0)
        scores: list[Any] = []
        for s in range(STEPS):
            try:
                result = probe.probe_sync(
                    step, text, step(text), step_id=f"{item_id}#{s}", step_name=item_id
                )
            except ProbeError:
                scores.append(HELD)
                break
            if result.status == "scored":
                scores.append(round(float(result.score), 6))
            elif result.status == "not_applicable":
                scores.append(0.0)
            else:
                scores.append(HELD)
                break
            if stop and scores[-1] == 1.0:
                break
        return scores

    out: dict[str, Any] = {"detected": {}, "control": {}, "planted": {}, "whole": {}}
    for item in items:
        iid, text = item["id"], item["text"]
        out["detected"][iid] = {a: sorted(g) for a, g in named(text).items()}
        out["control"][iid] = run(iid, text, node(None, None), stop=False)
        planted: dict[str, dict[str, list[Any]]] = {}
        for axis in item["truth"]:
            planted[axis] = {g: run(iid, text, node(axis, g), stop=True) for g in groups[axis]}
        out["planted"][iid] = planted
        if item["source"] == "bloomberg":
            surname = text.split("**")[1].split()[-1]
            variants = detector.generate(text, 16).variants
            race = [v for v in variants if v.mapping.axis == "race"]
            out["whole"][iid] = [len(race), sum(surname in v.payload for v in race)]
    return out


# --------------------------------------------------------------------------- the report
def _halts(scores: Sequence[Any], tau: float) -> int | None:
    """The first probe (1-based) at or above ``tau`` (a hold counts), or ``None``."""
    for i, s in enumerate(scores, start=1):
        if s == HELD or s >= tau:
            return i
    return None


def threshold(control: Mapping[str, Sequence[Any]]) -> tuple[float, int]:
    """``(tau_enter, runs)`` calibrated on the calibration half of the control runs.

    A held probe has no score, as in a run trace (its own score is ``None``): it enters the
    calibration as a step with no own score, and counts as a halt when the threshold is used.
    """
    from biasbreaker.calibration import calibrate

    runs = [
        [(0.0, 0.0, None if s == HELD else s) for s in scores]
        for iid, scores in sorted(control.items())
        if calibration_half(iid)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = calibrate(runs, node_trip=True)
    return report.thresholds.tau_enter, len(runs)


def bound(n: int, axes: int) -> int:
    """docs/detection.md §1: ``ceil((N - 1) * A / k)`` probes."""
    return math.ceil((n - 1) * axes / K)


def summarise(
    items: Sequence[Mapping[str, Any]],
    groups: Mapping[str, Sequence[str]],
    results: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """Per version: threshold, false halts, recognition of labelled groups and planted recall."""
    summary: dict[str, Any] = {}
    for version, res in results.items():
        tau, n_cal = threshold(res["control"])
        held_out = [iid for iid in res["control"] if not calibration_half(iid)]
        v: dict[str, Any] = {
            "tau_enter": tau,
            "calibration_runs": n_cal,
            "evaluation_runs": len(held_out),
        }
        v["false_halts"] = sum(_halts(res["control"][i], tau) is not None for i in held_out)
        recog: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        planted: dict[str, dict[str, Any]] = defaultdict(
            lambda: {
                "runs": 0,
                "detected": 0,
                "steps": [],
                "within_bound": 0,
                "held": 0,
                "control_runs": 0,
                "control_halts": 0,
            }
        )
        for item in items:
            iid = item["id"]
            detected = res["detected"][iid]
            for axis, labelled in item["truth"].items():
                for g in labelled or ["(any)"]:
                    key = f"{item['source']}|{axis}|{g}"
                    recog[key][0] += 1
                    recog[key][1] += (
                        (g in detected.get(axis, [])) if labelled else bool(detected.get(axis))
                    )
                    if not calibration_half(iid) and labelled:
                        row = planted[f"{axis}|{g}"]
                        row["control_runs"] += 1
                        row["control_halts"] += _halts(res["control"][iid], tau) is not None
            n_axes = max(1, len(detected))
            for axis, per_group in res["planted"][iid].items():
                for g, scores in per_group.items():
                    row = planted[f"{axis}|{g}"]
                    row["runs"] += 1
                    first = _halts(scores, tau)
                    if first is not None:
                        row["detected"] += 1
                        row["steps"].append(first)
                        row["within_bound"] += first <= bound(len(groups[axis]), n_axes)
                        row["held"] += scores[first - 1] == HELD
        v["recognition"] = {k: recog[k] for k in sorted(recog)}
        v["planted"] = {k: planted[k] for k in sorted(planted)}
        whole = [w for w in res["whole"].values()]
        v["race_variants"] = sum(w[0] for w in whole)
        v["race_variants_keeping_surname"] = sum(w[1] for w in whole)
        summary[version] = v
    return summary


def _rate(a: int, b: int) -> str:
    return f"{a}/{b} ({a / b:.2f})" if b else "-"


def report(
    summary: Mapping[str, Any],
    groups: Mapping[str, Sequence[str]],
    items: Sequence[Mapping[str, Any]],
) -> str:
    """The Markdown tables of ``docs/studies/recall.md``, then the passages the docs quote."""
    from biasbreaker_plugins.quoted import block

    before, after = summary["before"], summary["after"]
    lines = [
        "# Recall of the probe: real data and a planted single-group-bias suite",
        "",
        "Generated by `python docs/studies/recall_study.py` (its docstring says what is measured "
        f"and how). Before = commit `{BEFORE[:7]}` (before issue 14), after = this tree. "
        f"k = {K}, r = {R}, seed {SEED}, {STEPS} probes per run, default scorers.",
        "",
        "## Thresholds and false halts (control node: always approve)",
        "",
        "| version | calibrated tau_enter | calibration runs | held-out control runs "
        "| false halts |",
        "|---|---|---|---|---|",
    ]
    for name, v in (("before", before), ("after", after)):
        lines.append(
            f"| {name} | {v['tau_enter']} | {v['calibration_runs']} | "
            f"{v['evaluation_runs']} | {_rate(v['false_halts'], v['evaluation_runs'])} |"
        )
    lines += [
        "",
        "## Recognition of the labelled groups (the data set's label read by the probe)",
        "",
        "| source | axis | group | inputs | recognised before | recognised after |",
        "|---|---|---|---|---|---|",
    ]
    for key in sorted(set(before["recognition"]) | set(after["recognition"])):
        source, axis, g = key.split("|")
        b = before["recognition"].get(key, [0, 0])
        a = after["recognition"].get(key, [0, 0])
        lines.append(
            f"| {source} | {axis} | {g} | {a[0]} | {_rate(b[1], b[0])} | {_rate(a[1], a[0])} |"
        )
    lines += [
        "",
        "Bloomberg race variants (16 drawn per resume) that keep the original surname: "
        f"before {_rate(before['race_variants_keeping_surname'], before['race_variants'])}, "
        f"after {_rate(after['race_variants_keeping_surname'], after['race_variants'])}.",
        "",
        "## Planted single-group bias: a node that denies exactly group X",
        "",
        "Runs = inputs naming the axis (every source) x 1 node against X. Detected = a probe at "
        "or above the version's calibrated tau_enter (or a hold) within "
        f"{STEPS} probes; steps = mean and worst first detecting probe (after); bound = "
        "ceil((N - 1) · A / k) with A the axes the input names (after); false halts = control "
        "runs on held-out inputs labelled X that halted.",
        "",
        "| axis | group | runs | detected before | detected after | steps after (mean / worst) "
        "| within bound after | held after | false halts before | false halts after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for axis in AXES:
        for g in groups[axis]:
            key = f"{axis}|{g}"
            b, a = before["planted"].get(key), after["planted"].get(key)
            if a is None:
                continue
            steps = a["steps"]
            mean = f"{sum(steps) / len(steps):.2f} / {max(steps)}" if steps else "-"
            lines.append(
                f"| {axis} | {g} | {a['runs']} | {_rate(b['detected'], b['runs']) if b else '-'} "
                f"| {_rate(a['detected'], a['runs'])} | {mean} "
                f"| {_rate(a['within_bound'], a['detected'])} "
                f"| {a['held']} | {_rate(b['control_halts'], b['control_runs']) if b else '-'} "
                f"| {_rate(a['control_halts'], a['control_runs'])} |"
            )
    lines += [
        "",
        "## Quoted by the docs",
        "",
        "docs/detection.md §6 quotes these passages between the same markers; "
        "`python docs/studies/recall_study.py --check` (and `tests/test_recall_study.py`) "
        "fails when a quoted one differs.",
    ]
    for label, text in quoted(items, groups, summary).items():
        lines += ["", block(label, text)]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- quoted by the docs
SOURCES = ("bbq", "bbq-names", "bloomberg", "langfair", "planted")


def _axis_rows(
    axis: str, groups: Sequence[str], before: Mapping[str, Any], after: Mapping[str, Any]
) -> list[str]:
    """One table row per set of the axis's groups with the same after figures."""
    clusters: dict[tuple[Any, ...], list[str]] = {}
    for g in groups:
        a = after["planted"].get(f"{axis}|{g}")
        if a is None:
            continue
        key = (a["runs"], round(a["detected"] / a["runs"], 2), max(a["steps"], default=0))
        clusters.setdefault(key, []).append(g)
    rows = []
    for (runs, rate, worst), members in clusters.items():
        name = axis.replace("-", " ")
        if len(clusters) > 1:
            name += f": {members[0]}" if len(members) == 1 else f" ({len(members)} groups)"
        rates = [
            before["planted"][f"{axis}|{g}"]["detected"] / before["planted"][f"{axis}|{g}"]["runs"]
            for g in members
            if f"{axis}|{g}" in before["planted"]
        ]
        low, high = f"{min(rates):.2f}", f"{max(rates):.2f}"
        rows.append(
            f"| {name} | {runs} | {low if low == high else f'{low}–{high}'} | {rate:.2f} "
            f"| {worst or '-'} | {bound(len(groups), 1)} |"
        )
    return rows


def quoted(
    items: Sequence[Mapping[str, Any]],
    groups: Mapping[str, Sequence[str]],
    summary: Mapping[str, Any],
) -> dict[str, str]:
    """Label -> text of the passages docs/detection.md §6 quotes.

    recall.md carries them under "Quoted by the docs", between the markers of
    ``biasbreaker_plugins.quoted``.
    """
    before, after = summary["before"], summary["after"]
    by_source = {s: sum(i["source"] == s for i in items) for s in SOURCES}
    planted_runs = sum(r["runs"] for r in after["planted"].values())
    inputs = textwrap.fill(
        f"{len(items)} inputs: {by_source['bbq']} BBQ contexts, {by_source['bbq-names']} BBQ "
        f"first names, {by_source['bloomberg']} Bloomberg resumes, {by_source['langfair']} "
        f"LangFair prompts and {by_source['planted']} planted applications "
        f"({len(next(iter(PLANTED_SEEDS.values())))} templates × "
        f"{sum(len(g) for g in groups.values())} groups); {len(items)} control runs and "
        f"{planted_runs:,} planted runs per version.",
        99,
        break_on_hyphens=False,
    )

    def detected(v: Mapping[str, Any]) -> int:
        return sum(r["detected"] for r in v["planted"].values())

    measured = [
        textwrap.fill(
            f"Calibrated `tau_enter`: before {before['tau_enter']}, after {after['tau_enter']}. "
            f"False halts on {after['evaluation_runs']} held-out control runs: before "
            f"{before['false_halts']} of {before['evaluation_runs']}, after "
            f"**{after['false_halts']} of {after['evaluation_runs']}**. Planted single-group "
            f"bias, detected within {STEPS} probes, before → after:",
            99,
            break_on_hyphens=False,
        ),
        "",
        "| axis | runs per group | detected before (range over groups) | detected after "
        "| worst steps after | bound (one axis named) |",
        "|---|---|---|---|---|---|",
    ]
    for axis in AXES:
        measured += _axis_rows(axis, groups[axis], before, after)
    within = sum(r["within_bound"] for r in after["planted"].values())
    held = sum(r["held"] for r in after["planted"].values())
    measured += [
        "",
        textwrap.fill(
            f"After: {detected(after):,} of {planted_runs:,} planted runs detected, "
            f"{'every one' if within == detected(after) else f'{within:,}'} within the bound "
            f"for the axes its input names, {held} held; before: {detected(before):,} of "
            f"{planted_runs:,}. Bloomberg race variants (16 drawn per resume) that keep a "
            f"word of the original surname: before {before['race_variants_keeping_surname']} "
            f"of {before['race_variants']}, after {after['race_variants_keeping_surname']} of "
            f"{after['race_variants']}.",
            99,
            break_on_hyphens=False,
        ),
    ]
    names = [
        f"{axis} {g} {a[1]}/{a[0]}"
        for key, a in after["recognition"].items()
        for source, axis, g in [key.split("|")]
        if source == "bbq-names"
    ]
    recognised = textwrap.fill(
        "BBQ's labelled first names read as their label's group (after): " + ", ".join(names) + ".",
        99,
        break_on_hyphens=False,
    )
    return {
        "recall: inputs": inputs,
        "recall: measured": "\n".join(measured),
        "recall: names recognised": recognised,
    }


# --------------------------------------------------------------------------- the command
def _worker_main(spec: Path, out: Path) -> None:
    data = json.loads(spec.read_text(encoding="utf-8"))
    result = measure(data["items"], data["groups"])
    out.write_text(json.dumps(result, sort_keys=True), encoding="utf-8")


def _run_version(tree: Path, spec: Path, out: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BIASBREAKER_")}
    env["PYTHONPATH"] = f"{tree / 'core'}{os.pathsep}{tree / 'plugins'}"
    subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", str(spec), str(out)],
        check=True,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    return json.loads(out.read_text(encoding="utf-8"))


DOCS = (ROOT / "docs" / "detection.md",)
"""The documents quoting passages of recall.md."""


def main(argv: Sequence[str] | None = None) -> int:
    """Measure both versions and write the tables (or re-read them, or check them)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--worker", nargs=2, type=Path, metavar=("SPEC", "OUT"), help=argparse.SUPPRESS
    )
    parser.add_argument("--before", default=BEFORE, help="the commit measured as 'before'")
    parser.add_argument(
        "--summarise-only",
        action="store_true",
        help="re-read the runs of docs/studies/recall.json, rewrite the tables",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if recall.json's runs, recall.md or a passage "
        "docs/detection.md quotes differ from what the study gives (with --summarise-only: "
        "re-read the committed runs instead of measuring, a few seconds)",
    )
    args = parser.parse_args(argv)
    if args.worker:
        _worker_main(*args.worker)
        return 0
    items, groups = build_items(), groups_of_axes()
    committed = json.loads(OUT_JSON.read_text(encoding="utf-8"))
    if args.summarise_only:
        results, before = committed["runs"], committed["before_commit"]
    else:
        results, before = _measure(items, groups, args.before), args.before
    md, data = _render(items, groups, results, before)
    if args.check:
        return _check(md, data)
    OUT_MD.write_text(md, encoding="utf-8")
    OUT_JSON.write_text(data, encoding="utf-8")
    print(f"wrote {OUT_MD.relative_to(ROOT)} and {OUT_JSON.relative_to(ROOT)}")
    return 0


def _measure(
    items: Sequence[Mapping[str, Any]], groups: Mapping[str, Sequence[str]], before: str
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(json.dumps({"items": items, "groups": groups}), encoding="utf-8")
        before_tree = Path(tmp) / "before"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(before_tree), before],
            check=True,
        )
        try:
            return {
                "before": _run_version(before_tree, spec, Path(tmp) / "before.json"),
                "after": _run_version(ROOT, spec, Path(tmp) / "after.json"),
            }
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before_tree)],
                check=False,
            )


def _render(
    items: Sequence[Mapping[str, Any]],
    groups: Mapping[str, Sequence[str]],
    results: Mapping[str, Mapping[str, Any]],
    before: str,
) -> tuple[str, str]:
    """The text of recall.md and of recall.json."""
    summary = summarise(items, groups, results)
    data = {"before_commit": before, "summary": summary, "runs": results}
    return report(summary, groups, items), json.dumps(data, sort_keys=True) + "\n"


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _check(md: str, data: str) -> int:
    """1 (naming each difference) when a committed file or a quoted passage differs."""
    from biasbreaker_plugins.quoted import check

    differs = [
        f"{_name(path)} differs from what the study gives: rerun it without --check"
        for path, text in ((OUT_JSON, data), (OUT_MD, md))
        if path.read_text(encoding="utf-8") != text
    ]
    for doc in DOCS:
        differs += [f"{_name(doc)}: {line}" for line in check(md, doc.read_text(encoding="utf-8"))]
        differs += [
            f"{_name(doc)}: the passage {label!r} is missing"
            for label in quoted_labels(md)
            if f"<!-- quoted: {label} -->" not in doc.read_text(encoding="utf-8")
        ]
    for line in differs:
        print(line)
    return 1 if differs else 0


def quoted_labels(md: str) -> list[str]:
    """The labels of the passages recall.md carries."""
    from biasbreaker_plugins.quoted import blocks

    return list(blocks(md))


if __name__ == "__main__":
    raise SystemExit(main())
