"""``biasbreaker verify``: check recorded run traces — chain, replay and control properties."""

from __future__ import annotations

import json
import warnings
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated

import typer

from biasbreaker.cli._common import JsonOption, fail, stdout, warn
from biasbreaker.cli._stores import Location, as_folders
from biasbreaker.errors import BiasbreakerError, TraceError
from biasbreaker.trace import TraceTruncatedWarning
from biasbreaker.trace.signing import load_public_key
from biasbreaker.trace.sink import is_url
from biasbreaker.verify import PropertyReport, VerificationReport
from biasbreaker.verify.traceset import (
    ReportSpool,
    TraceSetVerification,
    trace_files,
    verify_traces,
)

SHOWN_VIOLATIONS = 5


def _verdict(holds: bool) -> str:
    return "HOLDS" if holds else "VIOLATED"


def _print(report: VerificationReport) -> None:
    out = stdout()
    rlb = report.rlb
    out.print(
        f"trace {report.path} (sha256 {report.trace_sha256}, head {report.head}, schema "
        f"v{report.version}), {report.steps} steps"
    )
    _print_property(report.chain)
    _print_property(report.replay)
    first = "" if rlb.first_recovery_step is None else f", first at step {rlb.first_recovery_step}"
    detail = (
        f"(W={rlb.max_history}, {rlb.cycles_total} cycles, "
        f"{rlb.recovery_transitions} recovery transition(s){first}, "
        f"{rlb.violation_count} violation(s); ADR literal bound exceeded at "
        f"{rlb.literal_bound_exceeded})"
    )
    if rlb.note:
        detail += f"; {rlb.note}"
    out.print(f"{rlb.property_version}: {_verdict(rlb.holds)} {detail}")
    for violation in rlb.violations[:SHOWN_VIOLATIONS]:
        out.print(f"  step {violation.step}: {violation.message}")
    for prop in report.properties:
        _print_property(prop)
    out.print("all properties hold" if report.holds else "some properties are VIOLATED")


def _print_property(prop: PropertyReport) -> None:
    """``name version: VERDICT (what it checked, N violation(s)); note`` and its violations."""
    out = stdout()
    note = f"; {prop.note}" if prop.note else ""
    what = prop.what or f"{prop.checked} checked"
    out.print(
        f"{prop.name} {prop.version}: {_verdict(prop.holds)} ({what}, "
        f"{prop.violation_count} violation(s)){note}"
    )
    for violation in prop.violations[:SHOWN_VIOLATIONS]:
        out.print(f"  step {violation.step}: {violation.message}")


def _print_set(checked: TraceSetVerification) -> None:
    out = stdout()
    failing = checked.failing()
    out.print(f"{checked.count} traces, {len(failing)} with a violation")
    for key in failing[:SHOWN_VIOLATIONS]:
        broken = checked.failures[key]
        out.print(f"  {key}: {', '.join(broken)} VIOLATED (verify it alone for the steps)")
    if len(failing) > SHOWN_VIOLATIONS:
        out.print(f"  ... and {len(failing) - SHOWN_VIOLATIONS} more")
    for total in checked.totals:
        out.print(total.line())
    if checked.manifest is not None:
        out.print(checked.manifest.line())
        for trace, problem in checked.manifest.problems[:SHOWN_VIOLATIONS]:
            out.print(f"  {trace}: {problem}")
        if len(checked.manifest.problems) > SHOWN_VIOLATIONS:
            out.print(f"  ... and {len(checked.manifest.problems) - SHOWN_VIOLATIONS} more")
    out.print(
        f"all properties hold on {checked.count} traces"
        if checked.holds
        else "some properties are VIOLATED"
    )


def verify(
    traces: Annotated[
        list[Location] | None,
        typer.Argument(
            parser=Location,
            help="Run traces (JSON Lines) to verify, or folders of them (every *.jsonl below), "
            "or trace store URLs (sqlite:///PATH.db, postgresql://host/db: every thread, read "
            "as the folder `biasbreaker trace export` writes); default with --manifest: the "
            "traces it lists.",
            show_default=False,
        ),
    ] = None,
    max_history: Annotated[
        int | None,
        typer.Option(
            "--max-history", min=1, help="Window length W for RLB-v1; default the trace header's."
        ),
    ] = None,
    public_key: Annotated[
        Path | None,
        typer.Option(
            "--public-key",
            dir_okay=False,
            help="Ed25519 public key (PEM, the KEY.pub of biasbreaker keygen): every seal must "
            "be signed with it.",
        ),
    ] = None,
    manifest: Annotated[
        Path | None,
        typer.Option(
            "--manifest",
            dir_okay=False,
            help="A results.jsonl listing each trace's head digest: name the traces missing, "
            "changed, swapped or extra, a 'done' whose trace ends escalated, and a manifest "
            "that differs from its seal (results.jsonl.seal; with --public-key it must be "
            "signed by that key).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Verify run traces: their chain, a replay of every step, and the control properties.

    The properties: RLB-v1, anti-thrash, must-trip, bounded retries, terminal escalation and
    recovery after the cool-down. One trace file prints every verdict and its first
    violations; several files, a folder or a manifest print one line per property over all
    of them and name the traces that violate one. Exit status 1 when anything is violated on
    any trace.
    """
    if not traces and manifest is None:
        fail("give trace files or folders to verify, or --manifest results.jsonl")
    given = [Path(a) for a in traces or [] if not is_url(a)]
    alone: list[VerificationReport] = []
    files: list[Path] = []  # a store URL's export can fail before any file is listed
    # every trace's report streams: to the one report printed, to disk for --json, or nowhere
    with ExitStack() as stack:
        try:
            key = None if public_key is None else load_public_key(public_key)
            with as_folders(list(traces or [])) as given:
                files = trace_files(given) if given else []
                single = (
                    manifest is None
                    and len(given) == 1
                    and len(files) == 1
                    and not given[0].is_dir()
                )
                spool = None if single or not as_json else stack.enter_context(ReportSpool())
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", TraceTruncatedWarning)
                    checked = verify_traces(
                        files,
                        max_history=max_history,
                        public_key=key,
                        manifest=manifest,
                        on_report=(lambda _, report: alone.append(report)) if single else spool,
                    )
        except TraceError as exc:
            folders = [str(p) for p in given if p.is_dir()]
            # only where the folder holds files that are no run trace: a tampered trace in a
            # folder of traces is not a usage mistake (a new-user trial read it as one)
            strays = [f for f in files if f.name in ("results.jsonl", "control-runs.jsonl")]
            hint = (
                f" (a folder argument, here {', '.join(folders)}, takes every *.jsonl file below "
                "it and each must be one run trace: give the folder that holds only the traces, "
                "e.g. biasbreaker-demo/traces rather than biasbreaker-demo, whose results.jsonl "
                "and control-runs.jsonl are not run traces)"
                if folders and strays
                else ""
            )
            fail(f"{exc}{hint}")
        except BiasbreakerError as exc:
            fail(str(exc))
        for item in caught:
            warn(str(item.message))
        if single:
            [report] = alone
            if as_json:
                typer.echo(json.dumps(report.to_json(), indent=2))
            else:
                _print(report)
        elif spool is not None:
            for chunk in checked.json_chunks(spool):
                typer.echo(chunk, nl=False)
            typer.echo("")
        else:
            _print_set(checked)
    if not checked.holds:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the ``verify`` command."""
    app.command("verify")(verify)
