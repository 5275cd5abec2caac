"""The adaptive-on-the-demo study (``docs/studies/demo_adaptive.py``) measures this tree.

The study runs ``biasbreaker demo --quick`` once per setting. Here one setting, adaptive
probing at ``adaptive_first = 1``, is run again and its row compared with the committed
``docs/studies/demo_adaptive.md``, so a change that moves the demo's adaptive figures fails
until the study is regenerated; and ``docs/cost.md`` must quote the committed table word for
word.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from biasbreaker_plugins.quoted import differences
from studies import load_study

pytest.importorskip("langgraph")
pytest.importorskip("matplotlib")

pytestmark = pytest.mark.langgraph


@pytest.fixture(scope="module")
def study() -> ModuleType:
    return load_study("demo_adaptive")


def test_cost_md_quotes_the_committed_table(study: ModuleType) -> None:
    report = study.REPORT.read_text(encoding="utf-8")
    assert differences(report, study.DOC.read_text(encoding="utf-8")) == []


def test_the_adaptive_row_is_what_the_demo_gives(study: ModuleType, tmp_path: Path) -> None:
    name = "adaptive, first 1"
    folder = tmp_path / "a1"
    study.run_demo(folder, study.SETTINGS[name])
    row = study.summarise(folder)
    committed = study.REPORT.read_text(encoding="utf-8")

    def cells(table: str) -> list[str]:
        """The setting's row, without the column comparing it with the full probe's run."""
        line = next(x for x in table.splitlines() if x.startswith(f"| {name} |"))
        out = line.split(" | ")
        return out[:6] + out[7:]

    # this row alone: "of the full probe's" needs the full probe's run, not re-run here
    assert cells(study.table({"full probe": row, name: row})) == cells(committed)
    assert row["step_calls"] < 3  # the node's own call and a first stage of one variant
    assert row["false_halts"] == 0
