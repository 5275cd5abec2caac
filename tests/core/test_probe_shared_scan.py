"""Finders of one name book share their name hits; the hits are those of an unshared scan."""

from __future__ import annotations

import dataclasses

from biasbreaker.probe import TermSet
from biasbreaker.probe.ages import _age_mentions, age_mentions
from biasbreaker.probe.mentions import MentionFinder

TEXT = (
    "Resume:\nLakisha Washington, 63, applied. Mr. Washington earns 40k.\n"
    "WASHINGTON Lakisha (b. 1961); Applicant Mei, born in 1958, is 65 years old."
)


def _context_free(terms: TermSet) -> TermSet:
    """``terms`` with no context-dependent forms (as the fake LLM's masking finder)."""
    axes = tuple(
        dataclasses.replace(a, needs_person_word=frozenset(), predicative=frozenset())
        for a in terms.axes
    )
    return dataclasses.replace(terms, axes=axes)


def test_finders_of_one_book_share_name_hits_equal_to_their_own_scan() -> None:
    terms = TermSet.default()
    one, two = MentionFinder(terms, terms.axes), MentionFinder(_context_free(terms), terms.axes)
    assert one._named is two._named
    hits = one._named.kept(TEXT)
    assert hits == two._name_hits(TEXT) == one._name_hits(TEXT)
    assert any(h.name == "Lakisha Washington" for h in hits)


def test_finders_with_other_person_words_do_not_share() -> None:
    terms = TermSet.default()
    other = dataclasses.replace(terms, person_words=terms.person_words | {"zorblax"})
    assert MentionFinder(terms, terms.axes)._named is not MentionFinder(other, other.axes)._named


def test_kept_age_mentions_are_those_found_again() -> None:
    rule = next(a.numeric_age for a in TermSet.default().axes if a.numeric_age is not None)
    kept = [(m.span(), m.group(0), n) for m, n in age_mentions(TEXT, rule)]
    again = [(m.span(), m.group(0), n) for m, n in age_mentions(TEXT, rule)]
    fresh = [(m.span(), m.group(0), n) for m, n in _age_mentions(TEXT, rule)]
    assert kept == again == fresh
    assert any(n == 65 for _, _, n in kept)
