"""The counterfactual generator: regression cases for every swapper complaint, round trips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biasbreaker.probe import CounterfactualGenerator, CounterfactualMapping, TermSet

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def gen() -> CounterfactualGenerator:
    return CounterfactualGenerator(seed=7)


def swap_gender(gen: CounterfactualGenerator, text: str) -> str:
    mapping = CounterfactualMapping("gender", (("male", "female"), ("female", "male")))
    return str(gen.apply(text, mapping).payload)


# --- the complaints in issue 3 / LangFair #247, each with the exact expected text ------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # his -> her before a noun, never "hers vaccines"
        ("Ricky is here for his vaccines.", "Ricky is here for her vaccines."),
        ("according to his vaccination record", "according to her vaccination record"),
        # his standing alone -> hers
        ("The book is his.", "The book is hers."),
        ("Is that coat his or mine?", "Is that coat hers or mine?"),
        # her -> his before a noun, him otherwise
        ("She met her brother.", "He met his sister."),
        ("You were in love with her.", "You were in love with him."),
        ("How dare you marry her?", "How dare you marry him?"),
        ("I told her about it.", "I told him about it."),
        ("They gave her flowers.", "They gave him flowers."),
        ("Her own car is red.", "His own car is red."),
        ("hers is blue", "his is blue"),
        ("She did it herself.", "He did it himself."),
        # capitals are swapped and keep their case
        ("He is 14 months old, so he is due.", "She is 14 months old, so she is due."),
        ("HIS CAR AND HER HOUSE", "HER CAR AND HIS HOUSE"),
        ("He's cute! He looks like Tiger Woods!", "She's cute! She looks like Tiger Woods!"),
        # Mr./Mrs./Ms./Miss are matched
        ("Hello Mrs. Parker.", "Hello Mr. Parker."),
        ("Hello Mr. Parker.", "Hello Ms. Parker."),
        ("Ms. Jones and Miss Lee", "Mr. Jones and Mr. Lee"),
        ("I miss you, Mr Smith.", "I miss you, Ms Smith."),
        # spouses and kin
        ("My wife and her mother", "My husband and his father"),
        ("his son-in-law and his daughters", "her daughter-in-law and her sons"),
        ("The groom thanked the bride's father.", "The bride thanked the groom's mother."),
        # whole words only, text never lower-cased
        ("This theme, then: Shell Oil.", "This theme, then: Shell Oil."),
        ("HELLO World, he said. The END.", "HELLO World, she said. The END."),
    ],
)
def test_gender_swap_regressions(gen: CounterfactualGenerator, text: str, expected: str) -> None:
    assert swap_gender(gen, text) == expected


def test_swap_keeps_every_byte_outside_the_swapped_words(gen: CounterfactualGenerator) -> None:
    text = "  He  said:\t'his' \\n (HIS) — his!\n"
    assert swap_gender(gen, text) == "  She  said:\t'hers' \\n (HERS) — hers!\n"


def test_article_follows_the_new_word(gen: CounterfactualGenerator) -> None:
    race = CounterfactualMapping("race", (("asian", "white"), ("white", "asian")))
    out = gen.apply("An Asian man met a white nurse.", race).payload
    assert out == "A white man met an Asian nurse."


def test_context_terms_swap_only_before_a_person_word(gen: CounterfactualGenerator) -> None:
    race = CounterfactualMapping("race", (("black", "white"), ("white", "black")))
    out = gen.apply("The black doctor parked the black car near white people.", race).payload
    assert out == "The white doctor parked the black car near Black people."
    assert [d.surface for d in gen.detect("a black car on a white wall")] == []


@pytest.mark.parametrize(
    ("text", "swapped"),
    [
        ("A Black Muslim woman applies.", "A white Muslim woman applies."),
        ("A Black, disabled veteran applies.", "A white, disabled veteran applies."),
        ("A Black gay man applies.", "A white gay man applies."),
        # other protected words before a thing are not a person either
        ("The black Muslim cat sat on a white gay flag.", None),
    ],
)
def test_a_context_term_before_other_protected_words_and_a_person_word_counts(
    gen: CounterfactualGenerator, text: str, swapped: str | None
) -> None:
    race = CounterfactualMapping("race", (("black", "white"), ("white", "black")))
    found = [d.surface for d in gen.detect(text) if d.axis == "race"]
    assert found == (["Black"] if swapped else [])
    assert gen.apply(text, race).payload == (swapped or text)


def test_no_protected_term_is_not_applicable(gen: CounterfactualGenerator) -> None:
    result = gen.generate({"task": "Summarise the quarterly report.", "n": 3}, k=4)
    assert result.status == "not_applicable"
    assert result.variants == ()
    assert "fairness through unawareness" in result.reason


# --- the LangFair prompts that show the upstream bug --------------------------------------


@pytest.fixture(scope="module")
def langfair() -> dict[str, Any]:
    doc = json.loads((DATA / "langfair" / "autoeval_results_file.json").read_text("utf-8"))
    return doc["counterfactual_responses"]["gender"]


def test_langfair_prompt_1_female(gen: CounterfactualGenerator, langfair: dict[str, Any]) -> None:
    original = langfair["metadata"]["original_prompts"][0]
    upstream_female = langfair["data"]["female_prompt"][0]
    # LangFair's own female prompt has the #247 bug and left "He" unswapped:
    assert "here for hers vaccines" in upstream_female
    assert "He is 14 months old, so she is due" in upstream_female
    expected = (
        original.replace("here for his vaccines", "here for her vaccines")
        .replace("according to his vaccination", "according to her vaccination")
        .replace("received his Polio", "received her Polio")
        .replace("He is 14 months old, so he is due", "She is 14 months old, so she is due")
        .replace("give him these", "give her these")
    )
    # Ricky, the boy, is a first name alone (a male first name of the public-record tables,
    # inside a sentence): a girl's first name replaces it everywhere, which LangFair left
    female = gen.to_group(original, "gender", "female")
    ricky = dict(female.mapping.names)["Ricky"]
    assert female.payload == expected.replace("Ricky", ricky)


def test_langfair_prompt_1_male(gen: CounterfactualGenerator, langfair: dict[str, Any]) -> None:
    original = langfair["metadata"]["original_prompts"][0]
    # upstream left "Mrs. Parker" in the male prompt (Mrs. never matched)
    assert "Hello Mrs. Parker" in langfair["data"]["male_prompt"][0]
    expected = original.replace("Hello Mrs. Parker", "Hello Mr. Parker")
    assert gen.to_group(original, "gender", "male").payload == expected


def test_langfair_prompt_2(gen: CounterfactualGenerator, langfair: dict[str, Any]) -> None:
    original = langfair["metadata"]["original_prompts"][1]
    upstream_male = langfair["data"]["male_prompt"][25]
    assert "you had a girlfriend?" in upstream_male  # 'girfriend' typo: never swapped
    assert "in love with her." in upstream_male
    male = (
        original.replace("had a girlfriend?", "had a boyfriend?")
        .replace("in love with her.", "in love with him.")
        .replace("marry her?", "marry him?")
    )
    female = original.replace("Oh, you men!", "Oh, you women!")
    assert gen.to_group(original, "gender", "male").payload == male
    assert gen.to_group(original, "gender", "female").payload == female


def test_langfair_prompt_3(gen: CounterfactualGenerator, langfair: dict[str, Any]) -> None:
    original = langfair["metadata"]["original_prompts"][2]
    upstream_female = langfair["data"]["female_prompt"][50]
    assert "He's cute! He looks like" in upstream_female  # capitals left unswapped upstream
    assert " ca n't " in upstream_female  # and the prompt was re-tokenised
    female = gen.to_group(original, "gender", "female")
    malik = dict(female.mapping.names)["Malik"]
    expected = original.replace("He's cute! He looks like", "She's cute! She looks like").replace(
        "My name's Malik.", f"My name's {malik}."
    )
    assert female.payload == expected
    male = original.replace("Watsup, ladies!", "Watsup, gentlemen!").replace(
        "She doesn't mind", "He doesn't mind"
    )
    assert gen.to_group(original, "gender", "male").payload == male


def test_langfair_prompts_round_trip(
    gen: CounterfactualGenerator, langfair: dict[str, Any]
) -> None:
    for prompt in langfair["metadata"]["original_prompts"]:
        result = gen.generate(prompt, k=3)
        assert result.status == "applicable"
        for v in result.variants:
            assert v.payload != prompt
            assert gen.map_back(v.payload, v.mapping) == prompt


# --- names -----------------------------------------------------------------------------------


def test_gender_swap_keeps_the_surname_and_is_consistent(gen: CounterfactualGenerator) -> None:
    text = "Jamal Washington applied. Later Jamal called back."
    variant = next(v for v in gen.generate(text, k=4).variants if v.mapping.axis == "gender")
    names = dict(variant.mapping.names)
    new_first = names["Jamal"]
    assert variant.payload == f"{new_first} Washington applied. Later {new_first} called back."
    book = gen.terms.names
    assert book is not None
    assert book.first[new_first].gender == "female"
    assert gen.map_back(variant.payload, variant.mapping) == text


def test_race_swap_draws_a_full_name_of_the_target_group(gen: CounterfactualGenerator) -> None:
    text = "JAKOB SCHMIDT and Mr. Schmidt"
    result = gen.generate(text, k=6)
    races = [v for v in result.variants if v.mapping.axis == "race"]
    assert races
    book = gen.terms.names
    assert book is not None
    for v in races:
        names = dict(v.mapping.names)
        new = names["Jakob Schmidt"]
        target = dict(v.mapping.groups)["white"]
        # a listed full name, or (native-american, which no list covers) one of the census
        # surnames of the group: either way the drawn name reads as the target group
        read = {d.axis: d.groups for d in gen.detect(f"{new} applied.")}
        assert read == {"race": (target,), "gender": ("male",)}, new
        assert v.payload == f"{new.upper()} and Mr. {new.split()[1]}"
        assert gen.map_back(v.payload, v.mapping) == text


def test_names_that_are_words_are_left_alone(gen: CounterfactualGenerator) -> None:
    assert gen.detect("Grace and Hunter saw Mark in Israel.") == ()


# --- payloads, determinism -----------------------------------------------------------------


def test_json_payloads_swap_values_and_keys(gen: CounterfactualGenerator) -> None:
    """A ``str`` key is text like a value: ``his`` standing alone becomes ``hers``."""
    state = {
        "his": "He wrote to his wife.",
        "messages": ["She agreed.", {"role": "user", "content": "Thank him."}],
        "count": 2,
        "flag": None,
        "pair": ("he", 1.5),
    }
    mapping = CounterfactualMapping("gender", (("male", "female"), ("female", "male")))
    out = gen.apply(state, mapping).payload
    assert out == {
        "hers": "She wrote to her husband.",
        "messages": ["He agreed.", {"role": "user", "content": "Thank her."}],
        "count": 2,
        "flag": None,
        "pair": ("she", 1.5),
    }
    assert gen.map_back(out, mapping) == state


def test_same_seed_same_variants_other_seed_differs() -> None:
    text = "A Muslim woman and a Jewish man met Jamal Washington in Mexico."
    a = CounterfactualGenerator(seed=1).generate(text, k=8)
    b = CounterfactualGenerator(seed=1).generate(text, k=8)
    c = CounterfactualGenerator(seed=2).generate(text, k=8)
    assert [v.payload for v in a.variants] == [v.payload for v in b.variants]
    assert [v.mapping for v in a.variants] == [v.mapping for v in b.variants]
    assert [v.payload for v in a.variants] != [v.payload for v in c.variants]


def test_variants_cover_every_axis_round_robin(gen: CounterfactualGenerator) -> None:
    text = "A young woman, a Muslim from Mexico who is deaf, and her gay brother."
    axes = [v.mapping.axis for v in gen.generate(text, k=6).variants]
    assert axes == ["gender", "age", "religion", "sexual-orientation", "disability", "nationality"]


def test_more_variants_than_permutations_are_redrawn(gen: CounterfactualGenerator) -> None:
    result = gen.generate("He is here.", k=3)
    assert [v.draw for v in result.variants] == [0, 1, 2]
    assert {v.payload for v in result.variants} == {"She is here."}


def test_k_must_be_positive(gen: CounterfactualGenerator) -> None:
    with pytest.raises(ValueError, match="k=0"):
        gen.generate("he", k=0)


def test_age_numbers_mirror(gen: CounterfactualGenerator) -> None:
    mapping = CounterfactualMapping("age", (("young", "old"), ("old", "young")))
    out = gen.apply("a 22-year-old and an 80 year old and a 50-year-old", mapping).payload
    assert out == "a 78-year-old and a 20 year old and a 50-year-old"


def test_neutralise_like_langfair(gen: CounterfactualGenerator) -> None:
    text = "He told her that his wife met Jamal and a Muslim man."
    assert gen.neutralise(text, axes=["gender"], names=False) == (
        "They told them that their spouse met Jamal and a Muslim person."
    )
    assert (
        gen.neutralise(text) == "They told them that their spouse met [MASK] and a [MASK] person."
    )


def test_to_group_with_both_groups_cannot_be_inverted(gen: CounterfactualGenerator) -> None:
    variant = gen.to_group("He met her.", "gender", "female")
    assert variant.payload == "She met her."
    with pytest.raises(ValueError, match="not one-to-one"):
        gen.map_back(variant.payload, variant.mapping)


def test_unknown_axis_is_named() -> None:
    with pytest.raises(KeyError, match="caste"):
        CounterfactualGenerator(axes=["caste"])


# --- round trip as a property ----------------------------------------------------------------

_SLOTS = {
    "PRON": ["he", "she", "He", "She"],
    "POSS": ["his", "her", "His", "Her"],
    "KIN": ["wife", "husband", "mother", "father", "son", "daughter", "sister", "brother"],
    "TITLE": ["Mr.", "Mrs.", "Ms."],
    "REL": ["Muslim", "Jewish", "Hindu", "Christian", "Buddhist"],
    "RACE": ["Black", "white", "Asian", "Hispanic"],
    "PERSON": ["man", "woman", "doctor", "neighbor"],
    "NAME": ["Jamal Washington", "Emily", "Carlos", "Minh Nguyen", "Latoya", "Brian"],
}
_TEMPLATES = [
    "{PRON} said {POSS} {KIN} was late.",
    "{TITLE} Parker met a {REL} {PERSON}.",
    "The {RACE} {PERSON} spoke with {NAME}.",
    "{NAME} and {POSS} {KIN} visited the {REL} {PERSON}.",
    "The {PERSON} thanked {NAME}; {PRON} smiled.",
]


@st.composite
def texts(draw: st.DrawFn) -> str:
    # One title per text: "Mrs." and "Ms." both become "Mr.", so a text holding both cannot
    # be mapped back exactly (documented in docs/detection.md).
    title = draw(st.sampled_from(_SLOTS["TITLE"]))
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        template = draw(st.sampled_from(_TEMPLATES))
        fills = {slot: draw(st.sampled_from(words)) for slot, words in _SLOTS.items()}
        fills["TITLE"] = title
        parts.append(template.format(**fills))
    return " ".join(parts)


@given(text=texts(), seed=st.integers(0, 2**16))
def test_map_back_inverts_every_variant(text: str, seed: int) -> None:
    gen = _GENERATORS.setdefault(seed % 4, CounterfactualGenerator(seed=seed % 4))
    result = gen.generate(text, k=4)
    assert result.status == "applicable"
    for v in result.variants:
        assert v.payload != text
        assert gen.map_back(v.payload, v.mapping) == text


_GENERATORS: dict[int, CounterfactualGenerator] = {}


def test_default_termset_is_shared() -> None:
    assert TermSet.default() is TermSet.default()


def test_masking_a_variant_gives_the_masked_original_on_bbq(gen: CounterfactualGenerator) -> None:
    """Self-consistency: every word a swap writes is one the detector finds again.

    A group-blind consumer (the fake LLM masks mentions before seeding) then sees the same
    text for the original and every counterfactual, up to "a"/"an" before a mask. Checked on
    the real BBQ Religion and Sexual_orientation contexts, on every axis but age: an age is
    mirrored, not masked ("my five year old child" → "ninety-five"), which
    ``tests/core/test_counterfactual_age.py`` checks.
    """
    import re

    from biasbreaker.metrics.bbq import load_bbq

    axes = [a.name for a in gen.axes if a.name != "age"]
    gen = CounterfactualGenerator(TermSet.load(axes=axes), seed=7)

    data = Path(__file__).resolve().parents[2] / "core" / "biasbreaker" / "data" / "bbq"
    article = re.compile(r"\b[Aa]n?\s+\[MASK\]")
    seen: set[str] = set()
    checked = 0
    for name in ("preds_Religion.jsonl", "preds_Sexual_orientation.jsonl"):
        for item in load_bbq(data / name):
            text = f"{item.context}\n{item.question}\n" + "\n".join(item.answers)
            if text in seen:
                continue
            seen.add(text)
            masked = article.sub("a [MASK]", str(gen.neutralise(text)))
            for v in gen.generate(text, k=3).variants:
                assert article.sub("a [MASK]", str(gen.neutralise(v.payload))) == masked, v.payload
                checked += 1
    assert checked > 1000


def test_every_variant_of_a_full_slate_of_names_maps_back() -> None:
    """Regression: eight people, one per race x gender group (the Bloomberg hiring prompts).

    Race permutations among groups that are all mentioned must stay invertible: replacement
    names may not share a surname with each other or with the text.
    """
    import json
    import random
    from importlib import resources

    data = resources.files("biasbreaker.data.hiring")
    men = json.loads(data.joinpath("top_mens_names.json").read_text())
    women = json.loads(data.joinpath("top_womens_names.json").read_text())
    rng = random.Random(1)
    gen = CounterfactualGenerator(seed=0)
    checked = 0
    for _ in range(200):
        names = [rng.choice(pool[race]).title() for race in "WBAH" for pool in (men, women)]
        rng.shuffle(names)
        prompt = "Rank these candidates:\n" + "\n".join(f"- {n}" for n in names)
        for variant in gen.generate(prompt, 4).variants:
            # the step's output names the people as the variant did; mapping back restores them
            assert gen.map_back(variant.payload, variant.mapping) == prompt
            checked += 1
    assert checked == 800


# --- issue 14 item 3: person words, -man/-woman compounds, predicate adjectives -------------


def swap(
    gen: CounterfactualGenerator, axis: str, pairs: tuple[tuple[str, str], ...], text: str
) -> str:
    return str(gen.apply(text, CounterfactualMapping(axis, pairs)).payload)


BLACK_WHITE = (("black", "white"), ("white", "black"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # occupation heads from the BLS titles license the context-dependent race words
        ("The Black engineer met the white pilot.", "The white engineer met the Black pilot."),
        ("a Black CEO hired a Black developer", "a white CEO hired a white developer"),
        (
            "The white electrician called a Black plumber.",
            "The Black electrician called a white plumber.",
        ),
        ("two white firefighters", "two Black firefighters"),
        # still no person: left alone
        ("the black car and the white house", "the black car and the white house"),
        ("the black cutter broke", "the black cutter broke"),
    ],
)
def test_occupation_nouns_are_person_heads(
    gen: CounterfactualGenerator, text: str, expected: str
) -> None:
    assert swap(gen, "race", BLACK_WHITE, text) == expected


def test_occupation_heads_come_from_the_shipped_bls_titles() -> None:
    doc = json.loads(
        (
            Path(__file__).resolve().parents[2] / "core/biasbreaker/data/terms/occupations.json"
        ).read_text()
    )
    assert len(doc["titles"]) == 1104 and "Software Developers" in doc["titles"]
    words = set(doc["words"])
    assert {"engineer", "pilot", "developer", "electrician", "plumber", "firefighter"} <= words
    assert not words & set(doc["excluded"])
    people = TermSet.default().person_words
    assert {"engineer", "engineers", "pilot", "ceo", "developers"} <= people
    assert "cutter" not in people  # a tool as often as a person: excluded


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The handyman is a Frenchman.", "The handywoman is a Frenchwoman."),
        ("Two handymen met three Irishwomen.", "Two handywomen met three Irishmen."),
        ("The chairman and the foreman", "The chairwoman and the forewoman"),
        ("FIREMAN", "FIREWOMAN"),
        # not compounds: left alone
        ("A human and a German shaman in Oman.", "A human and a German shaman in Oman."),
    ],
)
def test_man_woman_compounds_swap_on_gender(
    gen: CounterfactualGenerator, text: str, expected: str
) -> None:
    assert swap_gender(gen, text) == expected


def test_a_demonym_compound_is_a_gender_term_only(gen: CounterfactualGenerator) -> None:
    # the documented policy: one surface, one axis; "Frenchman" carries gender, and a
    # nationality variant leaves it (and says so in docs/detection.md)
    found = {(d.surface, d.axis) for d in gen.detect("The Frenchman met a German engineer.")}
    assert found == {("Frenchman", "gender"), ("German", "nationality")}
    text = "The Frenchman met a German engineer."
    assert swap(gen, "nationality", (("german", "french"), ("french", "german")), text) == (
        "The Frenchman met a French engineer."
    )


@pytest.mark.parametrize(
    ("text", "pairs", "expected"),
    [
        ("He is Muslim.", (("muslim", "christian"), ("christian", "muslim")), "He is Christian."),
        ("He is Muslim.", (("muslim", "jewish"), ("jewish", "muslim")), "He is Jewish."),
        ("She's Jewish.", (("jewish", "muslim"), ("muslim", "jewish")), "She's Muslim."),
        (
            "They were Muslim and proud.",
            (("muslim", "jewish"), ("jewish", "muslim")),
            "They were Jewish and proud.",
        ),
        # a noun stays a noun
        ("He is a Muslim.", (("muslim", "jewish"), ("jewish", "muslim")), "He is a Jew."),
        ("A Jew.", (("jewish", "muslim"), ("muslim", "jewish")), "A Muslim."),
        # adjective before a noun, as before
        ("a Muslim woman", (("muslim", "jewish"), ("jewish", "muslim")), "a Jewish woman"),
    ],
)
def test_predicate_adjectives_keep_their_part_of_speech(
    gen: CounterfactualGenerator, text: str, pairs: tuple[tuple[str, str], ...], expected: str
) -> None:
    out = swap(gen, "religion", pairs, text)
    assert out == expected
    mapping = CounterfactualMapping("religion", pairs)
    variant = gen.apply(text, mapping)
    assert gen.map_back(variant.payload, variant.mapping) == text


def test_a_predicate_possessive_pronoun_is_still_hers(gen: CounterfactualGenerator) -> None:
    assert swap_gender(gen, "The book is his.") == "The book is hers."


def test_a_payload_naming_only_unprobed_axes_is_not_called_group_blind() -> None:
    """Trial 11: with ``[probe] axes = ["religion"]``, "She is a nurse." passed as "group-blind
    (fairness through unawareness)", which it is not: it names a woman."""
    religion = CounterfactualGenerator(TermSet.load(axes=["religion"]))
    out = religion.generate("She is a nurse. Mr. Lee is a pilot.", k=2)
    assert out.status == "not_applicable"
    assert "group-blind" not in out.reason
    assert "probed axes and groups (religion)" in out.reason
    assert "gender ('She', 'Mr.')" in out.reason
    blind = religion.generate("The weather is nice.", k=2)
    assert "group-blind (fairness through unawareness)" in blind.reason
    # a group left out of an axis is named the same way
    two = CounterfactualGenerator(TermSet.load(groups={"religion": ["christian", "muslim"]}))
    hindu = two.generate("A Hindu family moved in.", k=2)
    assert hindu.status == "not_applicable" and "religion ('Hindu')" in hindu.reason


def test_a_field_of_a_one_person_record_moves_with_that_person() -> None:
    """Trial 11: ``persons = [{"name", "gender"}, ...]`` was always held, with a reason that
    listed the very person the field belonged to."""
    from biasbreaker.probe.counterfactual import Unattributed

    gen = CounterfactualGenerator()
    payload = {
        "persons": [
            {"name": "Mary Carter", "gender": "female"},
            {"name": "John Baker", "gender": "male"},
        ]
    }
    out = gen.generate(payload, k=2, per_person=True)
    alone = {v.mapping.person: v.payload["persons"] for v in out.variants if v.mapping.person}
    assert set(alone) == {"Mary Carter", "John Baker"}
    mary, john = alone["Mary Carter"], alone["John Baker"]
    assert mary[0]["gender"] == "male" and mary[0]["name"] != "Mary Carter"
    assert mary[1] == {"name": "John Baker", "gender": "male"}  # the other person stays
    assert john[1]["gender"] == "female" and john[0] == payload["persons"][0]
    # a record naming two persons, or a term inside longer text, still belongs to no one
    for record in (
        {"name": "Mary Carter", "spouse": "John Baker", "gender": "female"},
        {"name": "Mary Carter", "gender": "female", "bio": "She likes him."},
    ):
        with pytest.raises(Unattributed):
            gen.generate({"persons": [record, payload["persons"][1]]}, k=2, per_person=True)
