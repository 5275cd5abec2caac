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

from biasbreaker.config import Settings, load_settings
from biasbreaker.errors import ConfigError
from biasbreaker.hookspecs import hookimpl


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


def test_config_rows_never_show_secrets(isolated_config: Path) -> None:
    (isolated_config / "biasbreaker.toml").write_text(
        '[plugin.openai-compatible]\napi_key = "sk-live-123"\napi_key_env = "OPENAI_API_KEY"\n'
        'model = "gpt"\n'
    )
    rows = {k: v for k, v, _ in load_settings().rows()}
    assert rows["plugin.openai-compatible.api_key"] == "<redacted>"
    assert rows["plugin.openai-compatible.api_key_env"] == "OPENAI_API_KEY"
    assert rows["plugin.openai-compatible.model"] == "gpt"
    assert "sk-live-123" not in repr(rows)


def test_the_demo_section_validates_its_sizes_and_preset(isolated_config: Path) -> None:
    settings = load_settings().settings
    assert settings.demo.postings == 240 and settings.demo.fake_preset == "bloomberg-gpt35"
    (isolated_config / "biasbreaker.toml").write_text("[demo]\npostings = 100\nworkers = 1\n")
    assert load_settings().settings.demo.postings == 100
    for bad in ("postings = 3", 'fake_preset = "bloomberg-gpt5"', "fake_bias = 1.5"):
        (isolated_config / "biasbreaker.toml").write_text(f"[demo]\n{bad}\n")
        with pytest.raises(ConfigError, match=r"demo\."):
            load_settings()
