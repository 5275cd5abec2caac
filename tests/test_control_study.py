"""The control study regenerates: its quick text is the committed one, and its claims hold.

``docs/studies/control_study.py --quick`` is compared with ``tests/golden/control_study_quick.md``
byte for byte, so a change in the breaker, the machine, the calibration or the DoT harness that
moves any number of the study fails here; the full-size study and its figures are checked by
``nox -s study``. The other tests check the study's claims on the quick results directly, so a
golden file regenerated without reading it cannot hide a regression.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from biasbreaker.config import load_settings
from studies import load_study

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "control_study_quick.md"
REGENERATE = (
    "python docs/studies/control_study.py --quick --text-only --out tests/golden/"
    "control_study_quick.md (and the full study: python docs/studies/control_study.py)"
)


def load() -> ModuleType:
    return load_study("control_study")


@pytest.fixture(scope="module")
def study() -> ModuleType:
    return load()


@pytest.fixture(scope="module")
def quick(study: ModuleType) -> Any:
    with pytest.MonkeyPatch.context() as mp:
        for var in list(os.environ):
            if var.upper().startswith("BIASBREAKER_"):
                mp.delenv(var)
        return study.measure(study.QUICK)


def test_the_quick_study_is_the_committed_text(study: ModuleType, quick: Any) -> None:
    text = study.report(quick)
    committed = GOLDEN.read_text(encoding="utf-8")
    diff = "".join(
        difflib.unified_diff(
            committed.splitlines(keepends=True),
            text.splitlines(keepends=True),
            "committed",
            "regenerated",
            n=0,
        )
    )
    assert text == committed, (
        f"the study's numbers moved; regenerate with {REGENERATE}\n{diff[:4000]}"
    )


def test_check_names_the_file_that_differs(study: ModuleType, quick: Any, tmp_path: Path) -> None:
    out = tmp_path / "control.md"
    shutil.copyfile(GOLDEN, out)
    assert study.check(quick, out, text_only=True) == []
    out.write_text(GOLDEN.read_text(encoding="utf-8").replace("0.", "1.", 1), encoding="utf-8")
    assert study.check(quick, out, text_only=True) == [out]
    assert out.read_text(encoding="utf-8") != GOLDEN.read_text(encoding="utf-8")  # left alone
    out.unlink()
    assert study.check(quick, out, text_only=True) == [out]


def test_the_constants_are_the_configuration_defaults(study: ModuleType, tmp_path: Path) -> None:
    breaker = load_settings(cwd=tmp_path).settings.breaker
    calibration = load_settings(cwd=tmp_path).settings.calibration
    th = study.THRESHOLDS
    assert (th.tau_enter, th.tau_exit, th.tau_warn, th.kappa) == (
        breaker.tau_enter,
        breaker.tau_exit,
        breaker.tau_warn,
        breaker.kappa,
    )
    assert (
        breaker.cooldown_steps,
        breaker.max_retries,
        calibration.max_history,
    ) == (study.COOLDOWN, study.MAX_RETRIES, study.MAX_HISTORY)


def test_hysteresis_enters_once_where_a_single_threshold_thrashes(
    study: ModuleType, quick: Any
) -> None:
    entries = quick.thrash.entries
    for preset, by_breaker in entries.items():
        assert max(by_breaker["hysteresis breaker"]) <= 1, preset
        assert by_breaker["control machine, repair passes"] == by_breaker["hysteresis breaker"]
    assert min(entries["oscillate-near-threshold"]["single threshold at tau_enter"]) >= 3
    assert quick.thrash.leaked == 0
    assert quick.thrash.same_first_trip == quick.thrash.runs


def test_recovery_waits_for_the_window_and_escalation_for_the_budget(
    study: ModuleType, quick: Any
) -> None:
    for preset in ("spike", "recovery", "rise-oscillate-fall"):
        for run in quick.recovery.runs[preset]:
            assert run.recovered is not None and run.last_outlier is not None, preset
            assert run.recovered - run.last_outlier == study.MAX_HISTORY  # RLB-v1, with equality
    expected = study.expected_delay(study.COOLDOWN, study.MAX_RETRIES)
    for by_preset in quick.escalation.runs.values():
        for runs in by_preset.values():
            for run in runs:
                assert (run.interventions, run.delay, run.terminal) == (
                    study.MAX_RETRIES,
                    expected,
                    True,
                )
    for (retries, cooldown), runs in quick.escalation.grid.items():
        assert {run.delay for run in runs} == {study.expected_delay(cooldown, retries)}


def test_calibration_trips_exactly_when_the_trip_statistic_reaches_tau(quick: Any) -> None:
    for result in quick.calibration.rows:
        assert result.disagreements == 0, result.row
    mismatch = next(r for r in quick.calibration.rows if "mismatch" in r.row.label)
    assert mismatch.fresh.value > 0.5  # fast-only thresholds do not bound node trips


def test_with_node_trips_the_node_trigger_fires_first(quick: Any) -> None:
    for name, first in quick.triggers.defaults.items():
        assert first.by["network"] == 0, name
        assert first.by["node"] == len(first.combined), name
    for name in ("pipeline, decider a4 at drive 1", "pipeline, middle agent a2 at drive 1"):
        assert quick.triggers.defaults[name].network_only == []


def test_every_figure_the_report_links_exists() -> None:
    text = (ROOT / "docs" / "studies" / "control.md").read_text(encoding="utf-8")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(links) == 5
    for link in links:
        assert (ROOT / "docs" / "studies" / link).is_file(), link


def test_figures_are_written_byte_for_byte_again(
    study: ModuleType, quick: Any, tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    first = study.write_figures(quick, tmp_path / "a")
    second = study.write_figures(quick, tmp_path / "b")
    assert [p.name for p in first] == list(study.FIGURES.values())
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert a.read_bytes() == b.read_bytes(), a.name
