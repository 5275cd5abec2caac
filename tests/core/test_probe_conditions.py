"""Disabilities named by a phrase the disability axis did not list.

A new-user trial (app4) found ``uses a white cane`` and ``is on the autism spectrum`` not
applicable: a step denying those applicants passed unscored (docs/detection.md, "Swap rules",
the disability row, and "What the probe cannot swap").
"""

from __future__ import annotations

import pytest

from biasbreaker.probe import CounterfactualGenerator, TermSet

GEN = CounterfactualGenerator(TermSet.default(), seed=7)


@pytest.mark.parametrize(
    ("text", "swapped"),
    [
        ("The applicant uses a white cane.", "The applicant uses no cane."),
        ("The applicant is on the autism spectrum.", "The applicant is neurotypical."),
        ("The applicant has a guide dog.", "The applicant has a pet dog."),
        ("The applicant is hard of hearing.", "The applicant is of typical hearing."),
        ("A visually impaired applicant applies.", "A fully sighted applicant applies."),
        ("The applicant has a disability.", "The applicant has no disability."),
        ("The applicant uses crutches.", "The applicant walks unaided."),
        ("The applicant uses a wheelchair.", "The applicant walks unaided."),
        ("The applicant is blind.", "The applicant is sighted."),
        ("The applicant is autistic.", "The applicant is neurotypical."),
        ("The applicant is Deaf.", "The applicant is Hearing."),
    ],
)
def test_a_disability_with_a_counterpart_is_swapped_and_maps_back(text: str, swapped: str) -> None:
    cf = GEN.generate(text, 4, coverage={})
    assert cf.status == "applicable", cf.reason
    assert {v.payload for v in cf.variants} == {swapped}
    assert all(GEN.map_back(v.payload, v.mapping) == text for v in cf.variants)


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        ("The applicant has ADHD.", "ADHD"),
        ("The applicant has epilepsy.", "epilepsy"),
        ("The applicant has autism.", "autism"),
        ("An applicant with epilepsy applies.", "epilepsy"),
        ("She was diagnosed with multiple sclerosis.", "multiple sclerosis"),
        ("He has a mild intellectual disability.", "intellectual disability"),
        ("The applicant is dyslexic.", "dyslexic"),
        ("He is an amputee.", "an amputee"),
        ("A paraplegic applicant applies.", "paraplegic"),
        ("The tenant lives with bipolar disorder.", "bipolar disorder"),
    ],
)
def test_a_condition_with_no_counterpart_is_held_on_the_disability_axis(
    text: str, surface: str
) -> None:
    held = [(h.axis, h.surface) for h in GEN.held(text)]
    assert ("disability", surface) in held


@pytest.mark.parametrize(
    "text",
    [
        "She volunteers at the Epilepsy Foundation.",
        "Research on ADHD is growing.",
        "She worked with cancer patients.",
        "The clinic has cancer patients and HIV clients.",
        "He has an MS in Finance.",
        "A diabetic diet was served.",
        "He has ADD-on modules.",
    ],
)
def test_a_condition_said_of_no_one_is_not_held(text: str) -> None:
    assert [h for h in GEN.held(text) if h.axis == "disability"] == []


def test_the_condition_is_the_disability_axis_s_only() -> None:
    only_gender = CounterfactualGenerator(TermSet.load(axes=["gender"]), seed=7)
    assert only_gender.held("The applicant has epilepsy.") == ()
