"""The hiring demo's numbers that README.md and docs/demo.md quote, generated so they cannot drift.

A quoted passage sits in its document between two HTML comments that Markdown does not show::

    <!-- quoted: demo seed 0, 240 postings: summary -->
    ...the text the demo generated...
    <!-- /quoted -->

The demo writes the passages of its own run into ``report.md`` (section "Quoted by the
docs"), under the same markers. :func:`check` compares every passage a document quotes from
that run with the report's, word for word; :func:`update` rewrites them. ``nox -s numbers``
runs the full demo and checks README.md and docs/demo.md; ``tests/plugins/test_demo.py``
checks the ``--quick`` run's passage in docs/demo.md. A figure no passage carries (a wall
time) is not generated and is said apart from the passages.

Command line: ``python -m biasbreaker_plugins.demo.quoted check|update REPORT DOC...`` (exit
1 when a passage differs, naming it; ``update`` rewrites the documents atomically).
"""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

from biasbreaker.errors import InputError
from biasbreaker_plugins.demo.output import write_text_atomic
from biasbreaker_plugins.demo.paired import Paired
from biasbreaker_plugins.demo.summary import Lean, Selection, TraceCounts, Verification

END = "<!-- /quoted -->"
_BLOCK = re.compile(
    r"^<!-- quoted: (?P<label>[^>]*?) -->\n(?P<text>.*?)\n<!-- /quoted -->$", re.S | re.M
)
_OPENED = re.compile(r"^<!-- quoted: ", re.M)
"""A passage's markers stand alone on their lines; the same text inside prose is none."""
WIDTH = 99
"""Line width the generated prose is wrapped at (the docs' own)."""


def marker(label: str) -> str:
    """The opening comment of the passage ``label``."""
    return f"<!-- quoted: {label} -->"


def block(label: str, text: str) -> str:
    """The passage ``text`` between its markers."""
    return f"{marker(label)}\n{text}\n{END}"


def blocks(document: str) -> dict[str, str]:
    """Label -> text of every passage ``document`` quotes.

    Raises:
        InputError: A label is quoted twice, or a passage is opened and never closed.
    """
    found: dict[str, str] = {}
    for m in _BLOCK.finditer(document):
        if m.group("label") in found:
            raise InputError(f"the passage {m.group('label')!r} is quoted twice")
        found[m.group("label")] = m.group("text")
    opened = len(_OPENED.findall(document))
    if opened != len(found):
        raise InputError(
            f"{opened} passage(s) opened but {len(found)} closed by {END!r}: close each one"
        )
    return found


def _trip_nodes(nodes: Sequence[str]) -> str:
    named = sorted(set(nodes))
    if not named:
        return ""
    if len(named) == 1:
        return f", at the {named[0]}"
    return ", at " + ", ".join(f"the {n}" for n in named)


def _verdict(change_excludes_zero: bool) -> str:
    return (
        "beyond the run's noise"
        if change_excludes_zero
        else "within the run's noise (its interval includes no change)"
    )


def summary(
    *,
    label: str,
    postings: int,
    guarded: TraceCounts,
    fresh: TraceCounts,
    trip_nodes: Sequence[str],
    triggers: Mapping[str, int],
    selections: Mapping[str, Selection],
    leans: Mapping[str, Lean],
    paired: Paired,
    checked: Verification,
) -> str:
    """The README's paragraph of measured figures, as one passage (see the module).

    Args:
        label: The run's label (``"demo seed 0, 240 postings"``).
        postings: Postings of the run.
        guarded: The guarded phase's trace counts.
        fresh: The fresh control runs' trace counts.
        trip_nodes: The node of each trip (transition ``trip``) of the guarded phase.
        triggers: Its trips per trigger (:func:`~biasbreaker_plugins.demo.summary.trip_triggers`).
        selections: Phase -> selection rates (``reference``, ``unguarded``, ``guarded``).
        leans: Phase -> preference lean.
        paired: The paired comparison of ``unguarded`` and ``guarded``.
        checked: Every trace of the run verified.
    """
    repairs = sum(guarded.repairs.values())
    lean_change = paired.lean[2] if paired.lean is not None else None
    ref = "reference" in selections
    holds = all(t.holds for t in checked.totals)
    traces = max((t.traces for t in checked.totals), default=0)
    text = (
        f"Measured ({label}): the breaker tripped on {guarded.runs_tripped} of {postings} "
        f"biased rankings ({guarded.trips} trips{_trip_nodes(trip_nodes)}: "
        f"{triggers['network']} by the network score, fast B_net, {triggers['node']} by the "
        f"node's own score); {repairs} were repaired, "
        f"{guarded.escalated_runs} wait for a human; **{fresh.runs_tripped} of {fresh.runs} "
        f"fresh control runs halted**; the shortlists' lean towards GPT-3.5's preferences (mean "
        f"measured weight of the shortlisted groups, 1 = none) went from "
        f"{leans['unguarded'].mean:.4f} to {leans['guarded'].mean:.4f}"
        + (f" (a group-blind ranker: {leans['reference'].mean:.4f})" if ref else "")
    )
    if lean_change is not None:
        text += (
            f", a paired change of {lean_change.estimate:+.4f} [{lean_change.low:+.4f}, "
            f"{lean_change.high:+.4f}] over {paired.postings} postings, "
            f"{_verdict(lean_change.excludes(0.0))}"
        )
    if paired.distance is not None:
        d = paired.distance[2]
        way = "closer to" if d.estimate < 0 else "further from"
        text += (
            f"; its distance from 1 changed by {d.estimate:+.4f} [{d.low:+.4f}, {d.high:+.4f}]: "
            f"{way} no lean, {_verdict(d.excludes(0.0))}"
        )
    impact = paired.impact[2]
    text += (
        f". The four-fifths impact ratio moved from {selections['unguarded'].min_impact:.2f} to "
        f"{selections['guarded'].min_impact:.2f}"
        + (
            f" (the group-blind ranker's own: {selections['reference'].min_impact:.2f})"
            if ref
            else ""
        )
        + f", a paired change of {impact.estimate:+.2f} [{impact.low:+.2f}, {impact.high:+.2f}], "
        f"{_verdict(impact.excludes(0.0))}. "
        + (
            f"Every property holds on all {traces} traces."
            if holds
            else "Not every property holds: see the report's verification table."
        )
    )
    return textwrap.fill(text, WIDTH, break_on_hyphens=False)


def check(report: str, document: str) -> list[str]:
    """The passages ``document`` quotes from ``report``'s run whose text differs.

    A passage of another run (a label the report does not carry) is not compared.

    Returns:
        One line per differing passage, naming its label; empty when all agree.
    """
    generated = blocks(report)
    return [
        f"{label!r}: the document says {text!r}, the run says {generated[label]!r}"
        for label, text in blocks(document).items()
        if label in generated and generated[label] != text
    ]


def update(report: str, document: str) -> str:
    """``document`` with every passage of ``report``'s run replaced by the run's text."""
    generated = blocks(report)

    def replaced(m: re.Match[str]) -> str:
        label = m.group("label")
        return block(label, generated[label]) if label in generated else m.group(0)

    return _BLOCK.sub(replaced, document)


def main(argv: Sequence[str] | None = None) -> int:
    """``check|update REPORT DOC...``: exit 0 when every passage agrees (or was rewritten)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[0] not in ("check", "update"):
        print("usage: python -m biasbreaker_plugins.demo.quoted check|update REPORT DOC...")
        return 2
    report = Path(args[1]).read_text(encoding="utf-8")
    if not blocks(report):
        print(f"{args[1]}: no quoted passage (is it a demo report.md?)")
        return 2
    status = 0
    compared = 0
    for name in args[2:]:
        path = Path(name)
        document = path.read_text(encoding="utf-8")
        if args[0] == "update":
            new = update(report, document)
            if new != document:
                write_text_atomic(path, new)
                print(f"{name}: rewritten")
            continue
        compared += len(set(blocks(report)) & set(blocks(document)))
        for line in check(report, document):
            print(f"{name}: {line}")
            status = 1
    if args[0] == "check" and not compared:
        print(f"no document quotes a passage of {args[1]}'s run: nothing was checked")
        return 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["END", "block", "blocks", "check", "main", "marker", "summary", "update"]
