"""Checking a set of traces against a manifest: the head digests ``results.jsonl`` lists.

``biasbreaker run`` and ``biasbreaker demo`` write one ``results.jsonl`` record per thread with
its trace (``"trace"``, relative to the output folder) and that trace's head digest when the
thread finished or paused (``"trace_head"``, the digest of its last seal). Given that file, a
set of traces can be checked as a whole, which the traces alone cannot show:

- **missing**: a listed trace does not exist;
- **changed**: a listed trace's head differs from the manifest's — it was cut back (to an
  earlier seal, which the trace alone cannot show), continued, edited or replaced;
- **swapped**: a listed trace's head is the one the manifest gives another trace;
- **extra**: a trace given to verify is not in the manifest.

The manifest is as trustworthy as the copy of it one holds: keep it apart from the traces, or
sign the traces (``docs/control.md`` §6).

Source:
    ``docs/control.md`` §6 and §7.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from biasbreaker.errors import InputError
from biasbreaker.types import JSONValue


def read_manifest(path: str | os.PathLike[str]) -> dict[Path, str | None]:
    """Read the traces and head digests a ``results.jsonl`` lists.

    Args:
        path: The manifest (JSON Lines; records without a ``"trace"`` are skipped).

    Returns:
        Trace file (resolved against the manifest's folder) -> its head digest, or ``None``
        when the record names the trace without a head (written before heads were recorded).

    Raises:
        InputError: The file cannot be read, a line is not a JSON object, or a ``"trace"`` or
            ``"trace_head"`` is not a string (the message names the file and line).
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"manifest {file}: cannot read it: {exc.strerror or exc}") from None
    out: dict[Path, str | None] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{file}:{number}: not valid JSON: {exc}") from None
        if not isinstance(record, dict):
            raise InputError(f"{file}:{number}: a manifest line must be a JSON object")
        trace, head = record.get("trace"), record.get("trace_head")
        if trace is None:
            continue
        if not isinstance(trace, str) or (head is not None and not isinstance(head, str)):
            raise InputError(f"{file}:{number}: 'trace' and 'trace_head' must be strings")
        out[file.parent / trace] = head
    return out


@dataclass(frozen=True)
class ManifestCheck:
    """The set of traces against its manifest.

    Args:
        manifest: The manifest file.
        listed: Traces the manifest lists.
        problems: ``(trace, what)`` for every trace missing, changed, swapped or extra, in
            order.
    """

    manifest: Path
    listed: int
    problems: tuple[tuple[str, str], ...]

    @property
    def holds(self) -> bool:
        """Whether every listed trace is there with its head and nothing else was given."""
        return not self.problems

    def line(self, name: str | None = None) -> str:
        """One line: ``manifest results.jsonl: HOLDS (320 traces listed, ...)``.

        Args:
            name: How to name the manifest (default: its path as given).
        """
        verdict = "HOLDS" if self.holds else "VIOLATED"
        shown = self.manifest if name is None else name
        return (
            f"manifest {shown}: {verdict} ({self.listed} trace(s) listed, "
            f"{len(self.problems)} missing, changed, swapped or extra)"
        )

    def to_json(self) -> dict[str, JSONValue]:
        """Return the check as plain JSON."""
        return {
            "manifest": str(self.manifest),
            "holds": self.holds,
            "listed": self.listed,
            "problems": [{"trace": t, "problem": p} for t, p in self.problems],
        }


def check_manifest(
    manifest: str | os.PathLike[str],
    listed: Mapping[Path, str | None],
    heads: Mapping[Path, str],
    given: Iterable[Path],
) -> ManifestCheck:
    """Compare verified traces with a manifest.

    Args:
        manifest: The manifest file (for the report).
        listed: Its entries (:func:`read_manifest`).
        heads: Each verified trace file -> its head digest.
        given: The trace files given to verify (a given file the manifest does not list is
            extra).

    Returns:
        The check.
    """
    owner = {head: trace for trace, head in listed.items() if head is not None}
    resolved = {path.resolve(): head for path, head in heads.items()}
    problems: list[tuple[str, str]] = []
    for trace, head in listed.items():
        actual = resolved.get(trace.resolve())
        if actual is None:
            if not trace.exists():
                problems.append((str(trace), "missing: listed in the manifest, not found"))
            continue
        if head is None or actual == head:
            continue
        other = owner.get(actual)
        if other is not None:
            problems.append((str(trace), f"swapped: its head is the one listed for {other}"))
        else:
            problems.append(
                (
                    str(trace),
                    f"changed: head {actual} is not the manifest's {head} (cut back, continued, "
                    "edited or replaced)",
                )
            )
    known = {p.resolve() for p in listed}
    problems.extend(
        (str(path), "extra: not listed in the manifest")
        for path in given
        if path.resolve() not in known
    )
    return ManifestCheck(Path(manifest), len(listed), tuple(problems))


__all__ = ["ManifestCheck", "check_manifest", "read_manifest"]
