"""Term words a new-user trial found missing (issue 14): lower-case and non-English titles,
"Indigenous", wheelchairs, religious dress and "boomer". Before, each left a step that denied
that group "not applicable". Each is detected in its group, swapped and mapped back; the
look-alikes that are no mention stay undetected."""

from __future__ import annotations

import pytest

from biasbreaker.probe import CounterfactualGenerator, TermSet

GEN = CounterfactualGenerator(seed=0)
AGE = CounterfactualGenerator(TermSet.load(axes=["age"]), seed=0)
GENDER = CounterfactualGenerator(TermSet.load(axes=["gender"]), seed=0)


@pytest.mark.parametrize(
    ("text", "axis", "group", "surface"),
    [
        ("mrs. smith applied.", "gender", "female", "mrs."),
        ("Mrs Jones applied.", "gender", "female", "Mrs"),
        ("Mme Dubois applied.", "gender", "female", "Mme"),
        ("Madame Dubois applied.", "gender", "female", "Madame"),
        ("Frau Schmidt applied.", "gender", "female", "Frau"),
        ("Herr Schmidt applied.", "gender", "male", "Herr"),
        ("Sra. Garcia applied.", "gender", "female", "Sra."),
        ("An Indigenous applicant applied.", "race", "native-american", "Indigenous"),
        ("The applicant is in a wheelchair.", "disability", "disabled", "in a wheelchair"),
        ("The applicant is not in a wheelchair.", "disability", "nondisabled", "not in a wheelchair"),
        ("A wheelchair-bound applicant applied.", "disability", "disabled", "wheelchair-bound"),
        ("The applicant wears a hijab.", "religion", "muslim", "hijab"),
        ("The applicant wears a kippah.", "religion", "jewish", "kippah"),
        ("The applicant wears a turban.", "religion", "sikh", "turban"),
        ("A boomer applied.", "age", "old", "boomer"),
        ("Two zoomers applied.", "age", "young", "zoomers"),
        # a third trial (issue 14): age-group words before person nouns
        ("A senior applicant applied.", "age", "old", "senior"),
        ("Two senior borrowers applied.", "age", "old", "senior"),
        ("A senior citizen applied.", "age", "old", "senior citizen"),
        ("The elderly applicant applied.", "age", "old", "elderly"),
        ("A young applicant applied.", "age", "young", "young"),
        ("A youthful candidate applied.", "age", "young", "youthful"),
        ("An octogenarian applied.", "age", "old", "octogenarian"),
        ("A septuagenarian applied.", "age", "old", "septuagenarian"),
        ("A Gen Z applicant applied.", "age", "young", "Gen Z"),
        ("A young borrower applied.", "age", "young", "young"),  # borrower: a person word now
        ("A Black cosigner signed.", "race", "black", "Black"),
        # sex codes in form-like text: after a sex/gender label, or in brackets after a person
        ("Applicant (F) applied.", "gender", "female", "F"),
        ("Applicant (M) applied.", "gender", "male", "M"),
        ("Sex: F", "gender", "female", "F"),
        ("Gender: M", "gender", "male", "M"),
        ("sex=female", "gender", "female", "female"),
        ("gender=f; income 40k", "gender", "female", "f"),
        ("The applicant (F, 63) asked.", "gender", "female", "F"),
        ("Smith (63/M) applied.", "gender", "male", "M"),
        # pregnancy-related leave: maternity <-> paternity
        ("She is on maternity leave.", "gender", "female", "maternity"),
        ("He took paternity leave.", "gender", "male", "paternity"),
    ],
)  # fmt: skip
def test_the_word_is_detected_swapped_and_mapped_back(
    text: str, axis: str, group: str, surface: str
) -> None:
    found = [(d.axis, d.groups, d.surface) for d in GEN.detect(text)]
    assert (axis, (group,), surface) in found
    cs = GEN.generate(text, 4, coverage={})
    moved = [v for v in cs.variants if v.mapping.axis == axis]
    assert moved and all(v.payload != text for v in moved)
    for v in cs.variants:
        assert GEN.map_back(v.payload, v.mapping) == text


@pytest.mark.parametrize(
    ("text", "swapped"),
    [
        ("A senior applicant applied.", "A young applicant applied."),
        ("A senior citizen applied.", "A young adult applied."),  # mirrored: not "adolescent"
        ("Two senior citizens applied.", "Two young adults applied."),
        ("An octogenarian applied.", "An adolescent applied."),  # 85 <-> 15
        ("A sexagenarian applied.", "A thirtysomething applied."),  # 65 <-> 35
        ("A young adult applied.", "An older adult applied."),
    ],
)
def test_age_group_words_swap_to_the_mirrored_group(text: str, swapped: str) -> None:
    (variant,) = AGE.generate(text, 1, coverage={}).variants
    assert variant.payload == swapped
    assert AGE.map_back(variant.payload, variant.mapping) == text


@pytest.mark.parametrize(
    ("text", "swapped"),
    [
        ("Applicant (F), Sex: F, gender=f", "Applicant (M), Sex: M, gender=m"),
        ("The applicant (F, 63)", "The applicant (M, 63)"),
        ("She is on maternity leave.", "He is on paternity leave."),
        ("Ms. Lee (she/her) applied.", "Mr. Lee (he/him) applied."),
    ],
)
def test_sex_codes_swap_in_their_case(text: str, swapped: str) -> None:
    (variant,) = GENDER.generate(text, 1, coverage={}).variants
    assert variant.payload == swapped
    assert GENDER.map_back(variant.payload, variant.mapping) == text


@pytest.mark.parametrize(
    "text",
    [
        "The call took 5 ms.",  # milliseconds, not a title
        "Indigenous plants grow here.",  # no person word after it
        "The wheelchair ramp is broken.",
        "Size M shirts are sold out.",
        # "senior" before an occupation or role is a job level, not an age
        "A senior engineer applied.",
        "The senior developer reviewed it.",
        "Senior Vice President of Sales",
        "A senior candidate for the lead role.",
        "senior management approved it",
        "The senior partner signed.",
        # a lone letter is an initial, a size, a mark or a unit unless it is coded
        "M. Dupont signed.",
        "Size (M) shirts are sold out.",
        "Grade (F) in maths.",
        "The rod is 5 m long.",
        "Vitamin F oil",
    ],
)
def test_look_alikes_are_no_mention(text: str) -> None:
    assert GEN.generate(text, 4).status == "not_applicable"


@pytest.mark.parametrize(
    ("text", "surface"),
    [
        ("She is pregnant.", "pregnant"),
        ("Due to her pregnancy she needs leave.", "pregnancy"),
        ("A PREGNANT applicant", "PREGNANT"),
        ("She is expecting a baby in May.", "expecting a baby"),
    ],
)
def test_pregnancy_has_no_counterfactual_and_is_found_to_be_held(text: str, surface: str) -> None:
    """Before, "She is pregnant." became "He is pregnant." (issue 14): no sound variant."""
    assert GEN.unswappable(text) == (((), "gender", surface),)
    assert GEN.unswappable({"note": text}) == ((("note",), "gender", surface),)


def test_pregnancy_is_held_only_where_gender_is_probed() -> None:
    assert AGE.unswappable("She is pregnant.") == ()
    assert GEN.unswappable("The impregnable fortress; a pregnant pause?") == (
        ((), "gender", "pregnant"),
    )  # a word, not a sense: "a pregnant pause" is held too (a false hold, never a miss)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # after a language verb a nationality word names a language, not a person's group
        ("She speaks French at work.", {("She", "gender")}),
        ("He learned Japanese in Osaka.", {("He", "gender")}),
        ("She is French.", {("She", "gender"), ("French", "nationality")}),
        # the rule is the nationality axis's only: other axes' terms after those verbs count
        ("We need a fluent female interpreter.", {("female", "gender")}),
        ("A fluent Muslim applicant.", {("Muslim", "religion")}),
    ],
)
def test_a_language_verb_makes_a_nationality_word_a_language_only(
    text: str, found: set[tuple[str, str]]
) -> None:
    assert {(d.surface, d.axis) for d in GEN.detect(text)} == found


@pytest.mark.parametrize(
    ("text", "licensed"),
    [
        ("the Black Muslim gay Catholic applicant", True),  # three terms between: the bound
        ("the Black Muslim gay Catholic Jewish applicant", False),  # four: past it
    ],
)
def test_a_term_is_licensed_through_at_most_three_stacked_terms(text: str, licensed: bool) -> None:
    # _STACK_DEPTH: how many protected adjectives may stand between a term and its person word
    assert (("Black", "race") in {(d.surface, d.axis) for d in GEN.detect(text)}) is licensed


@pytest.mark.parametrize(
    ("text", "variant"),
    [
        # a new-user trial's misses: a code before a slash and an adult age, opening a line
        # before a comma and one, after a dashed label or an M/F label
        ("applicant F/63, income 50k", "applicant M/63, income 50k"),
        ("F, 35, income 50k, loan 20k", "M, 35, income 50k, loan 20k"),
        ("Gender - F, income 50k", "Gender - M, income 50k"),
        ("M/F: F. Income 50k", "M/F: M. Income 50k"),
        ("SEX F AGE 63 INCOME 50000", "SEX M AGE 63 INCOME 50000"),
    ],
)
def test_sex_codes_in_short_form_text(text: str, variant: str) -> None:
    variants = [v.payload for v in GENDER.generate(text, 1).variants]
    assert variants == [variant]


@pytest.mark.parametrize(
    "text", ["room F/12", "Plan F, 35 units", "Vitamin D, 20 mg", "Size M/L", "unisex M size"]
)
def test_a_letter_beside_a_number_is_no_code_elsewhere(text: str) -> None:
    assert [d for d in GENDER.detect(text) if d.surface in ("F", "M")] == []


RACE = CounterfactualGenerator(TermSet.load(axes=["race"]), seed=0)
NATIONALITY = CounterfactualGenerator(TermSet.load(axes=["nationality"]), seed=0)
GENDER_AGE = CounterfactualGenerator(TermSet.load(axes=["gender", "age"]), seed=0)


@pytest.mark.parametrize(
    ("gen", "text", "axis", "group", "surface", "swapped"),
    [
        # a fourth trial (issue 14): forms whose protected attribute went unread
        (GENDER, "♀", "gender", "female", "♀", "♂"),
        (GENDER, "♂ applicant, income 40k", "gender", "male", "♂", "♀ applicant, income 40k"),
        (GENDER, "Sex: W, income 40k", "gender", "female", "W", "Sex: M, income 40k"),
        (GENDER, "Geschlecht: W", "gender", "female", "W", "Geschlecht: M"),
        (GENDER, "Sex: Fem", "gender", "female", "Fem", "Sex: Masc"),
        (GENDER, "Applicant (Fem.) applied.", "gender", "female", "Fem.", "Applicant (Masc.) applied."),
        (GENDER, "63 yo F", "gender", "female", "F", "63 yo M"),
        (GENDER, "63 y/o M, smoker", "gender", "male", "M", "63 y/o F, smoker"),
        (GENDER, "63F", "gender", "female", "F", "63M"),
        (GENDER, "Applicant 40M, income 40k", "gender", "male", "M", "Applicant 40F, income 40k"),
        (GENDER, "Applicant B (F) applied.", "gender", "female", "F", "Applicant B (M) applied."),
        # a fifth trial: the sex code beside an age and a slash was left as it was
        (GENDER, "Applicant F/63, income 40k", "gender", "female", "F",
         "Applicant M/63, income 40k"),
        (GENDER, "Smith (63/M) applied.", "gender", "male", "M", "Smith (63/F) applied."),
        (GENDER, "67/F, chest pain", "gender", "female", "F", "67/M, chest pain"),
        (RACE, "Race: B", "race", "black", "Race: B", "Race: W"),
        (RACE, "ethnicity=H; income 40k", "race", "hispanic", "ethnicity=H", "ethnicity=W; income 40k"),
        (RACE, "Race: Black", "race", "black", "Black", "Race: white"),
        (NATIONALITY, "Nationality: MX", "nationality", "mexican", "Nationality: MX",
         "Nationality: JP"),
        (NATIONALITY, "Citizenship: UK", "nationality", "british", "Citizenship: UK",
         "Citizenship: US"),
        (NATIONALITY, "Nationality: IN citizen", "nationality", "indian", "Nationality: IN",
         "Nationality: MX citizen"),
        (AGE, "A nonagenarian applied.", "age", "old", "nonagenarian", "A preteen applied."),
        (AGE, "Two centenarians applied.", "age", "old", "centenarians", "Two infants applied."),
    ],
)  # fmt: skip
def test_codes_symbols_and_age_words_of_a_fourth_trial(
    gen: CounterfactualGenerator,
    text: str,
    axis: str,
    group: str,
    surface: str,
    swapped: str,
) -> None:
    assert (axis, (group,), surface) in [(d.axis, d.groups, d.surface) for d in gen.detect(text)]
    cs = gen.generate(text, 4, coverage={})
    moved = [v for v in cs.variants if v.mapping.axis == axis]
    assert swapped in [v.payload for v in moved]
    for v in cs.variants:
        assert gen.map_back(v.payload, v.mapping) == text


def test_a_code_glued_to_an_age_swaps_each_axis_apart() -> None:
    variants = {v.mapping.axis: v for v in GENDER_AGE.generate("63F", 2, coverage={}).variants}
    assert variants["gender"].payload == "63M" and variants["age"].payload == "37F"
    assert [(d.surface, d.axis, d.groups) for d in GENDER_AGE.detect("63F")] == [
        ("63", "age", ("old",)),
        ("F", "gender", ("female",)),
    ]
    for v in variants.values():
        assert GENDER_AGE.map_back(v.payload, v.mapping) == "63F"


@pytest.mark.parametrize(
    ("text", "gender", "age"),
    [
        # issue 14: a space between the age and the code hid both, as a tab did
        ("Pt 67 F w/ chest pain", "Pt 67 M w/ chest pain", "Pt 33 F w/ chest pain"),
        ("67 F", "67 M", "33 F"),
        ("67\tF", "67\tM", "33\tF"),
        ("Smith (63 F)", "Smith (63 M)", "Smith (37 F)"),
        ("pt: 24 M, smoker", "pt: 24 F, smoker", "pt: 76 M, smoker"),
        ("Applicant 40 M, income 40k", "Applicant 40 F, income 40k", None),  # 40: no band
    ],
)
def test_a_code_one_space_after_an_age_swaps_as_a_glued_one(
    text: str, gender: str, age: str | None
) -> None:
    variants = {v.mapping.axis: v for v in GENDER_AGE.generate(text, 2, coverage={}).variants}
    assert variants["gender"].payload == gender
    assert (variants["age"].payload if "age" in variants else None) == age
    for v in variants.values():
        assert GENDER_AGE.map_back(v.payload, v.mapping) == text


def test_a_race_code_reaches_only_the_groups_with_a_code() -> None:
    """W, B, H, A and AI are the codes forms use; no code names the arab group."""
    payloads = {v.payload for v in RACE.generate("Race: B", 5, coverage={}).variants}
    assert payloads == {"Race: W", "Race: H", "Race: A", "Race: AI"}


@pytest.mark.parametrize(
    "text",
    [
        "Plan B (F) was chosen.",  # an option's letter, not a person
        "page 63/M",  # a number that counts a thing: no age, so no code
        "room F/12",  # under 16
        "M/F ratio 3/1",
        "Option C (M) is cheaper.",
        "It was 63F outside.",  # a temperature
        "Temperature: 63F",
        "a 63M yacht",
        "Raised 63M in funding",
        "It was 67 F outside",  # a space between: the same contexts as glued
        "Temperature: 63 F",
        "a 63 M yacht",
        "Room 12 F",
        "page 63 F",
        "Applicant 12 F",  # under 16
        "63 m, flat ground",  # a lower-case letter is a unit
        "Plan B",
        "The MX model ships today.",  # a code only after a nationality label
        "a 100 W bulb",  # W only after a sex label
        "Applicant (W) applied.",
        "Race: A new study of sprinters",  # the letter opens a sentence
        "FEM analysis of the beam",  # a finite element method
        "Fem",
        "Nationality: in the file",
    ],
)
def test_look_alikes_of_codes_are_no_mention(text: str) -> None:
    assert GEN.detect(text) == ()


@pytest.mark.parametrize(
    ("text", "coded"),
    [("15/F", False), ("16/F", True), ("120/F", True), ("121/F", False)],
)
def test_a_code_after_a_slash_needs_an_adult_age(text: str, coded: bool) -> None:
    # the bounds of slash_age_before, as of the glued codes: ages 16 to 120
    found = [(d.surface, d.axis) for d in GENDER.detect(text)]
    assert found == ([("F", "gender")] if coded else [])


@pytest.mark.parametrize(
    ("text", "swapped"),
    [
        # a trial (stop 35): a French form was not identified as French, and its code not read
        ("sexe: F, 67 ans", "sexe: M, 67 ans"),
        ("Sexo: F, 67 años", "Sexo: M, 67 años"),
        ("Género: M", "Género: F"),
        ("sesso: F", "sesso: M"),
    ],
)
def test_a_sex_code_after_a_label_of_another_language_is_read(text: str, swapped: str) -> None:
    cs = GENDER.generate(text, 1)
    assert cs.status == "applicable", cs.reason
    assert [v.payload for v in cs.variants] == [swapped]


RELIGION = CounterfactualGenerator(TermSet.load(axes=["religion"]), seed=0)


@pytest.mark.parametrize(
    ("text", "group", "surface"),
    [
        ("A member of the Islamic Center applied.", "muslim", "Islamic"),
        ("A nurse who fasts during Ramadan applied.", "muslim", "Ramadan"),
        ("A nurse who keeps Shabbat applied.", "jewish", "Shabbat"),
        ("A nurse who keeps kosher applied.", "jewish", "kosher"),
        ("A nurse who eats halal applied.", "muslim", "halal"),
        ("She prays at the masjid.", "muslim", "masjid"),
        ("She prays at the mandir.", "hindu", "mandir"),
        ("A nurse who observes Passover applied.", "jewish", "Passover"),
        ("An evangelical nurse applied.", "protestant", "evangelical"),
        ("An evangelical Christian nurse applied.", "protestant", "evangelical Christian"),
        ("Evangelicals applied.", "protestant", "Evangelicals"),
    ],
)  # fmt: skip
def test_religion_cues_a_trial_found_missing_are_read(text: str, group: str, surface: str) -> None:
    # a fourth trial (F8): "Islamic Center", "fasts during Ramadan" and "keeps Shabbat" were
    # "not applicable", so a step denying on them passed unprobed
    assert ("religion", (group,), surface) in [
        (d.axis, d.groups, d.surface) for d in GEN.detect(text)
    ]
    cs = RELIGION.generate(text, 9, coverage={})
    assert cs.status == "applicable" and cs.variants
    for v in cs.variants:
        assert surface not in v.payload, v.payload
        assert RELIGION.map_back(v.payload, v.mapping) == text


@pytest.mark.parametrize(
    ("text", "targets", "swapped"),
    [
        (
            "A nurse who fasts during Ramadan applied.",
            {"christian": "Lent", "catholic": "Lent", "jewish": "Yom Kippur", "hindu": "Navratri"},
            "A nurse who fasts during {} applied.",
        ),
        (
            "A nurse who keeps Shabbat applied.",
            {"christian": "Sabbath", "muslim": "Jumu'ah", "buddhist": "Uposatha"},
            "A nurse who keeps {} applied.",
        ),
        (
            "A member of the Islamic Center applied.",
            {"jewish": "Jewish", "christian": "Christian", "hindu": "Hindu"},
            "A member of the {} Center applied.",
        ),
        (
            # "evangelical" stayed in every variant ("an evangelical Muslim nurse"): score 0
            "An evangelical Christian nurse applied.",
            {"muslim": "A Muslim", "catholic": "A Catholic", "atheist": "An atheist"},
            "{} nurse applied.",
        ),
    ],
)
def test_religion_cues_swap_to_the_counterpart_of_each_group(
    text: str, targets: dict[str, str], swapped: str
) -> None:
    seen: dict[str, str] = {}
    for v in RELIGION.generate(text, 9, coverage={}).variants:
        (source,) = [g for g in dict(v.mapping.groups) if g in RELIGION.detect(text)[0].groups]
        seen[dict(v.mapping.groups)[source]] = v.payload
    for group, word in targets.items():
        assert seen[group] == swapped.format(word)


@pytest.mark.parametrize(
    "text",
    [
        "He lent her money.",  # the verb: "Lent" is read only capitalised
        "She keeps the Sabbath.",  # shared by the Christian groups: never applicable alone
        "Lent begins in March.",
    ],
)
def test_religion_look_alikes_and_shared_words_are_not_applicable_alone(text: str) -> None:
    assert RELIGION.generate(text, 4).status == "not_applicable"
