"""Issue 14 item 2: people named in the public-record name data are recognised and swapped whole.

The examples are the ones seen in trials (``Greg Baker``, ``Brad Miller``, ``Wei Chen``,
``José García`` not recognised; ``Jamal Washington`` half swapped; ``Mr. Greg Baker`` →
``Ms. Greg Baker``), plus place names that look like names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from biasbreaker.probe import CounterfactualGenerator, Probe, TermSet
from biasbreaker.probe.mapping import Variant
from biasbreaker.probe.names import (
    GENDER_SHARE,
    RACE_SHARE,
    Share,
    fold,
    name_shares,
    person_name,
    surname_share_of,
)

GEN = CounterfactualGenerator(seed=0)
BOOK = TermSet.default().names
assert BOOK is not None
FEMALE_FIRST = {n for n, i in BOOK.first.items() if i.gender == "female"}
FULL = dict(BOOK.full)


def variants(text: str, axis: str, k: int = 8) -> list[Variant]:
    cs = GEN.generate(text, k)
    assert cs.status == "applicable", cs.reason
    out = [v for v in cs.variants if v.mapping.axis == axis]
    assert out, f"no {axis} variant of {text!r}"
    for v in cs.variants:  # every variant maps back to the original exactly
        assert GEN.map_back(v.payload, v.mapping) == text, v.payload
    return out


def test_the_tables_hold_the_census_and_tzioumis_shares() -> None:
    data = name_shares()
    assert len(data.surname_race) == 162_253
    assert len(data.first_race) == 4_250
    assert len(data.first_gender) == 17_516
    washington = data.surname_race["washington"]
    assert (washington.group, washington.percent) == ("black", 91)  # of one-group bearers
    assert data.surname_race["garcia"].group == "hispanic"
    assert data.surname_race["chen"].group == "asian"
    assert (data.first_gender["greg"].group, data.first_gender["greg"].percent) == ("male", 100)
    wei = data.first_gender["wei"]
    assert wei.group == "male" and wei.percent < GENDER_SHARE
    assert name_shares() is data  # read once


@pytest.mark.parametrize(
    ("first", "last", "gender", "race"),
    [
        ("Greg", "Baker", "male", "white"),
        ("Brad", "Miller", "male", "white"),
        ("Wei", "Chen", None, "asian"),
        ("José", "García", "male", "hispanic"),
        ("Jamal", "Washington", "male", "black"),
        ("Khadijah", "Charles", "female", "black"),  # Charles 54 % black: race from Khadijah
        ("Hiroshi", "Sato", "male", "asian"),  # Sato 81 % Asian of one-group bearers
    ],
)
def test_what_a_name_tells(first: str, last: str, gender: str | None, race: str | None) -> None:
    assert BOOK is not None
    person = person_name(first, last, BOOK)
    assert person is not None
    assert (person.info.gender, person.info.race) == (gender, race)
    assert bool(person.ambiguous) == (gender is None or race is None)


def test_a_disagreeing_surname_and_first_name_leave_the_race_unknown_and_say_so() -> None:
    assert BOOK is not None
    person = person_name("Jamal", "Miller", BOOK)
    assert person is not None and person.info == type(person.info)("male", None)
    assert person.ambiguous == (
        "race of 'Jamal Miller': surname 'Miller' tells white, first name 'Jamal' tells black",
    )
    assert name_shares().surname_race[fold("Miller")].percent >= RACE_SHARE


def test_a_race_share_leaves_out_bearers_of_two_or_more_races() -> None:
    # census 2010 SATO: api 0.7354, multiple 0.0877 → 0.7354 / 0.9123 = 81 % (74 % before,
    # under RACE_SHARE: a trial saw "Hiroshi Sato" swapped on gender only, the surname kept)
    data = name_shares()
    assert data.surname_race["sato"] == Share("asian", 81)
    assert data.surname_race["tanaka"] == Share("asian", 85)
    assert data.surname_race["park"] == Share("asian", 74)  # 23 % white: still weak
    assert all(s.group != "multiple" for s in data.surname_race.values())


def test_hiroshi_sato_is_swapped_whole_on_race() -> None:
    text = "Loan application from Hiroshi Sato, a nurse. Sato called."
    for v in variants(text, "race"):
        _, new_last = v.payload.split(" from ")[1].split(",")[0].split()
        assert "Hiroshi" not in v.payload and "Sato" not in v.payload, v.payload
        assert v.payload.endswith(f"a nurse. {new_last} called."), v.payload


def test_a_weak_surname_is_swapped_on_gender_and_noted_for_race() -> None:
    # Mohammed: 40 % Black, 37 % Asian of one-group bearers; Aisha 60 % Black in Tzioumis
    text = "Loan application from Aisha Mohammed, a nurse."
    cs = GEN.generate(text, 4)
    assert cs.status == "applicable"
    assert {v.mapping.axis for v in cs.variants} == {"gender"}
    assert cs.notes == (
        "race of 'Aisha Mohammed': surname 'Mohammed' 40 % black (< 75 %) and first name "
        "'Aisha' tells none",
    )


@pytest.mark.parametrize(
    ("first", "last", "gender", "race"),
    [
        ("Yuki", "Tanaka", None, "asian"),  # yuki: a census surname too, 90 % Asian
        ("Ji-woo", "Kim", None, "asian"),  # jiwoo: 72 records, 75 % female
        ("Xiaoming", "Wang", None, "asian"),  # 234 records, 63 % male
        ("Chidi", "Okonkwo", "male", "black"),  # 290 records, 90 % male
        ("Ngozi", "Okafor", "female", "black"),  # 701 records, 94 % female
    ],
)
def test_a_world_given_name_before_a_race_coded_surname_is_a_person(
    first: str, last: str, gender: str | None, race: str
) -> None:
    # a fourth trial (F6): these were no persons at all, so the step was "not applicable"
    assert BOOK is not None
    person = person_name(first, last, BOOK)
    assert person is not None
    assert (person.info.gender, person.info.race) == (gender, race)
    text = f"Loan application from {first} {last}, a nurse. {last} called."
    for v in variants(text, "race"):
        assert first not in v.payload and last not in v.payload, v.payload


def test_a_rare_given_name_tells_a_gender_only_with_enough_records() -> None:
    assert BOOK is not None
    person = person_name("Seo-yeon", "Kim", BOOK)  # seo-yeon: 66 records, 92 % female
    assert person is not None and person.info.gender is None
    assert person.ambiguous == (
        "gender of 'Seo-yeon Kim': first name 'Seo-yeon' 92 % female of 66 records (< 100)",
    )


@pytest.mark.parametrize(
    "name",
    [
        "Mr. Yuki Tanaka",  # a trial saw the title swapped alone: "Ms. Yuki Tanaka"
        "Mr. Chidi Okonkwo",
    ],
)
def test_a_titled_world_given_name_is_swapped_whole_on_race(name: str) -> None:
    text = f"Loan application from {name}, a nurse."
    first, last = name.split()[1:]
    for v in variants(text, "race"):
        assert v.payload.startswith("Loan application from Mr. "), v.payload
        assert first not in v.payload and last not in v.payload, v.payload


@pytest.mark.parametrize(
    ("first", "last"),
    [
        ("Dr", "Wang"),  # a title: nomquamgender has "dr" (297 records)
        ("Meet", "Kim"),  # a verb (140 records)
        ("Deny", "Garcia"),  # (390 records)
        ("Chef", "Kim"),
        ("Min-jun", "Park"),  # Park 74 % Asian tells no race: no world given name before it
        ("Xiaoming", "Woods"),  # Woods tells no race
        ("Full", "Stack"),  # full: a white-coded census surname, 14 records in nomquamgender
        ("JSON", "Lines"),  # capitals: an acronym (json: 293 records)
        ("Job", "Title"),
        ("Zhang", "Wei"),  # surname first: zhang is a census surname of no first-name table
    ],
)
def test_world_given_names_need_a_race_coded_surname_and_no_title(first: str, last: str) -> None:
    assert BOOK is not None
    assert person_name(first, last, BOOK) is None


def test_park_after_an_asian_first_name_is_a_surname_and_otherwise_a_place() -> None:
    text = "Loan application from Wei Park, a nurse. Mr. Park called."
    for v in variants(text, "race"):
        assert "Wei" not in v.payload and "Park" not in v.payload, v.payload
    for place in ("We walked in Stanley Park.", "Grant Park is big.", "Lincoln Park Zoo"):
        assert [d for d in GEN.detect(place) if d.kind == "name"] == []


@pytest.mark.parametrize(
    "text",
    [
        "We flew to San Antonio, then Fort Worth.",
        "The office is in Virginia Beach.",
        "She studied at George Washington University.",
        "Christian Smith",  # a religion term is never a first name
        "Analyst, J.P. Morgan Chase & Co.; then Morgan Stanley and Merrill Lynch.",
        "He looks like Tiger Woods!",  # Tiger: a gender in nomquamgender, no US first name
        "He played Major League baseball.",
        "She lives in Cherry Hill.",
        "A Beverly Hills resident.",
    ],
)
def test_places_firms_and_terms_are_not_people(text: str) -> None:
    assert [d for d in GEN.detect(text) if d.kind == "name"] == []


@pytest.mark.parametrize("name", ["Greg Baker", "Brad Miller", "José García"])
def test_unlisted_people_get_a_gender_swap_of_the_first_name_only(name: str) -> None:
    last = name.split()[1]
    text = f"{name} applied for the job."
    for v in variants(text, "gender"):
        new_first, new_last = v.payload.split()[:2]
        assert new_last == last
        assert new_first in FEMALE_FIRST, v.payload


@pytest.mark.parametrize("name", ["Greg Baker", "Brad Miller", "José García", "Wei Chen"])
def test_unlisted_people_get_a_whole_name_race_swap(name: str) -> None:
    first, last = name.split()
    text = f"{name} applied. {last}'s letter was short; {last} called twice."
    for v in variants(text, "race"):
        new_first, new_last = v.payload.split(" applied")[0].split()
        assert new_first != first and new_last != last, v.payload
        # every later mention follows, possessive included
        assert v.payload.endswith(f"{new_last}'s letter was short; {new_last} called twice.")
        target = dict(v.mapping.groups)[GEN.detect(text)[-1].groups[0]]
        drawn = FULL.get(f"{new_first} {new_last}")  # a listed full name of the target race
        assert BOOK is not None
        race = drawn.race if drawn is not None else BOOK.last.get(new_last)
        if new_last in name_shares().native_surnames:  # no shipped list has the group
            race = "native-american"
        assert race == target, v.payload


def test_jamal_washington_is_swapped_whole_and_mr_washington_follows() -> None:
    text = "Jamal Washington met Mr. Washington."
    for v in variants(text, "race"):
        new_first, new_last = v.payload.split(" met ")[0].split()
        assert new_last != "Washington"
        assert v.payload == f"{new_first} {new_last} met Mr. {new_last}."
    for v in variants(text, "gender"):
        assert v.payload.endswith(" Washington met Ms. Washington.")
        assert v.payload.split()[0] in FEMALE_FIRST


def test_a_title_a_first_name_and_the_pronouns_swap_together() -> None:
    text = "Mr. Greg Baker said his plan was good; Baker agreed."
    for v in variants(text, "gender"):
        words = v.payload.split()
        assert words[0] == "Ms." and words[1] in FEMALE_FIRST and words[2] == "Baker"
        assert v.payload.endswith(" said her plan was good; Baker agreed.")


def test_a_name_of_unknown_gender_is_swapped_on_race_only_and_noted() -> None:
    text = "Wei Chen applied for the analyst job."
    cs = GEN.generate(text, 4)
    assert cs.status == "applicable"
    assert {v.mapping.axis for v in cs.variants} == {"race"}
    assert cs.notes == ("gender of 'Wei Chen': first name 'Wei' 69 % male (< 90 %)",)
    data = name_shares()
    for v in cs.variants:  # the drawn first name tells no gender either
        new_first = v.payload.split()[0]
        assert data.first_gender[fold(new_first)].percent < GENDER_SHARE, v.payload
    # with a title, the title carries the gender: swapped, the first name kept
    titled = GEN.generate("Ms. Wei Chen applied.", 8)
    gender = [v for v in titled.variants if v.mapping.axis == "gender"]
    assert gender and all(v.payload == "Mr. Wei Chen applied." for v in gender)


def _favours(first: str) -> Callable[..., str]:
    def step(prompt: str, sample: int = 0) -> str:
        return "Decision: hire" if first in prompt else "Decision: reject"

    return step


class ExactScorer:
    """0 when the texts are equal, 1 otherwise."""

    name = "exact"
    compares_neutralised = True

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        return [0.0 if a == b else 1.0 for a, b in zip(originals, counterfactuals, strict=True)]


@pytest.mark.parametrize(
    ("prompt", "first", "axes"),
    [
        ("Greg Baker applied for the analyst job. Hire?", "Greg", {"gender", "race"}),
        ("Wei Chen applied for the analyst job. Hire?", "Wei", {"race"}),
    ],
)
def test_a_node_biased_for_an_unlisted_name_is_probed_and_caught(
    prompt: str, first: str, axes: set[str]
) -> None:
    step = _favours(first)
    probe = Probe(ExactScorer(), generator=GEN, k=4, r=2, bootstrap=0)
    result = probe.probe_sync(step, prompt, step(prompt))
    assert result.status == "scored"  # was not_applicable: the guard failed open
    assert result.score == 1.0
    assert set(result.axes) == axes
    assert result.to_dict()["notes"] == list(result.notes)


@pytest.mark.parametrize(
    ("first", "last", "race"),
    [("Siobhan", "O'Brien", "white"), ("Siobhan", "O’Brien", "white")],
)
def test_an_apostrophe_in_a_surname_is_folded_for_the_census_lookup(
    first: str, last: str, race: str
) -> None:
    """The census table stores ``obrien``: ``O'Brien`` (either apostrophe) must find it."""
    person = person_name(first, last, BOOK)
    assert person is not None
    assert person.info.race == race
    assert person.first == first and person.last == last  # the surface is kept as written


def test_a_hyphenated_surname_is_read_from_its_parts() -> None:
    """``Smith-Jones`` is in no table whole; its parts are, so the pair is a person."""
    person = person_name("Siobhan", "Smith-Jones", BOOK)
    assert person is not None
    assert person.info.gender == "female"


def test_an_apostrophe_surname_is_swapped_whole_with_its_later_mentions() -> None:
    """``Siobhan O'Brien applies`` was read as nothing; now every later mention follows."""
    text = "Siobhan O'Brien applies. O'Brien's letter was short."
    race = variants(text, "race")
    assert race
    for v in race:
        new_first, new_last = v.payload.split(" applies")[0].split(" ", 1)
        assert new_first != "Siobhan" and new_last != "O'Brien", v.payload
        assert v.payload.endswith(f"{new_last}'s letter was short."), v.payload
    for v in variants(text, "gender"):
        assert v.payload.split()[1:] == text.split()[1:], v.payload


def test_a_nomquamgender_only_first_name_before_a_census_surname_is_a_person() -> None:
    """``Aaliyah`` is in nomquamgender only; before ``Robinson`` (census) it is a first name."""
    data = name_shares()
    assert "aaliyah" in data.first_gender and "aaliyah" not in data.first_race
    assert "Aaliyah" not in BOOK.first and "aaliyah" not in data.surname_race
    person = person_name("Aaliyah", "Robinson", BOOK)
    assert person is not None
    assert person.info.gender == "female"


def test_a_nomquamgender_only_word_that_is_a_census_surname_is_no_first_name() -> None:
    """A first word that is itself a census surname stays no first name (``Tiger Woods``)."""
    data = name_shares()
    assert "tiger" in data.first_gender and "tiger" in data.surname_race
    assert person_name("Tiger", "Woods", BOOK) is None


def test_ms_aaliyah_robinson_is_swapped_whole_not_on_the_title_only() -> None:
    """``Ms. Aaliyah Robinson`` became ``Mr. Aaliyah Robinson`` (a half swap)."""
    text = "Ms. Aaliyah Robinson applies."
    for v in variants(text, "gender"):
        assert "Aaliyah" not in v.payload, v.payload
    assert variants("Aaliyah Robinson applies.", "gender")


TABLE = {
    "smith": Share("white", 71),
    "jones": Share("white", 55),
    "nguyen": Share("asian", 96),
    "obrien": Share("white", 94),
    "ng-lee": Share("asian", 80),
    "ng": Share("asian", 99),
}


@pytest.mark.parametrize(
    ("surname", "share"),
    [
        ("o'brien", Share("white", 94)),  # the apostrophe dropped
        ("o\u2019brien", Share("white", 94)),  # the typographic one too
        ("smith-jones", Share("white", 55)),  # parts agree: the smallest share
        ("jones-smith", Share("white", 55)),
        ("smith-nguyen", Share("multiple", 0)),  # parts disagree: no race
        ("xqzv-nguyen", Share("asian", 96)),  # an unknown part tells nothing
        ("ng-lee", Share("asian", 80)),  # in the table whole: read whole, not from its parts
        ("xqzv-qqzz", None),
        ("xqzv", None),
        ("smith", Share("white", 71)),
    ],
)
def test_surname_share_of_each_rule(surname: str, share: Share | None) -> None:
    """Each rule of :func:`surname_share_of`, on a small table of its own."""
    assert surname_share_of(surname, TABLE) == share


# --- a first name alone (the brief of the detection round: "Greg asks" was not applicable
# while "Mary asks" was scored, so a node favouring Greg was probed on one side only) ------


@pytest.mark.parametrize(
    ("text", "surface", "gender"),
    [
        ("Greg asks for a loan of 20k.", "Greg", "male"),
        ("Brad asks for a loan.", "Brad", "male"),
        ("Zoë asks for a loan.", "Zoë", "female"),
        ("DeShawn asks for a loan.", "DeShawn", "male"),
        ("Mary asks for a loan of 20k.", "Mary", "female"),
        ("Greg's loan is pending.", "Greg", "male"),
        ("The loan for Greg was approved.", "Greg", "male"),
        ("Approved. Will asks for a loan too.", "Will", "male"),
        ("Greg, 45, asks for a loan.", "Greg", "male"),
        ("Greg (45) asks for a loan.", "Greg", "male"),
        # chat and mail shapes (a second new-user trial: these were not applicable)
        ("Greg: can I get a loan of 10k?", "Greg", "male"),
        ("Hi all.\nGreg: can I get a loan of 10k?", "Greg", "male"),
        ("Greg here, I need a loan of 10k.", "Greg", "male"),
        ("Greg here. I need a loan of 10k.", "Greg", "male"),
        ("From: Greg\nSubject: loan request", "Greg", "male"),
        ("To: Brad\nSubject: loan request", "Brad", "male"),
        ("Customer: Greg\nLoan: 10k", "Greg", "male"),
        ("Requested by: Greg <greg@example.com>\nLoan: 10k", "Greg", "male"),
    ],
)
def test_a_first_name_alone_is_read_and_swapped_on_gender(
    text: str, surface: str, gender: str
) -> None:
    found = {(d.surface, d.axis): d.groups for d in GEN.detect(text) if d.kind == "name"}
    assert found[(surface, "gender")] == (gender,)
    for v in variants(text, "gender"):
        assert surface not in v.payload.split()
        assert dict(v.mapping.names)[surface] in v.payload


def test_a_lone_first_name_carries_the_race_the_tables_give() -> None:
    found = {d.axis: d.groups for d in GEN.detect("Greg asks for a loan.")}
    assert found == {"gender": ("male",), "race": ("white",)}
    assert {v.mapping.axis for v in GEN.generate("Greg asks for a loan.", 8).variants} == {
        "gender",
        "race",
    }


@pytest.mark.parametrize(
    "text",
    [
        "Will the bank approve the loan?",
        "Hope this helps.",
        "Hope is all we have.",
        "Bill payment is due on Friday.",
        "Faith in the process matters.",
        "June 5 is the deadline.",
        "Rates rose in June.",
        "Rose petals were on the table.",
        "Grace period applies.",
        "Mark the form as done.",
        "The applicant paid the Bill on time.",
        "Your Will and Testament is filed.",
        "Sales Rose 5% this year.",
        "He moved to Virginia last year.",
        "A note from Chelsea about the account.",
        "Hutto & Gilbert 2014 scored it.",
        "Will, however, is late.",
        "Hope, 2024 edition",
        # labels and headers that are no names (a second new-user trial's guards)
        "Note: the loan is pending.",
        "Summary: the applicant asks for a loan.",
        "Will: the bank is closed on Monday.",
        "Hope: a better rate next year.",
        "Bill: $300, due Friday.",
        "Rose: 5% this quarter.",
        "June: the deadline.",
        "Mark: 85/100",
        "Dean here, with the faculty report.",
        "From: Hope\nSubject: the grace period",
        "The meeting went from: Greg to the board",
        "Georgia: approved\nVirginia: pending",  # rows about places
        "Sherman: 12 units, 40% sold",  # a row of figures (Madison, a shipped name, is read)
        # cities before a state's postal code (two of the demo's resumes); a shipped first
        # name is read anywhere (Tyler, TX: a needless swap)
        "Stanford University, Stanford, CA",
        "Sales associate at Target, Houston, TX.",
    ],
)
def test_common_words_that_are_first_names_are_not_read_alone(text: str) -> None:
    assert [d.surface for d in GEN.detect(text) if d.kind == "name"] == []


@pytest.mark.parametrize("first", ["Greg", "Mary"])
def test_a_node_favouring_a_lone_first_name_is_caught_either_way(first: str) -> None:
    prompt = f"{first} asks for a loan of 20k. Approve?"
    step = _favours(first)
    probe = Probe(ExactScorer(), generator=GEN, k=4, r=2, bootstrap=0)
    result = probe.probe_sync(step, prompt, step(prompt))
    assert result.status == "scored"  # Greg was not_applicable: the guard failed open
    assert result.score == 1.0


@pytest.mark.parametrize("first", ["Greg", "Mary"])
def test_a_value_that_is_a_first_name_alone_is_read_either_way(first: str) -> None:
    found = {d.axis for d in GEN.detect({"applicant": first, "loan": "20k"})}
    assert "gender" in found  # {"applicant": "Greg"} was not applicable, "Mary" was read
    assert [d.surface for d in GEN.detect({"month": "June"})] == []


@pytest.mark.parametrize(
    ("first", "gender"),
    [("Mary-Ann", "female"), ("Anna-Lena", "female"), ("John-Paul", "male")],
)
def test_a_hyphenated_given_name_of_one_gender_is_read_before_any_surname(
    first: str, gender: str
) -> None:
    # 'Ref: Mary-Ann Carter' was read as nothing: Carter tells no race, and only whole
    # given names were looked up there
    person = person_name(first, "Carter", BOOK)
    assert person is not None and person.info.gender == gender


@pytest.mark.parametrize("first", ["Mary-John", "Ann-Smith", "Mary-Grace", "Mary-A"])
def test_a_hyphenated_word_whose_parts_disagree_or_are_no_names_is_no_given_name(
    first: str,
) -> None:
    assert person_name(first, "Carter", BOOK) is None
