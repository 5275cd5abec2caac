"""Build ``core/biasbreaker/data/terms/countries.json`` from a checkout of The World Factbook.

Usage::

    python scripts/build_country_data.py FACTBOOK_JSON_CHECKOUT

``FACTBOOK_JSON_CHECKOUT`` is a clone of https://github.com/factbook/factbook.json (the CIA
World Factbook's country profiles as JSON, public domain) at commit :data:`COMMIT`; another
commit is refused. Reads each profile ``<region>/<gec>.json`` (two letters) that has a
``People and Society`` → ``Nationality`` entry and no ``Government`` → ``Dependency status``
(sovereign states and the few entities the Factbook lists alike: Kosovo, Taiwan, Western
Sahara), and writes per entity its short name (``Syria``), the noun and adjective forms of its
nationality (``Syrian``, ``Syrians``), cleaned by the rules of :func:`forms` and
:data:`OVERRIDES`. Stdlib only; deterministic: the same checkout gives a byte-identical file.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import subprocess
from pathlib import Path
from typing import Any

COMMIT = "8662a8b17a784841ab4528631b04090eb2f183eb"
OUT = Path(__file__).resolve().parents[1] / "core/biasbreaker/data/terms/countries.json"

OVERRIDES: dict[str, dict[str, list[str]]] = {
    # short forms the Factbook writes as "none", an abbreviation or with a qualifier
    "ct": {"names": ["Central African Republic", "the Central African Republic"]},
    "ae": {"names": ["United Arab Emirates", "the United Arab Emirates", "UAE", "the UAE"]},
    "fm": {"names": ["Micronesia"], "adjectives": ["Micronesian"]},
    "cg": {"names": ["Democratic Republic of the Congo", "the Democratic Republic of the Congo",
                     "DRC", "the DRC"]},
    "cf": {"names": ["Republic of the Congo", "the Republic of the Congo"]},
    "iv": {"names": ["Côte d'Ivoire", "Cote d'Ivoire", "Ivory Coast", "the Ivory Coast"]},
    "dr": {"names": ["Dominican Republic", "the Dominican Republic"]},
    "bm": {"names": ["Burma", "Myanmar"]},
    "ga": {"names": ["The Gambia", "the Gambia", "Gambia"]},
    "bf": {"names": ["The Bahamas", "the Bahamas", "Bahamas"]},
    "rp": {"names": ["Philippines", "the Philippines"], "adjectives": ["Philippine", "Filipino"]},
    "nl": {"names": ["Netherlands", "the Netherlands", "Holland"]},
    "tw": {"adjectives": ["Taiwanese"], "nouns": ["Taiwanese"]},
    "kn": {"names": ["North Korea"], "adjectives": ["North Korean", "Korean"],
           "nouns": ["North Korean", "North Koreans", "Korean", "Koreans"]},
    "ks": {"names": ["South Korea"], "adjectives": ["South Korean", "Korean"],
           "nouns": ["South Korean", "South Koreans", "Korean", "Koreans"]},
    "ez": {"names": ["Czechia", "the Czech Republic", "Czech Republic"]},
    "vt": {"names": ["Vatican City", "the Holy See"]},
    "wz": {"adjectives": ["Swazi", "Swati"], "nouns": ["Swazi", "Swazis"]},
    "ns": {"nouns": ["Surinamer", "Surinamers", "Surinamese"]},
    "uz": {"nouns": ["Uzbekistani", "Uzbekistanis", "Uzbek", "Uzbeks"]},
}  # fmt: skip
"""Hand corrections per Factbook code, replacing the parsed list of that kind."""
_DROP = re.compile(r";\s*note\b.*$|\((?:colloquial|US [^)]*|singular and plural)\)", re.I)


def forms(text: str) -> tuple[list[str], list[str]]:
    """``(singular, plural)`` forms of a Factbook nationality noun or adjective entry.

    ``Syrian(s)`` → ``Syrian``, ``Syrians``; ``Beninese (singular and plural)`` → both
    ``Beninese``; ``Motswana (singular), Batswana (plural)``; alternatives split at ``or``,
    ``,``, ``;`` and ``/``; notes, ``(colloquial)`` and ``(US …)`` dropped; ``none``,
    ``NA`` and compounds written ``Frenchman(men)`` (gender terms of the gender axis) skipped.
    """
    singular: list[str] = []
    plural: list[str] = []
    both = "singular and plural" in text
    text = _DROP.sub("", html.unescape(text))
    for part in re.split(r"\s*(?:,|;|/|\bor\b)\s*", text):
        part = part.strip()
        kind = "any"
        if part.endswith("(singular)"):
            part, kind = part[: -len("(singular)")].strip(), "singular"
        elif part.endswith("(plural)") or part.endswith("(collective plural)"):
            part, kind = re.sub(r"\((?:collective )?plural\)$", "", part).strip(), "plural"
        if not part or part in ("none", "NA") or re.search(r"\((?:wo)?men\)$", part):
            continue
        m = re.fullmatch(r"(.+?)\s*\(s\)", part)
        if m:
            singular.append(m.group(1))
            plural.append(m.group(1) + "s")
        elif kind == "plural":
            plural.append(part)
        else:
            singular.append(part)
            if both or (kind == "any" and part.endswith(("ese", "ss", "ish", "ch", "i"))):
                plural.append(part)
    return list(dict.fromkeys(singular)), list(dict.fromkeys(plural))


def entity(code: str, doc: dict[str, Any]) -> dict[str, Any] | None:
    """One entity's names and nationality forms, or ``None`` (no nationality, a dependency)."""
    gov = doc.get("Government", {})
    nat = doc.get("People and Society", {}).get("Nationality")
    if not nat or "Dependency status" in gov:
        return None
    short = html.unescape(
        gov.get("Country name", {}).get("conventional short form", {}).get("text", "none")
    )
    names = [] if short == "none" else [short]
    noun_s, noun_p = forms(nat.get("noun", {}).get("text", "none"))
    adj, _ = forms(nat.get("adjective", {}).get("text", "none"))
    row = {"code": code, "names": names, "adjectives": adj, "nouns": noun_s + noun_p}
    for kind, values in OVERRIDES.get(code, {}).items():
        row[kind] = values
    row["nouns"] = list(dict.fromkeys(row["nouns"]))
    return row if row["names"] and (row["adjectives"] or row["nouns"]) else None


def main() -> None:
    """Read the checkout given on the command line and write :data:`OUT`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkout", type=Path)
    args = parser.parse_args()
    git = ["git", "-C", str(args.checkout)]
    head = subprocess.check_output([*git, "rev-parse", "HEAD"], text=True).strip()
    if head != COMMIT:
        raise SystemExit(f"checkout is at {head}, expected {COMMIT}: check out that commit")
    files = subprocess.check_output([*git, "ls-tree", "-r", "--name-only", "HEAD"], text=True)
    rows = []
    for path in sorted(files.split()):
        m = re.fullmatch(r"[a-z-]+/([a-z]{2})\.json", path)
        if m is None:
            continue
        doc = json.loads(subprocess.check_output([*git, "show", f"HEAD:{path}"]))
        row = entity(m.group(1), doc)
        if row is not None:
            rows.append(row)
    out = {
        "kind": "countries",
        "source": f"The World Factbook (CIA), as JSON in factbook/factbook.json at {COMMIT}",
        "licence": "public domain (US government work; the JSON is dedicated to the public domain)",
        "entities": rows,
    }
    OUT.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{len(rows)} entities -> {OUT}")


if __name__ == "__main__":
    main()
