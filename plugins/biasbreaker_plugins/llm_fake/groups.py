"""Demographic mentions for the simulated fake LLM, found with the kernel's own term lists.

The fake needs to know *which group* a prompt or an option refers to (so the bias dial can act on
it) and to *mask* every mention (so that, at dial 0, its randomness cannot depend on the group).
It has no lexicon of its own: mentions are the detections of the kernel's
:class:`~biasbreaker.probe.CounterfactualGenerator` over a :class:`~biasbreaker.probe.TermSet`
(by default the shipped lists of every axis, with names), the very words the probe swaps. So
every mention the probe can swap is one the fake masks.

Masking (:meth:`GroupLexicon.mask`) covers everything a counterfactual swap may change:

* every detection (terms, names, ``22-year-old`` ages) becomes :data:`MASK`, and so does every
  context-dependent form wherever it stands (``old``, ``straight``, ``blind``: a swap may write
  one where the detector would not count it, ``the elderly engineer`` -> ``the youthful
  engineer``);
* every capitalised word of the name lists outside a detection (``Mr. Robinson``: a swap of
  ``Malik Robinson`` to another race also swaps the standalone surname) becomes :data:`MASK`,
  and so does a surname a race swap to native-american draws (``Mr. Begay``;
  :attr:`~biasbreaker.probe.names.NameShares.native_surnames`);
* ``a``/``an`` before a mask becomes ``a`` (``A`` when capitalised): a swap corrects the
  article (``an Asian man`` -> ``a white man``);
* masks separated only by whitespace merge into one (a full name, or a first name the swap
  left next to its old surname: ``Jamal Washington`` -> ``Ebony Washington``).

Labels. A mention's labels are its groups as the kernel names them, except gender: ``man``
and ``woman`` (``male`` and ``female`` are accepted as spellings in group keys). A name carries
its gender and race when the lists agree on them; a form shared by several groups of one axis
(``church``) carries none. The labels of the shipped lists: ``man woman white black hispanic
asian arab native-american young old christian catholic protestant mormon muslim jewish hindu
buddhist sikh atheist straight gay lesbian bisexual pansexual asexual disabled nondisabled`` and
the nationalities ``american british canadian mexican brazilian german french russian chinese
japanese indian pakistani nigerian iranian``.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass
from typing import Literal

from biasbreaker.probe import CounterfactualGenerator, TermSet
from biasbreaker.probe.names import name_shares

__all__ = ["MASK", "GroupLexicon", "Mention", "known_labels", "label_of", "lexicon"]

MASK = "\u27e8G\u27e9"
"""What every mention is replaced with in the masked prompt (one token for every group)."""

_GENDER_LABELS = {"male": "man", "female": "woman"}
_ARTICLE = re.compile(r"(?<![\w'’-])([Aa][Nn]?)(\s+)$")
_MERGE = re.compile(re.escape(MASK) + r"(?:\s+" + re.escape(MASK) + r")+")
_TOKEN = re.compile(r"(?<![\w'’-])[\w'’-]+")
_CACHED = 1024  # texts whose mentions and mask a lexicon keeps

Kind = Literal["term", "name", "age"]


def label_of(axis: str, group: str) -> str:
    """The fake's label of a kernel group: ``man``/``woman`` for gender, else the group name.

    Args:
        axis: Axis name (``"gender"``, ``"race"``, ...).
        group: Group name on that axis (``"female"``, ``"black"``, ...).

    Returns:
        The label, e.g. ``"woman"`` or ``"black"``.
    """
    return _GENDER_LABELS.get(group, group) if axis == "gender" else group


@functools.lru_cache(maxsize=1)
def known_labels() -> frozenset[str]:
    """Every label of the shipped term lists (the groups of every axis, gender as man/woman)."""
    return frozenset(label_of(a.name, g) for a in TermSet.default().axes for g in a.groups)


@dataclass(frozen=True, slots=True)
class Mention:
    """One demographic mention in a text.

    Args:
        start: Offset of the first character.
        end: Offset after the last character.
        text: The mention as written.
        labels: Its group labels, e.g. ``frozenset({"black", "man"})``; empty for a form
            shared by several groups.
        kind: ``"name"``, ``"term"`` or ``"age"``.
    """

    start: int
    end: int
    text: str
    labels: frozenset[str]
    kind: Kind


class GroupLexicon:
    """The kernel generator's detections, as the fake uses them.

    Args:
        terms: The term lists (default: the shipped lists, every axis, with names). Give the
            probe's term lists when they add words (``[probe] term_files`` / ``extra_terms``),
            so the fake masks every word the probe may write.
    """

    def __init__(self, terms: TermSet | None = None) -> None:
        self.terms = terms if terms is not None else TermSet.default()
        self._gen = CounterfactualGenerator(self.terms)
        # For masking, context-dependent forms count everywhere: a swap can write one where
        # the detector would not count it ("the elderly engineer" -> "the youthful engineer").
        anywhere = dataclasses.replace(
            self.terms,
            axes=tuple(
                dataclasses.replace(a, needs_person_word=frozenset(), predicative=frozenset())
                for a in self.terms.axes
            ),
        )
        self._mask_gen = CounterfactualGenerator(anywhere)
        # The probe sends one prompt several times (resamples differ only in `sample`).
        self._find_cached = functools.lru_cache(maxsize=_CACHED)(self._find)
        self._mask_cached = functools.lru_cache(maxsize=_CACHED)(self._mask)
        words: set[str] = set()
        book = self.terms.names
        if book is not None:
            # and the surnames a race swap to native-american draws (no list holds them)
            natives = name_shares().native_surnames
            for n in (*book.first, *book.last, *book.full, *natives):
                words.update(w.lower() for w in n.split())
        self._name_words = frozenset(words)

    def _name_word(self, text: str, pos: int) -> int | None:
        """End of the capitalised name-list word starting at ``pos``, else ``None``.

        Matched as the generator matches names: whatever the case, starting with a capital,
        ending before neither a word character nor a hyphen (``Washington's`` holds one).
        """
        if not text[pos : pos + 1].isupper():
            return None
        m = _TOKEN.match(text, pos)
        if m is None:
            return None
        token = m.group(0)
        cuts = [len(token)] + [i for i in range(len(token) - 1, 0, -1) if token[i] in "'’"]
        for cut in cuts:
            if token[:cut].lower() in self._name_words:
                return pos + cut
        return None

    def find(self, text: str) -> tuple[Mention, ...]:
        """All mentions in ``text``, left to right, without overlaps (cached per text).

        A one-word name followed on its line by a capitalised word of the name lists is
        extended over it (``Ebony Washington``, ``Khadijah Hamza``), so a person named in full
        is one mention whether or not the full name is in the lists: a gender swap keeps the
        surname (``Jamal Washington`` -> ``Ebony Washington``) and a swap of ``Charles`` also
        swaps the surname of ``Khadijah Charles``.

        Args:
            text: Any text.

        Returns:
            The mentions, in order of position.
        """
        return self._find_cached(text)

    def _find(self, text: str) -> tuple[Mention, ...]:
        spans: dict[tuple[int, int], tuple[set[str], Kind]] = {}
        for d in self._gen.detect(text):
            labels, _ = spans.setdefault((d.start, d.end), (set(), d.kind))
            if len(d.groups) == 1:
                labels.add(label_of(d.axis, d.groups[0]))
        ordered = sorted(spans.items())
        out: list[Mention] = []
        i = 0
        while i < len(ordered):
            (start, end), (labels, kind) = ordered[i]
            i += 1
            if kind == "name" and not any(c.isspace() for c in text[start:end]):
                gap = end
                while text[gap : gap + 1] in (" ", "\t"):
                    gap += 1
                tail = self._name_word(text, gap) if gap > end else None
                nxt = ordered[i][0] if i < len(ordered) else (len(text), len(text))
                if tail is not None and tail <= nxt[0]:
                    end = tail
                elif tail is not None and nxt == (gap, tail) and ordered[i][1][1] == "name":
                    end = tail  # a surname that is also a first name: Khadijah Hamza
                    i += 1
            out.append(Mention(start, end, text[start:end], frozenset(labels), kind))
        return tuple(out)

    def mask(self, text: str) -> str:
        """``text`` with every mention, and every name word, replaced by :data:`MASK` (cached).

        See the module docstring for the rules (name words, articles, merged masks).

        Args:
            text: Any text.

        Returns:
            The masked text.
        """
        return self._mask_cached(text)

    def _mask(self, text: str) -> str:
        spans = sorted({(d.start, d.end) for d in self._mask_gen.detect(text)})
        covered = iter(spans)
        block = next(covered, None)
        extra: list[tuple[int, int]] = []
        for token in _TOKEN.finditer(text):
            while block is not None and token.start() >= block[1]:
                block = next(covered, None)
            if block is not None and token.start() >= block[0]:
                continue
            end = self._name_word(text, token.start())
            if end is not None and (block is None or end <= block[0]):
                extra.append((token.start(), end))
        parts: list[str] = []
        pos = 0
        for start, end in sorted(spans + extra):
            parts.append(_ARTICLE.sub(_plain_article, text[pos:start]))
            parts.append(MASK)
            pos = end
        parts.append(text[pos:])
        return _MERGE.sub(MASK, "".join(parts))

    def labels(self, text: str) -> frozenset[str]:
        """The union of the labels of every mention in ``text``."""
        out: set[str] = set()
        for m in self.find(text):
            out |= m.labels
        return frozenset(out)


def _plain_article(m: re.Match[str]) -> str:
    return ("A" if m.group(1)[0] == "A" else "a") + m.group(2)


@functools.lru_cache(maxsize=1)
def lexicon() -> GroupLexicon:
    """The lexicon of the shipped term lists, built once."""
    return GroupLexicon()
