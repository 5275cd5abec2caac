"""The language guard: an input the English term lists cannot read is "unsupported language".

French, German, Spanish and Chinese inputs about a person were silently "not applicable"
(issue 14, item 5). They are now ``unsupported_language``: held for review by default, let
through unprobed with the reason recorded when ``[probe] unsupported_language = "proceed"``.
English is never unsupported, however short and whatever the names in it (a false
"unsupported" on English would be a false halt); English naming no group stays "not
applicable". The identifier (py3langid, the ``languages`` extra) runs once per probed step.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("py3langid")

from biasbreaker.errors import ConfigError, InputError, ProbeError
from biasbreaker.kernel import Kernel
from biasbreaker.probe import CounterfactualGenerator, Probe, ProbeResult, build_probe
from biasbreaker.probe import language as language_module
from biasbreaker.probe.language import NO_LANGUAGE, LanguageGuard, LanguageReading
from biasbreaker.trace.records import UNSUPPORTED_HELD, UNSUPPORTED_PROCEEDED
from biasbreaker_plugins.scorers.decision import DecisionScorer

ROOT = Path(__file__).resolve().parents[2]

ABOUT_A_PERSON = {
    "fr": [
        "Marie Dubois a postulé pour le poste d'ingénieure.",
        "Il est musulman et travaille comme infirmier à Lyon.",
        "La candidate est une femme noire de 45 ans.",
        "Décidez si ce candidat chrétien obtient le prêt.",
    ],
    "de": [
        "Zoë Müller hat sich auf die Stelle als Ingenieurin beworben.",
        "Er ist Muslim und arbeitet als Krankenpfleger in Berlin.",
        "Die Bewerberin ist eine 45-jährige schwarze Frau.",
        "Entscheide, ob dieser christliche Bewerber den Kredit bekommt.",
    ],
    "es": [
        "José García solicitó el puesto de ingeniero.",
        "Ella es musulmana y trabaja como enfermera en Madrid.",
        "El candidato es un hombre negro de 45 años.",
        "Decide si esta solicitante cristiana recibe el préstamo.",
    ],
    "zh": [
        "陈伟申请了工程师的职位。",
        "她是穆斯林，在上海当护士。",
        "这位求职者是一名四十五岁的黑人女性。",
        "他是黑人。",
    ],
}
FOREIGN = [(lang, text) for lang, texts in ABOUT_A_PERSON.items() for text in texts]

ENGLISH = [
    # very short, and names from outside English
    "José García",
    "Wei Chen",
    "Maritza Huerta",  # reads as Basque (p = 0.57) alone: a bare name has no language
    "Zoë Müller",
    "José García applied.",
    "Wei Chen applied for the job.",
    "Zoë Müller is a nurse.",
    "Hire Wei Chen?",
    "Approve José García?",
    "Zoë Müller, 34, engineer.",
    "He is Muslim.",
    "She is Black.",
    "Is he Jewish?",
    "Mr. Nguyen called.",
    "Ana Lucía Fernández is a pilot.",
    "Björn Andersson, nurse, 52.",
    "François Lefèvre is retired.",
    "Mrs. Nakamura, 78, widow.",
    "Rank: Li Na, Juan Pérez, Emily Clark.",
    # English with a French (German, Spanish, Chinese) name or word in it
    "Jean-Pierre Dubois applied for the nurse position in Montréal.",
    "Hire François? He speaks French and studied at the Université de Lyon.",
    "Bonjour! Can you review Amélie Poulain's application?",
    "Herr Müller from München applied for the software job.",
    "Señora Gutiérrez asked whether her loan was approved.",
    "Wei Chen (陈伟) is a Muslim engineer from Xi'an.",
    "A café owner named Chloé said her husband is Jewish.",
]


def decide(text: str) -> str:
    return "approve"


def probe(**kwargs: Any) -> Probe:
    return Probe(DecisionScorer(), k=2, r=1, seed=0, bootstrap=0, **kwargs)


@pytest.mark.parametrize(("lang", "text"), FOREIGN)
def test_a_foreign_input_about_a_person_is_unsupported_and_held_by_default(
    lang: str, text: str
) -> None:
    calls: list[str] = []

    def step(x: str) -> str:
        calls.append(x)
        return "approve"

    result = probe().probe_sync(step, text, "approve", step_id="s")
    assert result.status == "unsupported_language", result.reason
    assert result.language == lang and result.holds
    assert result.reason.startswith(UNSUPPORTED_HELD), result.reason
    assert f"({lang}, p = " in result.reason and "cover English only" in result.reason
    assert result.score is None and result.calls == 0 and calls == []  # nothing re-run
    assert ProbeResult.from_dict(result.to_dict()) == result


@pytest.mark.parametrize(("lang", "text"), FOREIGN)
def test_a_foreign_input_proceeds_with_its_reason_when_configured(lang: str, text: str) -> None:
    guard = LanguageGuard(policy="proceed")
    result = probe(language=guard).probe_sync(decide, text, "approve", step_id="s")
    assert result.status == "unsupported_language" and not result.holds
    assert result.reason.startswith(UNSUPPORTED_PROCEEDED), result.reason
    assert 'unsupported_language = "proceed"' in result.reason


@pytest.mark.parametrize("text", ENGLISH)
def test_english_is_never_unsupported_however_short_and_whatever_the_names(text: str) -> None:
    result = probe().probe_sync(decide, text, "approve", step_id="s")
    assert result.status != "unsupported_language", result.reason
    assert result.language in ("en", "und", "")  # "": names alone, nothing to identify


@pytest.mark.parametrize(
    "text",
    [
        "Born in Nigeria. Loan 5k.",  # py3langid: pcm, p = 0.62
        "Applicant from Ghana, income 40k, asks 5k.",  # pcm, p = 0.52
        "Oluwaseun Adeyemi applies for a loan.",  # pcm, p = 0.67
        "Dis woman wan borrow money for im shop, abeg make una help am.",  # Pidgin, p = 0.91
    ],
)
def test_nigerian_pidgin_is_read_with_the_english_term_lists(text: str) -> None:
    # English about Nigeria or Ghana read as Nigerian Pidgin and was held as unsupported
    # (a new-user trial): applicants from there went to review more often than others
    reading = LanguageGuard().check(text)
    assert reading is not None and reading.language == "pcm" and reading.supported
    assert LanguageGuard(languages=("fr",)).check(text) is not None
    assert not LanguageGuard(languages=("fr",)).check(text).supported  # type: ignore[union-attr]


def _bloomberg_names() -> list[str]:
    names = []
    with gzip.open(ROOT / "tests/data/bloomberg/rankings_compact.jsonl.gz", "rt") as fh:
        for line in fh:
            names += [n.title() for n in json.loads(line)["default_order"]]
    return sorted(set(names))


def test_no_name_of_the_bloomberg_data_reads_as_unsupported() -> None:
    # real names of every group the data set codes (Black, White, Hispanic, Asian; men and
    # women), bare and in a sentence: the probe's own inputs must not halt on them
    guard, finder = LanguageGuard(), CounterfactualGenerator(seed=0)
    names = _bloomberg_names()
    assert len(names) == 800
    for name in names:
        for text in (name, f"{name} applied for the software engineer job."):
            found = [(d.path, d.start, d.end) for d in finder.detect(text) if d.kind == "name"]
            reading = guard.check(text, found)  # what the probe passes
            assert reading is None or reading.supported, (text, reading)


def test_english_bbq_contexts_are_not_unsupported() -> None:
    guard = LanguageGuard()
    path = ROOT / "core/biasbreaker/data/bbq/preds_Religion.jsonl"
    items = [json.loads(line) for line in path.read_text().splitlines()[::10]]
    for item in items:
        for text in (item["context"], item["question"], item["ans0"]):
            reading = guard.check(text)
            assert reading is None or reading.supported, (text, reading)


def test_english_naming_no_group_stays_not_applicable() -> None:
    for text in ("Summarize the quarterly report.", "Translate the attached file.", "OK"):
        result = probe().probe_sync(decide, text, "approve", step_id="s")
        assert result.status == "not_applicable" and result.language in ("en", "und")
        assert "no protected term" in result.reason


def test_a_payload_without_letters_is_not_identified() -> None:
    assert LanguageGuard().check({"n": "42", "m": ["", "3.5 %"]}) is None
    result = probe().probe_sync(decide, "42", "approve", step_id="s")
    assert result.status == "not_applicable" and result.language == ""


def test_the_values_of_a_payload_are_read_not_its_keys() -> None:
    seen: list[str] = []

    def identify(text: str) -> tuple[str, float]:
        seen.append(text)
        return "en", 1.0

    LanguageGuard(identify=identify).check({"bewerberin": "Ms. Carter", "n": [1, "applies"]})
    assert seen == ["Ms. Carter applies"]


def test_the_identifier_runs_once_per_probed_step_and_not_on_unsampled_ones() -> None:
    seen: list[str] = []

    def identify(text: str) -> tuple[str, float]:
        seen.append(text)
        return "en", 0.99

    p = probe(language=LanguageGuard(identify=identify))
    result = p.probe_sync(decide, "He is Muslim.", "approve", step_id="s")
    assert result.status == "scored" and result.calls >= 2  # the step re-ran, once identified
    assert seen == ["He is Muslim.", "He is Muslim."]  # the whole input, then its one sentence
    skipped = Probe(DecisionScorer(), probe_rate=0.0, language=LanguageGuard(identify=identify))
    assert skipped.probe_sync(decide, "He is Muslim.", "approve").status == "not_sampled"
    assert seen == ["He is Muslim.", "He is Muslim."]


def test_a_language_the_term_files_cover_is_probed() -> None:
    text = "Er ist Muslim und arbeitet als Krankenpfleger in Berlin."
    guard = LanguageGuard(["en", "de"])
    result = probe(language=guard).probe_sync(decide, text, "approve", step_id="s")
    assert result.status == "scored" and result.language == "de"  # "Muslim" is swapped


def test_without_a_guard_a_foreign_input_is_not_applicable_again() -> None:
    result = probe(language=None).probe_sync(decide, "陈伟申请了工程师的职位。", "x", step_id="s")
    assert result.status == "not_applicable" and result.language == ""


def test_below_the_threshold_the_lexicon_decides() -> None:
    guard = LanguageGuard(identify=lambda text: ("fr", 0.49))
    assert guard.check("Marie") == LanguageReading("fr", 0.49, True, 5)
    assert not LanguageGuard(identify=lambda text: ("fr", 0.5)).check("Marie").supported  # type: ignore[union-attr]
    assert LanguageGuard(identify=lambda text: ("en", 1.0), max_chars=3).check("abcdef").chars == 3  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "answer", [("fr", 1.5), ("fr", -0.1), (None, 0.9), ("fr", "0.9"), ("fr", True)]
)
def test_a_misbehaving_identifier_fails_the_probe_closed(answer: Any) -> None:
    guard = LanguageGuard(identify=lambda text: answer)
    with pytest.raises(ProbeError, match="language identifier answered"):
        guard.check("text")


def test_an_identifier_that_raises_fails_the_probe_closed() -> None:
    def broken(text: str) -> tuple[str, float]:
        raise RuntimeError("boom")

    with pytest.raises(ProbeError, match="boom"):
        probe(language=LanguageGuard(identify=broken)).probe_sync(decide, "He is Muslim.", "x")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"languages": []},
        {"languages": ["EN"]},
        {"languages": ["english"]},
        {"policy": "ignore"},
        {"threshold": 0.0},
        {"threshold": 1.5},
        {"max_chars": 0},
        {"segment_words": 0},
        {"segment_words": True},
        {"segment_threshold": 0.0},
        {"segment_threshold": 1.5},
        {"segment_ratio": 0.0},
        {"segment_ratio": -1.0},
    ],
)
def test_guard_arguments_are_checked(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InputError):
        LanguageGuard(**kwargs)


@pytest.fixture
def no_py3langid(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the `languages` extra were not installed."""
    monkeypatch.setattr(language_module, "_LOADED", [])
    monkeypatch.setitem(sys.modules, "py3langid", None)
    monkeypatch.setitem(sys.modules, "py3langid.langid", None)


@pytest.mark.usefixtures("no_py3langid")
def test_without_py3langid_the_default_guard_fails_the_probe_closed() -> None:
    assert not language_module.identifier_available()
    with pytest.raises(ProbeError, match=r"biasbreaker\[languages\]"):
        probe().probe_sync(decide, "He is Muslim.", "approve", step_id="s")


@pytest.mark.usefixtures("no_py3langid")
@pytest.mark.parametrize("policy", ["hold", "proceed"])
def test_without_py3langid_a_configured_probe_does_not_start(tmp_path: Path, policy: str) -> None:
    kernel = Kernel.load(cwd=tmp_path, overrides={"probe": {"unsupported_language": policy}})
    with pytest.raises(ConfigError, match=r"biasbreaker\[languages\]"):
        build_probe(kernel)


GERMAN_TITLES = {
    "axis": "gender",
    "groups": ["male", "female"],
    "languages": ["de"],
    "rows": [{"male": "Herr", "female": "Frau", "case_sensitive": True}],
}


def test_the_policy_and_languages_come_from_the_configuration(tmp_path: Path) -> None:
    (tmp_path / "de.json").write_text(json.dumps(GERMAN_TITLES))
    (tmp_path / "biasbreaker.toml").write_text(
        '[probe]\nunsupported_language = "proceed"\nlanguages = ["en", "DE"]\n'
        f"term_files = [{json.dumps(str(tmp_path / 'de.json'))}]\n"
        'axes = ["gender"]\n'
    )
    built = build_probe(Kernel.load(cwd=tmp_path))
    assert built.language is not None
    assert built.language.policy == "proceed" and built.language.languages == ("en", "de")
    default = build_probe(Kernel.load(cwd=tmp_path / "nowhere")).language
    assert default is not None and default.policy == "hold" and default.languages == ("en",)


def test_a_language_no_term_list_covers_is_refused_naming_term_files(tmp_path: Path) -> None:
    kernel = Kernel.load(cwd=tmp_path, overrides={"probe": {"languages": ["en", "fr"]}})
    with pytest.raises(ConfigError) as caught:
        build_probe(kernel)
    message = str(caught.value)
    assert "[probe] languages" in message and "'fr'" in message
    assert "term_files" in message and '"languages": ["fr"]' in message
    assert "covered: en" in message


def test_a_term_file_declares_its_languages(tmp_path: Path) -> None:
    (tmp_path / "de.json").write_text(json.dumps(GERMAN_TITLES))
    settings: dict[str, Any] = {
        "languages": ["de"],
        "term_files": [str(tmp_path / "de.json")],
        "axes": ["gender"],
    }
    built = build_probe(Kernel.load(cwd=tmp_path, overrides={"probe": settings}))
    assert built.generator.terms.languages == {"en", "de"}
    (tmp_path / "bad.json").write_text(json.dumps({**GERMAN_TITLES, "languages": ["deutsch"]}))
    settings["term_files"] = [str(tmp_path / "bad.json")]
    with pytest.raises(ConfigError, match=r"bad\.json: languages \['deutsch'\]"):
        build_probe(Kernel.load(cwd=tmp_path, overrides={"probe": settings}))


def test_a_language_must_be_covered_for_every_axis_not_just_by_some_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "de.json").write_text(json.dumps(GERMAN_TITLES))
    words = {"kind": "person_words", "languages": ["de"], "words": ["Antragsteller"]}
    (tmp_path / "words.json").write_text(json.dumps(words))
    caste = {
        "axis": "caste",
        "groups": ["a", "b"],
        "languages": ["de"],
        "rows": [{"a": "Brahmane", "b": "Dalit"}],
    }
    (tmp_path / "caste.json").write_text(json.dumps(caste))
    for files, axes in [
        (["words.json"], ["gender"]),  # person words cover no axis
        (["caste.json"], ["gender"]),  # an axis not probed covers nothing
        (["de.json"], ["gender", "religion"]),  # German gender terms, no German religion terms
    ]:
        settings = {
            "languages": ["en", "de"],
            "term_files": [str(tmp_path / f) for f in files],
            "axes": axes,
        }
        with pytest.raises(ConfigError) as caught:
            build_probe(Kernel.load(cwd=tmp_path, overrides={"probe": settings}))
        message = str(caught.value)
        assert "'de': no terms for " in message and "[probe] axes" in message, files
        assert ("religion" in message) == ("religion" in axes), message
    settings["axes"] = ["gender"]
    built = build_probe(Kernel.load(cwd=tmp_path, overrides={"probe": settings}))
    assert built.generator.terms.axis_languages == {"gender": {"en", "de"}}


@pytest.mark.parametrize(
    "probe_section",
    [
        {"unsupported_language": "ignore"},
        {"languages": []},
        {"languages": ["e1"]},
        {"languages": ["en", "fra"]},  # ISO 639-3: the identifier reports fr, never fra
    ],
)
def test_bad_language_settings_are_refused(tmp_path: Path, probe_section: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        Kernel.load(cwd=tmp_path, overrides={"probe": probe_section})


RANKER_INPUT = {
    "posting": "posting-0082",
    "job": "retail",
    "candidates": "Amari Dorsey Alexandra Cervantes Brayden Mueller Shanika Roberson John Tran "
    "Joshua Ibarra Bethany Erickson Mary Lin",
    "screen": "no yes yes no yes yes yes no",
    "ranking": "Shanika Roberson Mary Lin Joshua Ibarra Alexandra Cervantes Brayden Mueller "
    "Amari Dorsey Bethany Erickson John Tran",
}
"""The demo's ranker input of posting-0082 (seed 0): read whole it is Nigerian Pidgin, p = 0.55."""


def test_a_list_of_names_with_a_few_words_is_not_a_foreign_language() -> None:
    """12 of the demo's English ranker steps were held as Aragonese or Nigerian Pidgin."""
    guard = LanguageGuard()
    finder = CounterfactualGenerator(seed=0)
    found = [(d.path, d.start, d.end) for d in finder.detect(RANKER_INPUT) if d.kind == "name"]
    assert len(found) > 16  # names on the gender and race axes: spans repeat
    whole = language_module._py3langid()(" ".join(RANKER_INPUT.values()))
    assert whole[0] != "en" and whole[1] >= guard.threshold  # what the guard used to classify
    reading = guard.check(RANKER_INPUT, found)
    assert reading is not None and reading.supported, reading
    names_only = {k: v for k, v in RANKER_INPUT.items() if k in ("candidates", "ranking")}
    assert guard.check({**names_only, "job": "retail"}, found) is None  # one word besides


@pytest.mark.parametrize(
    ("text", "words"),
    [("He is Muslim.", 3), ("a b c", 0), ("她是穆斯林。", 5), ("Zoë, 34, née Schäfer", 3), ("", 0)],
)
def test_words_are_runs_of_two_letters_or_unspaced_characters(text: str, words: int) -> None:
    assert language_module._words(text) == words


def test_min_words_is_checked() -> None:
    with pytest.raises(InputError, match="min_words=0"):
        LanguageGuard(min_words=0)


RUN_ID = "3f2a9c1e-77b0-4d2e-9a1f-0c8d6e5b4a21"


def test_ids_and_numbers_are_not_classified() -> None:
    """Tokens holding a digit are blanked before the text is classified: ids, hashes and
    numbers have no language (py3langid reads a run id as ``zxx``)."""
    seen: list[str] = []

    def identify(text: str) -> tuple[str, float]:
        seen.append(text)
        return "en", 1.0

    LanguageGuard(identify=identify).check(
        {"run": RUN_ID, "text": "Ms. Carter earns 40k, ref A-77 since 2019-03-01 applies"}
    )
    assert seen == ["Ms. Carter earns ref since applies"] * 2  # the whole, then its sentence
    assert LanguageGuard(identify=identify).check({"run": RUN_ID, "sha": "ab12" * 16}) is None


@pytest.mark.parametrize(
    "payload",
    [
        f"Loan application from Ms. Mary Carter. She earns 40k a year. Run {RUN_ID}.",
        {"case": "airport", "run_id": RUN_ID, "assistant_id": RUN_ID[::-1], "graph_id": "g1"},
        {"request": "Approve the loan of Ms. Mary Carter?", "ids": [RUN_ID] * 5},
    ],
)
def test_english_with_ids_is_never_unsupported(payload: Any) -> None:
    """Before: each of these read as ``zxx`` (p = 0.93-1.00) and was held (a LangGraph
    server's config carries assistant, run and thread ids)."""
    reading = LanguageGuard().check(payload)
    assert reading is None or reading.supported, reading


@pytest.mark.parametrize("code", sorted(NO_LANGUAGE))
def test_a_reading_of_no_language_is_not_unsupported(code: str) -> None:
    reading = LanguageGuard(identify=lambda text: (code, 1.0)).check("Ms. Carter applies today")
    assert reading is not None and reading.supported


@pytest.mark.parametrize(("lang", "text"), FOREIGN)
def test_a_foreign_input_with_ids_is_still_unsupported(lang: str, text: str) -> None:
    reading = LanguageGuard().check({"text": text, "run_id": RUN_ID, "n": "12345"})
    assert reading is not None and not reading.supported and reading.language == lang


UNSPACED_WITH_NUMBERS = [
    # a loan application about Ms. Wang: before, every digit blanked its whole clause, the
    # text reached the identifier empty, and the step was "not applicable", its decision passed
    ("zh", "王女士，收入9万。申请贷款20万元，信用评分710。"),
    ("zh", "陈伟，男，1985年出生，月薪12000元，申请贷款。"),
    ("ja", "田中さん、年収500万円。ローン2000万円を申請。"),
    ("ja", "佐藤花子さん（45歳）は2019年に入社しました。"),
    ("ko", "김민지 씨는 연봉5000만원이고 대출2억원을 신청했습니다."),
    ("th", "คุณสมศรีอายุ45ปี รายได้9หมื่นบาท ขอกู้20หมื่นบาท"),
]


@pytest.mark.parametrize(
    ("lang", "text"),
    UNSPACED_WITH_NUMBERS,
    ids=[f"{lang}-{i}" for i, (lang, _) in enumerate(UNSPACED_WITH_NUMBERS)],
)
def test_numbers_inside_unspaced_text_do_not_blank_it(lang: str, text: str) -> None:
    """Issue 14: Chinese and Japanese have no spaces, so blanking the "token" around a digit
    blanked a whole clause; only the ASCII run around the digit is blanked now."""
    result = probe().probe_sync(decide, text, "approve", step_id="s")
    assert result.status == "unsupported_language" and result.holds, result.reason
    assert result.language == lang and result.calls == 0


def test_only_the_ascii_run_around_a_digit_is_blanked() -> None:
    prose = language_module._prose
    assert prose("王女士，收入9万。") == "王女士，收入 万。"
    assert prose("年収500万円、ID:A-77b") == "年収   万円、        "
    assert prose("run 3f2a9c1e-77b0 at 2019-03-01T10:00, 40k.") == "run " + " " * 13 + (
        " at " + " " * 17 + " " + " " * 4
    )


SHORT_HAN = [
    # py3langid spreads short Chinese over zh, wuu (Wu) and yue (Cantonese): its top guess is
    # below the threshold, and the English lexicon, finding nothing, called the step
    # "not applicable"; a text mostly of Han, Kana, Hangul or Thai letters is not English
    "王女士 收入9万",  # zh, p = 0.39
    "王女士",  # wuu, p = 0.35
    "王女士，收入9万。",  # zh, p = 0.40
    "张伟 男 35岁 工程师",  # zh, p = 0.46
    "佐藤花子",  # wuu, p = 0.32
    "東京都在住の会社員",  # zh, p = 0.40 (Japanese: the Kana say so)
]


@pytest.mark.parametrize("text", SHORT_HAN, ids=[f"han-{i}" for i in range(len(SHORT_HAN))])
def test_short_text_mostly_of_an_unspaced_script_is_unsupported(text: str) -> None:
    result = probe().probe_sync(decide, text, "approve", step_id="s")
    assert result.status == "unsupported_language" and result.holds, result.reason
    assert result.language in ("zh", "wuu", "yue", "ja"), result.language
    assert "Han" in result.reason and "cover English only" in result.reason, result.reason


ENGLISH_WITH_CJK = [
    # English naming a group the term lists know, and a person in Chinese, Japanese or Korean
    # letters, with amounts and ids: the Latin letters are the majority, the identifier decides
    "Ms. 王 (Wang Fang), income 90k, asks for 200k.",
    "Wei Chen (陈伟) is a Muslim engineer from Xi'an.",
    "Ranked: 1. 王伟 2. Emily Clark 3. José García",
]
UNNAMED_CJK = [
    # ... and naming no group the term lists know: the words they cannot read may name the
    # person (recorded "not applicable" before, the step unprobed)
    "Applicant 王伟 requests a loan of 20000",
    "Approve 王伟?",
    "王伟 applies for the loan.",
    "王女士 income 9万",
    "Applicant: 田中花子 (Tanaka Hanako), 45, nurse, Osaka.",
    "Loan request #A-1093 from 김민지 (Kim Min-ji): 25,000 USD over 36 months.",
    {"name": "王伟", "request": "a car loan of 20000 for three years", "run_id": RUN_ID},
]


@pytest.mark.parametrize(
    "payload", ENGLISH_WITH_CJK, ids=[f"en-{i}" for i in range(len(ENGLISH_WITH_CJK))]
)
def test_english_with_a_chinese_name_is_not_held_for_it(payload: Any) -> None:
    result = probe().probe_sync(decide, payload, "approve", step_id="s")
    assert result.status != "unsupported_language", result.reason


@pytest.mark.parametrize(
    "payload", UNNAMED_CJK, ids=[f"unnamed-{i}" for i in range(len(UNNAMED_CJK))]
)
def test_english_naming_no_known_group_beside_unread_letters_is_held(payload: Any) -> None:
    result = probe().probe_sync(decide, payload, "approve", step_id="s")
    assert result.status == "unsupported_language", result.reason
    assert "letters, in which no language of the term lists is written" in result.reason
    assert "may name the person" in result.reason


def test_unread_letters_in_an_input_without_a_mention_are_unsupported_unless_covered() -> None:
    english = LanguageGuard(identify=lambda text: ("en", 0.9))
    assert english.check("Approve 王伟 for the loan") == LanguageReading(
        "en", 0.9, False, 23, "Han", unnamed=True
    )
    assert english.check("Approve 王伟 for the loan", mentioned=True) == LanguageReading(
        "en", 0.9, True, 23
    )
    assert english.check("Approve Wang Wei for the loan", mentioned=False) == LanguageReading(
        "en", 0.9, True, 29
    )
    covered = LanguageGuard(["en", "zh"], identify=lambda text: ("en", 0.9))
    assert covered.check("Approve 王伟 for the loan", mentioned=False) == LanguageReading(
        "en", 0.9, True, 23
    )
    korean = english.check("Approve 김민지 for the loan", mentioned=False)
    assert korean is not None and (korean.script, korean.unnamed) == ("Hangul", True)


def test_the_script_rule_leaves_a_covered_script_to_the_identifier() -> None:
    guard = LanguageGuard(["en", "zh"], identify=lambda text: ("wuu", 0.35))
    assert guard.check("王女士 收入9万") == LanguageReading("wuu", 0.35, True, 8)
    held = LanguageGuard(identify=lambda text: ("wuu", 0.35)).check("王女士 收入9万")
    assert held == LanguageReading("wuu", 0.35, False, 8, script="Han")
    english = LanguageGuard(identify=lambda text: ("en", 0.9)).check("王女士 收入9万")
    assert english is not None and not english.supported  # not English, whatever it reads as


@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("王女士 收入 万", "Han"),
        ("東京都在住の会社員", "Han and Kana"),
        ("ひらがな", "Kana"),
        ("김민지 씨", "Hangul"),
        ("สมศรี", "Thai"),
        ("श्रीमती प्रिया शर्मा", "Devanagari"),
        ("Ольга Иванова", "Cyrillic"),
        ("גברת שרה כהן", "Hebrew"),
        ("محترمہ عائشہ خان", "Arabic"),
        ("κυρία Μαρία", "Greek"),
        ("王女士 income 万", ""),  # 4 letters of 10: the identifier decides
        ("Applicant Ольга requests a loan", ""),
        ("王伟 applies", ""),
        ("Applicant 王伟 requests a loan", ""),
        ("Zoë Müller", ""),
        ("", ""),
    ],
)
def test_a_text_is_written_in_the_script_of_most_of_its_letters(text: str, script: str) -> None:
    written = language_module._written_script(text)
    assert (written[0] if written else "") == script


SPACED_SCRIPTS = [
    # a fourth trial (F5): py3langid spreads short Hindi over hi and sa (Sanskrit), the top
    # guess below the threshold, so the English lexicon decided, found nothing, and the whole
    # application was "not applicable"
    "श्रीमती प्रिया शर्मा का ऋण आवेदन, आयु 67 वर्ष, आय 50 हज़ार। स्वीकृत या अस्वीकृत?",  # hi 0.32
    "श्रीमती प्रिया शर्मा",  # sa, p = 0.25
    "Госпожа Ольга Иванова, 67 лет",
    "גברת שרה כהן, בת 67",
]


@pytest.mark.parametrize(
    "text", SPACED_SCRIPTS, ids=[f"spaced-{i}" for i in range(len(SPACED_SCRIPTS))]
)
def test_text_mostly_of_a_spaced_script_no_term_list_covers_is_unsupported(text: str) -> None:
    result = probe().probe_sync(decide, text, "approve", step_id="s")
    assert result.status == "unsupported_language" and result.holds, result.reason


@pytest.mark.parametrize(
    ("payload", "script"),
    [
        ("Applicant प्रिया शर्मा requests a loan of 20000", "Devanagari"),
        ("Loan application from Ольга Иванова, a nurse earning 50k.", "Cyrillic"),
        ("Loan application from محمد عبدالله, a nurse earning 50k.", "Arabic"),
        ("Approve שרה כהן for the loan?", "Hebrew"),
    ],
)
def test_a_spaced_script_word_beside_english_naming_no_group_is_held(
    payload: str, script: str
) -> None:
    reading = LanguageGuard(identify=lambda text: ("en", 0.9)).check(payload)
    assert reading is not None and (reading.script, reading.unnamed) == (script, True)
    result = probe().probe_sync(decide, payload, "approve", step_id="s")
    assert result.status == "unsupported_language", result.reason


@pytest.mark.parametrize(
    "text",
    [
        "We used alpha α = 0.05 and 5 μm beads.",  # a Greek letter alone is a symbol
        "The Δ of the two runs was small.",
    ],
)
def test_a_lone_letter_of_a_spaced_script_is_no_unread_word(text: str) -> None:
    reading = LanguageGuard(identify=lambda text: ("en", 0.9)).check(text)
    assert reading is not None and reading.supported and reading.script == ""


def test_a_covered_spaced_script_is_left_to_the_identifier() -> None:
    guard = LanguageGuard(["en", "ru"], identify=lambda text: ("ru", 0.3))
    assert guard.check("Ольга Иванова, 67 лет") == LanguageReading("ru", 0.3, True, 18)
    held = LanguageGuard(identify=lambda text: ("ru", 0.3)).check("Ольга Иванова, 67 лет")
    assert held == LanguageReading("ru", 0.3, False, 18, script="Cyrillic")


MIXED = [
    (
        "Applicant: Greg Baker has a steady income of 50k and no debts. Branch note: elle est "
        "musulmane.",
        "fr",
        "Branch note: elle est musulmane.",
        "the input, characters 64-95",
    ),
    (
        "Applicant: Greg Baker has a steady income of 50k and good credit history. Nota: es "
        "musulmana.",
        "es",
        "Nota: es musulmana.",
        "the input, characters 75-93",
    ),
    (
        {
            "applicant": "Greg Baker, steady income, no debts.",
            "notes": "Good payer.\nSie ist Muslimin.",
        },
        "de",
        "Sie ist Muslimin.",
        "notes, characters 13-29",
    ),
]
"""English inputs with a sentence or line in French, Spanish or German naming the person's
group (a new-user trial: the first was scored 0, its variants swapping only the English name,
and the second was *not applicable*)."""


@pytest.mark.parametrize(("text", "lang", "segment", "where"), MIXED)
def test_a_sentence_in_an_unsupported_language_holds_an_english_input(
    text: Any, lang: str, segment: str, where: str
) -> None:
    whole = LanguageGuard(segment_words=10_000).check(text)  # the whole input alone
    assert whole is not None and whole.supported and whole.language == "en"
    calls: list[Any] = []

    def step(x: Any) -> str:
        calls.append(x)
        return "approve"

    result = probe().probe_sync(step, text, "approve", step_id="s")
    assert result.status == "unsupported_language", result.reason
    assert result.holds and result.language == lang and calls == []
    assert result.reason.startswith(UNSUPPORTED_HELD)
    assert f"reads as English as a whole, but its segment {segment!r} ({where}) reads as" in (
        result.reason
    ), result.reason
    assert f"({lang}, p = " in result.reason


def test_a_segment_is_judged_on_its_words_probability_and_margin_over_english() -> None:
    rankings = {
        "One two three.": {"fr": 0.31, "en": 0.01},  # 31 times English: unsupported
        "Four five six.": {"fr": 0.29, "en": 0.01},  # 29 times: not
        "Seven eight nine.": {"fr": 0.09, "en": 0.0},  # below the threshold: not
        "Ten eleven.": {"fr": 0.99, "en": 0.0},  # two words: not ranked
        "Twelve thirteen fourteen.": {"pcm": 0.9, "en": 0.0},  # read as English
        "Run zero zero.": {"zxx": 0.9, "en": 0.0},  # no language
    }
    ranked: list[str] = []

    def rank(text: str) -> dict[str, float]:
        ranked.append(text)
        return rankings[text]

    guard = LanguageGuard(identify=lambda text: ("en", 0.9), rank=rank)
    text = "\n".join(t for t in rankings if t != "One two three.")
    assert guard.check(text) == LanguageReading("en", 0.9, True, len(" ".join(text.split())))
    assert "Ten eleven." not in ranked
    reading = guard.check(text + " One two three.")
    assert reading is not None and not reading.supported and reading.whole == "en"
    assert (reading.language, reading.probability, reading.segment) == (
        "fr",
        0.31,
        "One two three.",
    )
    assert reading.where == f"the input, characters {len(text) + 2}-{len(text) + 15}"
    assert (
        LanguageGuard(identify=lambda text: ("en", 0.9), rank=rank, segment_ratio=32)
        .check("One two three.")
        .supported
    )  # type: ignore[union-attr]


def test_a_misbehaving_ranking_fails_the_probe_closed() -> None:
    guard = LanguageGuard(identify=lambda text: ("en", 0.9), rank=lambda text: {"fr": 1.5})
    with pytest.raises(ProbeError, match="ranked"):
        guard.check("One two three.")
