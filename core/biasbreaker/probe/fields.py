"""Protected attributes held in structured fields, which the probe cannot vary.

The probe makes counterfactuals by rewriting text (:mod:`~biasbreaker.probe.payloads`: the
strings of a payload); a number, a bool or a code is passed through unchanged. A form or
database pipeline often carries the attribute that way: ``{"age": 63}``, ``{"sex": "F"}``,
``{"is_female": True}``, ``{"gender_code": "F"}``. A node that denies on such a field is not
seen by the text probe, and calling the step "not applicable" (no protected group named) would
be false: the payload names the group, in a form the probe cannot swap. So a step whose input
has such a field is held for review with the field named (fail closed), before anything is
drawn or run.

A field counts when its key (split at ``_``, ``-``, spaces, digits and camelCase, lower-cased)
(or, in a name-value record such as ``["sex", "F"]`` or ``{"field": "sex", "value": "F"}``,
its name) is an attribute word of one of the configured axes (:data:`FIELD_WORDS`), an age bound
(``over_60``, ``65_plus``) or the two sexes (``M/F``), with only person
words before it (:data:`PERSON_WORDS`: ``is_female``, ``applicant_sex``, ``date_of_birth``)
and only qualifier words after it (:data:`QUALIFIER_WORDS`: ``gender_code``, ``age_years``,
``birth_date``, ``birth_yr``; or ``at`` and one word: ``sex_at_birth``), so
``retry_disabled``, ``man_hours``, ``account_age_days`` or ``citizen_services_used`` do not
count; and its value is a number, a bool, a string
without white space of at most :data:`CODE_LENGTH` characters in which the text probe found no
protected term (``"F"``, ``"fem."``, ``"1961-04-02"``), or, under an age word, any string the
text probe did not read as an age (``"2 April 1961"``, ``"63 years"``, ``"60-69"``). Other
strings are text, which the probe reads:
``{"sex": "female"}`` is swapped like any other mention. ``None`` is absent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from biasbreaker.probe.names import unaccent
from biasbreaker.probe.payloads import Path, embedded_json

__all__ = [
    "CODE_LENGTH",
    "FIELD_WORDS",
    "GROUP_WORDS",
    "PERSON_ONLY",
    "PERSON_WORDS",
    "QUALIFIER_WORDS",
    "opaque_fields",
    "opaque_reason",
]

FIELD_WORDS: Final[Mapping[str, frozenset[str]]] = {
    "gender": frozenset({"sex", "gender", "female", "male", "woman", "man", "pregnant",
                         "pregnancy", "sexe", "geschlecht", "sexo", "genero", "sesso",
                         "genere"}),
    "race": frozenset({"race", "ethnicity", "ethnic", "racial",
                       "ethnie", "rasse", "raza", "etnia", "razza"}),
    "age": frozenset({"age", "dob", "yob", "birth", "birthdate", "birthday", "birthyear",
                      "senior", "elderly",
                      "naissance", "alter", "geburtsdatum", "geburtsjahr", "geburtstag", "edad",
                      "nacimiento", "idade", "nascimento", "nascita"}),
    "religion": frozenset({"religion", "faith", "religious",
                           "konfession", "religione", "religiao"}),
    "sexual-orientation": frozenset({"orientation", "lgbt", "lgbtq", "gay", "orientacion",
                                     "orientamento", "orientacao"}),
    "disability": frozenset({"disability", "disabled", "handicap", "handicapped",
                             "behinderung", "discapacidad", "disabilita", "deficiencia"}),
    "nationality": frozenset({"nationality", "citizenship", "citizen",
                              "nationalite", "nationalitat", "staatsangehorigkeit",
                              "nacionalidad", "nacionalidade", "nazionalita", "cittadinanza"}),
}  # fmt: skip
"""Axis → the key words that make a field carry that axis's attribute: English, then the
French, German, Spanish, Portuguese and Italian words a form or database column uses (a key
is compared with its accents removed, so ``âge``, ``género`` and ``Staatsangehörigkeit``
match). Not ``eta`` (Italian *età*) nor ``genre`` (French *gender*): as keys they are far
more often an arrival time and a kind of book or music. ``senior`` and ``elderly`` are age
flags (``{"senior": true}``); ``senior_engineer`` is no field, its last word qualifying no
attribute. These are also the field labels of text (``Race: B``,
:mod:`~biasbreaker.probe.term_context`); a key may name the attribute by the words of
:data:`GROUP_WORDS` too."""

GROUP_WORDS: Final[Mapping[str, frozenset[str]]] = {
    "gender": frozenset({"transgender", "nonbinary"}),
    "race": frozenset({"caste", "hispanic", "latino", "latina", "latinx", "asian", "caucasian",
                       "biracial", "multiracial", "mixed_race", "african_american",
                       "native_american", "black", "white"}),
    "religion": frozenset({"denomination", "muslim", "islam", "islamic", "christian", "jewish",
                           "jew", "hindu", "buddhist", "sikh", "catholic", "protestant",
                           "mormon", "atheist", "evangelical"}),
    "sexual-orientation": frozenset({"lesbian", "bisexual", "homosexual"}),
    "disability": frozenset({"wheelchair", "wheelchair_user", "blind", "deaf", "autistic",
                             "autism", "amputee", "paraplegic", "quadriplegic", "dyslexic",
                             "dyslexia", "adhd", "visually_impaired", "hearing_impaired"}),
    "nationality": frozenset({"national_origin", "country_of_birth", "birth_country",
                              "birthplace", "birth_place", "place_of_birth",
                              "country_of_origin", "origin_country", "home_country",
                              "home_language", "home_lang", "native_language", "native_lang",
                              "first_language", "first_lang", "mother_tongue",
                              "immigration", "immigrant", "visa_status", "refugee", "asylum",
                              "undocumented"}),
}  # fmt: skip
"""Axis → more key words of a field (a new-user trial found ``{"is_muslim": true}``,
``{"wheelchair": true}``, ``{"national_origin": "MX"}``, ``{"country_of_birth": "NG"}`` and
``{"home_lang": "es"}`` "not applicable"): the names of the axis's groups, common words for
them, and the attribute's other names. A word with ``_`` is a phrase, the key's words in that
order (``national_origin``, ``countryOfBirth``, ``home_lang``; ``place_of_birth`` is a
nationality, ``date_of_birth`` stays an age). Not ``language`` alone (``{"language":
"python"}`` is a skill), nor ``origin`` or ``visa`` alone (a URL's or a trip's origin, a card
brand), nor ``trans`` (``trans_id``). ``blind`` counts alone (``{"blind": true}`` is held) but
``blind_review`` does not, ``review`` qualifying no attribute. A zip code is a proxy of race
and national origin the probe does not read (``zip``: too common a field to hold). The words
of :data:`PERSON_ONLY` count only after a person word."""

PERSON_ONLY: Final = frozenset({"black", "white", "undocumented"})
"""Field words that count only with a person word before them (``is_black``,
``applicant_white``, ``is_undocumented``): alone they are far more often a colour or a count
(``{"black": 0}``, ``{"undocumented": 3}`` functions)."""

PERSON_WORDS: Final = frozenset(
    {"is", "has", "the", "a", "of", "date", "year", "self", "reported", "declared", "legal",
     "primary", "main", "applicant", "applicants", "client", "customer", "patient", "person",
     "user", "member", "candidate", "employee", "borrower", "student", "tenant", "resident",
     "de", "du", "la", "le", "fecha", "data", "di", "da", "del", "der", "des"}
)  # fmt: skip
"""Words a key may have before its attribute word (who has it, or how it is dated;
``date_de_naissance``, ``fecha_de_nacimiento``, ``data_di_nascita``)."""

QUALIFIER_WORDS: Final = frozenset(
    {"code", "id", "group", "band", "range", "category", "cat", "flag", "value", "years",
     "yrs", "yr", "status", "type", "date", "year", "at", "identity", "label", "bucket", "bracket",
     "tier",
     "ans", "jahre", "anos", "anni", "codigo"}
)  # fmt: skip
"""Words a key may have after its attribute word (how the attribute is coded). ``at`` and one
word of any kind may end the key too: when the attribute holds (``sex_at_birth``,
``age_at_application``, ``age_at_hire``)."""

PAIR_NAMES: Final = frozenset({"name", "field", "key", "label", "attribute", "question"})
"""Keys under which a name-value record names its field: ``{"field": "sex", "value": "F"}``."""
PAIR_VALUES: Final = frozenset({"value", "answer", "response"})
"""Keys under which such a record holds the field's value."""

CODE_LENGTH: Final = 16
"""Longest string value without white space read as a code (``"F"``, ``"1961-04-02"``)."""

_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_AGE_BOUND_KEY = re.compile(
    r"(?:^|(?<=[\W_])|(?<=[a-z])(?=[A-Z]))(?:over|under|above|below|older_?than|younger_?than)"
    r"[\W_]?\d{1,3}(?:s|[\W_]?plus)?$|^\d{1,3}[\W_]?(?:plus|\+)$",
    re.IGNORECASE,
)
"""A key that is an age bound: ``over_60``, ``is_over60``, ``applicantOver65``, ``under-25s``,
``65_plus``, ``65+`` (a bound is an age whatever value it has)."""
_SEX_PAIR_KEY = re.compile(r"\s*(?:m\s*/\s*f|f\s*/\s*m|m_f|f_m)\s*", re.IGNORECASE)
"""A key naming the two sexes, as forms head the column: ``M/F``, ``F/M``, ``m_f``."""


def _attribute(key: str, words: Mapping[str, frozenset[str]]) -> str | None:
    """The axis ``key`` names an attribute of, by the rule above, or ``None``."""
    if "gender" in words and _SEX_PAIR_KEY.fullmatch(key):
        return "gender"
    bound = _AGE_BOUND_KEY.search(key) if "age" in words else None
    if bound is not None:
        head = [w.lower() for w in _WORD.findall(key[: bound.start()])]
        if all(w in PERSON_WORDS or w in words["age"] for w in head):
            return "age"
    parts = _phrases([w.lower() for w in _WORD.findall(unaccent(key).replace("ß", "ss"))], words)
    for i, part in enumerate(parts):
        axis = next((a for a, ws in words.items() if part in ws), None)
        if (
            axis is not None
            and all(w in PERSON_WORDS for w in parts[:i])
            and (i > 0 or part not in PERSON_ONLY)
            and _qualifiers(parts[i + 1 :])
        ):
            return axis
    return None


def _phrases(parts: list[str], words: Mapping[str, frozenset[str]]) -> list[str]:
    """``parts`` with each run of words that is a phrase of ``words`` joined by ``_``.

    Runs of three words are tried before two: ``["country", "of", "birth"]`` →
    ``["country_of_birth"]``.
    """
    phrases = {w for ws in words.values() for w in ws if "_" in w}
    out: list[str] = []
    i = 0
    while i < len(parts):
        n = next((n for n in (3, 2) if "_".join(parts[i : i + n]) in phrases), 1)
        out.append("_".join(parts[i : i + n]))
        i += n
    return out


def _qualifiers(after: list[str]) -> bool:
    """Whether the words after an attribute word only say how it is coded or when it holds."""
    if len(after) >= 2 and after[-2] == "at":  # sex_at_birth, age_at_application
        after = after[:-2]
    return all(w in QUALIFIER_WORDS for w in after)


def opaque_fields(
    payload: Any,
    axes: Sequence[str],
    found: frozenset[Path] = frozenset(),
    read: Callable[[Any], frozenset[Path]] | None = None,
) -> Iterator[tuple[Path, str, Any]]:
    """The fields of ``payload`` that carry a protected attribute the probe cannot vary.

    A string holding a JSON object or array (:func:`~biasbreaker.probe.payloads.
    embedded_json`: ``'{"applicant": {"age": 63}}'``, a tool's result) is walked too: its
    fields are at the string's path followed by their path in the parse.

    Args:
        payload: The step's input: nested ``dict`` / ``list`` / ``tuple`` of values.
        axes: The configured axes (``[probe] axes``); a field counts for these only.
        found: Paths of strings where the text probe found a protected term (those are
            swapped, so they do not count).
        read: The text probe's ``found`` of a parsed JSON string (the paths, in the parse,
            of its strings with a protected term); default: none found, so a field in a
            JSON string counts whenever it is a field (a hold, never a miss).

    Yields:
        ``(path, axis, value)`` for each such field, in payload order.
    """
    words = {
        axis: FIELD_WORDS[axis] | GROUP_WORDS.get(axis, frozenset())
        for axis in axes
        if axis in FIELD_WORDS
    }
    yield from _walk(payload, (), words, found, read)


def _walk(
    value: Any,
    path: Path,
    words: Mapping[str, frozenset[str]],
    found: frozenset[Path],
    read: Callable[[Any], frozenset[Path]] | None,
) -> Iterator[tuple[Path, str, Any]]:
    pair = _named_pair(value, words, path, found)
    if pair is not None:
        yield (*path, pair[0]), pair[1], value[pair[0]]
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = (*path, key)
            if isinstance(key, str) and here not in found:
                axis = _attribute(key, words)
                if axis is not None and _opaque(item, axis):
                    yield here, axis, item
                    continue
            yield from _walk(item, here, words, found, read)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _walk(item, (*path, i), words, found, read)
    elif isinstance(value, str):
        inner = embedded_json(value)
        if inner is not None:
            inner_found = read(inner) if read is not None else frozenset()
            yield from _walk(inner, path, words, frozenset((*path, *p) for p in inner_found), read)


def _named_pair(
    value: Any, words: Mapping[str, frozenset[str]], path: Path, found: frozenset[Path]
) -> tuple[Any, str] | None:
    """``(where the value is, axis)`` when ``value`` is a field written as a name and a value.

    Forms and key-value stores write a field as ``["sex", "F"]`` (a pair in a list of
    pairs) or ``{"field": "sex", "value": "F"}`` (:data:`PAIR_NAMES`, :data:`PAIR_VALUES`):
    the name is then a value, not a key, and names the attribute the same way. Not when the
    text probe found a protected term in the name or the value (``["male", "nurse"]`` is
    text it swaps).
    """
    if isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[0], str):
        name, at, where = value[0], 0, 1
    elif isinstance(value, Mapping) and len(value) <= 4:
        names = [k for k in value if k in PAIR_NAMES and isinstance(value[k], str)]
        places = [k for k in value if k in PAIR_VALUES]
        if len(names) != 1 or len(places) != 1:
            return None
        name, at, where = value[names[0]], names[0], places[0]
    else:
        return None
    if (*path, at) in found or (*path, where) in found:
        return None
    axis = _attribute(name, words) if len(name) <= 40 else None
    if axis is None or not _opaque(value[where], axis):
        return None
    return where, axis


def _opaque(value: Any, axis: str) -> bool:
    if isinstance(value, (bool, int, float)):
        return True
    if not isinstance(value, str) or not value.strip():
        return False
    if axis == "age":
        # under an age key any text the probe did not read as an age ("63 years", "60-69",
        # "sixty-three, retired"): a string it reads is swapped and never reaches here
        return True
    return len(value) <= CODE_LENGTH and not any(c.isspace() for c in value)


def opaque_reason(fields: Sequence[tuple[Path, str, Any]]) -> str:
    """The hold reason for :func:`opaque_fields`' fields: each field, its axis and value."""
    shown = ", ".join(
        f"{'.'.join(str(p) for p in path)} = {value!r} ({axis})" for path, axis, value in fields
    )
    return (
        f"the probe cannot vary a protected attribute held in a structured field: {shown}; it "
        "rewrites text only. Write the attribute as text the probe reads (e.g. 'aged 63', "
        "'sex: female'), leave it out of what the step sees, or set probe=False for this "
        "step and review its outputs (docs/detection.md, 'Structured fields')"
    )
