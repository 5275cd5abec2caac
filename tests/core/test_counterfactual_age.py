"""Numeric ages are protected mentions (issue 14): before, "aged 65" or "born in 1958" left an
age-biased step "not applicable" and the guard failed open. Each form is detected in its band
(young <= 39, old >= 61; docs/detection.md), swapped to the mirrored age and mapped back."""

from __future__ import annotations

import pytest

from biasbreaker.probe import CounterfactualGenerator, TermSet

GEN = CounterfactualGenerator(TermSet.load(axes=["age"]), seed=0)


@pytest.mark.parametrize(
    ("text", "group", "swapped"),
    [
        ("The applicant, aged 65, asked for a loan.", "old", "The applicant, aged 35, asked for a loan."),
        ("She is 65 years old.", "old", "She is 35 years old."),
        ("He was born in 1958 and asked.", "old", "He was born in 1992 and asked."),
        ("Born 1990, she applied.", "young", "Born 1960, she applied."),
        ("a 70-year-old man applied", "old", "a 30-year-old man applied"),
        ("a 22-year-old applied", "young", "a 78-year-old applied"),
        ("She is 30 years of age.", "young", "She is 70 years of age."),
        ("Age: 22. Approve?", "young", "Age: 78. Approve?"),
        ("retired at age 67", "old", "retired at age 33"),
        ("He is retired.", "old", "He is young."),
        ("She is young.", "young", "She is old."),
        ("A retired nurse applied.", "old", "A young nurse applied."),
    ],
)  # fmt: skip
def test_each_age_form_is_detected_swapped_and_mapped_back(
    text: str, group: str, swapped: str
) -> None:
    detections = [d for d in GEN.detect(text) if d.axis == "age"]
    assert [d.groups for d in detections] == [(group,)]
    cs = GEN.generate(text, 1, coverage={})
    assert cs.status == "applicable"
    (variant,) = cs.variants
    assert variant.payload == swapped
    assert GEN.map_back(variant.payload, variant.mapping) == text


@pytest.mark.parametrize(
    "text",
    [
        "The applicant, aged 50, asked.",  # between the bands: no protected age
        "He retired the old car last year.",  # a verb, and "old" before no person word
        "born in 2090",  # a year after the reference year
        "Room 65 years-old-style",
        "version 1.65 years old",
    ],
)
def test_what_is_no_age_mention(text: str) -> None:
    assert GEN.generate(text, 1).status == "not_applicable"


def test_a_birth_year_is_read_against_the_fixed_reference_year() -> None:
    rule = GEN.terms.axis("age").numeric_age
    assert rule is not None and rule.reference_year == 2025
    # 2025 - 1986 = 39 (young), 2025 - 1964 = 61 (old), 2025 - 1975 = 50 (neither)
    assert [d.groups for d in GEN.detect("born in 1986")] == [("young",)]
    assert [d.groups for d in GEN.detect("born in 1964")] == [("old",)]
    assert GEN.detect("born in 1975") == ()
