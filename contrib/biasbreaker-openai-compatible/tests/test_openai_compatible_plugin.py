"""The installed distribution: entry point, configuration, CLI listing, lazy imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
from biasbreaker_openai_compatible.testing import ChatServer
from typer.testing import CliRunner

from biasbreaker.cli import app
from biasbreaker.errors import ConfigError, LLMError, PluginError
from biasbreaker.kernel import Kernel
from biasbreaker.llm import LLMClient, LLMRequest, complete_sync

DIST = "biasbreaker-openai-compatible"
KEY = "sk-proj-Zq8TestKeyThatMustNeverLeak0123456789"


def _write_config(directory: Path, body: str) -> Path:
    path = directory / "biasbreaker.toml"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def test_plugin_is_installed() -> None:
    eps = [
        ep for ep in metadata.entry_points(group="biasbreaker") if ep.name == "openai-compatible"
    ]
    assert len(eps) == 1
    ep = eps[0]
    assert ep.value == "biasbreaker_openai_compatible.plugin"
    assert ep.dist is not None and ep.dist.metadata["Name"] == DIST
    kernel = Kernel.load(overrides={"llm": {"client": "openai-compatible"}})
    impl = kernel.registry.get("llm_client", "openai-compatible")
    assert impl.distribution == DIST
    assert impl.version == metadata.version(DIST)


def test_plugins_command_lists_it_with_its_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write_config(
        tmp_path,
        """
        [llm]
        client = "openai-compatible"
        [plugin.openai-compatible]
        model = "m"
        """,
    )
    result = CliRunner().invoke(app, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    row = rows["openai-compatible"]
    assert (row["distribution"], row["version"], row["status"]) == (
        DIST,
        metadata.version(DIST),
        "loaded",
    )
    assert row["hooks"] == ["llm_client"]
    assert [(i["point"], i["name"], i["selected"]) for i in row["implementations"]] == [
        ("llm_client", "openai-compatible", True)
    ]


def test_selected_by_toml_and_answers_through_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: ChatServer
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BB_TEST_KEY", KEY)
    config = _write_config(
        tmp_path,
        f"""
        seed = 11
        [llm]
        client = "openai-compatible"
        [plugin.openai-compatible]
        base_url = "{openai_server.base_url}"
        model = "tiny"
        api_key_env = "BB_TEST_KEY"
        max_retries = 2
        """,
    )
    kernel = Kernel.load(config)
    client = kernel.llm()
    assert isinstance(client, LLMClient)
    assert type(client).__module__ == "biasbreaker_openai_compatible.client"
    reply = complete_sync(client, LLMRequest.chat("hello there"))
    assert reply.text == "echo: hello there"
    (call,) = openai_server.chat_calls
    assert call.body["model"] == "tiny"
    assert call.body["seed"] == 11  # the run's seed, since the request carries none
    assert call.headers["authorization"] == f"Bearer {KEY}"


def test_missing_key_variable_fails_the_build_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BB_ABSENT_KEY", raising=False)
    kernel = Kernel.load(
        overrides={
            "llm": {"client": "openai-compatible"},
            "plugin": {"openai-compatible": {"model": "m", "api_key_env": "BB_ABSENT_KEY"}},
        }
    )
    with pytest.raises(PluginError) as info:
        kernel.llm()
    assert isinstance(info.value.__cause__, LLMError)
    assert "BB_ABSENT_KEY" in str(info.value) and DIST in str(info.value)


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({}, "plugin.openai-compatible.model"),
        ({"model": "m", "base_url": "ftp://x"}, "http:// or https://"),
        ({"model": "m", "base_url": "http://h/v1/chat/completions"}, "without /chat/completions"),
        ({"model": "m", "max_concurrency": "0"}, "plugin.openai-compatible.max_concurrency"),
        ({"model": "m", "backoff_base_s": 5, "backoff_max_s": 1}, "raise backoff_max_s"),
        ({"model": "m", "json_mode": "xml"}, "plugin.openai-compatible.json_mode"),
    ],
)
def test_invalid_options_name_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: dict[str, object], expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    kernel = Kernel.load(
        overrides={"llm": {"client": "openai-compatible"}, "plugin": {"openai-compatible": table}}
    )
    with pytest.raises(ConfigError, match="openai-compatible") as info:
        kernel.llm()
    assert expected in str(info.value)


@pytest.mark.parametrize(
    "table",
    [
        {"model": "m", "api_key": KEY},
        {"model": "m", "token": KEY},
        {"model": "m", "api_key_env": KEY},
        {"model": "m", "api_key_env": "gsk_" + "aB3" * 15},
    ],
)
def test_a_key_written_into_the_config_is_rejected_without_echoing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: dict[str, str]
) -> None:
    monkeypatch.chdir(tmp_path)
    config = _write_config(tmp_path, '[llm]\nclient = "openai-compatible"\n')
    with pytest.raises(ConfigError) as info:  # refused when the configuration loads
        Kernel.load(config, overrides={"plugin": {"openai-compatible": table}}).llm()
    message = str(info.value)
    secret = next(v for k, v in table.items() if k != "model")
    assert secret not in message
    assert "api_key_env" in message
    assert secret not in repr(info.value.__cause__)


def test_options_accept_strings_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from biasbreaker_openai_compatible.plugin import OpenAICompatibleOptions

    opts = OpenAICompatibleOptions.model_validate(
        {
            "model": "m",
            "max_retries": "5",
            "timeout_s": "2.5",
            "temperature": "0.7",
            "send_seed": "false",
        }
    )
    assert (opts.max_retries, opts.timeout_s, opts.temperature, opts.send_seed) == (
        5,
        2.5,
        0.7,
        False,
    )
    assert opts.endpoint == "http://127.0.0.1:11434/v1/chat/completions"


LAZY_CHECK = """
import json, sys
from importlib import metadata
from biasbreaker.kernel import Kernel
from biasbreaker.plugins import GROUP, PluginHost

ours = [ep for ep in metadata.entry_points(group=GROUP) if ep.name == "openai-compatible"]
before = "httpx" in sys.modules
only_ours = PluginHost(autoload=False)
only_ours.load_entry_points(ours)
only_ours.build_registry()
httpx_after_our_module = "httpx" in sys.modules

host = PluginHost()                       # every installed plugin, ours included
kernel = Kernel.load(host=host, overrides={
    "llm": {"client": "openai-compatible"},
    "plugin": {"openai-compatible": {"model": "m"}},
})
kernel.options("llm_client", "openai-compatible")   # second-pass validation of our options
client_after_load = "biasbreaker_openai_compatible.client" in sys.modules
kernel.llm()
print(json.dumps({
    "before": before,
    "httpx_after_our_module": httpx_after_our_module,
    "loaded": host.infos["openai-compatible"].status,
    "client_after_load": client_after_load,
    "after_build": {m: m in sys.modules for m in ("httpx", "biasbreaker_openai_compatible.client")},
}))
"""


def test_loading_plugins_does_not_import_httpx_until_the_client_is_built(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", LAZY_CHECK], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["before"] is False, "importing biasbreaker imported httpx"
    assert result["httpx_after_our_module"] is False
    assert result["loaded"] == "loaded"
    assert result["client_after_load"] is False
    assert result["after_build"] == {"httpx": True, "biasbreaker_openai_compatible.client": True}


OTHER_CLIENT_CHECK = """
import json, sys
from biasbreaker.kernel import Kernel

kernel = Kernel.load(overrides={"llm": {"client": "fake"}})
kernel.llm()                              # builds the fake client
print(json.dumps(sorted(m for m in ("httpx", "biasbreaker_openai_compatible.client") if m in sys.modules)))
"""


def test_selecting_another_client_never_imports_this_one(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", OTHER_CLIENT_CHECK],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_config_check_builds_the_client_without_calling_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_server: ChatServer
) -> None:
    monkeypatch.chdir(tmp_path)
    for var in [v for v in os.environ if v.startswith("BIASBREAKER_")]:
        monkeypatch.delenv(var)
    monkeypatch.delenv("BB_CHECK_KEY", raising=False)
    _write_config(
        tmp_path,
        f"""
        [llm]
        client = "openai-compatible"
        [plugin.openai-compatible]
        base_url = "{openai_server.base_url}"
        model = "tiny"
        api_key_env = "BB_CHECK_KEY"
        """,
    )
    # --check builds the client, so a missing key variable is found before any run
    result = CliRunner().invoke(app, ["config", "--check"])
    assert result.exit_code == 1, result.output
    assert "BB_CHECK_KEY" in result.stderr
    assert "[selected by llm.client (biasbreaker.toml)" in result.stderr
    monkeypatch.setenv("BB_CHECK_KEY", KEY)
    result = CliRunner().invoke(app, ["config", "--check"])
    assert result.exit_code == 0, result.output
    assert openai_server.chat_calls == []  # built and closed, never asked anything


@pytest.mark.parametrize(
    "var",
    [
        "BIASBREAKER_PLUGIN__OPENAI_COMPATIBLE__MAX_RETRIES",  # the spelling `export` accepts
        "BIASBREAKER_PLUGIN__OPENAI-COMPATIBLE__MAX_RETRIES",  # the plugin's hyphen, via `env`
    ],
)
def test_an_env_variable_overrides_one_option_of_the_toml_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [v for v in os.environ if v.startswith("BIASBREAKER_")]:
        monkeypatch.delenv(name)
    _write_config(
        tmp_path,
        """
        [llm]
        client = "openai-compatible"
        [plugin.openai-compatible]
        model = "tiny"
        max_retries = 1
        """,
    )
    monkeypatch.setenv(var, "5")
    result = CliRunner().invoke(app, ["config", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["key"]: r for r in json.loads(result.stdout)}
    assert rows["plugin.openai-compatible.max_retries"] == {
        "key": "plugin.openai-compatible.max_retries",
        "value": 5,
        "source": f"env {var}",
    }
    assert rows["plugin.openai-compatible.model"]["source"] == "biasbreaker.toml"
    kernel = Kernel.load()
    assert kernel.options("llm_client", "openai-compatible").model_dump()["max_retries"] == 5
