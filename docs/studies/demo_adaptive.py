"""Adaptive probing on the demo: LLM calls per clean guarded step against detection (issue 15).

One command runs the hiring demo (``biasbreaker demo --quick``, simulated: the seeded fake LLM)
once per setting of :data:`SETTINGS` and writes ``docs/studies/demo_adaptive.md``::

    python docs/studies/demo_adaptive.py            # about 10 minutes per setting under load
    python docs/studies/demo_adaptive.py --runs DIR # keep the demo folders in DIR, reuse them

Each setting is a ``[probe]`` table over the demo's defaults (seed 0): the full probe, and
adaptive probing (docs/detection.md §3, "Adaptive probing") with first stages of 1 and 2
rotation variants, stopping on a first stage that scores 0 (the demo's ``r = 0``, so a first
stage stops only when none of its counterfactuals moved the output at all). Every setting's
control runs are recorded with the full probe (``phases.recording``), so every setting runs
with the same calibrated thresholds.

**Columns** (all read from the runs' ``results.jsonl`` and traces):

* *tau_enter*: the calibrated threshold the guarded phase ran with (its traces' header);
* *step calls per clean step*: over every step of the fresh-control phase (fair agents: every
  step is clean), the mean of ``1 + k + r`` of its probe (``scored: k=… counterfactual(s),
  r=… resample(s)``): the node's own call and its re-runs;
* *LLM calls per clean step*: the fresh-control phase's LLM calls (every role: agents,
  probes, re-checks, skeptics) over its steps; an unguarded step makes
  :func:`unguarded_calls` of them (the reference phase's agent calls over its steps);
* *false halts*: fresh-control postings whose breaker tripped;
* *postings tripped*: guarded postings (the biased ranker) whose breaker tripped;
* *of the full probe's*: those of the full probe's tripped postings this setting tripped too
  (the same postings, not only as many);
* *shortlist-changing tripped*: among the postings whose unguarded shortlist differs from the
  blind reference's (the bias changed who was shortlisted), those tripped;
* *guarded LLM calls*: every LLM call of the guarded phase.

Source:
    issue 15 item 2 (the goal: at most 3 LLM calls per clean guarded step with detection
    within one percentage point of full probing).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "studies" / "demo_adaptive.md"
DOC = ROOT / "docs" / "cost.md"
LABEL = "adaptive on the demo"
SETTINGS: Mapping[str, Mapping[str, Any]] = {
    "full probe": {"adaptive": False},
    "adaptive, first 1": {"adaptive": True, "adaptive_first": 1},
    "adaptive, first 2": {"adaptive": True, "adaptive_first": 2},
}
"""Setting name → its ``[probe]`` settings (over the demo's defaults). The full probe's says
``adaptive = false`` rather than nothing: an empty ``[probe]`` table in a ``--config`` file
counts as setting every key under it, and the demo would drop its ``r = 0`` default."""
_PROBE = re.compile(r"scored: k=(\d+) counterfactual\(s\), r=(\d+) resample\(s\)")


def toml(probe: Mapping[str, Any]) -> str:
    """The ``--config`` file of one setting."""
    lines = ["[probe]"] + [f"{key} = {json.dumps(value)}" for key, value in probe.items()]
    return "\n".join(lines) + "\n"


def run_demo(folder: Path, probe: Mapping[str, Any]) -> None:
    """``biasbreaker demo --quick --out folder`` with ``probe`` as its ``[probe]`` table.

    Reuses ``folder`` when it holds a finished run (its ``report.md``).

    Raises:
        RuntimeError: The demo exited with an error (its output in the message).
    """
    from typer.testing import CliRunner

    from biasbreaker.cli import app

    if (folder / "report.md").exists():
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    config = folder.with_suffix(".toml")
    config.write_text(toml(probe), encoding="utf-8")
    args = ["demo", "--quick", "--out", str(folder), "-c", str(config)]
    result = CliRunner().invoke(app, args)
    if result.exit_code != 0:
        raise RuntimeError(f"biasbreaker {' '.join(args)} failed:\n{result.output}")


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _calls(result: Mapping[str, Any], roles: Sequence[str] | None = None) -> int:
    usage = result.get("usage") or {}
    return sum(int(u["calls"]) for role, u in usage.items() if roles is None or role in roles)


def summarise(folder: Path) -> dict[str, Any]:
    """One run's figures (the columns of the module docstring), from its folder.

    Raises:
        ValueError: A fresh-control step has no scored probe reason to count its calls from.
    """
    results = _records(folder / "results.jsonl")
    by_phase: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_phase.setdefault(r["phase"], []).append(r)

    def steps(result: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [x for x in _records(folder / result["trace"]) if x.get("kind") == "step"]

    def tripped(result: Mapping[str, Any]) -> bool:
        return any(s["state"] not in ("normal", "warning") for s in steps(result))

    fresh = by_phase["fresh-control"]
    step_calls: list[int] = []
    for result in fresh:
        for step in steps(result):
            found = _PROBE.search((step.get("probe") or {}).get("reason", ""))
            if found is None:
                raise ValueError(f"{result['trace']} step {step['step']}: no scored probe")
            step_calls.append(1 + int(found.group(1)) + int(found.group(2)))
    guarded = by_phase["guarded"]
    header = _records(folder / guarded[0]["trace"])[0]
    reference = {r["thread"]: r["shortlist"] for r in by_phase["reference"]}
    unguarded = {r["thread"]: r["shortlist"] for r in by_phase["unguarded"]}
    changed = {t for t in unguarded if set(unguarded[t]) != set(reference[t])}
    trips = {r["thread"] for r in guarded if tripped(r)}
    reference_steps = 4 * len(by_phase["reference"])
    return {
        "tau_enter": header["thresholds"]["tau_enter"],
        "step_calls": sum(step_calls) / len(step_calls),
        "llm_calls": sum(_calls(r) for r in fresh) / len(step_calls),
        "unguarded_llm_calls": sum(_calls(r) for r in by_phase["reference"]) / reference_steps,
        "false_halts": sum(tripped(r) for r in fresh),
        "fresh": len(fresh),
        "tripped": len(trips),
        "trips": sorted(trips),
        "postings": len(guarded),
        "changed_tripped": len(trips & changed),
        "changed": len(changed),
        "guarded_calls": sum(_calls(r) for r in guarded),
    }


def table(rows: Mapping[str, Mapping[str, Any]]) -> str:
    """The report's text: the quoted passage and how to regenerate it."""
    from biasbreaker_plugins.quoted import block

    any_row = next(iter(rows.values()))
    lines = [
        f"`biasbreaker demo --quick` (hiring, simulated, seed 0), one run per setting; "
        f"`adaptive_stop` = 0; an unguarded step makes {any_row['unguarded_llm_calls']:.2f} "
        "LLM calls (the blind reference phase):",
        "",
        "| setting | tau_enter | step calls per clean step | LLM calls per clean step | "
        "false halts | postings tripped | of the full probe's | shortlist-changing tripped | "
        "guarded LLM calls |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    full = set(rows["full probe"]["trips"])
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['tau_enter']:.4g} | {r['step_calls']:.2f} | {r['llm_calls']:.2f} | "
            f"{r['false_halts']} of {r['fresh']} | {r['tripped']} of {r['postings']} | "
            f"{len(full & set(r['trips']))} of {len(full)} | "
            f"{r['changed_tripped']} of {r['changed']} | {r['guarded_calls']:,} |"
        )
    head = (
        "# Adaptive probing on the demo (generated by demo_adaptive.py)\n\n"
        "Regenerate with `python docs/studies/demo_adaptive.py`; its docstring defines every "
        "column.\n\n"
    )
    return head + block(LABEL, "\n".join(lines)) + "\n"


def measure(runs: Path) -> str:
    """Run (or reuse) every setting's demo under ``runs`` and return the report's text."""
    rows = {}
    for name, probe in SETTINGS.items():
        folder = runs / name.replace(", ", "-").replace(" ", "-")
        run_demo(folder, probe)
        rows[name] = summarise(folder)
    return table(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure every setting and write the report (``--check``: compare, write nothing)."""
    from biasbreaker_plugins.quoted import differences

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=Path, help="keep (and reuse) the demo folders here")
    parser.add_argument("--check", action="store_true", help="exit 1 if a file differs")
    args = parser.parse_args(argv)
    if args.runs is not None:
        text = measure(args.runs)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            text = measure(Path(tmp))
    if not args.check:
        REPORT.write_text(text, encoding="utf-8")
        print(f"wrote {REPORT}")
        return 0
    differs = []
    if not REPORT.exists() or REPORT.read_text(encoding="utf-8") != text:
        differs.append(f"{REPORT} differs from what the script measures: rerun without --check")
    differs += [f"{DOC}: {line}" for line in differences(text, DOC.read_text(encoding="utf-8"))]
    print("\n".join(differs) or f"{REPORT}: unchanged, and quoted as it is")
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
