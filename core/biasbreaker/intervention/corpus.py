"""Counter-evidence corpora for MADERA retrievers: JSON Lines, one record per line.

Each record is an object with ``id`` (non-empty string, unique), ``text`` (non-empty string)
and optionally ``source`` (string). Blank lines are skipped; anything else malformed is an
:class:`~biasbreaker.errors.InputError` naming the file and line. The project ships a small demo
corpus for the hiring and BBQ scenarios (``biasbreaker/data/counter_evidence/``, written by the
biasbreaker developers, Apache-2.0); a retriever uses it when its ``corpus`` option is unset.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from biasbreaker.errors import InputError

DEMO_CORPUS = "counter_evidence/evidence.jsonl"
"""The shipped demo corpus, relative to ``biasbreaker/data``."""


@dataclass(frozen=True, slots=True)
class CorpusRecord:
    """One corpus record.

    Args:
        id: Unique id.
        text: The statement.
        source: Citation, or ``None``.
    """

    id: str
    text: str
    source: str | None = None


def parse_corpus(lines: list[str], *, where: str) -> tuple[CorpusRecord, ...]:
    """Parse JSON Lines corpus text.

    Args:
        lines: The file's lines.
        where: The file name, for errors.

    Returns:
        The records, in file order.

    Raises:
        InputError: On a line that is not a JSON object, a missing or non-string ``id`` or
            ``text``, a non-string ``source``, an unknown field or a duplicate id.
    """
    records: list[CorpusRecord] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(data, dict):
            raise InputError(f"{where}:{number}: a record must be a JSON object")
        extra = set(data) - {"id", "text", "source"}
        if extra:
            raise InputError(
                f"{where}:{number}: unknown field(s) {sorted(extra)}; records have id, text "
                "and optional source"
            )
        rid, text, source = data.get("id"), data.get("text"), data.get("source")
        if not isinstance(rid, str) or not rid.strip():
            raise InputError(f"{where}:{number}: id={rid!r} must be a non-empty string")
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{where}:{number}: text={text!r} must be a non-empty string")
        if source is not None and not isinstance(source, str):
            raise InputError(f"{where}:{number}: source={source!r} must be a string or absent")
        if rid in seen:
            raise InputError(f"{where}:{number}: duplicate id {rid!r}; ids must be unique")
        seen.add(rid)
        records.append(CorpusRecord(rid, text, source))
    return tuple(records)


def load_corpus(path: str | os.PathLike[str] | None = None) -> tuple[CorpusRecord, ...]:
    """Load a corpus file, or the shipped demo corpus when ``path`` is ``None``.

    Args:
        path: A JSON Lines file, or ``None``.

    Returns:
        The records (at least one).

    Raises:
        InputError: If the file cannot be read, is malformed or is empty.
    """
    if path is None:
        ref = resources.files("biasbreaker").joinpath("data", *DEMO_CORPUS.split("/"))
        where = f"biasbreaker/data/{DEMO_CORPUS}"
        text = ref.read_text(encoding="utf-8")
    else:
        where = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(
                f"cannot read counter-evidence corpus {where}: {exc.strerror}; set the "
                "retriever's `corpus` option to a JSON Lines file"
            ) from exc
    records = parse_corpus(text.splitlines(), where=where)
    if not records:
        raise InputError(f"counter-evidence corpus {where} has no records")
    return records


__all__ = ["DEMO_CORPUS", "CorpusRecord", "load_corpus", "parse_corpus"]
