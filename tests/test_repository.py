"""Promises the repository makes to a newcomer: the README's commands and CI agree."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```bash\n(.+?)\n```", text, flags=re.DOTALL)


def test_ci_runs_exactly_the_readme_test_command() -> None:
    commands = _readme_commands()
    test_command = next(c for c in commands if "pytest" in c)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_command in ci


def test_nothing_reads_the_shared_folder() -> None:
    # built from parts, so this guard does not name the folder it forbids
    shared = "/".join(("..", "shared"))
    offenders = []
    for path in [
        *ROOT.glob("core/**/*.py"),
        *ROOT.glob("plugins/**/*.py"),
        *ROOT.glob("tests/**/*.py"),
    ]:
        if shared in path.read_text(encoding="utf-8"):
            offenders.append(str(path))
    assert offenders == []


def test_every_shipped_data_folder_has_licence_and_source() -> None:
    folders = [p for p in (ROOT / "core/biasbreaker/data").iterdir() if p.is_dir()]
    folders += [p for p in (ROOT / "tests/data").iterdir() if p.is_dir()]
    assert folders
    for folder in folders:
        assert (folder / "SOURCE.md").is_file(), folder
        assert any(folder.glob("LICENSE*")), folder
