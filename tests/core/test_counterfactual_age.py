"""Numeric ages are protected mentions (issue 14): before, "aged 65" or "born in 1958" left an
age-biased step "not applicable" and the guard failed open. Each form is detected in its band
(young <= 39, old >= 61; docs/detection.md), swapped to the mirrored age and mapped back."""

from __future__ import annotations

import pytest

from biasbreaker.probe import CounterfactualGenerator, TermSet
from biasbreaker.probe.ages import age_of, mirrored_age, number_words
from biasbreaker.probe.terms import NumericAge

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
        # the forms a new-user trial found missed (issue 14)
        ("Ms. Mary Smith, 63, applied.", "old", "Ms. Mary Smith, 37, applied."),
        ("Mary Smith (63) applied.", "old", "Mary Smith (37) applied."),
        ("She is 63.", "old", "She is 37."),
        ("He is 63 years and asks.", "old", "He is 37 years and asks."),
        ("The applicant is 24, unemployed.", "young", "The applicant is 76, unemployed."),
        ("A 63 y/o applied.", "old", "A 37 y/o applied."),
        ("The applicant, 63 yo, applied", "old", "The applicant, 37 yo, applied"),
        ("aged sixty-three", "old", "aged thirty-seven"),
        ("a Sixty-Three-year-old applied", "old", "a Thirty-Seven-year-old applied"),
        ("aged twenty one", "young", "aged seventy nine"),
        ("Deny applicants over 60.", "old", "Deny applicants under 40."),
        ("Applicants under 25 are approved", "young", "Applicants over 75 are approved"),
        ("I am above 65, and", "old", "I am below 35, and"),
        ("anyone older than 60", "old", "anyone younger than 40"),
        ("persons 65 or older", "old", "persons 35 or younger"),
        ("candidates over the age of 60", "old", "candidates under the age of 40"),
        ("It is in her sixties.", "old", "It is in her thirties."),
        ("It is in his late 30s.", "young", "It is in his early 60s."),
        ("In their mid-20's they", "young", "In their mid-70's they"),
        ("DOB: 1958-04-12", "old", "DOB: 1992-04-12"),
        ("date of birth: 12 April 1958", "old", "date of birth: 12 April 1992"),
        ("born on April 12, 1958, it", "old", "born on April 12, 1992, it"),
        ("d.o.b. 04/12/1958", "old", "d.o.b. 04/12/1992"),
        ("The baby, aged 0, was", "young", "The baby, aged 100, was"),
        ("She was born in 1925, and", "old", "She was born in 2025, and"),  # 100 <-> 0
        ("Mary Smith (16) applied.", "young", "Mary Smith (84) applied."),
        ("Tom Lee, 16, applied.", "young", "Tom Lee, 84, applied."),
        # what a second new-user trial found missed (a step keyed on the number passed)
        ("Mary Smith is 63.", "old", "Mary Smith is 37."),
        ("My mother, 63, co-signs.", "old", "My mother, 37, co-signs."),
        ("He turned 63 last week.", "old", "He turned 37 last week."),
        ("Mary Smith (63, retired)", "old", "Mary Smith (37, retired)"),
        ("Mary Smith, sixty-three, applied", "old", "Mary Smith, thirty-seven, applied"),
        ("a 63yo applied", "old", "a 37yo applied"),
        ("It is 63yrs.", "old", "It is 37yrs."),
        ("a 63-yr-old applied", "old", "a 37-yr-old applied"),
        ("63 years young", "old", "37 years young"),
        ("Smith (b. 1961) applied", "old", "Smith (b. 1989) applied"),
        ("age=63", "old", "age=37"),
        ("The applicant is over 60.", "old", "The applicant is under 40."),
        ("Mary Smith, 63, and her husband, 65, apply.", "old",
         "Mary Smith, 37, and her husband, 35, apply."),
        ("It is 63 (born in 1962) now.", "old", "It is 37 (born in 1988) now."),
        # issue 14, third new-user trial: two-digit birth years (read against the reference
        # year 2025, so '61 is 1961: age 64 <-> 36, written '89), no closing comma, "of", "at"
        ("DOB 4/2/61", "old", "DOB 4/2/89"),
        ("DOB: 04/02/1961", "old", "DOB: 04/02/1989"),
        ("date of birth 1961-02-04", "old", "date of birth 1989-02-04"),
        ("D.O.B. 2/4/61", "old", "D.O.B. 2/4/89"),
        ("DOB 4/2/05", "young", "DOB 4/2/45"),
        ("born '61", "old", "born '89"),
        ("She was born in ’61 and", "old", "She was born in ’89 and"),
        ("born 4/2/61, she", "old", "born 4/2/89, she"),
        ("Smith (b. '61) applied", "old", "Smith (b. '89) applied"),
        ("Mary Smith, 63 wants a loan", "old", "Mary Smith, 37 wants a loan"),
        ("Applicant: Mary Smith, 63", "old", "Applicant: Mary Smith, 37"),
        ("my mother, 63 who", "old", "my mother, 37 who"),
        ("a man of 63", "old", "a man of 37"),
        ("a woman of sixty-three, retired", "old", "a woman of thirty-seven, retired"),
        ("At 63, she applied.", "old", "At 37, she applied."),
        ("At the age of 24, he", "young", "At the age of 76, he"),
        ("a 62-year-old applied", "old", "a 38-year-old applied"),
        ("age: 63", "old", "age: 37"),
        ("aged 65+", "old", "aged ≤35"),  # "35+" would still hold the old
        ("Age group: 65+", "old", "Age group: ≤35"),
        ("Age: ≤ 35", "young", "Age: 65 +"),  # the spacing moves with the sign
        ("Applicant age - 63", "old", "Applicant age - 37"),
        ("Age (years): 63", "old", "Age (years): 37"),
        ("She is now 63.", "old", "She is now 37."),
        ("He just turned 70.", "old", "He just turned 30."),
        ("Turning 65 next month, she", "old", "Turning 35 next month, she"),
        ("Mary Smith (sixty-three) applied", "old", "Mary Smith (thirty-seven) applied"),
        ("her 63rd birthday", "old", "her 37th birthday"),
        ("his 21st birthday", "young", "his 79th birthday"),
        ("the 88th birthday", "old", "the 12th birthday"),
        # a decade of birth is read from its first year (the 1960s: 56-65, so old)
        ("born in the 1950s", "old", "born in the 2000s"),
        ("Born in the ’60s, she", "old", "Born in the ’90s, she"),
        ("born in the 90s", "young", "born in the 60s"),
        ("a discount for the over-60s", "old", "a discount for the under-40s"),
        ("Under-25's are approved", "young", "Over-75's are approved"),
        # age ranges: each end mirrored, the ends trading places; the age is the middle
        ("Age group: 18-24", "young", "Age group: 76-82"),
        ("Age range: 25–34", "young", "Age range: 66–75"),
        ("aged between 60 and 70", "old", "aged between 30 and 40"),
        ("ages 65 to 74", "old", "ages 26 to 35"),
        # a range whose middle is in neither band is in the one band it reaches into:
        # 55-64 holds the old ages 61-64 (it was not probed), and its mirror the young 36-39
        ("Age group: 55-64. Applicant asks for a loan.", "old",
         "Age group: 36-45. Applicant asks for a loan."),
        ("Applicants aged 55–64 apply.", "old", "Applicants aged 36–45 apply."),
        ("Age group: 36-45", "young", "Age group: 55-64"),
        # the middle 39 is young, and its mirror 56-65 (middle 60) now reads back as old
        ("Age range: 56-65", "old", "Age range: 35-44"),
        # "aged 65" gave "aged 35 and older", still the old: the bound is part of the age
        ("aged 65 and older", "old", "aged 35 and younger"),
        ("aged 65 years or older", "old", "aged 35 years or younger"),
        # a first match out of context (or out of range) does not stop the search
        ("The score is over 60; applicants over 60 are denied.", "old",
         "The score is over 60; applicants under 40 are denied."),
        ("Not aged 101 but aged 65.", "old", "Not aged 101 but aged 35."),
    ],
)  # fmt: skip
def test_each_age_form_is_detected_swapped_and_mapped_back(
    text: str, group: str, swapped: str
) -> None:
    detections = [d for d in GEN.detect(text) if d.axis == "age"]
    assert detections and {d.groups for d in detections} == {(group,)}
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
        # numbers that count something else than a person's years
        "The score is 63.",
        "The applicant scored over 60.",
        "over 60 applications arrived",
        "In March, 63 people applied.",
        "Table 1, 2, 3.",
        "Temperatures were in the 60s.",
        "10 years of experience",
        "It has 20 years.",
        "Section (3) applies.",
        "Paris, 65 km away",
        "He is 50.",  # between the bands
        "She is one of us.",
        "born in 75 BC",
        "He is aged 101.",  # beyond the mirror: 100 - 101 < 0
        "Room B (15) is free.",  # a capitalised word, but under 16: a number, not an age
        "Block C, 12, was sold.",
        "Tom Lee, 15, applied.",
        "The total, 63, was paid.",  # the word before is not capitalised
        "She has 10 yrs experience.",
        "$63,000 and 63% of it",
        "She was aged zero.",  # no mirror in words (100)
        "65+ applications arrived",  # "+" is read after an age label only
        "turning 90 degrees",
        "on the 63rd floor",
        "age bracket 45-54",  # within the middle: reaches no band
        "Applicants aged 30-70 apply.",  # reaches both bands: no group
        "Applicants aged 30–70 apply.",  # nor its first end alone ("aged 30")
        "aged 70-60",  # no range
        "the 1960s were loud",
        # dates that are no birth date, counts after a name or a person noun, times
        "Meeting on 4/2/61",
        "Invoice 4/2/61 paid",
        "It was '61 when",
        "Acme Corp, 63 employees",
        "a member of 63 clubs",
        "at 63, the price fell",
        "At 8, she left.",  # a time, not an age: under 16
        "Price 63.",
        "3 years of experience",
        "Room 63",
    ],
)
def test_what_is_no_age_mention(text: str) -> None:
    assert GEN.generate(text, 1).status == "not_applicable"


@pytest.mark.parametrize(
    ("text", "age"),
    [
        ("over 60", 61), ("under 40", 39), ("older than 60", 61), ("younger than 40", 39),
        ("60 or older", 60), ("in her sixties", 65), ("in her early 60s", 62),
        ("in her late sixties", 68), ("in his teens", 15), ("aged ninety-nine", 99),
        ("born in 1958", 67), ("DOB: 04/12/1958", 67), ("over 65", 66), ("under 35", 34),
        ("Age: 18-24", 21), ("over-60s", 61), ("under-25s", 24), ("DOB 4/2/61", 64), ("born '26", 99), ("born '25", 0), ("DOB 1/1/00", 25),
    ],
)  # fmt: skip
def test_the_age_a_surface_states(text: str, age: int) -> None:
    """A bound is one year past its number; a decade is its middle, early/late its 3rd/8th."""
    rule = GEN.terms.axis("age").numeric_age
    assert rule is not None
    assert age_of(text, rule) == age


def test_each_mirror_is_its_own_inverse_in_its_own_style() -> None:
    rule = GEN.terms.axis("age").numeric_age
    assert rule is not None
    for n in range(0, 101):
        w = number_words(n) if 0 < n < 100 else ""
        words = [f"aged {w}", f"AGED {w.upper()}", f"Aged {w.capitalize()}"] if w else []
        for surface in [f"aged {n}", *words]:
            once = mirrored_age(surface, rule)
            assert once is not None and age_of(once, rule) == 100 - n
            assert mirrored_age(once, rule) == surface
    assert mirrored_age("in his nineties", rule) is None  # 100 - 95 = 5: no decade says it
    assert mirrored_age("aged 20s", rule) is None  # a decade only in "in her 20s"
    assert age_of("aged 20s", rule) is None
    assert mirrored_age("born in 1924", rule) is None  # 101: beyond the mirror
    assert mirrored_age("aged 101", rule) is None
    assert mirrored_age("over-101s", rule) is None
    for yy in range(100):  # two-digit birth years stay two digits and map back
        once = mirrored_age(f"DOB 4/2/{yy:02d}", rule)
        if once is None:
            assert yy == 25  # age 0: its mirror, 100, has no two-digit year
            continue
        assert age_of(once, rule) == 100 - age_of(f"born '{yy:02d}", rule)  # type: ignore[operator]
        assert mirrored_age(once, rule) == f"DOB 4/2/{yy:02d}"
    assert number_words(0) == "zero" and number_words(99) == "ninety-nine"
    ninety = NumericAge(young_max=39, old_min=61, mirror_sum=90)
    assert mirrored_age("in her sixties", ninety) == "in her twenties"
    odd = NumericAge(young_max=39, old_min=61, mirror_sum=95)
    assert mirrored_age("in her sixties", odd) is None  # 95 - 65 = 30: not a decade's middle
    assert mirrored_age("aged 60", odd) == "aged 35"
    assert mirrored_age("in his eighties", rule) == "in his teens"
    assert number_words(63) == "sixty-three" and number_words(63, hyphen=" ") == "sixty three"
    with pytest.raises(ValueError, match="outside 0-99"):
        number_words(100)


def test_a_birth_year_is_read_against_the_fixed_reference_year() -> None:
    rule = GEN.terms.axis("age").numeric_age
    assert rule is not None and rule.reference_year == 2025
    # 2025 - 1986 = 39 (young), 2025 - 1964 = 61 (old), 2025 - 1975 = 50 (neither)
    assert [d.groups for d in GEN.detect("born in 1986")] == [("young",)]
    assert [d.groups for d in GEN.detect("born in 1964")] == [("old",)]
    assert GEN.detect("born in 1975") == ()


def test_the_pronoun_of_a_decade_moves_with_the_person() -> None:
    """Before, "a woman in her sixties" became "a man in her sixties": the age surface held the
    pronoun, so the gender variant could not reach it."""
    gen = CounterfactualGenerator(TermSet.load(axes=["gender", "age"]), seed=0)
    for text, gender, age in [
        ("a woman in her sixties", "a man in his sixties", "a woman in her thirties"),
        ("He is in his late 60s.", "She is in her late 60s.", "He is in his early 30s."),
    ]:
        variants = {v.mapping.axis: v for v in gen.generate(text, 2, coverage={}).variants}
        assert variants["gender"].payload == gender and variants["age"].payload == age
        for v in variants.values():
            assert gen.map_back(v.payload, v.mapping) == text


@pytest.mark.parametrize(
    ("text", "age", "variant"),
    [
        # a new-user trial: "Applicant F/63" was denied and passed, its age unread
        ("Applicant F/63", "/63", "Applicant F/37"),
        ("Applicant M/63, income 50k", "/63", "Applicant M/37, income 50k"),
        ("Smith (63/M)", "63", "Smith (37/M)"),
        ("applicant F/30", "/30", "applicant F/70"),
    ],
)
def test_an_age_beside_a_sex_code_and_a_slash(text: str, age: str, variant: str) -> None:
    assert [d.surface for d in GEN.detect(text)] == [age]
    assert [v.payload for v in GEN.generate(text, 1).variants] == [variant]


@pytest.mark.parametrize("text", ["room F/12", "5/6 of them", "F/63.5 ratio", "Q3/M"])
def test_a_number_beside_a_slash_is_no_age_elsewhere(text: str) -> None:
    assert GEN.detect(text) == ()


@pytest.mark.parametrize(
    ("text", "age", "group", "variant"),
    [
        # a fourth new-user trial (issue 14): forms whose age went unread
        ("63F", "63", "old", "37F"),
        ("Mary Smith, 63F, asked.", "63", "old", "Mary Smith, 37F, asked."),
        ("Applicant 63, income 40k", "63", "old", "Applicant 37, income 40k"),
        ("patient: 24; income 40k", "24", "young", "patient: 76; income 40k"),
        ("63 years, income 40k", "63 years", "old", "37 years, income 40k"),
        ("- 63 yrs, renter", "63 yrs", "old", "- 37 yrs, renter"),
        ("65+ applicant", "65+", "old", "≤35 applicant"),
        ("Only 65+ customers qualify.", "65+", "old", "Only ≤35 customers qualify."),
        ("63 yo F", "63 yo", "old", "37 yo F"),
        ("yob 1961", "yob 1961", "old", "yob 1989"),
        ("Year of birth: 1990", "Year of birth: 1990", "young", "Year of birth: 1960"),
        ("YOB '61, income 40k", "YOB '61", "old", "YOB '89, income 40k"),
        # a fifth trial: a triage note's patient
        ("Pt 67F w/ chest pain", "67", "old", "Pt 33F w/ chest pain"),
        ("Pt. 67F, chest pain", "67", "old", "Pt. 33F, chest pain"),
        ("pt: 24F", "24", "young", "pt: 76F"),
        # issue 14: one space or a tab between the age and the code, kept
        ("Pt 67 F w/ chest pain", "67", "old", "Pt 33 F w/ chest pain"),
        ("67 F", "67", "old", "33 F"),
        ("Smith (63 M)", "63", "old", "Smith (37 M)"),
        ("Mary Smith, 63 F, asked.", "63", "old", "Mary Smith, 37 F, asked."),
        ("pt: 24\tF", "24", "young", "pt: 76\tF"),
    ],
)
def test_forms_of_a_fourth_trial(text: str, age: str, group: str, variant: str) -> None:
    assert [(d.surface, d.groups) for d in GEN.detect(text)] == [(age, (group,))]
    (v,) = GEN.generate(text, 1, coverage={}).variants
    assert v.payload == variant
    assert GEN.map_back(v.payload, v.mapping) == text


@pytest.mark.parametrize(
    "text",
    [
        "page 63/M",  # a number counts a thing: page, room, seat ...
        "Page 63/M",
        "see Room 63/F",
        "Applicant 17",  # a number naming the applicant, no field after it
        "Applicant #63, income 40k",
        "63 applicants applied.",  # a count: no bound sign
        "It was 63F outside.",
        "Term: 30 years, rate 5%",  # years of a loan, not at a line start or after a person
        "Applicant 12F",  # under 16: no age
        "Pt 12F",
        "It was 67 F outside.",
        "Temperature: 63 F",
        "a 63 M yacht",
        "page 63 F",
        "Pt 12 F",
        "Set the title in 12 pt, the body in 10 pt.",  # points, not a patient
    ],
)
def test_numbers_of_a_fourth_trial_that_are_no_age(text: str) -> None:
    assert GEN.detect(text) == ()
