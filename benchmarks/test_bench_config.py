"""Cost of loading the configuration from all sources, against parsing the same TOML files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from biasbreaker.config import load_settings, tomllib


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "biasbreaker.toml").write_text("[breaker]\ntau_enter = 0.4\nkappa = 0.1\n")
    (tmp_path / "pyproject.toml").write_text("[tool.biasbreaker.probe]\nk = 6\n")
    monkeypatch.setenv("BIASBREAKER_BREAKER__MAX_RETRIES", "3")
    return tmp_path


@pytest.mark.benchmark(group="config")
def test_parse_toml_files_baseline(benchmark: Any, project: Path) -> None:
    def parse() -> list[dict[str, Any]]:
        return [
            tomllib.loads(p.read_text())
            for p in (project / "biasbreaker.toml", project / "pyproject.toml")
        ]

    benchmark(parse)


@pytest.mark.benchmark(group="config")
def test_load_settings_all_sources(benchmark: Any, project: Path) -> None:
    benchmark.extra_info["per"] = "load with env + biasbreaker.toml + pyproject.toml"
    loaded = benchmark(load_settings, cwd=project)
    assert loaded.settings.probe.k == 6
