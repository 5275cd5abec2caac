"""Disabilities named by a condition that has no counterpart a variant could write.

The disability axis swaps a disabled form for a nondisabled one where the language has a
natural counterpart (``uses a wheelchair`` ↔ ``walks unaided``, ``on the autism spectrum`` ↔
``neurotypical``: rows of ``data/terms/disability.json``). A diagnosis such as ``has
epilepsy`` or ``has ADHD`` has none: ``has no epilepsy`` is no sentence a form writes, and a
variant that drops the words is no longer the same applicant in another group. An input that
says a person has one was "not applicable" (a new-user trial: a step denying the applicant
with epilepsy passed unscored), so it is held for review
(:meth:`~biasbreaker.probe.held.HeldReader.held`).

A condition counts only where it is said of someone: after a verb of having (``has``,
``diagnosed with``, ``living with``, ``suffers from``, or ``with`` after a person word; an
article and one severity word may stand between: ``has a mild intellectual disability``), or,
for the words that also name a person (``epileptic``, ``dyslexic``, ``amputee``,
``paraplegic``), after a copula
(``is dyslexic``, ``is an amputee``) or before a person word. ``the Epilepsy Foundation``,
``research on ADHD``, ``an ADHD clinic``, ``worked with cancer patients`` and ``has
cancer patients`` name no one and are not held.

The list is hand-curated from the trial's findings and the conditions the US Department of
Justice's ADA regulation names as ones that "will, as a factual matter, virtually always be
found to impose a substantial limitation" (28 CFR § 35.108(d)(2)(iii), a US government work:
deafness, blindness, intellectual disability, partially or completely missing limbs, mobility
impairments requiring a wheelchair, autism, cancer, cerebral palsy, diabetes, epilepsy, HIV,
multiple sclerosis, muscular dystrophy, major depressive disorder, bipolar disorder,
post-traumatic stress disorder, traumatic brain injury, obsessive compulsive disorder,
schizophrenia), recalled from
memory of that public text (no copy is shipped); blindness, deafness, autism and wheelchair
use have counterparts and are term rows instead (``on the autism spectrum`` ↔ ``neurotypical``;
``has autism`` is held: a row ``has autism`` ↔ ``is neurotypical`` would read ``is
neurotypical`` back as ``has autism`` where the input said ``is autistic``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

__all__ = ["CONDITIONS", "condition_mentions"]

CONDITIONS: Final = (
    "ADHD",
    "autism",
    "ADD",
    "attention deficit hyperactivity disorder",
    "epilepsy",
    "seizure disorder",
    "cerebral palsy",
    "multiple sclerosis",
    "muscular dystrophy",
    "spina bifida",
    "Down syndrome",
    "Down's syndrome",
    "intellectual disability",
    "learning disability",
    "developmental disability",
    "traumatic brain injury",
    "brain injury",
    "dyslexia",
    "schizophrenia",
    "bipolar disorder",
    "major depressive disorder",
    "depression",
    "PTSD",
    "post-traumatic stress disorder",
    "OCD",
    "obsessive compulsive disorder",
    "HIV",
    "AIDS",
    "diabetes",
    "cancer",
    "Tourette syndrome",
    "Tourette's syndrome",
    "Tourette's",
    "prosthetic leg",
    "prosthetic arm",
    "prosthesis",
    "amputation",
)
"""Conditions held after a verb of having (:data:`_HAVING`). Upper-case abbreviations match as
written only (``ADD``, ``AIDS``: ``with aids`` is another word). ``MS`` is left out: ``has an
MS in Finance`` is a degree."""

_PERSON_CONDITIONS: Final = (
    "epileptic",
    "dyslexic",
    "schizophrenic",
    "bipolar",
    "amputee",
    "an amputee",
    "paraplegic",
    "a paraplegic",
    "quadriplegic",
    "a quadriplegic",
    "HIV-positive",
    "HIV positive",
    "diabetic",
    "a diabetic",
)
"""Conditions that describe a person after a copula (``is dyslexic``, ``is an amputee``) or
before a person word (``a paraplegic applicant``)."""

_HAVING = (
    r"(?:has|have|had|having|diagnosed\s+with|living\s+with|lives\s+with|"
    r"suffers\s+from|suffering\s+from|suffered\s+from)"
)
_SEVERITY = r"(?:an?\s+)?(?:(?:mild|moderate|severe|chronic|diagnosed)\s+)?"


def _alternatives(words: tuple[str, ...]) -> str:
    """A regex alternation of ``words``, longest first; upper-case words match as written."""
    out = []
    for w in sorted(words, key=len, reverse=True):
        body = re.escape(w).replace(r"\ ", r"\s+")
        out.append(body if w.isupper() or w[:3].isupper() else f"(?i:{body})")
    return "|".join(out)


_HAD = re.compile(
    rf"(?<![\w'’-])(?:(?i:{_HAVING})|(?P<who>[^\W\d_]+)\s+(?i:with))\s+(?i:{_SEVERITY})(?P<c>{_alternatives(CONDITIONS)})"
    r"(?![\w'’-])"
)
_IS = re.compile(
    r"(?<![\w'’-])(?i:is|am|are|was|were|being|an?)\s+(?:(?i:also|now)\s+)?"
    rf"(?P<c>{_alternatives(_PERSON_CONDITIONS)})(?![\w'’-])"
)


_NEXT_WORD = re.compile(r"[ \t]+([^\W\d_]+)")


def _person_after(text: str, end: int, person_words: frozenset[str]) -> bool:
    """Whether the word after ``text[:end]`` is a person word (``… patients``)."""
    m = _NEXT_WORD.match(text, end)
    return m is not None and m.group(1).lower() in person_words


def condition_mentions(text: str, person_words: frozenset[str]) -> Iterator[tuple[int, int, str]]:
    """The conditions ``text`` says a person has: ``(start, end, surface)``, in text order.

    Args:
        text: One string of a payload.
        person_words: Lower-case words that name a person (``applicant``, ``nurse``).

    Returns:
        The span and surface of each condition (the condition alone: ``epilepsy`` of ``has
        epilepsy``). After ``a``/``an`` a person condition counts only before a person word
        (``a paraplegic applicant``; ``a diabetic diet`` is none).
    """
    for m in _HAD.finditer(text):
        if m.group("who") is not None and m.group("who").lower() not in person_words:
            continue  # "research with cancer", not "an applicant with epilepsy"
        if _person_after(text, m.end(), person_words):
            continue  # "has cancer patients", "worked with HIV clients"
        yield m.start("c"), m.end("c"), m.group("c")
    for m in _IS.finditer(text):
        if m.group(0)[:2].lower() in ("a ", "an") and not _person_after(
            text, m.end(), person_words
        ):
            continue
        yield m.start("c"), m.end("c"), m.group("c")
