"""The words around a mention: lookup keys and the part-of-speech cues of running text.

:func:`norm` is the lookup key of every surface; :func:`word_after` and :func:`word_before`
read the neighbours of a span, and :func:`context_pos` and :func:`by_context` choose a term's
form by them (the rewriting of :mod:`biasbreaker.probe.rewriting` uses them). The word lists
here are shared by the term rules (:mod:`biasbreaker.probe.term_context`), the reading of names
in running text (:mod:`biasbreaker.probe.name_context`) and the held mentions
(:mod:`biasbreaker.probe.held`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from biasbreaker.probe.terms import TermRow

__all__ = [
    "COPULAS",
    "FUNCTION_WORDS",
    "OBJECT_VERBS",
    "POSSESSIVE",
    "SENTENCE_OPEN",
    "WORD_AFTER",
    "by_context",
    "capitalised",
    "context_pos",
    "norm",
    "word_after",
    "word_before",
]

# Words after which a pronoun or adjective-noun ambiguous form stands alone (not before a noun).
FUNCTION_WORDS = frozenset(
    """
    a an the this that these those my your his her its our their some any no every each
    either neither all both few many much more most other another such what which whose to
    of in on at by for with from about into onto upon over under above below across along
    around through during before after since until till than as like near off out up down
    away back behind beside besides between beyond against among toward towards within
    without via per and or but nor so yet because if when while whereas although though
    unless whether once where why how then now today tonight tomorrow yesterday here there
    again also too very just only even still already soon later always never ever often
    sometimes usually really quite rather almost well maybe perhaps instead anyway else i me
    you he him she it we us they them myself yourself himself herself itself ourselves
    themselves who whom whoever someone somebody anyone anybody everyone everybody nobody
    nothing something anything everything is are was were am be been being has have had do
    does did will would shall should can could may might must ought not n't 's 're 've 'd
    'll 'm
    """.split()  # noqa: SIM905
)
# Verbs after which "her" is the object even before a noun ("gave her flowers", "let her go").
OBJECT_VERBS = frozenset(
    """
    give gives gave giving given tell tells told telling show shows showed showing shown
    send sends sent sending offer offers offered offering buy buys bought buying ask asks
    asked asking teach teaches taught teaching hand hands handed handing bring brings
    brought bringing pay pays paid paying owe owes owed promise promises promised lend lends
    lent wish wishes wished let lets letting make makes made making help helps helped
    helping
    """.split()  # noqa: SIM905
)
COPULAS = frozenset(
    """
    is are was were am be been being seem seems seemed become becomes became 's 're ’s ’re
    identifies identify identified
    """.split()  # noqa: SIM905
)
POSSESSIVE = re.compile(r"['’]s?$")
WORD_AFTER = re.compile(r"\s*(?:(\w[\w'’]*)|(\S))?")
_WORD_BEFORE = re.compile(r"(?:(\w[\w'’]*)|(\S))?\s*$")
SENTENCE_OPEN = frozenset(".!?:;\n\"“”'‘’(*•>-#")
"""Characters after which (spaces passed over) a word opens a sentence or a list item."""


def norm(surface: str) -> str:
    """The lookup key of a surface: lower case, single spaces."""
    return " ".join(surface.lower().split())


def capitalised(surface: str) -> bool:
    """Whether every word of ``surface`` starts with a capital (names are written so)."""
    return all(w[:1].isupper() for w in surface.split())


def word_after(text: str, end: int) -> str | None:
    """The word right after ``text[:end]`` (spaces passed over), else ``None``."""
    m = WORD_AFTER.match(text, end)
    if m is None or m.group(1) is None:
        return None
    return m.group(1)


def word_before(text: str, start: int) -> str | None:
    """The word right before ``text[start:]`` (within 80 characters), else ``None``."""
    window = text[max(0, start - 80) : start]
    m = _WORD_BEFORE.search(window)
    if m is None or m.group(1) is None:
        return None
    return m.group(1)


def context_pos(text: str, start: int, end: int) -> Literal["prenominal", "standalone"]:
    """Whether the word at ``text[start:end]`` stands before a noun phrase.

    Prenominal when the next token is a word that is not a function word, unless the previous
    word is a verb that takes "her" as its object (give, tell, let, make …).
    """
    nxt = word_after(text, end)
    if nxt is None or nxt.lower() in FUNCTION_WORDS:
        return "standalone"
    prev = word_before(text, start)
    if prev is not None and prev.lower() in OBJECT_VERBS:
        return "standalone"
    return "prenominal"


def by_context(
    rows: Sequence[TermRow], text: str, start: int, end: int, *, predicate: bool = False
) -> list[TermRow]:
    """The rows whose part of speech fits the words around ``text[start:end]`` (else all).

    With ``predicate`` (every axis but gender, whose standalone forms are pronouns: "is
    hers"), a word standing alone right after a copula is a predicate adjective and takes
    the adjective (prenominal) form: "He is Muslim." → "He is Christian." (not "Jew"),
    while "He is a Muslim." keeps the noun reading ("a Jew").
    """
    if not any(r.pos != "any" for r in rows):
        return list(rows)
    ctx = context_pos(text, start, end)
    if predicate and ctx == "standalone":
        prev = word_before(text, start)
        if prev is not None and (
            prev.lower() in COPULAS or prev.lower().endswith(("'s", "’s", "'re", "’re"))
        ):
            ctx = "prenominal"
    fitting = [r for r in rows if r.pos in (ctx, "any")]
    return fitting or list(rows)
