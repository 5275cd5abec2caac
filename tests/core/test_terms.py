"""Term lists: the shipped data, extension from configuration, and errors that name the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biasbreaker.errors import ConfigError
from biasbreaker.probe import DEFAULT_AXES, CounterfactualGenerator, CounterfactualMapping, TermSet


def test_shipped_axes_and_names() -> None:
    terms = TermSet.default()
    assert terms.axis_names == DEFAULT_AXES
    book = terms.names
    assert book is not None
    # BBQ first names carry gender and race; Bloomberg full names both; ambiguous firsts lose race
    assert (book.first["Jamal"].gender, book.first["Jamal"].race) == ("male", "black")
    assert (book.first["Guadalupe"].gender, book.first["Guadalupe"].race) == ("female", "hispanic")
    assert book.first["Abigail"].race is None  # Bloomberg lists Abigail as W, A and H
    assert (book.full["Jakob Schmidt"].gender, book.full["Jakob Schmidt"].race) == ("male", "white")
    assert "Grace" not in book.first  # English words are excluded
    assert "Hunter" not in book.first
    for gender in ("male", "female"):
        for race in ("white", "black", "hispanic", "asian", "arab"):
            assert len(book.full_pool(gender, race)) >= 20


def test_every_shipped_surface_belongs_to_one_axis() -> None:
    owner: dict[str, str] = {}
    for axis in TermSet.default().axes:
        for s in axis.surfaces():
            assert owner.setdefault(s, axis.name) == axis.name


def test_extra_file_extends_an_axis_and_adds_one(tmp_path: Path) -> None:
    extra = tmp_path / "knights.json"
    extra.write_text(
        json.dumps(
            {
                "axis": "gender",
                "groups": ["male", "female"],
                "rows": [{"male": "knight", "female": "dame"}],
            }
        )
    )
    caste = tmp_path / "caste.json"
    caste.write_text(
        json.dumps(
            {
                "axis": "caste",
                "groups": ["dalit", "brahmin"],
                "rows": [{"dalit": "Dalit", "brahmin": "Brahmin"}],
            }
        )
    )
    words = tmp_path / "persons.json"
    words.write_text(json.dumps({"kind": "person_words", "words": ["astronaut-trainee"]}))
    terms = TermSet.load(extra_files=[extra, caste, words])
    gen = CounterfactualGenerator(terms, axes=["gender", "caste"])
    swap = CounterfactualMapping("gender", (("male", "female"), ("female", "male")))
    assert gen.apply("The knight and his horse.", swap).payload == "The dame and her horse."
    result = gen.generate("A Dalit engineer.", k=1)
    assert result.variants[0].payload == "A Brahmin engineer."
    assert "astronaut-trainee" in terms.person_words


def test_inline_rows_from_configuration() -> None:
    terms = TermSet.load(
        axes=["gender"], inline={"gender": [{"male": "squire", "female": "damsel"}]}
    )
    gen = CounterfactualGenerator(terms)
    swap = CounterfactualMapping("gender", (("male", "female"), ("female", "male")))
    assert gen.apply("The squire left.", swap).payload == "The damsel left."
    assert terms.names is not None


def test_axes_subset_and_no_names() -> None:
    terms = TermSet.load(axes=["religion"], names=False)
    assert terms.axis_names == ("religion",)
    assert terms.names is None


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"axis": "Caste", "groups": ["a", "b"], "rows": [{"a": "x", "b": "y"}]}, "field 'axis'"),
        ({"axis": "caste", "groups": ["a"], "rows": [{"a": "x"}]}, "field 'groups'"),
        ({"axis": "caste", "groups": ["a", "b"], "rows": []}, "field 'rows'"),
        ({"axis": "caste", "groups": ["a", "b"], "rows": [{"a": "x", "c": "y"}]}, "unknown key"),
        ({"axis": "caste", "groups": ["a", "b"], "rows": [{"a": "x"}]}, "at least two groups"),
        (
            {"axis": "caste", "groups": ["a", "b"], "rows": [{"a": "x", "b": "y", "pos": "verb"}]},
            "'pos'",
        ),
        (
            {"axis": "caste", "groups": ["a", "b"], "rows": [{"a": "he", "b": "y"}]},
            "belongs to axes 'gender' and 'caste'",
        ),
        (
            {"axis": "gender", "groups": ["male", "robot"], "rows": [{"male": "x", "robot": "y"}]},
            "not groups of axis 'gender'",
        ),
    ],
)
def test_bad_term_files_name_file_and_field(tmp_path: Path, doc: object, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=message) as info:
        TermSet.load(extra_files=[path])
    if "belongs to" not in message:
        assert str(path) in str(info.value)


def test_missing_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        TermSet.load(extra_files=[tmp_path / "nope.json"])
    broken = tmp_path / "broken.json"
    broken.write_text('{"axis": "x",\n  oops}')
    with pytest.raises(ConfigError, match="line 2"):
        TermSet.load(extra_files=[broken])


def test_unknown_axis_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="probe axis 'caste' is not known; known axes: age"):
        TermSet.load(axes=["caste"])
    with pytest.raises(ConfigError, match="inline term rows name axis 'caste'"):
        TermSet.load(inline={"caste": [{"a": "x"}]})


def test_groups_restrict_an_axis() -> None:
    terms = TermSet.load(
        axes=["religion"], groups={"religion": ["christian", "muslim", "jewish"]}, names=False
    )
    axis = terms.axis("religion")
    assert axis.groups == ("christian", "muslim", "jewish")
    gen = CounterfactualGenerator(terms)
    assert [d.surface for d in gen.detect("A Hindu and a Muslim met a Jew.")] == ["Muslim", "Jew"]
    written = {str(v.payload) for v in gen.generate("A Muslim man.", k=4).variants}
    assert written == {"A Christian man.", "A Jewish man."}
    with pytest.raises(ConfigError, match="at least two of its groups"):
        TermSet.load(groups={"religion": ["christian", "wiccan"]})
    with pytest.raises(ConfigError, match="probe groups name axis 'caste'"):
        TermSet.load(groups={"caste": ["a", "b"]})
