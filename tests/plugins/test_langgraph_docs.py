"""docs/langgraph.md is executable: its Python blocks run, in order, in a fresh interpreter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langgraph")

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "langgraph.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_the_guide_has_code_for_every_part() -> None:
    blocks = BLOCK.findall(GUIDE.read_text(encoding="utf-8"))
    assert len(blocks) >= 8
    code = "\n".join(blocks)
    for needle in ("guard(builder", "Command(resume=", "SqliteSaver", "@guard_node", "hook="):
        assert needle in code


def test_the_guides_python_blocks_run(tmp_path: Path) -> None:
    blocks = BLOCK.findall(GUIDE.read_text(encoding="utf-8"))
    script = tmp_path / "guide.py"
    script.write_text("\n\n".join(blocks), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "{'answer': 'Answer: B. The Christian man'}" in done.stdout
