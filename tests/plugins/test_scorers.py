"""The four first-party scorers through the `scorer` hook: registration, options, laziness."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import biasbreaker_plugins.scorers as scorers_plugin
from biasbreaker.errors import ConfigError, PluginError
from biasbreaker.probe import Probe, Scorer, build_probe


@pytest.fixture
def kernel(register_plugin: Any, make_kernel: Any) -> Any:
    register_plugin(scorers_plugin, name="scorers")
    return make_kernel


def test_hook_registers_four_named_scorers(kernel: Any) -> None:
    k = kernel()
    names = sorted(impl.name for impl in k.registry if impl.point == "scorer")
    assert names == ["decision", "lexical", "semantic", "sentiment"]


@pytest.mark.parametrize("name", ["lexical", "sentiment", "decision"])
def test_each_builds_a_scorer(kernel: Any, name: str) -> None:
    k = kernel({"probe": {"scorers": [name]}})
    built = k.build("scorer", name)
    assert isinstance(built, Scorer)
    assert built.name == name
    values = built.divergence(["He hired her.", "yes"], ["He hired her.", "no"])
    assert values[0] == 0.0
    assert 0.0 < values[1] <= 1.0


def test_plugin_options_are_validated(kernel: Any) -> None:
    k = kernel({"probe": {"scorers": ["lexical"]}, "plugin": {"lexical": {"metric": "meteor"}}})
    with pytest.raises(ConfigError, match="metric"):
        k.build("scorer", "lexical")
    k = kernel({"probe": {"scorers": ["sentiment"]}, "plugin": {"sentiment": {"field": "neg"}}})
    assert k.build("scorer", "sentiment").options.field == "neg"


def test_build_probe_follows_the_probe_section(kernel: Any, tmp_path: Path) -> None:
    extra = tmp_path / "caste.json"
    extra.write_text(
        json.dumps(
            {
                "axis": "caste",
                "groups": ["dalit", "brahmin"],
                "rows": [{"dalit": "Dalit", "brahmin": "Brahmin"}],
            }
        )
    )
    k = kernel(
        {
            "seed": 9,
            "probe": {
                "scorers": ["decision", "lexical"],
                "k": 3,
                "r": 1,
                "combine": "mean",
                "axes": ["caste", "gender"],
                "term_files": [str(extra)],
                "bootstrap": 0,
            },
        }
    )
    probe = build_probe(k)
    assert isinstance(probe, Probe)
    assert [s.name for s in probe.scorers] == ["decision", "lexical"]
    assert (probe.k, probe.r, probe.combine, probe.seed) == (3, 1, "mean", 9)
    assert [a.name for a in probe.generator.axes] == ["caste", "gender"]

    def step(text: str) -> str:
        return "reject" if "Dalit" in text else "hire"

    result = probe.probe_sync(step, "A Dalit engineer applied.", "reject")
    assert result.axes == ("caste",)
    assert result.parts["decision"].score == 1.0


def test_build_probe_reports_a_bad_axis(kernel: Any) -> None:
    k = kernel({"probe": {"axes": ["gender", "caste"]}})
    with pytest.raises(ConfigError, match="probe axis 'caste' is not known"):
        build_probe(k)


def test_a_non_scorer_is_refused(register_plugin: Any, make_kernel: Any) -> None:
    from biasbreaker.hookspecs import hookimpl

    class Broken:
        @hookimpl
        def scorer(self, register: Any) -> None:
            register("broken", lambda options, context: object())

    register_plugin(Broken(), name="broken-scorer")
    k = make_kernel({"probe": {"scorers": ["broken"]}})
    with pytest.raises(PluginError, match="scorer 'broken' built a object without name"):
        build_probe(k)


def test_importing_the_plugin_module_imports_no_heavy_library() -> None:
    code = (
        "import sys, biasbreaker_plugins.scorers; "
        "heavy = [m for m in ('nltk', 'rouge_score', 'vaderSentiment', 'torch', "
        "'sentence_transformers', 'numpy') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
