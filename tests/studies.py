"""Loading a study script of ``docs/studies/`` as a module, for the tests that check it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

STUDIES = Path(__file__).resolve().parents[1] / "docs" / "studies"


def load_study(name: str) -> ModuleType:
    """Import ``docs/studies/<name>.py`` as the module ``name`` (kept in ``sys.modules``, so
    its dataclasses and pickles resolve)."""
    spec = importlib.util.spec_from_file_location(name, STUDIES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
