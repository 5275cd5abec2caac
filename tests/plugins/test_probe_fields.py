"""Protected attributes held in structured fields: found, and the step held, never "not applicable".

A node that denies on ``{"age": 63}`` or ``{"sex": "F"}`` was recorded as not applicable
("group-blind"), and its denial went downstream: the text probe passes numbers, bools and codes
through unchanged, so it cannot swap them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from biasbreaker.probe import CounterfactualGenerator, Probe
from biasbreaker.probe.fields import opaque_fields
from biasbreaker_plugins.scorers.decision import DecisionScorer

AXES = ["gender", "race", "age", "religion", "sexual-orientation", "disability", "nationality"]


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"age": 63}, [(("age",), "age", 63)]),
        ({"applicant": {"sex": "F"}}, [(("applicant", "sex"), "gender", "F")]),
        ({"is_female": True}, [(("is_female",), "gender", True)]),
        ({"genderCode": "M"}, [(("genderCode",), "gender", "M")]),
        ({"people": [{"race": "B"}]}, [(("people", 0, "race"), "race", "B")]),
        ({"religion_id": 4, "disabled": False}, [(("religion_id",), "religion", 4),
                                                 (("disabled",), "disability", False)]),
        ({"nationality": "FR"}, [(("nationality",), "nationality", "FR")]),
        # a date of birth, a code longer than 3 characters, a year in words under an age key
        ({"dob": "1961-04-02"}, [(("dob",), "age", "1961-04-02")]),
        ({"birth_date": "1961-04-02"}, [(("birth_date",), "age", "1961-04-02")]),
        ({"date_of_birth": "2 April 1961"}, [(("date_of_birth",), "age", "2 April 1961")]),
        ({"applicantSex": "fem."}, [(("applicantSex",), "gender", "fem.")]),
        # a new-user trial's misses: pregnancy flags, an age bracket, an age in words
        ({"is_pregnant": True}, [(("is_pregnant",), "gender", True)]),
        ({"applicant": {"pregnant": True}}, [(("applicant", "pregnant"), "gender", True)]),
        ({"age_bracket": "60-69"}, [(("age_bracket",), "age", "60-69")]),
        ({"age": "63 years"}, [(("age",), "age", "63 years")]),
        ({"age": "sixty-three, retired"}, [(("age",), "age", "sixty-three, retired")]),
        # column names in French, German, Spanish, Portuguese, Italian; accents or not
        ({"sexe": "F", "âge": 63}, [(("sexe",), "gender", "F"), (("âge",), "age", 63)]),
        ({"Geschlecht": "w"}, [(("Geschlecht",), "gender", "w")]),
        ({"Staatsangehörigkeit": "DE"}, [(("Staatsangehörigkeit",), "nationality", "DE")]),
        ({"fecha_de_nacimiento": "1961-04-02"},
         [(("fecha_de_nacimiento",), "age", "1961-04-02")]),
        ({"date_de_naissance": "02/04/1961"}, [(("date_de_naissance",), "age", "02/04/1961")]),
        ({"género": "F", "raza": 2}, [(("género",), "gender", "F"), (("raza",), "race", 2)]),
        ({"data_di_nascita": "1961"}, [(("data_di_nascita",), "age", "1961")]),
        # ... but not words those languages share with English keys of another meaning
        ({"genre": "jazz", "eta": 5, "alter_table": "x"}, []),
        # text the probe reads, an absent value, and keys that only contain a word
        ({"sex": "a woman of 40"}, []),
        ({"age": None, "sex": ""}, []),
        ({"page": 3, "manager": "Bo", "message": 1, "stage": 2, "average": 0.5}, []),
        # an attribute word qualified as something else (a new-user trial's false holds)
        ({"retry_disabled": True, "man_hours": 40, "account_age_days": 12}, []),
        ({"citizen_services_used": 2, "age_limit_note": "n/a"}, []),
        # a fourth trial (issue 14): an age bound or an age flag as the key, a sex-pair column
        ({"over_60": True}, [(("over_60",), "age", True)]),
        ({"applicant": {"isOver65": False}}, [(("applicant", "isOver65"), "age", False)]),
        ({"age_under_25": 1, "65_plus": True}, [(("age_under_25",), "age", 1),
                                                (("65_plus",), "age", True)]),
        ({"senior": True}, [(("senior",), "age", True)]),
        ({"is_elderly": "Y"}, [(("is_elderly",), "age", "Y")]),
        ({"yob": 1961}, [(("yob",), "age", 1961)]),
        ({"M/F": "F"}, [(("M/F",), "gender", "F")]),
        ({"f/m": "m"}, [(("f/m",), "gender", "m")]),
        # ... but a bound inside another word, a senior job, a page and a size are no field
        ({"hangover_60": 1, "turnover_60": 2, "game_over_60": 3}, []),
        ({"senior_engineer": True, "m/f_ratio": 0.5, "size": "M"}, []),
        ([{"score": 3}], []),
        ("age 63", []),
        # a fifth trial (issue 14): a short year, when the attribute holds, name-value records
        ({"birth_yr": 1961}, [(("birth_yr",), "age", 1961)]),
        ({"sex_at_birth": "F"}, [(("sex_at_birth",), "gender", "F")]),
        ({"age_at_application": 63}, [(("age_at_application",), "age", 63)]),
        ([["sex", "F"], ["income", 5]], [((0, 1), "gender", "F")]),
        ({"form": (("race", "B"),)}, [(("form", 0, 1), "race", "B")]),
        ({"answers": [{"field": "gender", "value": "F"}, {"field": "city", "value": "X"}]},
         [(("answers", 0, "value"), "gender", "F")]),
        ([{"question": "Age", "answer": 63}], [((0, "answer"), "age", 63)]),
        # ... but not a key qualified by more than one word after "at", a record named by a
        # person, a record with two names, nor a pair whose name is no attribute
        ({"sex_at_random_place": "F", "q": {"name": "Mary", "value": "F"}}, []),
        ([{"name": "sex", "label": "Sex", "value": "F"}], []),
        ([["score", "F"], ["sex"], ["sex", "F", "x"]], []),
    ],
)  # fmt: skip
def test_fields_that_carry_a_protected_attribute(payload: Any, expected: list[Any]) -> None:
    assert list(opaque_fields(payload, AXES)) == expected


def test_a_year_makes_a_text_a_field_value_only_under_an_age_key() -> None:
    assert list(opaque_fields({"born": "in April 1961"}, AXES)) == []  # not an age word
    assert list(opaque_fields({"birth": "in April 1961"}, AXES)) == [
        (("birth",), "age", "in April 1961")
    ]
    assert list(opaque_fields({"nationality": "naturalised in 1990"}, AXES)) == []


def test_a_code_is_at_most_16_characters() -> None:
    assert list(opaque_fields({"race": "A" * 16}, AXES)) == [(("race",), "race", "A" * 16)]
    assert list(opaque_fields({"race": "A" * 17}, AXES)) == []


def test_only_the_configured_axes_count() -> None:
    payload = {"age": 63, "sex": "F"}
    assert [axis for _, axis, _ in opaque_fields(payload, ["gender"])] == ["gender"]
    assert list(opaque_fields(payload, ["race"])) == []


def test_a_string_the_text_probe_swaps_does_not_count() -> None:
    assert list(opaque_fields({"sex": "female"}, AXES, frozenset({("sex",)}))) == []
    assert list(opaque_fields({"sex": "female"}, AXES)) == [(("sex",), "gender", "female")]


def test_a_pair_the_text_probe_swaps_does_not_count() -> None:
    assert list(opaque_fields(["male", "nurse"], AXES, frozenset({(0,)}))) == []
    assert list(opaque_fields([["sex", "F"]], AXES, frozenset({(0, 1)}))) == []
    record = {"field": "sex", "value": "F"}
    assert list(opaque_fields([record], AXES, frozenset({(0, "field")}))) == []
    assert list(opaque_fields([record], AXES)) == [((0, "value"), "gender", "F")]


def probe() -> Probe:
    return Probe([DecisionScorer()], generator=CounterfactualGenerator(seed=1), k=4, r=2, seed=1)


def denies(field: str, value: Any) -> Any:
    def step(payload: dict[str, Any]) -> str:
        return "Decision: DENY" if payload.get(field) == value else "Decision: APPROVE"

    return step


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("age", 63),
        ("sex", "F"),
        ("is_female", True),
        ("gender_code", "F"),
        ("dob", "1961-04-02"),
        ("over_60", True),
        ("senior", True),
        ("M/F", "F"),
    ],
)
def test_a_step_reading_such_a_field_is_held_before_anything_runs(field: str, value: Any) -> None:
    calls: list[Any] = []
    step = denies(field, value)

    def counted(payload: dict[str, Any]) -> str:
        calls.append(payload)
        return step(payload)

    payload = {"name": "Applicant 17", field: value}
    result = asyncio.run(probe().probe(counted, payload, counted(payload), step_name="decide"))
    assert result.status == "unreadable" and result.holds
    assert f"{field} = {value!r}" in result.reason and "rewrites text only" in result.reason
    assert result.calls == 0 and len(calls) == 1  # only the step's own run


@pytest.mark.parametrize(
    "form", [[["sex", "F"], ["income", "40k"]], [{"field": "sex", "value": "F"}]]
)
def test_a_step_reading_a_name_value_record_is_held(form: Any) -> None:
    def step(payload: dict[str, Any]) -> str:
        return "Decision: DENY" if "F" in str(payload["form"]) else "Decision: APPROVE"

    payload = {"name": "Applicant 17", "form": form}
    result = asyncio.run(probe().probe(step, payload, step(payload), step_name="decide"))
    assert result.status == "unreadable" and result.holds and "= 'F' (gender)" in result.reason


def test_a_list_of_words_the_probe_swaps_is_no_record() -> None:
    payload = {"roles": ["male", "nurse"]}
    step = denies("roles", ["male", "nurse"])
    result = asyncio.run(probe().probe(step, payload, step(payload), step_name="decide"))
    assert result.status == "scored" and not result.holds


def test_a_text_attribute_is_still_probed() -> None:
    payload = {"name": "Applicant 17", "sex": "female"}
    step = denies("sex", "female")
    result = asyncio.run(probe().probe(step, payload, step(payload), step_name="decide"))
    assert result.status == "scored" and result.score == 1.0 and not result.holds


@pytest.mark.parametrize(
    ("text", "denied"),
    [
        # a fourth new-user trial (issue 14): each was "not applicable" and the denial passed
        ("63F, income 40k", "63F"),
        ("63F, income 40k", "F,"),
        ("Applicant 63, income 40k", "63"),
        ("63 years, income 40k", "63"),
        ("65+ applicant", "65+"),
        ("63 yo F", " F"),
        ("♀ applicant", "♀"),
        ("yob 1961", "1961"),
        ("Race: B", "B"),
        ("Nationality: MX", "MX"),
        ("Sex: W", "W"),
        ("Sex: Fem", "Fem"),
        ("A nonagenarian applied.", "nonagenarian"),
    ],
)
def test_a_step_denying_the_group_of_a_trial_form_is_scored(text: str, denied: str) -> None:
    def step(payload: dict[str, Any]) -> str:
        return "Decision: DENY" if denied in payload["application"] else "Decision: APPROVE"

    payload = {"application": text}
    result = asyncio.run(probe().probe(step, payload, step(payload), step_name="decide"))
    assert result.status == "scored" and result.score == 1.0


def test_a_group_blind_input_is_still_not_applicable() -> None:
    payload = {"name": "Applicant 17", "income": 40000, "page": 2}
    step = denies("income", 40000)
    result = asyncio.run(probe().probe(step, payload, step(payload), step_name="decide"))
    assert result.status == "not_applicable" and not result.holds


@pytest.mark.parametrize(
    "text", ["Mary Smith, 31, is pregnant.", "She is on leave for her pregnancy."]
)
def test_a_step_reading_a_pregnancy_is_held_before_anything_runs(text: str) -> None:
    """Before, "She is pregnant." was swapped to "He is pregnant." and scored (issue 14)."""
    calls: list[Any] = []

    def step(payload: dict[str, Any]) -> str:
        calls.append(payload)
        return "Decision: DENY" if "pregnan" in payload["note"] else "Decision: APPROVE"

    payload = {"note": text}
    result = asyncio.run(probe().probe(step, payload, step(payload), step_name="decide"))
    assert result.status == "unreadable" and result.holds
    assert "Pregnancy Discrimination Act" in result.reason and "in note (gender)" in result.reason
    assert result.calls == 0 and len(calls) == 1


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        # a tool's result (a ToolMessage's content) or a form posted as a JSON string
        ('{"applicant": {"age": 63, "sex": "F"}}',
         [(("applicant", "age"), "age", 63), (("applicant", "sex"), "gender", "F")]),
        ({"tool": ' {"over_60": true} '}, [(("tool", "over_60"), "age", True)]),
        ({"rows": ['[["sex", "F"]]']}, [(("rows", 0, 0, 1), "gender", "F")]),
        # not JSON, or JSON that is no object or array: text
        ('{"age": 63', []),
        ('"{\\"age\\": 63}"', []),
        ("{age: 63}", []),
        ('{"age": NaN}', []),
    ],
)  # fmt: skip
def test_fields_in_a_json_string_count(payload: Any, expected: list[Any]) -> None:
    assert list(opaque_fields(payload, AXES)) == expected


def test_a_json_string_field_the_text_probe_swaps_does_not_count() -> None:
    payload = {"tool": '{"sex": "female", "age": 63}'}
    gen = CounterfactualGenerator(seed=0)

    def read(inner: Any) -> frozenset[Any]:
        return frozenset(d.path for d in gen.detect(inner))

    assert list(opaque_fields(payload, AXES, read=read)) == [(("tool", "age"), "age", 63)]
    # without the text probe's reading every field of the JSON string counts (a hold)
    assert [f[0] for f in opaque_fields(payload, AXES)] == [("tool", "sex"), ("tool", "age")]


def test_a_step_reading_a_field_in_a_json_string_is_held() -> None:
    """Before, '{"over_60": true}' in a tool's result was "not applicable" and passed."""
    payload = {"tool_result": '{"applicant": {"over_60": true, "income": 40000}}'}

    def step(p: dict[str, Any]) -> str:
        return "Decision: DENY" if "true" in p["tool_result"] else "Decision: APPROVE"

    result = asyncio.run(probe().probe(step, payload, step(payload), step_name="decide"))
    assert result.status == "unreadable" and result.holds
    assert "tool_result.applicant.over_60 = True (age)" in result.reason


@pytest.mark.parametrize(
    ("field", "value", "axis"),
    [
        # a new-user trial's fail-opens: a group, a disability term or another name of the
        # attribute as the key; each was "not applicable"
        ("is_muslim", True, "religion"),
        ("isMuslim", True, "religion"),
        ("wheelchair", True, "disability"),
        ("is_deaf", True, "disability"),
        ("national_origin", "MX", "nationality"),
        ("country_of_birth", "NG", "nationality"),
        ("countryOfBirth", "NG", "nationality"),
        ("place_of_birth", "NG", "nationality"),
        ("home_lang", "es", "nationality"),
        ("applicant_native_language", "es", "nationality"),
        ("is_hispanic", 1, "race"),
        ("is_black", True, "race"),
    ],
)
def test_a_key_naming_a_group_or_the_attribute_is_held(field: str, value: Any, axis: str) -> None:
    assert list(opaque_fields({field: value}, AXES)) == [((field,), axis, value)]
    payload = {"name": "Applicant 17", field: value}
    result = asyncio.run(probe().probe(denies(field, value), payload, "Decision: DENY"))
    assert result.status == "unreadable"  # was not_applicable: the planted DENY passed
    assert f"{field} = {value!r} ({axis})" in result.reason


@pytest.mark.parametrize(
    "payload",
    [
        {"blind_review": True},  # a review mode, not a person's sight
        {"language": "python", "languages": ["go"]},  # a skill
        {"black": 0, "white": 255},  # colours: a group colour word counts after a person word
        {"undocumented": 3},  # a count of functions
        {"zip": "10001", "zip_code": "60621"},  # a proxy the probe does not read
        {"origin": "SFO", "trans_id": 4, "visa": True},
        {"date_of_birth": "1961"},
    ],
)
def test_look_alike_keys_are_not_held_as_groups(payload: Any) -> None:
    assert [axis for _, axis, _ in opaque_fields(payload, AXES) if axis != "age"] == []
