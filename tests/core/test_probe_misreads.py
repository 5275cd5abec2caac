"""Issue 14, new-user trials: words misread as mentions, and names that were not read.

``MS in Finance`` was read as the title Ms. (``MR in Finance``), ``See Fig. F`` as the person
``See Fig``, ``32 F outside`` as an age and a sex; ``Applicant Kim Ji-woo``, ``Applicant
Yamamoto Hiroshi`` (surname first after a label) and ``Begay`` alone were not read at all.
"""

from __future__ import annotations

import pytest

from biasbreaker.probe import CounterfactualGenerator, TermSet

GEN = CounterfactualGenerator(TermSet.default(), seed=7)


def found(text: str) -> list[tuple[str, str]]:
    return [(d.axis, d.surface) for d in GEN.detect(text)]


def variants(text: str, k: int = 4) -> list[str]:
    return [v.payload for v in GEN.generate(text, k).variants]


@pytest.mark.parametrize(
    "text",
    ["She holds an MS in Finance.", "MS patients are welcome.", "An MS degree is required."],
)
def test_ms_in_capitals_before_no_name_is_no_title(text: str) -> None:
    assert ("gender", "MS") not in found(text)
    assert all("MR" not in v for v in variants(text))


def test_a_title_in_capitals_before_a_name_is_still_one() -> None:
    assert ("gender", "MS") in found("Dear MS SMITH, your loan")
    assert ("gender", "Ms") in found("Ms Smith applied")


@pytest.mark.parametrize("text", ["See Fig. F for details.", "(see Fig. F)", "See Table 3."])
def test_a_figure_reference_is_neither_a_person_nor_a_sex_code(text: str) -> None:
    assert found(text) == []


def test_a_name_before_a_reference_word_with_no_label_is_still_read() -> None:
    assert ("gender", "Larry Page") in found("Larry Page founded it.")


@pytest.mark.parametrize("text", ["32 F outside", "63F today", "It is 32 F outside"])
def test_a_temperature_at_a_line_start_is_no_age_and_sex(text: str) -> None:
    assert found(text) == []


@pytest.mark.parametrize(
    "text", ["32 F presents with chest pain", "Pt 67 F w/ chest pain", "63F, smoker"]
)
def test_a_clinical_age_and_sex_is_still_read(text: str) -> None:
    axes = {a for a, _ in found(text)}
    assert axes == {"age", "gender"}


@pytest.mark.parametrize(
    ("text", "surname", "axes"),
    [
        ("Applicant Kim Ji-woo", "Kim", {"race"}),
        ("Applicant Yamamoto Hiroshi", "Yamamoto", {"gender", "race"}),
        ("Name: Yamamoto Hiroshi", "Yamamoto", {"gender", "race"}),
        ("Yamamoto Hiroshi applied for the loan.", "Yamamoto", {"gender", "race"}),
    ],
)
def test_a_name_written_surname_first_where_a_name_stands_is_read_whole(
    text: str, surname: str, axes: set[str]
) -> None:
    dets = GEN.detect(text)
    assert {d.axis for d in dets} == axes
    assert all(d.surface.startswith(surname) and " " in d.surface for d in dets)
    race = [v for v in variants(text) if surname not in v]
    assert race  # the surname moves with the race variant, not only the given name


def test_a_given_name_then_a_surname_after_a_label_is_read_as_written() -> None:
    assert ("gender", "Mary Kim") in found("Applicant Mary Kim")
    assert found("a loan for Yamamoto Hiroshi") == []  # inside a sentence: as before


@pytest.mark.parametrize("payload", ["Begay", {"applicant": "Begay"}, "Begay."])
def test_a_race_coded_surname_alone_is_read(payload: object) -> None:
    (det,) = GEN.detect(payload)
    assert (det.axis, det.groups) == ("race", ("native-american",))


def test_a_surname_alone_that_is_also_a_place_is_held() -> None:
    assert GEN.detect("Washington") == ()
    assert [(h.axis, h.surface) for h in GEN.held("Washington")] == [("race", "Washington")]


@pytest.mark.parametrize(
    "text",
    ["She is a single mother of two.", "A father of three applied.", "Grandmother of 4."],
)
def test_a_parent_of_two_has_no_age(text: str) -> None:
    """``a single mother of two`` became ``mother of ninety-eight``: ``of two`` read as an age."""
    assert not [d for d in GEN.detect(text) if d.axis == "age"]


@pytest.mark.parametrize(
    ("text", "age"),
    [("A man of 70, retired.", "of 70"), ("A mother of 63 years applied.", "of 63 years")],
)
def test_an_age_after_of_is_still_read(text: str, age: str) -> None:
    assert [d.surface for d in GEN.detect(text) if d.axis == "age"] == [age]


def test_a_name_with_they_them_pronouns_is_held() -> None:
    """``Alex Taylor (they/them)``: the name's gender reading does not win, the step is held."""
    assert ("gender", "they/them") in [
        (h.axis, h.surface) for h in GEN.held("Alex Taylor (they/them) applied.")
    ]
