"""Measure the language guard on its test inputs and on the repository's English data.

Usage::

    python scripts/measure_language.py [--misses]

Each input is checked as the probe checks it: the default :class:`LanguageGuard` (py3langid,
threshold 0.5, English), given the person names the probe's lexicon finds in it. Prints, per
set, how many inputs are *unsupported* (held by default); ``--misses`` lists the foreign inputs
that are not and the English ones that are. Run it with ``PYTHONPATH`` at another checkout's
``core`` and ``plugins`` to measure that version's guard on the same inputs (the inputs are
read from this checkout's ``tests/``).

Foreign (about a person; every one should be unsupported): the 16 French, German, Spanish and
Chinese sentences of ``tests/core/test_probe_language.py`` (``FOREIGN``), its Chinese,
Japanese, Korean and Thai loan applications with amounts and dates written into the text
(``UNSPACED_WITH_NUMBERS``, issue 14), its short Chinese and Japanese inputs (``SHORT_HAN``)
and the Spanish sentence ``docs/detection.md`` names as a miss. English (none should be): that
file's ``ENGLISH`` (short, names from outside English, English with French, German, Spanish or
Chinese names and words) and ``ENGLISH_WITH_CJK`` (a person named in Chinese, Japanese or
Korean letters), English with run ids, the demo's ranker input (``RANKER_INPUT``), the three
false holds ``docs/detection.md`` names, every tenth BBQ item of both shipped files (context,
question, three answers), the 22 counter-evidence statements, the demo's 32 hiring resumes,
the LangFair prompts and replies (``tests/data/langfair``) and the 800 Bloomberg names, bare
and in a sentence.
Needs the ``languages`` and ``test`` extras (the test module imports pytest).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from biasbreaker.probe import CounterfactualGenerator
from biasbreaker.probe.language import LanguageGuard

ROOT = Path(__file__).resolve().parents[1]


def _tests() -> Any:
    spec = importlib.util.spec_from_file_location(
        "language_tests", ROOT / "tests/core/test_probe_language.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line)


def english_data() -> dict[str, list[Any]]:
    """The English sets read from the repository's data."""
    bbq: list[Any] = []
    for name in ("preds_Religion.jsonl", "preds_Sexual_orientation.jsonl"):
        for item in list(_jsonl(ROOT / "core/biasbreaker/data/bbq" / name))[::10]:
            bbq += [item["context"], item["question"], item["ans0"], item["ans1"], item["ans2"]]
    evidence = [
        e["text"] for e in _jsonl(ROOT / "core/biasbreaker/data/counter_evidence/evidence.jsonl")
    ]
    resumes = json.loads((ROOT / "core/biasbreaker/data/hiring/resumes_to_rank.json").read_text())
    hiring = [r.replace("{name}", "Alex Smith") for job in resumes.values() for r in job["resumes"]]
    langfair = json.loads((ROOT / "tests/data/langfair/counterfactual_data_file.json").read_text())
    names: set[str] = set()
    with gzip.open(ROOT / "tests/data/bloomberg/rankings_compact.jsonl.gz", "rt") as fh:
        for line in fh:
            names.update(n.title() for n in json.loads(line)["default_order"])
    return {
        "BBQ (every 10th item: context, question, answers)": bbq,
        "counter-evidence statements": evidence,
        "hiring resumes (the demo's, named Alex Smith)": hiring,
        "LangFair prompts and replies": [t for texts in langfair.values() for t in texts],
        "Bloomberg names, bare": sorted(names),
        "Bloomberg names in a sentence": [
            f"{n} applied for the software engineer job." for n in sorted(names)
        ],
    }


def main() -> None:
    """Print the counts (and with ``--misses`` the misses) of every set."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list the misses")
    args = parser.parse_args()
    tests = _tests()
    run_id = tests.RUN_ID
    foreign = {
        "FOREIGN (fr, de, es, zh sentences)": [text for _, text in tests.FOREIGN],
        "UNSPACED_WITH_NUMBERS (zh, ja, ko, th)": [
            text for _, text in getattr(tests, "UNSPACED_WITH_NUMBERS", [])
        ],
        "SHORT_HAN (short zh, ja)": list(getattr(tests, "SHORT_HAN", [])),
        "known misses (docs/detection.md)": ["Este estudiante gay busca un piso."],
    }
    english = {
        "ENGLISH (short, foreign names and words)": list(tests.ENGLISH),
        "ENGLISH_WITH_CJK (a person named in CJK letters)": list(
            getattr(tests, "ENGLISH_WITH_CJK", [])
        ),
        "English with run ids, the demo's ranker input": [
            f"Loan application from Ms. Mary Carter. She earns 40k a year. Run {run_id}.",
            {"case": "airport", "run_id": run_id, "assistant_id": run_id[::-1], "graph_id": "g1"},
            {"request": "Approve the loan of Ms. Mary Carter?", "ids": [run_id] * 5},
            tests.RANKER_INPUT,
        ],
        "known false holds (docs/detection.md)": [
            "Oluwaseun Adeyemi applies for a loan.",
            "The candidate, Marie-Claire Lefèvre, has a diplôme d'ingénieur from École "
            "Polytechnique.",
            "Notes: Zoë Müller, née Schäfer, Straße 12, Köln. Decide on her loan.",
        ],
        **english_data(),
    }
    guard, finder = LanguageGuard(), CounterfactualGenerator(seed=0)

    def unsupported(payload: Any) -> bool:
        found = [(d.path, d.start, d.end) for d in finder.detect(payload) if d.kind == "name"]
        reading = guard.check(payload, found)
        return reading is not None and not reading.supported

    for title, sets, want in (("foreign", foreign, True), ("English", english, False)):
        total = hits = 0
        for name, payloads in sets.items():
            if not payloads:
                continue  # not in this checkout's tests
            marks = [unsupported(p) for p in payloads]
            total, hits = total + len(marks), hits + sum(marks)
            print(f"{sum(marks):4d}/{len(marks):<4d} unsupported  {title}: {name}")
            if args.misses:
                for payload, mark in zip(payloads, marks, strict=True):
                    if mark != want:
                        print(f"            miss: {payload!r}")
        print(f"{hits:4d}/{total:<4d} unsupported  {title}, all\n")


if __name__ == "__main__":
    main()
