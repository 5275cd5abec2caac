"""Demographic mentions for the simulated fake LLM: find them, label them, mask them.

Deliberately small: the fake only needs to know *which group* a prompt or an option refers to
(so the bias dial can act on it) and to *mask* every mention (so that, at dial 0, its randomness
cannot depend on the group). The project's counterfactual swapper lives in the kernel's probe;
this lexicon is the fake's own and covers:

* person names from the shipped data: the Bloomberg hiring lists
  (``biasbreaker/data/hiring/top_{mens,womens}_names.json``: full names, race x gender; matched
  case-insensitively) and BBQ's ``vocabulary_proper_names.csv`` (first and last names, matched as
  written or in upper case; a name listed under several groups keeps only the attributes all its
  entries agree on);
* a short list of group terms (gender words and pronouns, race/ethnicity, religion, sexual
  orientation, a few age words), matched case-insensitively as whole words.

Labels are lower-case words: ``woman``, ``man``, ``white``, ``black``, ``asian``, ``hispanic``,
``arab``, ``muslim``, ``jewish``, ``christian``, ``catholic``, ``protestant``, ``mormon``,
``hindu``, ``buddhist``, ``sikh``, ``atheist``, ``gay``, ``lesbian``, ``bisexual``,
``pansexual``, ``straight``, ``old``, ``young``.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources

__all__ = ["LABELS", "MASK", "GroupLexicon", "Mention", "lexicon"]

MASK = "\u27e8G\u27e9"
"""What every mention is replaced with in the masked prompt (one token for every group)."""

_TERMS: dict[str, tuple[str, ...]] = {
    # gender
    "woman": ("woman",), "women": ("woman",), "female": ("woman",), "girl": ("woman",),
    "girls": ("woman",), "lady": ("woman",), "ladies": ("woman",), "mother": ("woman",),
    "wife": ("woman",), "daughter": ("woman",), "sister": ("woman",), "she": ("woman",),
    "her": ("woman",), "hers": ("woman",), "herself": ("woman",), "mrs": ("woman",),
    "ms": ("woman",),
    "man": ("man",), "men": ("man",), "male": ("man",), "boy": ("man",), "boys": ("man",),
    "gentleman": ("man",), "gentlemen": ("man",), "father": ("man",), "husband": ("man",),
    "son": ("man",), "brother": ("man",), "he": ("man",), "him": ("man",), "his": ("man",),
    "himself": ("man",), "mr": ("man",),
    # race / ethnicity
    "white": ("white",), "caucasian": ("white",),
    "black": ("black",), "african american": ("black",), "african-american": ("black",),
    "asian": ("asian",), "asian american": ("asian",), "asian-american": ("asian",),
    "hispanic": ("hispanic",), "latino": ("hispanic",), "latina": ("hispanic",),
    "latinx": ("hispanic",),
    "arab": ("arab",), "middle eastern": ("arab",),
    # religion
    "muslim": ("muslim",), "jewish": ("jewish",), "christian": ("christian",),
    "catholic": ("catholic",), "protestant": ("protestant",), "mormon": ("mormon",),
    "hindu": ("hindu",), "buddhist": ("buddhist",), "sikh": ("sikh",), "atheist": ("atheist",),
    # sexual orientation
    "gay": ("gay",), "lesbian": ("lesbian",), "bisexual": ("bisexual",),
    "pansexual": ("pansexual",), "straight": ("straight",),
    # age
    "elderly": ("old",), "older": ("old",), "young": ("young",), "younger": ("young",),
}  # fmt: skip

_RACE = {"W": "white", "B": "black", "A": "asian", "H": "hispanic"}
_BBQ_ETHNICITY = {
    "Black": "black",
    "Latino": "hispanic",
    "White": "white",
    "Asian": "asian",
    "Arab": "arab",
}
_BBQ_GENDER = {"F": "woman", "M": "man"}

LABELS: frozenset[str] = frozenset(
    {lab for labs in _TERMS.values() for lab in labs} | set(_RACE.values()) | {"arab"}
)
"""Every group label the fake knows."""

_WORD = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")
_MAX_NGRAM = 3


@dataclass(frozen=True, slots=True)
class Mention:
    """One demographic mention in a text.

    Args:
        start: Offset of the first character.
        end: Offset after the last character.
        text: The mention as written.
        labels: Its group labels, e.g. ``frozenset({"black", "woman"})``.
        kind: ``"name"`` or ``"term"``.
    """

    start: int
    end: int
    text: str
    labels: frozenset[str]
    kind: str


class GroupLexicon:
    """Names and terms with their group labels.

    Args:
        folded: Lower-cased name or term (words separated by one space) -> labels; matched
            whatever the case.
        exact: Name as written -> labels; matched as written or in upper case.
        names: Which keys (of either table) are person names rather than group terms.
    """

    def __init__(
        self,
        folded: Mapping[str, frozenset[str]],
        exact: Mapping[str, frozenset[str]],
        names: Iterable[str],
    ) -> None:
        self._folded = dict(folded)
        self._exact = dict(exact)
        self._exact.update({k.upper(): v for k, v in exact.items() if k.upper() not in exact})
        self._names = set(names)
        self._heads = {k.split(" ")[0].lower() for k in (*self._folded, *self._exact)}

    def _lookup(self, phrase: str) -> tuple[frozenset[str], str] | None:
        labels = self._exact.get(phrase)
        if labels is not None:
            return labels, "name"
        key = phrase.lower()
        labels = self._folded.get(key)
        if labels is not None:
            return labels, "name" if key in self._names else "term"
        return None

    def find(self, text: str) -> list[Mention]:
        """All mentions in ``text``, left to right, longest match first (up to three words).

        Words are runs of ASCII letters, possibly hyphenated (``al-Masri``); the words of a
        multi-word mention are separated by single spaces.

        Args:
            text: Any text.

        Returns:
            Non-overlapping mentions in order of position.
        """
        out: list[Mention] = []
        last_end = 0
        heads = self._heads
        for head in _WORD.finditer(text):
            if head.group().lower() not in heads:
                continue
            start = head.start()
            if start < last_end:
                continue
            ends = [head.end()]
            while len(ends) < _MAX_NGRAM and text.startswith(" ", ends[-1]):
                nxt = _WORD.match(text, ends[-1] + 1)
                if nxt is None:
                    break
                ends.append(nxt.end())
            for end in reversed(ends):
                found = self._lookup(text[start:end])
                if found is not None:
                    out.append(Mention(start, end, text[start:end], found[0], found[1]))
                    last_end = end
                    break
        return out

    def mask(self, text: str) -> str:
        """``text`` with every mention replaced by :data:`MASK`."""
        parts: list[str] = []
        pos = 0
        for m in self.find(text):
            parts.append(text[pos : m.start])
            parts.append(MASK)
            pos = m.end
        parts.append(text[pos:])
        return "".join(parts)

    def labels(self, text: str) -> frozenset[str]:
        """The union of the labels of every mention in ``text``."""
        out: set[str] = set()
        for m in self.find(text):
            out |= m.labels
        return frozenset(out)


def _read(folder: str, name: str) -> str:
    return (resources.files("biasbreaker") / "data" / folder / name).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def lexicon() -> GroupLexicon:
    """The fake's lexicon, built once from the shipped name lists and the term list."""
    folded: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in _TERMS.items()}
    names: set[str] = set()
    for fname, gender in (("top_mens_names.json", "man"), ("top_womens_names.json", "woman")):
        table: dict[str, list[str]] = json.loads(_read("hiring", fname))
        for code, full_names in table.items():
            for full in full_names:
                key = " ".join(full.lower().split())
                folded[key] = frozenset({_RACE[code], gender})
                names.add(key)
    entries: dict[str, list[tuple[str | None, str | None]]] = {}
    for row in csv.DictReader(io.StringIO(_read("bbq", "vocabulary_proper_names.csv"))):
        entries.setdefault(row["Name"], []).append(
            (_BBQ_GENDER.get(row["gender"]), _BBQ_ETHNICITY.get(row["ethnicity"]))
        )
    exact: dict[str, frozenset[str]] = {}
    for name, rows in entries.items():
        labels: set[str] = set()
        for idx in (0, 1):
            values = {r[idx] for r in rows if r[idx] is not None}
            if len(values) == 1:
                labels.add(values.pop())  # type: ignore[arg-type]
        if labels:
            exact[name] = frozenset(labels)
    return GroupLexicon(folded, exact, names | set(exact))
