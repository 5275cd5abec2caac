"""Passages of generated text that documents quote, checked so their figures cannot drift.

A quoted passage sits in its document between two HTML comments that Markdown does not show::

    <!-- quoted: demo seed 0, 240 postings: summary -->
    ...the text a run generated...
    <!-- /quoted -->

A generated file (the demo's ``report.md``, a study's report, ``docs/bench/latest.md``) carries
its passages under the same markers. :func:`check` compares every passage a document quotes
from that file with the file's, word for word; :func:`update` rewrites them. The markers stand
alone on their lines (not indented), or they are not a passage.

Command line: ``python -m biasbreaker_plugins.quoted check|update GENERATED DOC...`` (exit 1
when a passage differs, naming it; ``update`` rewrites the documents atomically).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from biasbreaker.errors import InputError
from biasbreaker_plugins.demo.output import write_text_atomic

END = "<!-- /quoted -->"
_BLOCK = re.compile(
    # the text never crosses a marker line: an empty passage (its end marker on the next line)
    # or an unclosed one cannot reach into the next passage
    r"^<!-- quoted: (?P<label>[^>]*?) -->\n"
    r"(?:(?P<text>(?:(?!^<!-- (?:quoted: |/quoted -->)).)*?)\n)?<!-- /quoted -->$",
    re.S | re.M,
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
        found[m.group("label")] = m.group("text") or ""
    opened = len(_OPENED.findall(document))
    if opened != len(found):
        raise InputError(
            f"{opened} passage(s) opened but {len(found)} closed by {END!r}: close each one"
        )
    return found


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


def differences(report: str, document: str) -> list[str]:
    """:func:`check`, and a line for each passage of ``report`` that ``document`` does not quote.

    For a study whose every passage its document must quote (``docs/studies/*.py``).
    """
    quoted = blocks(document)
    return check(report, document) + [
        f"the passage {name!r} is missing" for name in blocks(report) if name not in quoted
    ]


def study_main(
    description: str,
    text: Callable[[], str],
    report: Path,
    document: Path,
    argv: Sequence[str] | None = None,
) -> int:
    """A study script's command line: write its report, or (``--check``) compare.

    Args:
        description: The ``--help`` line.
        text: Measures and returns the report's text.
        report: The generated file (``docs/studies/NAME.md``).
        document: The document quoting its passages (:func:`differences`).
        argv: The arguments (default ``sys.argv[1:]``).

    Returns:
        0, or with ``--check`` 1 when the report or a quoted passage differs from what
        ``text`` measures (each difference printed).
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 if a file differs")
    args = parser.parse_args(argv)
    generated = text()
    if not args.check:
        report.write_text(generated, encoding="utf-8")
        print(f"wrote {report}")
        return 0
    differs = []
    if not report.exists() or report.read_text(encoding="utf-8") != generated:
        differs.append(f"{report} differs from what the script measures: rerun without --check")
    quoted = document.read_text(encoding="utf-8")
    differs += [f"{document}: {line}" for line in differences(generated, quoted)]
    print("\n".join(differs) or f"{report}: unchanged, and quoted as it is")
    return 1 if differs else 0


def update(report: str, document: str) -> str:
    """``document`` with every passage of ``report``'s run replaced by the run's text.

    Raises:
        InputError: ``document`` (or ``report``) quotes a label twice or leaves a passage
            unclosed (:func:`blocks`): nothing is rewritten.
    """
    generated = blocks(report)
    blocks(document)  # a malformed document is refused before any text is replaced

    def replaced(m: re.Match[str]) -> str:
        label = m.group("label")
        return block(label, generated[label]) if label in generated else m.group(0)

    return _BLOCK.sub(replaced, document)


def main(argv: Sequence[str] | None = None) -> int:
    """``check|update REPORT DOC...``: exit 0 when every passage agrees (or was rewritten)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[0] not in ("check", "update"):
        print("usage: python -m biasbreaker_plugins.quoted check|update GENERATED DOC...")
        return 2
    report = Path(args[1]).read_text(encoding="utf-8")
    if not blocks(report):
        print(f"{args[1]}: no quoted passage (is it a generated file?)")
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


__all__ = [
    "END",
    "WIDTH",
    "block",
    "blocks",
    "check",
    "differences",
    "main",
    "marker",
    "study_main",
    "update",
]
