"""The outputs of ``biasbreaker run``: numbers from its files, ``report.md``, a B_net figure.

The report lists every input that failed (line, node, error) and, when the run stopped early
(``--fail-fast``) or was interrupted (:func:`write_partial_run_report`), what completed and what
did not run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from biasbreaker.probe.adaptive import report_note
from biasbreaker.trace import read_trace
from biasbreaker.usage import describe_usage
from biasbreaker_plugins.demo.driver import ThreadOutcome, iter_results
from biasbreaker_plugins.demo.figures import bnet_figure, pick_runs
from biasbreaker_plugins.demo.output import MARKER, write_text_atomic
from biasbreaker_plugins.demo.report import Table, phase_table, property_table, verification_block
from biasbreaker_plugins.demo.run_graph import InputLine, RunResult, describe_roles
from biasbreaker_plugins.demo.summary import TraceCounts, Verification, trace_counts, verification

_MESSAGE = 300
"""Characters of an error message shown in the report's table (results.jsonl has it whole)."""


@dataclass(frozen=True)
class RunOutputs:
    """What ``biasbreaker run`` wrote.

    Args:
        counts: What the traces record.
        waiting: Runs paused for human review.
        verification: Every trace verified.
        tables: The report's tables.
        report: ``report.md``.
        figure: The B_net figure.
    """

    counts: TraceCounts
    waiting: int
    verification: Verification
    tables: tuple[Table, ...]
    report: Path
    figure: Path


def _cell(text: str) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= _MESSAGE else text[: _MESSAGE - 1] + "…"


def failure_table(records: Sequence[dict[str, object]]) -> Table | None:
    """The failed inputs of ``results.jsonl`` records: line, node, error class and message."""
    rows = []
    for record in records:
        error = record.get("error")
        if record.get("status") != "failed" or not isinstance(error, dict):
            continue
        rows.append(
            (
                str(record.get("line")),
                str(error.get("node") or "—"),
                _cell(str(error.get("class"))),
                _cell(str(error.get("message"))),
            )
        )
    if not rows:
        return None
    return Table(
        f"Failed inputs ({len(rows)})",
        ("line", "node", "error", "message"),
        tuple(rows),
        note="Each traceback is in `run.log`; each record in `results.jsonl` has the whole error.",
    )


def _not_run(inputs: Sequence[InputLine], outcomes: Sequence[ThreadOutcome]) -> list[int]:
    ran = {o.thread for o in outcomes}
    return [line.number for line in inputs if line.thread not in ran]


def _numbers(outcomes: Sequence[ThreadOutcome]) -> list[int]:
    """The input line numbers of ``outcomes`` (threads are named ``input-<line>``)."""
    return [int(o.thread.rpartition("-")[2]) for o in outcomes]


def _lines(numbers: Sequence[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:20])
    return shown + (f", … ({len(numbers)} in all)" if len(numbers) > 20 else "")


def write_run_outputs(
    result: RunResult,
    out: Path,
    *,
    graph: str,
    inputs: Path,
    lines: Sequence[InputLine] = (),
) -> RunOutputs:
    """Compute the run's numbers from ``out`` and write ``report.md`` and the figure.

    Args:
        result: What the run did.
        out: The output folder.
        graph: The ``--graph`` spec (the report's title).
        inputs: The ``--inputs`` file.
        lines: The inputs, to say which did not run when the run stopped early.
    """
    # one input's record and one trace at a time: memory does not grow with the inputs
    paths: list[Path] = []
    statuses: Counter[str] = Counter()
    failures_seen: list[dict[str, object]] = []
    for r in iter_results(out / "results.jsonl"):
        statuses[str(r["status"])] += 1
        if r["trace"]:
            paths.append(out / str(r["trace"]))
        if r["status"] == "failed":
            failures_seen.append(r)
    records = sum(statuses.values())
    counts = trace_counts(read_trace(p) for p in paths)
    checked = verification(paths, out)
    waiting = statuses["review"]
    failed = statuses["failed"]
    figures = out / "figures"
    figures.mkdir(exist_ok=True)
    figure = figures / "bnet.png"
    plotted = pick_runs(read_trace(p) for p in paths)
    bnet_figure(
        plotted,
        figure,
        title=f"{graph}: fast and slow B_net, trips by trigger, breaker state",
        total=len(paths),
    )
    tables = (phase_table([("run", counts, result.llm_calls)]), property_table(checked.totals))
    s = result.settings
    b = s["breaker"]
    calibrated = s["calibration"]["calibrated_on"]
    text = [
        f"# biasbreaker run: `{graph}`",
        "",
        f"{records} input(s) from `{inputs}`, one LangGraph thread each; "
        f"{waiting} paused for human review, {failed} failed. "
        + (
            "**Control runs** (`--control`): the graph as it is, the breaker observing only "
            f"(tau_enter {b['tau_enter']}: it intervenes only if a trip statistic reaches the "
            "top of the scale; no calibration window), every trace also in "
            "`control-runs.jsonl`. `biasbreaker calibrate` treats every control run as fair: "
            "review the outputs in `results.jsonl` before calibrating on them."
            if result.control
            else f"Thresholds: tau_enter {b['tau_enter']}, tau_exit {b['tau_exit']}, tau_warn "
            f"{b['tau_warn']} — "
            + (
                f"calibrated on {calibrated}."
                if calibrated
                else "the shipped starting points, **not calibrated** (record control runs "
                "with `biasbreaker run --control` and run `biasbreaker calibrate`)."
            )
        ),
        "",
        *((note.strip(), "") if (note := report_note(s.get("probe", {}))) else ()),
        f"LLM per role: {describe_roles(result.roles)}.",
        "",
        f"LLM calls and tokens per role: {describe_usage(result.usage)}.",
        "",
    ]
    if result.stopped:
        not_run = _not_run(lines, result.outcomes)
        text += [
            f"**Stopped early** ({result.stopped}): {len(result.outcomes)} of {result.total} "
            f"input(s) ran; not run: lines {_lines(not_run) or 'none'}.",
            "",
        ]
    failures = failure_table(failures_seen)
    if failures is not None:
        text += [failures.markdown(), ""]
    text += [
        tables[0].markdown(),
        "",
        "![B_net](figures/bnet.png)",
        "",
        *verification_block(tables[1], checked),
    ]
    report = out / "report.md"
    write_text_atomic(report, "\n".join(text))
    return RunOutputs(counts, waiting, checked, tables, report, figure)


def write_partial_run_report(
    out: Path,
    *,
    graph: str,
    inputs: Path,
    lines: Sequence[InputLine],
    outcomes: Sequence[ThreadOutcome],
    why: str,
) -> Path:
    """Write ``report.md`` for an interrupted run: what completed, what failed, what did not run.

    Quick on purpose (no figure, no verification): it is written within the two seconds a run
    has to stop after SIGINT or SIGTERM.

    Args:
        out: The output folder.
        graph: The ``--graph`` spec.
        inputs: The ``--inputs`` file.
        lines: Every input of the file.
        outcomes: The inputs that finished (done, review or failed), in order.
        why: What stopped the run, e.g. ``"interrupted by SIGINT"``.

    Returns:
        The report's path.
    """
    done = [o for o in outcomes if o.status in ("done", "review")]
    failed = [o for o in outcomes if o.status == "failed"]
    stopped = [o for o in outcomes if o.status == "interrupted"]
    not_run = _not_run(lines, outcomes)
    rows = []
    for outcome in failed:
        error = outcome.error or {}
        number = int(outcome.thread.rpartition("-")[2])
        rows.append(
            (
                str(number),
                str(error.get("node") or "—"),
                _cell(str(error.get("class"))),
                _cell(str(error.get("message"))),
            )
        )
    text = [
        f"# biasbreaker run: `{graph}` — partial",
        "",
        f"**{why.capitalize()}**: {len(done) + len(failed)} of {len(lines)} input(s) from "
        f"`{inputs}` completed ({len(done)} finished or paused for review, {len(failed)} "
        f"failed); stopped while running: lines {_lines(_numbers(stopped)) or 'none'}; not "
        f"run: lines {_lines(not_run) or 'none'}.",
        "",
        "Every file written is whole: `results.jsonl` has one line per input that completed "
        "or was stopped while running (`status` `interrupted`, with its trace), each trace in "
        "`traces/` holds whole records up to where its run stopped (check them with "
        f"`biasbreaker verify {out / 'traces'} --manifest {out / 'results.jsonl'}`). "
        f"`{MARKER}` lists the files and says `partial`. No figure or verification was made "
        "for this report.",
        "",
    ]
    if rows:
        table = Table(
            f"Failed inputs ({len(rows)})", ("line", "node", "error", "message"), tuple(rows)
        )
        text += [table.markdown(), ""]
    report = out / "report.md"
    write_text_atomic(report, "\n".join(text))
    return report


__all__ = ["RunOutputs", "failure_table", "write_partial_run_report", "write_run_outputs"]
