"""Configuration: six sources in order, provenance, errors, plugin options (second pass)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from biasbreaker.config import LoadedSettings, Settings, load_settings
from biasbreaker.errors import ConfigError
from biasbreaker.hookspecs import hookimpl
from biasbreaker.resolution import typed_plugin_tables


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_precedence_across_all_six_sources(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Each source sets `kappa` (so the winner is visible) plus one key only it sets.
    _write(
        isolated_config / "pyproject.toml",
        '[project]\nname = "x"\n[tool.biasbreaker.breaker]\nkappa = 0.6\ncooldown_steps = 9\n',
    )
    _write(
        isolated_config / "biasbreaker.toml",
        "[breaker]\nkappa = 0.5\nmax_retries = 7\n",
    )
    explicit = _write(tmp_path / "explicit.toml", "[breaker]\nkappa = 0.4\ntau_warn = 0.11\n")
    monkeypatch.setenv("BIASBREAKER_BREAKER__KAPPA", "0.3")
    monkeypatch.setenv("BIASBREAKER_BREAKER__TAU_ENTER", "0.9")

    def load(**kw: Any) -> Any:
        return load_settings(explicit, cwd=isolated_config, **kw)

    loaded = load(overrides={"breaker": {"kappa": 0.2}})
    b = loaded.settings.breaker
    assert b.kappa == 0.2 and loaded.source_of("breaker.kappa") == "argument"
    assert b.tau_enter == 0.9
    assert loaded.source_of("breaker.tau_enter") == "env BIASBREAKER_BREAKER__TAU_ENTER"
    assert b.tau_warn == 0.11 and loaded.source_of("breaker.tau_warn") == str(explicit)
    assert b.max_retries == 7 and loaded.source_of("breaker.max_retries") == "biasbreaker.toml"
    assert b.cooldown_steps == 9
    assert loaded.source_of("breaker.cooldown_steps") == "pyproject.toml [tool.biasbreaker]"
    assert b.tau_exit == 0.2 and loaded.source_of("breaker.tau_exit") == "default"

    # peel the sources off one by one: the next one down wins
    assert load().settings.breaker.kappa == 0.3
    monkeypatch.delenv("BIASBREAKER_BREAKER__KAPPA")
    assert load().settings.breaker.kappa == 0.4
    assert load_settings(cwd=isolated_config).settings.breaker.kappa == 0.5
    (isolated_config / "biasbreaker.toml").unlink()
    assert load_settings(cwd=isolated_config).settings.breaker.kappa == 0.6
    (isolated_config / "pyproject.toml").unlink()
    assert load_settings(cwd=isolated_config).settings.breaker.kappa == 0.05


def test_env_values_arrive_as_strings_and_are_coerced(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIASBREAKER_BREAKER__MAX_RETRIES", "4")
    monkeypatch.setenv("BIASBREAKER_SEED", "17")
    monkeypatch.setenv("BIASBREAKER_TRACE__FSYNC", "true")
    monkeypatch.setenv("BIASBREAKER_PROBE__SCORERS", '["lexical", "sentiment"]')
    s = load_settings().settings
    assert s.breaker.max_retries == 4
    assert s.seed == 17
    assert s.trace.fsync is True
    assert s.probe.scorers == ["lexical", "sentiment"]


def test_env_value_that_does_not_parse_names_the_variable(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIASBREAKER_BREAKER__MAX_RETRIES", "many")
    with pytest.raises(
        ConfigError, match=r"breaker.max_retries = 'many' \(env BIASBREAKER_BREAKER__MAX_RETRIES\)"
    ):
        load_settings()


def test_toml_syntax_error_reports_file_and_line(isolated_config: Path) -> None:
    _write(isolated_config / "biasbreaker.toml", "[breaker]\ntau_enter = 0.4\nkappa = = 2\n")
    with pytest.raises(ConfigError, match=r"biasbreaker.toml: invalid TOML: .*line 3"):
        load_settings()


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[breaker]\ntau_entr = 0.4\n", "breaker.tau_entr"),
        ("[brakeer]\ntau_enter = 0.4\n", "brakeer"),
        ("colour = 'blue'\n", "colour"),
    ],
)
def test_unknown_keys_are_errors(isolated_config: Path, text: str, key: str) -> None:
    _write(isolated_config / "biasbreaker.toml", text)
    with pytest.raises(ConfigError, match=rf"unknown key {key}.*\(biasbreaker.toml\)"):
        load_settings()


def test_unknown_env_variable_is_an_error(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIASBREAKER_BRAKER__TAU_ENTER", "0.4")
    with pytest.raises(ConfigError, match="unknown environment variable BIASBREAKER_BRAKER"):
        load_settings()
    monkeypatch.delenv("BIASBREAKER_BRAKER__TAU_ENTER")
    monkeypatch.setenv("BIASBREAKER_BREAKER__TAU_ENTR", "0.4")
    with pytest.raises(ConfigError, match="unknown key breaker.tau_entr"):
        load_settings()


def test_out_of_range_value_and_dead_band(isolated_config: Path) -> None:
    _write(isolated_config / "biasbreaker.toml", "[probe]\nprobe_rate = 1.5\n")
    with pytest.raises(
        ConfigError, match=r"probe.probe_rate = 1.5 \(biasbreaker.toml\): .*less than or equal to 1"
    ):
        load_settings()
    with pytest.raises(ConfigError, match="tau_enter=0.2 must be greater than tau_exit=0.2"):
        load_settings(overrides={"breaker": {"tau_enter": 0.2, "tau_exit": 0.2}})


def test_missing_config_file(isolated_config: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_settings(isolated_config / "nope.toml")


def test_a_config_path_that_is_no_regular_file_is_named_so(isolated_config: Path) -> None:
    """``--config /dev/null`` exists: it is not a regular file, not "no such file"."""
    with pytest.raises(ConfigError, match="/dev/null: not a regular file; pass the path"):
        load_settings(Path("/dev/null"))


class TopK(BaseModel):
    model_config = ConfigDict(extra="forbid")
    top_k: int = Field(5, gt=0, description="results returned")
    corpus: str = Field("evidence.jsonl", description="corpus path")


class _Retriever:
    def __init__(self, options: TopK) -> None:
        self.options = options


class RetrieverPlugin:
    @hookimpl
    def retriever(self, register: Any) -> None:
        register("bm25", lambda options, context: _Retriever(options), options=TopK)


def test_plugin_options_validated_by_the_plugin_model(
    register_plugin: Any, make_kernel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    register_plugin(RetrieverPlugin(), name="bm25", distribution="bb-retriever-bm25", version="0.3")
    monkeypatch.setenv("BIASBREAKER_PLUGIN__BM25__TOP_K", "3")
    kernel = make_kernel({"intervention": {"retriever": "bm25"}})
    retriever = kernel.build("retriever")
    assert isinstance(retriever, _Retriever)
    assert retriever.options.top_k == 3  # arrived as the string "3"


def test_invalid_plugin_options_name_key_value_and_source(
    register_plugin: Any, make_kernel: Any, isolated_config: Path
) -> None:
    register_plugin(RetrieverPlugin(), name="bm25", distribution="bb-retriever-bm25", version="0.3")
    _write(
        isolated_config / "biasbreaker.toml",
        '[intervention]\nretriever = "bm25"\n[plugin.bm25]\ntop_k = 0\n',
    )
    kernel = make_kernel()
    with pytest.raises(ConfigError) as info:
        kernel.build("retriever")
    message = str(info.value)
    assert "retriever 'bm25' (bb-retriever-bm25 0.3) options invalid" in message
    assert "plugin.bm25.top_k = 0 (biasbreaker.toml): Input should be greater than 0" in message


def test_unknown_plugin_option_and_unknown_plugin_table(
    register_plugin: Any, make_kernel: Any
) -> None:
    register_plugin(RetrieverPlugin(), name="bm25")
    kernel = make_kernel({"intervention": {"retriever": "bm25"}, "plugin": {"bm25": {"topk": 3}}})
    with pytest.raises(ConfigError, match="unknown key plugin.bm25.topk .*allowed: corpus, top_k"):
        kernel.build("retriever")
    kernel = make_kernel({"plugin": {"bm52": {"top_k": 3}}})
    with pytest.raises(
        ConfigError,
        match=r"\[plugin.bm52\] .*configures no installed implementation; installed names: bm25",
    ):
        kernel.check()


finite = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@st.composite
def settings_dicts(draw: st.DrawFn) -> dict[str, Any]:
    exit_ = draw(st.floats(min_value=0.0, max_value=0.98, allow_nan=False, exclude_min=True))
    enter = draw(st.floats(min_value=exit_ + 0.01, max_value=1.0, allow_nan=False))
    names = st.from_regex(r"[a-z][a-z0-9]{0,8}(-[a-z0-9]{1,5}){0,2}", fullmatch=True)
    return {
        "seed": draw(st.integers(0, 2**63 - 1)),
        "probe": {
            "k": draw(st.integers(1, 64)),
            "r": draw(st.integers(0, 64)),
            "probe_rate": draw(finite),
            "scorers": draw(st.lists(names, min_size=1, max_size=4)),
        },
        "breaker": {
            "tau_enter": enter,
            "tau_exit": exit_,
            "tau_warn": draw(st.floats(0.0, 1.0, exclude_min=True)),
            "kappa": draw(st.floats(min_value=1e-6, max_value=1.0, allow_nan=False)),
            "cooldown_steps": draw(st.integers(0, 10_000)),
            "max_retries": draw(st.integers(1, 100)),
        },
        "intervention": {
            "aggregator": draw(names),
            # a panel is at least two distinct skeptics (InterventionSettings rejects fewer)
            "skeptics": draw(st.lists(names, min_size=2, max_size=4, unique=True)),
        },
        "plugin": draw(
            st.dictionaries(
                names, st.dictionaries(names, st.integers(-5, 5), max_size=3), max_size=3
            )
        ),
    }


@given(settings_dicts())
def test_config_round_trips_through_toml(tmp_path_factory: Any, data: dict[str, Any]) -> None:
    original = Settings.model_validate(data)
    path = tmp_path_factory.mktemp("rt") / "biasbreaker.toml"
    # TOML has no null: optional settings left unset are simply absent from the file.
    path.write_bytes(tomli_w.dumps(original.model_dump(mode="json", exclude_none=True)).encode())
    loaded = load_settings(path, cwd=path.parent.parent)
    assert loaded.settings == original
    for key, _, source in loaded.rows():
        assert source in (str(path), "default"), key
    assert math.isfinite(loaded.settings.breaker.tau_enter)


def test_plugin_table_names_from_the_shell_use_underscores_for_hyphens(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIASBREAKER_PLUGIN__OPENAI_COMPATIBLE__MODEL", "llama3")
    loaded = load_settings()
    assert loaded.settings.plugin == {"openai-compatible": {"model": "llama3"}}
    assert (
        loaded.source_of("plugin.openai-compatible.model")
        == "env BIASBREAKER_PLUGIN__OPENAI_COMPATIBLE__MODEL"
    )
    with pytest.raises(ConfigError, match=r"\[plugin.openai-compatible\] is given twice"):
        load_settings(
            overrides={"plugin": {"openai_compatible": {"model": "a"}, "openai-compatible": {}}}
        )


# --- a hyphenated plugin's options from the environment (new-user report 2, bug 2) -------


@pytest.mark.parametrize(
    "var",
    [
        "BIASBREAKER_PLUGIN__STRICT_RT__TOP_K",  # the documented spelling (`export` accepts it)
        "BIASBREAKER_PLUGIN__STRICT-RT__TOP_K",  # the plugin's own hyphen (`env` accepts it)
        "biasbreaker_plugin__Strict_Rt__top_k",  # names are matched case-insensitively
    ],
)
@pytest.mark.parametrize("with_table", [True, False], ids=["with-table", "without-table"])
def test_an_env_variable_overrides_one_key_of_a_hyphenated_plugin_table(
    register_plugin: Any,
    make_kernel: Any,
    isolated_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    var: str,
    with_table: bool,
) -> None:
    register_plugin(StrictPlugin(), name="strict-rt", distribution="bb-strict", version="1")
    table = '[plugin.strict-rt]\ntop_k = 2\nendpoint = "x"\n' if with_table else ""
    _write(
        isolated_config / "biasbreaker.toml", f'[intervention]\nretriever = "strict-rt"\n{table}'
    )
    if not with_table:
        monkeypatch.setenv("BIASBREAKER_PLUGIN__STRICT_RT__ENDPOINT", "y")
    monkeypatch.setenv(var, "6")
    kernel = make_kernel()
    loaded = kernel.loaded
    assert loaded.settings.plugin["strict-rt"]["top_k"] == "6"  # raw until the plugin's model
    assert loaded.source_of("plugin.strict-rt.top_k") == f"env {var}"  # the variable set
    endpoint = loaded.source_of("plugin.strict-rt.endpoint")
    assert endpoint == (
        "biasbreaker.toml" if with_table else "env BIASBREAKER_PLUGIN__STRICT_RT__ENDPOINT"
    )
    options = kernel.build("retriever")
    assert options == StrictOptions(top_k=6, endpoint="x" if with_table else "y")
    rows = {k: (v, s) for k, v, s in loaded.rows(typed_plugin_tables(loaded, kernel.registry))}
    assert rows["plugin.strict-rt.top_k"] == (6, f"env {var}")  # typed like the option
    assert rows["plugin.strict-rt.endpoint"][0] == ("x" if with_table else "y")


def test_typed_plugin_tables_leave_an_invalid_table_raw(
    register_plugin: Any, make_kernel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    register_plugin(StrictPlugin(), name="strict-rt")
    monkeypatch.setenv("BIASBREAKER_PLUGIN__STRICT_RT__TOP_K", "many")
    kernel = make_kernel({"plugin": {"strict-rt": {"endpoint": "x"}}, "seed": 1})
    assert typed_plugin_tables(kernel.loaded, kernel.registry) == {}
    rows = {
        k: v for k, v, _ in kernel.loaded.rows(typed_plugin_tables(kernel.loaded, kernel.registry))
    }
    assert rows["plugin.strict-rt.top_k"] == "many"  # as given: `config --check` says why


def test_one_key_under_two_spellings_is_an_error_naming_both(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIASBREAKER_PLUGIN__OPENAI_COMPATIBLE__MAX_RETRIES", "5")
    monkeypatch.setenv("BIASBREAKER_PLUGIN__OPENAI-COMPATIBLE__MODEL", "m")
    loaded = load_settings()  # different keys under two spellings merge into one table
    assert loaded.settings.plugin == {"openai-compatible": {"max_retries": "5", "model": "m"}}
    monkeypatch.setenv("BIASBREAKER_PLUGIN__OPENAI-COMPATIBLE__MAX_RETRIES", "6")
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert "BIASBREAKER_PLUGIN__OPENAI-COMPATIBLE__MAX_RETRIES and " in message
    assert "BIASBREAKER_PLUGIN__OPENAI_COMPATIBLE__MAX_RETRIES both set" in message
    assert "plugin.openai-compatible.max_retries" in message


def test_plugin_tables_merge_across_files_whatever_their_spelling(
    isolated_config: Path, tmp_path: Path
) -> None:
    _write(isolated_config / "biasbreaker.toml", "[plugin.openai_compatible]\nmax_retries = 1\n")
    explicit = _write(tmp_path / "x.toml", '[plugin.openai-compatible]\nmodel = "m"\n')
    loaded = load_settings(explicit)
    assert loaded.settings.plugin == {"openai-compatible": {"max_retries": 1, "model": "m"}}
    assert loaded.source_of("plugin.openai-compatible.max_retries") == "biasbreaker.toml"
    both = _write(
        tmp_path / "both.toml",
        '[plugin.openai_compatible]\nmodel = "a"\n[plugin.openai-compatible]\nmodel = "b"\n',
    )
    with pytest.raises(ConfigError) as info:
        load_settings(both)
    assert str(info.value) == (
        f"{both}: [plugin.openai-compatible] is given twice (as 'openai_compatible' and "
        "'openai-compatible'); keep one"
    )


def test_a_secret_in_a_file_is_refused_naming_the_key_not_the_value(
    isolated_config: Path,
) -> None:
    (isolated_config / "biasbreaker.toml").write_text(
        '[plugin.openai-compatible]\napi_key = "sk-live-123"\napi_key_env = "OPENAI_API_KEY"\n'
        'model = "gpt"\n'
    )
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert "plugin.openai-compatible.api_key (biasbreaker.toml)" in message
    assert "api_key_env" in message and "sk-live-123" not in message


def test_config_rows_never_show_secrets(isolated_config: Path) -> None:
    # a tree built in Python skips the refusal of load_settings; its rows still hide the key
    settings = Settings(
        plugin={
            "openai-compatible": {
                "api_key": "sk-live-123",
                "api_key_env": "OPENAI_API_KEY",
                "model": "gpt",
                "headers": {"Authorization": "Bearer abc-123-def"},
            }
        }
    )
    rows = {k: v for k, v, _ in LoadedSettings(settings).rows()}
    assert rows["plugin.openai-compatible.api_key"] == "<redacted>"
    assert rows["plugin.openai-compatible.api_key_env"] == "OPENAI_API_KEY"
    assert rows["plugin.openai-compatible.model"] == "gpt"
    assert rows["plugin.openai-compatible.headers.Authorization"] == "<redacted>"
    assert "sk-live-123" not in repr(rows) and "abc-123-def" not in repr(rows)


# --- environment lists and tables (new-user report, bug 7) ---------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("lexical", ["lexical"]),
        ("lexical,sentiment", ["lexical", "sentiment"]),
        (" lexical , sentiment ,", ["lexical", "sentiment"]),
        ('["lexical", "sentiment"]', ["lexical", "sentiment"]),
    ],
)
def test_env_lists_are_json_or_comma_separated(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch, raw: str, expected: list[str]
) -> None:
    monkeypatch.setenv("BIASBREAKER_PROBE__SCORERS", raw)
    loaded = load_settings()
    assert loaded.settings.probe.scorers == expected
    assert loaded.source_of("probe.scorers") == "env BIASBREAKER_PROBE__SCORERS"
    # Settings() read directly (no load_settings) decodes the environment the same way
    assert Settings().probe.scorers == expected


def test_env_list_with_broken_json_names_the_variable(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIASBREAKER_PROBE__AXES", '["gender", "race"')
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert 'BIASBREAKER_PROBE__AXES=\'["gender", "race"\'' in message
    assert "not valid JSON" in message
    assert "comma-separated" in message


def test_env_table_must_be_a_json_object_naming_the_variable(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIASBREAKER_PROBE__GROUPS", "gender")
    with pytest.raises(ConfigError, match=r"BIASBREAKER_PROBE__GROUPS='gender' .*JSON object"):
        load_settings()
    monkeypatch.setenv("BIASBREAKER_PROBE__GROUPS", '{"gender": ["male", "female"]}')
    assert load_settings().settings.probe.groups == {"gender": ["male", "female"]}
    monkeypatch.delenv("BIASBREAKER_PROBE__GROUPS")
    monkeypatch.setenv("BIASBREAKER_PROBE__GROUPS__RELIGION", "christian,muslim")
    assert load_settings().settings.probe.groups == {"religion": ["christian", "muslim"]}


def test_env_section_as_json_and_a_conflicting_key(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIASBREAKER_BREAKER", '{"tau_enter": 0.5, "tau_exit": 0.3}')
    assert load_settings().settings.breaker.tau_enter == 0.5
    monkeypatch.setenv("BIASBREAKER_BREAKER__KAPPA", "0.1")
    with pytest.raises(
        ConfigError,
        match="BIASBREAKER_BREAKER and BIASBREAKER_BREAKER__KAPPA both set breaker; keep one",
    ):
        load_settings()


# --- values from files keep their type (bug 8) ---------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "shown", "expected"),
    [
        ("[breaker]\nmax_retries = true\n", "breaker.max_retries", "true", "an integer"),
        ("[breaker]\ncooldown_steps = false\n", "breaker.cooldown_steps", "false", "an integer"),
        ("[probe]\nk = true\n", "probe.k", "true", "an integer"),
        ("[probe]\nk = 3.0\n", "probe.k", "3.0", "an integer"),
        ("[probe]\nnames = 1\n", "probe.names", "1", "true or false"),
        ('[breaker]\ntau_enter = "0.4"\n', "breaker.tau_enter", '"0.4"', "a number"),
        ("[breaker]\ntau_enter = true\n", "breaker.tau_enter", "true", "a number"),
        ("seed = '7'\n", "seed", '"7"', "an integer"),
        ('[probe]\nscorers = "lexical"\n', "probe.scorers", '"lexical"', "a list of strings"),
    ],
)
def test_file_values_must_have_the_field_type(
    isolated_config: Path, text: str, key: str, shown: str, expected: str
) -> None:
    _write(isolated_config / "biasbreaker.toml", text)
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert f"{key} = {shown} (biasbreaker.toml): expected {expected}" in message
    assert "not converted" in message
    assert message.count(key + " ") == 1  # reported once, not again by the ordinary validation


@pytest.mark.parametrize(
    ("overrides", "key", "shown", "expected"),
    [
        ({"probe": {"k": True}}, "probe.k", "true", "an integer"),
        ({"probe": {"k": "4"}}, "probe.k", '"4"', "an integer"),
        ({"probe": {"k": 3.0}}, "probe.k", "3.0", "an integer"),
        ({"breaker": {"tau_enter": "0.4"}}, "breaker.tau_enter", '"0.4"', "a number"),
        ({"probe": {"scorers": "decision"}}, "probe.scorers", '"decision"', "a list of strings"),
    ],
)
def test_argument_values_must_have_the_field_type(
    isolated_config: Path, overrides: dict[str, Any], key: str, shown: str, expected: str
) -> None:
    """Explicit arguments (``guard(builder, {...})``) are not converted either: a trial's
    ``{"k": True}`` ran as ``k = 1`` and ``"0.4"`` was read as a number."""
    with pytest.raises(ConfigError) as info:
        load_settings(overrides=overrides)
    message = str(info.value)
    assert f"{key} = {shown} (argument): expected {expected}" in message
    assert "values given as arguments are not converted" in message
    assert message.count(key + " ") == 1


def test_argument_values_of_the_right_type_pass(isolated_config: Path) -> None:
    s = load_settings(overrides={"breaker": {"tau_enter": 1}, "probe": {"k": 3}}).settings
    assert (s.breaker.tau_enter, s.probe.k) == (1.0, 3)  # an integer is a number


def test_file_values_of_the_right_type_pass_and_env_strings_are_coerced(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(
        isolated_config / "biasbreaker.toml",
        "[breaker]\ntau_enter = 1\n[probe]\nterm_files = ['terms.json']\n"
        "[calibration]\ncalibrated_on = 2026-11-29\n",
    )
    loaded = load_settings()
    assert loaded.settings.breaker.tau_enter == 1.0  # an integer is a number
    assert loaded.settings.probe.term_files == [Path("terms.json")]
    assert str(loaded.settings.calibration.calibrated_on) == "2026-11-29"
    assert loaded.files == ("biasbreaker.toml",)
    # the same wrong-typed value is fine when it comes from the environment (always a string)
    monkeypatch.setenv("BIASBREAKER_BREAKER__MAX_RETRIES", "3")
    monkeypatch.setenv("BIASBREAKER_PROBE__NAMES", "0")
    s = load_settings().settings
    assert (s.breaker.max_retries, s.probe.names) == (3, False)


def test_a_wrong_typed_file_value_overridden_by_the_environment_is_not_used(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(isolated_config / "biasbreaker.toml", '[breaker]\nkappa = "0.1"\n')
    monkeypatch.setenv("BIASBREAKER_BREAKER__KAPPA", "0.2")
    assert load_settings().settings.breaker.kappa == 0.2


def test_nan_and_inf_are_rejected_as_not_finite(isolated_config: Path) -> None:
    _write(isolated_config / "biasbreaker.toml", "[breaker]\ntau_enter = nan\nkappa = inf\n")
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert "breaker.tau_enter = nan (biasbreaker.toml): Input should be a finite number" in message
    assert "breaker.kappa = inf (biasbreaker.toml): Input should be a finite number" in message


def test_a_missing_required_key_says_what_to_set(isolated_config: Path) -> None:
    _write(isolated_config / "biasbreaker.toml", "[calibration.control]\nmean = 0.1\nstd = 0.05\n")
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert "calibration.control.n_steps is required and has no default" in message
    assert "the rest of [calibration.control] comes from biasbreaker.toml" in message
    assert "BIASBREAKER_CALIBRATION__CONTROL__N_STEPS" in message
    assert "{" not in message  # not the parent table's value


class StrictOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    top_k: int = Field(5, gt=0, description="results returned")
    stem: bool = Field(True, description="stem words")
    stopwords: list[str] = Field(default_factory=list, description="words ignored")
    endpoint: str = Field(description="where the index lives")


class StrictPlugin:
    @hookimpl
    def retriever(self, register: Any) -> None:
        register("strict-rt", lambda options, context: options, options=StrictOptions)


def test_plugin_options_from_files_keep_their_type_and_env_is_decoded(
    register_plugin: Any, make_kernel: Any, isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    register_plugin(StrictPlugin(), name="strict-rt", distribution="bb-strict", version="1")
    _write(
        isolated_config / "biasbreaker.toml",
        '[intervention]\nretriever = "strict-rt"\n'
        '[plugin.strict-rt]\ntop_k = "3"\nstem = 0\nendpoint = "x"\n',
    )
    with pytest.raises(ConfigError) as info:
        make_kernel().build("retriever")
    message = str(info.value)
    assert 'plugin.strict-rt.top_k = "3" (biasbreaker.toml): expected an integer' in message
    assert "plugin.strict-rt.stem = 0 (biasbreaker.toml): expected true or false" in message
    # the environment is strings: coerced for scalars, split or JSON-decoded for lists
    _write(isolated_config / "biasbreaker.toml", '[intervention]\nretriever = "strict-rt"\n')
    monkeypatch.setenv("BIASBREAKER_PLUGIN__STRICT_RT__TOP_K", "3")
    monkeypatch.setenv("BIASBREAKER_PLUGIN__STRICT_RT__STEM", "false")
    monkeypatch.setenv("BIASBREAKER_PLUGIN__STRICT_RT__STOPWORDS", "the,a")
    monkeypatch.setenv("BIASBREAKER_PLUGIN__STRICT_RT__ENDPOINT", "http://x")
    options = make_kernel().build("retriever")
    assert options == StrictOptions(
        top_k=3, stem=False, stopwords=["the", "a"], endpoint="http://x"
    )
    monkeypatch.setenv("BIASBREAKER_PLUGIN__STRICT_RT__STOPWORDS", '["the", "an"]')
    assert make_kernel().build("retriever").stopwords == ["the", "an"]


def test_a_missing_required_plugin_option_says_what_to_set(
    register_plugin: Any, make_kernel: Any
) -> None:
    register_plugin(StrictPlugin(), name="strict-rt")
    kernel = make_kernel({"intervention": {"retriever": "strict-rt"}})
    with pytest.raises(ConfigError) as info:
        kernel.build("retriever")
    message = str(info.value)
    assert "plugin.strict-rt.endpoint is required and has no default" in message
    assert "set endpoint = ... under [plugin.strict-rt]" in message
    assert "BIASBREAKER_PLUGIN__STRICT_RT__ENDPOINT" in message
    assert "= {}" not in message


# --- one message per problem (bug 10) ------------------------------------------------------


def test_an_invalid_selected_plugin_table_is_reported_once(
    register_plugin: Any, make_kernel: Any
) -> None:
    register_plugin(RetrieverPlugin(), name="bm25", distribution="bb-retriever-bm25", version="0.3")
    kernel = make_kernel({"intervention": {"retriever": "bm25"}, "plugin": {"bm25": {"top_k": 0}}})
    with pytest.raises(ConfigError) as info:
        kernel.check()
    # (the bare test host lacks the first-party plugins, so the defaults are problems too)
    assert str(info.value).count("plugin.bm25.top_k = 0") == 1


def test_the_demo_section_validates_its_sizes_and_preset(isolated_config: Path) -> None:
    settings = load_settings().settings
    assert settings.demo.postings == 240 and settings.demo.fake_preset == "bloomberg-gpt35"
    (isolated_config / "biasbreaker.toml").write_text("[demo]\npostings = 100\nworkers = 1\n")
    assert load_settings().settings.demo.postings == 100
    for bad in ("postings = 3", 'fake_preset = "bloomberg-gpt5"', "fake_bias = 1.5"):
        (isolated_config / "biasbreaker.toml").write_text(f"[demo]\n{bad}\n")
        with pytest.raises(ConfigError, match=r"demo\."):
            load_settings()


def test_a_plugin_table_set_as_json_from_the_environment_shows_once(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIASBREAKER_PLUGIN__FAKE__WEIGHTS", '{"christian": 2}')
    # raw (before the plugin validates it) the variable's text is one row
    rows = [r for r in load_settings().rows() if r[0].startswith("plugin.fake.weights")]
    assert rows == [
        ("plugin.fake.weights", '{"christian": 2}', "env BIASBREAKER_PLUGIN__FAKE__WEIGHTS")
    ]


def test_an_empty_table_sets_none_of_its_keys(tmp_path: Path) -> None:
    """An empty ``[probe]`` header made every probe key read as set by the file, so the demo,
    which keeps its own defaults for keys left at theirs, ran with r = 2 instead of its 0."""
    (tmp_path / "b.toml").write_text("[probe]\n\n[breaker]\ntau_enter = 0.4\n[plugin.lexical]\n")
    loaded = load_settings(config_file=tmp_path / "b.toml", cwd=tmp_path)
    assert loaded.source_of("probe.r") == "default"
    assert loaded.source_of("breaker.tau_enter").endswith("b.toml")
    assert loaded.source_of("breaker.tau_exit") == "default"
    assert loaded.source_of("plugin.lexical.metric") == "default"
