"""Unselected plugins are listed from their metadata and never imported (biasbreaker.catalog)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from biasbreaker.catalog import Wanted
from biasbreaker.cli import app
from biasbreaker.errors import UnknownImplementationError
from biasbreaker.kernel import Kernel
from biasbreaker.plugins import PluginHost

CANARY = """
import os
from pathlib import Path

from biasbreaker.hookspecs import hookimpl

# what a plugin's import can do on every machine it is installed on
Path(os.environ["CANARY_FILE"]).open("a").write("imported\\n")


@hookimpl
def aggregator(register):
    register("canary-mean", lambda options, context: object(), summary="canary")
"""


@pytest.fixture
def canary(fake_plugin_dist: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A third-party plugin that declares what it provides and leaves a mark when imported."""
    mark = tmp_path / "imported.txt"
    monkeypatch.setenv("CANARY_FILE", str(mark))
    fake_plugin_dist(
        "bb-canary",
        entry_points={"canary": "bb_canary_mod"},
        modules={"bb_canary_mod": CANARY},
        implementations={"aggregator.canary-mean": "bb_canary_mod"},
    )
    return mark


def _imported(mark: Path) -> bool:
    return mark.exists() or "bb_canary_mod" in sys.modules


def test_an_unselected_declared_plugin_is_never_imported(
    canary: Path, isolated_config: Path
) -> None:
    # no LLM client, so no LLM repair: config --check passes
    (isolated_config / "biasbreaker.toml").write_text('[intervention]\nrouter = "human-review"\n')
    kernel = Kernel.load(cwd=isolated_config)
    kernel.check_build()
    assert kernel.host.infos["canary"].status == "declared"
    for args in (["config"], ["config", "--check"], ["plugins"], ["plugins", "--json"]):
        assert CliRunner().invoke(app, args).exit_code == 0, args
    assert not _imported(canary)
    rows = {r["name"]: r for r in json.loads(CliRunner().invoke(app, ["plugins", "--json"]).stdout)}
    assert rows["canary"]["status"] == "declared"
    assert rows["canary"]["implementations"][0]["name"] == "canary-mean"
    assert rows["canary"]["implementations"][0]["imported"] is False
    assert "canary  bb-canary 1.0.0  not imported" in CliRunner().invoke(app, ["plugins"]).stdout


@pytest.mark.parametrize(
    "toml",
    [
        '[intervention]\naggregator = "canary-mean"\n',  # selected
        "[plugin.canary-mean]\n",  # configured (its table is validated)
    ],
)
def test_a_selected_or_configured_plugin_is_imported(
    canary: Path, isolated_config: Path, toml: str
) -> None:
    (isolated_config / "biasbreaker.toml").write_text(toml)
    kernel = Kernel.load(cwd=isolated_config)
    assert kernel.host.infos["canary"].status == "loaded" and _imported(canary)
    assert kernel.registry.by_name("canary-mean")


def test_plugins_verbose_imports_every_plugin(canary: Path, isolated_config: Path) -> None:
    result = CliRunner().invoke(app, ["plugins", "--verbose", "--json"])
    assert result.exit_code == 0
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["canary"]["status"] == "loaded" and _imported(canary)
    assert rows["canary"]["implementations"][0]["summary"] == "canary"


def test_a_misspelt_name_lists_declared_implementations_as_installed(
    canary: Path, isolated_config: Path
) -> None:
    (isolated_config / "biasbreaker.toml").write_text('[intervention]\naggregator = "canary-men"\n')
    kernel = Kernel.load(cwd=isolated_config)
    with pytest.raises(UnknownImplementationError, match=r"canary-mean \(bb-canary 1.0.0\)"):
        kernel.check()
    assert not _imported(canary)


def test_a_plugin_that_declares_nothing_is_imported(fake_plugin_dist: Any) -> None:
    fake_plugin_dist(
        "bb-quiet",
        entry_points={"quiet": "bb_quiet_mod"},
        modules={"bb_quiet_mod": CANARY.replace("canary-mean", "quiet-mean").split("# what")[0]},
    )
    host = PluginHost(wanted=Wanted())
    assert host.infos["quiet"].status == "loaded"  # nothing else says what it provides


def test_a_malformed_declaration_is_a_notice_and_its_plugin_is_imported(
    fake_plugin_dist: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CANARY_FILE", str(tmp_path / "mark"))
    fake_plugin_dist(
        "bb-odd",
        entry_points={"odd": "bb_odd_mod"},
        modules={"bb_odd_mod": CANARY},
        implementations={"aggregatr.canary-mean": "bb_odd_mod", "aggregator.x": "elsewhere"},
    )
    host = PluginHost(wanted=Wanted())
    assert host.infos["odd"].status == "loaded"
    assert any("'aggregatr.canary-mean'" in n and "imported" in n for n in host.notices)
    assert any("'aggregator.x'" in n and "ignored" in n for n in host.notices)


def test_a_declaration_that_differs_from_the_registration_is_a_notice(
    fake_plugin_dist: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CANARY_FILE", str(tmp_path / "mark"))
    fake_plugin_dist(
        "bb-drift",
        entry_points={"drift": "bb_drift_mod"},
        modules={"bb_drift_mod": CANARY},
        implementations={"aggregator.canary-median": "bb_drift_mod"},
    )
    host = PluginHost()
    host.build_registry()
    notices = " ".join(host.notices)
    assert "registers aggregator 'canary-mean' but does not declare it" in notices
    assert "declares aggregator 'canary-median'" in notices


def test_every_installed_distribution_declares_exactly_what_it_registers() -> None:
    # first-party and contrib: a wrong declaration would hide an implementation
    host = PluginHost()
    registry = host.build_registry()
    assert not [n for n in host.notices if "declare" in n], host.notices
    for info in host.infos.values():
        if info.distribution == "biasbreaker" or (info.distribution or "").startswith(
            "biasbreaker-"
        ):
            registered = {(i.point, i.name) for i in registry.registered_by(info.name)}
            assert set(info.declared or ()) == registered, info.name


def test_disabling_still_wins_over_declarations(
    canary: Path, isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIASBREAKER_DISABLE_PLUGINS", "canary")
    (isolated_config / "biasbreaker.toml").write_text(
        '[intervention]\naggregator = "canary-mean"\n'
    )
    kernel = Kernel.load(cwd=isolated_config)
    assert kernel.host.infos["canary"].status == "disabled" and not _imported(canary)
