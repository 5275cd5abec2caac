"""The `plugins` and `config` commands, run in-process through typer's test runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from biasbreaker.cli import app
from biasbreaker.testing import write_fake_dist

runner = CliRunner()

AGG = """
from biasbreaker.hookspecs import hookimpl

@hookimpl
def aggregator(register):
    register("{name}", lambda options, context: object(), summary="{name} aggregator")
"""


@pytest.fixture
def aggregators(fake_plugin_dist: Any) -> None:
    for name in ("mean", "median"):
        fake_plugin_dist(
            f"bb-agg-{name}",
            version="1.2",
            entry_points={f"agg-{name}": f"bb_cli_agg_{name}"},
            modules={f"bb_cli_agg_{name}": AGG.replace("{name}", name)},
        )


def test_plugins_lists_a_third_party_distribution(aggregators: None, isolated_config: Path) -> None:
    result = runner.invoke(app, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    mean = rows["agg-mean"]
    assert (mean["distribution"], mean["version"], mean["status"]) == (
        "bb-agg-mean",
        "1.2",
        "loaded",
    )
    assert mean["hooks"] == ["aggregator"]
    assert mean["implementations"] == [
        {
            "point": "aggregator",
            "name": "mean",
            "summary": "mean aggregator",
            "selected": False,
            "conflict": False,
            "missing": [],
            "install": "",
            "imported": True,  # it declares nothing: it must be imported to be listed
        }
    ]
    table = runner.invoke(app, ["plugins", "--hook", "aggregator"])
    assert table.exit_code == 0
    lines = table.stdout.splitlines()
    head = lines.index("agg-median  bb-agg-median 1.2")
    assert lines[head + 1].split() == ["aggregator", "median"]


def test_plugins_marks_the_selected_implementation(
    aggregators: None, isolated_config: Path
) -> None:
    (isolated_config / "biasbreaker.toml").write_text('[intervention]\naggregator = "median"\n')
    rows = {r["name"]: r for r in json.loads(runner.invoke(app, ["plugins", "--json"]).stdout)}
    assert rows["agg-median"]["implementations"][0]["selected"] is True
    assert rows["agg-mean"]["implementations"][0]["selected"] is False


def test_plugins_reports_a_broken_plugin_and_strict_fails(
    fake_plugin_dist: Any, isolated_config: Path
) -> None:
    fake_plugin_dist(
        "bb-broken",
        version="0.1",
        entry_points={"broken": "bb_cli_broken"},
        modules={"bb_cli_broken": "raise ImportError('needs numpy 9')\n"},
    )
    result = runner.invoke(app, ["plugins", "--json"])
    assert result.exit_code == 0
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["broken"]["status"] == "failed"
    assert "needs numpy 9" in rows["broken"]["error"]
    assert "bb-broken 0.1" in result.stderr
    assert runner.invoke(app, ["plugins", "--strict"]).exit_code == 1


def test_config_shows_env_value_with_its_source(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIASBREAKER_BREAKER__TAU_ENTER", "0.9")
    result = runner.invoke(app, ["config", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["key"]: r for r in json.loads(result.stdout)}
    assert rows["breaker.tau_enter"] == {
        "key": "breaker.tau_enter",
        "value": 0.9,
        "source": "env BIASBREAKER_BREAKER__TAU_ENTER",
    }
    assert rows["breaker.tau_exit"]["source"] == "default"


def test_config_check_fails_for_an_uninstalled_aggregator(
    aggregators: None, isolated_config: Path
) -> None:
    (isolated_config / "biasbreaker.toml").write_text('[intervention]\naggregator = "trsut"\n')
    result = runner.invoke(app, ["config", "--check"])
    assert result.exit_code == 1
    assert (
        "aggregator 'trsut' (biasbreaker.toml: intervention.aggregator) is not available"
        in result.stderr
    )
    assert "mean (bb-agg-mean 1.2), median (bb-agg-median 1.2)" in result.stderr


def test_config_reports_a_toml_syntax_error(isolated_config: Path) -> None:
    bad = isolated_config / "custom.toml"
    bad.write_text("[breaker]\ntau_enter = \n")
    result = runner.invoke(app, ["config", "--config", str(bad)])
    assert result.exit_code == 1
    assert "invalid TOML" in result.stderr and "line 2" in result.stderr


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.startswith("biasbreaker ")


# --- the plugins table (new-user report: 170 columns, "(selected)" without its extra) -----


def test_plugins_table_fits_80_columns_and_flags_a_missing_extra(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "langgraph", None)  # as if LangGraph were not installed
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    result = runner.invoke(app, ["plugins"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    adapter = next(
        i for i, line in enumerate(lines) if line.split()[:2] == ["framework_adapter", "langgraph"]
    )
    assert lines[adapter].split()[2:] == ["selected,", "needs", "extra"]
    assert lines[adapter + 1].split() == ["missing:", "langgraph"]
    assert lines[adapter + 2].strip() == "install: pip install 'biasbreaker[langgraph]'"
    semantic = next(line for line in lines if line.split()[:2] == ["scorer", "semantic"])
    assert semantic.split()[2:] == ["needs", "extra"]
    # every implementation is on one line of its own, its name unbroken
    rows = {r["name"]: r for r in json.loads(runner.invoke(app, ["plugins", "--json"]).stdout)}
    for row in rows.values():
        for impl in row["implementations"]:
            assert any(line.split()[:2] == [impl["point"], impl["name"]] for line in lines)
    assert rows["langgraph"]["implementations"][0]["missing"] == ["langgraph"]
    wide = runner.invoke(app, ["plugins", "--wide"], env={"COLUMNS": "80"}).stdout
    assert "interrupt() review" in wide  # summaries, on one line each
    assert any(len(line) > 80 for line in wide.splitlines())


THIRD_PARTY_LEXICAL = """
from biasbreaker.hookspecs import hookimpl

@hookimpl
def scorer(register):
    register("lexical", lambda options, context: object(), summary="another lexical")
"""


def test_plugins_keeps_a_duplicate_under_each_plugin_and_advises_the_third_party(
    fake_plugin_dist: Any, isolated_config: Path
) -> None:
    fake_plugin_dist(
        "bb-lexical",
        version="1.0",
        entry_points={"my-lexical": "bb_cli_lexical"},
        modules={"bb_cli_lexical": THIRD_PARTY_LEXICAL},
    )
    result = runner.invoke(app, ["plugins"])
    lines = result.stdout.splitlines()
    own = lines.index("scorers  biasbreaker 0.1.0")
    assert lines[own + 2].split() == ["scorer", "lexical", "selected,", "registered", "twice"]
    theirs = lines.index("my-lexical  bb-lexical 1.0")
    assert lines[theirs + 1].split()[:2] == ["scorer", "lexical"]
    assert "uninstall bb-lexical or set BIASBREAKER_DISABLE_PLUGINS=my-lexical" in result.stderr
    assert "which removes all 4 of its implementations" in result.stderr


# --- config --check finds what building finds (bug 9) --------------------------------------


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('[probe]\naxes = ["gendr"]\n', "probe axis 'gendr' is not known"),
        ('[probe]\ngroups = {gendr = ["a", "b"]}\n', "probe groups name axis 'gendr'"),
        ('[probe]\ngroups = {gender = ["mal", "female"]}\n', "unknown: ['mal']"),
        ('[probe]\nterm_files = ["/nonexistent.json"]\n', "'/nonexistent.json' cannot be read"),
        (
            '[probe]\nextra_terms = {gender = [{male = "knight"}]}\n',
            "a row needs surface forms for at least two groups",
        ),
        (
            "[plugin.heuristic]\npersistence_steps = 20\n",
            "persistence_steps = 20 exceeds breaker.history_steps = 8",
        ),
        ('[breaker]\nprobation = "hold"\n', "a guarded LangGraph graph needs 'half-open'"),
        (
            '[plugin.langgraph]\ntrace_path = "/proc/bb/{thread_id}.jsonl"\n',
            "[plugin.langgraph] trace_path = '/proc/bb/{thread_id}.jsonl': nothing can be "
            "created in /proc",
        ),
    ],
)
def test_config_check_builds_what_a_run_builds(
    isolated_config: Path, toml: str, expected: str
) -> None:
    (isolated_config / "biasbreaker.toml").write_text(toml)
    assert runner.invoke(app, ["config"]).exit_code == 0  # without --check: cheap, no build
    result = runner.invoke(app, ["config", "--check"])
    assert result.exit_code == 1, result.output
    assert expected in result.stderr
    assert "biasbreaker.toml" in result.stderr  # the source of the failing setting


@pytest.mark.parametrize(
    ("toml", "hidden", "expected"),
    [
        (
            '[probe]\nscorers = ["semantic"]\n',
            "sentence_transformers",
            "the 'semantic' scorer needs the semantic extra",
        ),
        (
            '[adapter]\nframework = "langgraph"\n',
            "biasbreaker_plugins.langgraph.adapter",
            "framework_adapter 'langgraph' needs LangGraph",
        ),
    ],
)
def test_config_check_finds_a_missing_extra(
    isolated_config: Path,
    monkeypatch: pytest.MonkeyPatch,
    toml: str,
    hidden: str,
    expected: str,
) -> None:
    (isolated_config / "biasbreaker.toml").write_text(toml)
    monkeypatch.setitem(sys.modules, hidden, None)  # the import fails as without the extra
    result = runner.invoke(app, ["config", "--check"])
    assert result.exit_code == 1, result.output
    assert expected in result.stderr
    assert "(biasbreaker.toml)" in result.stderr


def test_config_check_fails_the_defaults_naming_the_three_choices(isolated_config: Path) -> None:
    """No LLM client by default: the skeptics and MADERA cannot be built, and the error says
    how to go on (a client, human review only, or the fake by name)."""
    result = runner.invoke(app, ["config", "--check"])
    assert result.exit_code == 1, result.output
    text = " ".join(result.stderr.split())
    assert text.count("[llm] client is not set (default)") == 1, text  # once, not per skeptic
    for choice in (
        '[llm] client = "openai-compatible"',
        'router = "human-review"',
        'client = "fake"',
    ):
        assert choice in text


@pytest.mark.parametrize(
    "toml", ['[intervention]\nrouter = "human-review"\n', '[llm]\nclient = "fake"\n']
)
def test_config_check_passes_with_human_review_only_or_a_named_client(
    isolated_config: Path, toml: str
) -> None:
    (isolated_config / "biasbreaker.toml").write_text(toml)
    result = runner.invoke(app, ["config", "--check"])
    assert result.exit_code == 0, result.output
    assert "configuration OK" in result.stdout
    # with --json, stdout is one JSON document and the verdict goes to stderr
    as_json = runner.invoke(app, ["config", "--check", "--json"])
    assert as_json.exit_code == 0, as_json.output
    rows = json.loads(as_json.stdout)
    assert any(row["key"] == "breaker.tau_enter" for row in rows)
    assert "configuration OK" in as_json.stderr


@pytest.mark.parametrize(
    ("path", "warned"), [("runs/trace.jsonl", True), ("runs/{thread_id}.jsonl", False)]
)
def test_config_check_warns_of_a_trace_path_without_thread_id(
    isolated_config: Path, path: str, warned: bool
) -> None:
    """One file holds one thread's run: a second thread's run would be refused."""
    (isolated_config / "biasbreaker.toml").write_text(
        f'[intervention]\nrouter = "human-review"\n[plugin.langgraph]\ntrace_path = "{path}"\n'
    )
    result = runner.invoke(app, ["config", "--check"])
    assert result.exit_code == 0, result.output  # a warning, not a problem
    text = " ".join(result.stderr.split())
    assert (
        "plugin.langgraph.trace_path = 'runs/trace.jsonl' (biasbreaker.toml) has no "
        "{thread_id}" in text
    ) is warned
    assert ("put {thread_id} in it" in text) is warned


@pytest.mark.parametrize(
    "toml",
    [
        '[trace]\nsink = "sqlite"\nurl = "sqlite:////tmp/bbx.db?key=q7w3e9"\n',
        '[trace]\nsink = "sqlite"\nurl = "sqlite:////tmp/bbx.db?cache=shared&sig=q7w3e9"\n',
        '[plugin.openai-compatible]\nbase_url = "http://127.0.0.1:9/v1?code=q7w3e9"\n',
        '[plugin.openai-compatible]\nbase_url = "http://127.0.0.1:9/v1?x-api-key=q7w3e9"\n',
    ],
)
def test_config_refuses_a_url_with_a_secret_query_parameter_never_showing_it(
    isolated_config: Path, toml: str
) -> None:
    """``?key=``, ``?sig=``, ``?code=`` are refused as ``?password=`` is, the value unshown."""
    (isolated_config / "biasbreaker.toml").write_text('[llm]\nclient = "fake"\n' + toml)
    for args in (["config"], ["config", "--check"], ["config", "--json"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, result.output
        assert "q7w3e9" not in result.output
        assert "a secret in a URL query parameter" in " ".join(result.stderr.split())


def test_config_warns_that_probe_rate_zero_guards_nothing(isolated_config: Path) -> None:
    (isolated_config / "biasbreaker.toml").write_text(
        '[intervention]\nrouter = "human-review"\n[probe]\nprobe_rate = 0\n'
    )
    result = runner.invoke(app, ["config", "--check"])
    assert result.exit_code == 0, result.output  # a legitimate setting (benchmarks), not an error
    assert "probe_rate = 0: no guarded step is probed" in result.stderr
    (isolated_config / "biasbreaker.toml").write_text(
        '[intervention]\nrouter = "human-review"\n[probe]\nprobe_rate = 0.5\n'
    )
    sampled = " ".join(runner.invoke(app, ["config", "--check"]).stderr.split())
    assert "probe_rate = 0.5: about 50 % of guarded steps are not probed" in sampled
    assert "no guarded step is probed" not in sampled


def test_config_check_reports_an_invalid_plugin_table_once(isolated_config: Path) -> None:
    (isolated_config / "biasbreaker.toml").write_text(
        '[llm]\nclient = "fake"\n[plugin.lexical]\nmetric = "foo"\n'
    )
    result = runner.invoke(app, ["config", "--check"])
    assert result.exit_code == 1
    assert "problems" not in result.stderr
    assert result.stderr.count("plugin.lexical.metric") == 1


def _bullets(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("- ")]


def test_config_check_lists_each_problem_once_with_the_right_count(isolated_config: Path) -> None:
    (isolated_config / "typo.toml").write_text(
        '[llm]\nclient = "fake"\n[intervention]\nskeptics = ["empirical-auditor", "contrarain"]\n'
        'retriever = "kewyord"\n'
    )
    result = runner.invoke(app, ["config", "--check", "-c", "typo.toml"])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: 2 problems:\n")
    bullets = _bullets(result.stderr)
    assert len(bullets) == 2, result.stderr
    assert bullets[0].startswith("- skeptic 'contrarain' (typo.toml: intervention.skeptics)")
    assert bullets[1].startswith("- retriever 'kewyord' (typo.toml: intervention.retriever)")
    assert "configuration problems" not in result.stderr
    # a problem found only by building (the probe's axis) is listed next to them, once
    (isolated_config / "typo.toml").write_text(
        '[llm]\nclient = "fake"\n[intervention]\nskeptics = ["contrarion", "contrarain"]\n'
        '[probe]\naxes = ["gendr"]\n'
    )
    result = runner.invoke(app, ["config", "--check", "-c", "typo.toml"])
    assert result.stderr.startswith("error: 3 problems:\n")
    bullets = _bullets(result.stderr)
    assert [b.split(" (")[0] for b in bullets] == [
        "- skeptic 'contrarion'",
        "- skeptic 'contrarain'",
        "- [probe] term lists: probe axis 'gendr' is not known; known axes: age, disability, "
        "gender, nationality, race, religion, sexual-orientation. Check the spelling or add a "
        "term file for it. [building the probe's term lists; [probe]: typo.toml]",
    ]
    # without --check, config shows the configuration as read: the names are not looked up
    result = runner.invoke(app, ["config", "-c", "typo.toml"])
    assert result.exit_code == 0, result.output


def test_config_check_with_a_broken_plugin_counts_each_problem_once(
    fake_plugin_dist: Any, isolated_config: Path
) -> None:
    fake_plugin_dist(
        "bb-nu3",
        version="0.1",
        entry_points={"nu3": "bb_cli_nu3"},
        modules={"bb_cli_nu3": "raise ImportError('needs numpy 9')\n"},
    )
    (isolated_config / "biasbreaker.toml").write_text(
        '[llm]\nclient = "fake"\n[intervention]\nskeptics = ["empirical-auditor", "contrarian"]\n'
        'aggregator = "nu3-agg"\nretriever = "nu3-retr"\n[plugin.contrarian]\n'
        'decision = "revise"\n[plugin.nu3-retr]\ntop_k = 2\n'
    )
    result = runner.invoke(app, ["config", "--check"])
    assert result.exit_code == 1, result.output
    assert "error: 5 problems:" in result.stderr
    bullets = _bullets(result.stderr)
    assert sorted(b.split(" (")[0] for b in bullets) == [
        "- [plugin.contrarian]",
        "- [plugin.nu3-retr]",
        "- aggregator 'nu3-agg'",
        "- retriever 'nu3-retr'",
        "- skeptic 'contrarian'",
    ]
    # an unknown name says a plugin failed to load, which may be why
    notes = [b for b in bullets if "Some plugins failed and provide nothing" in b]
    assert sorted(b.split(" (")[0] for b in notes) == [
        "- aggregator 'nu3-agg'",
        "- retriever 'nu3-retr'",
        "- skeptic 'contrarian'",
    ]
    assert "warning: plugin 'nu3'" in result.stderr


def test_env_list_error_is_a_clean_error_on_every_command(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIASBREAKER_PROBE__SCORERS", "lexical,sentiment")
    result = runner.invoke(app, ["config", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["key"]: r["value"] for r in json.loads(result.stdout)}
    assert rows["probe.scorers"] == ["lexical", "sentiment"]
    monkeypatch.setenv("BIASBREAKER_PROBE__SCORERS", "[lexical")
    for command in (["config"], ["plugins"], ["simulate", "control", "--steps", "1"]):
        result = runner.invoke(app, command)
        assert result.exception is None or isinstance(result.exception, SystemExit), command
        assert "BIASBREAKER_PROBE__SCORERS='[lexical'" in result.stderr, command


# --- a plugin that fails to load is reported once (bug 10) ---------------------------------


def test_a_plugin_load_failure_is_printed_once(tmp_path: Path, isolated_config: Path) -> None:
    site = write_fake_dist(
        tmp_path / "site",
        "bb-broken-once",
        version="0.2",
        entry_points={"broken-once": "bb_broken_once"},
        modules={"bb_broken_once": "raise ImportError('needs numpy 9')\n"},
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("BIASBREAKER_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    for command in (["plugins"], ["config"]):
        done = subprocess.run(
            [sys.executable, "-c", "from biasbreaker.cli import main; main()", *command],
            cwd=isolated_config,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr.count("needs numpy 9") == 1, done.stderr
        assert done.stderr.startswith("warning: plugin 'broken-once'"), done.stderr


HOOK_RAISES = """
from biasbreaker.hookspecs import hookimpl

@hookimpl
def skeptic(register):
    register("contrarian", lambda options, context: object())
    raise ValueError("hook raised")
"""


def test_a_plugin_that_fails_to_register_is_reported_once_and_commands_keep_working(
    tmp_path: Path, isolated_config: Path
) -> None:
    site = write_fake_dist(
        tmp_path / "site",
        "nu3",
        version="0.3",
        entry_points={"nu3": "bb_nu3_hook"},
        modules={"bb_nu3_hook": HOOK_RAISES},
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("BIASBREAKER_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    env["BIASBREAKER_LLM__CLIENT"] = "fake"  # config --check builds the skeptics

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", "from biasbreaker.cli import main; main()", *args],
            cwd=isolated_config,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    for command in (["plugins"], ["config"], ["config", "--check"]):
        done = cli(*command)
        assert done.returncode == 0, done.stderr
        assert done.stderr.count("ValueError('hook raised')") == 1, done.stderr
        assert done.stderr.startswith("warning: plugin 'nu3' (bb_nu3_hook, from nu3 0.3)")
        assert "BIASBREAKER_DISABLE_PLUGINS=nu3" in done.stderr
    listing = cli("plugins")
    assert "nu3  nu3 0.3  failed: " in listing.stdout and "contrarian" not in listing.stdout
    for command in (["plugins", "--strict"], ["config", "--strict"]):
        done = cli(*command)
        assert done.returncode == 1
        assert done.stderr.startswith("error: plugin 'nu3'"), done.stderr
        assert "its skeptic hook raised ValueError('hook raised')" in done.stderr
    (isolated_config / "biasbreaker.toml").write_text(
        '[intervention]\nskeptics = ["contrarian", "devils-advocate"]\n'
    )
    done = cli("config", "--check")
    assert done.returncode == 1
    assert "skeptic 'contrarian' (biasbreaker.toml: intervention.skeptics) is not available" in (
        done.stderr
    )
    assert "failed and provide nothing: plugin 'nu3'" in done.stderr


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["plugins"],
        ["config"],
        ["simulate"],
        ["calibrate"],
        ["verify"],
        ["score"],
        ["demo"],
        ["run"],
    ],
)
def test_help_shows_no_type_placeholders_and_keeps_brackets(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.stdout
    assert "<list[str]>" not in result.stdout
    if command == ["score"]:
        assert "[probe] scorers" in result.stdout  # not swallowed as markup
        assert "-s, --scorer NAME" in result.stdout


def test_a_plugin_adds_a_command_through_the_commands_group(fake_plugin_dist: Any) -> None:
    import typer

    from biasbreaker.cli import COMMAND_GROUP, load_plugin_commands

    fake_plugin_dist(
        "biasbreaker-hello",
        group=COMMAND_GROUP,
        entry_points={"hello": "bb_hello:register", "broken": "bb_hello:missing"},
        modules={
            "bb_hello": """
                def register(app):
                    @app.command("hello")
                    def hello(name: str = "world") -> None:
                        print(f"hello {name}")
                """
        },
    )
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Root."""

    failures = load_plugin_commands(app)
    assert len(failures) == 1 and "'broken'" in failures[0]  # left out, the others work
    result = CliRunner().invoke(app, ["hello", "--name", "plugins"])
    assert result.exit_code == 0 and result.output == "hello plugins\n"


def test_a_plugin_table_from_one_variable_is_one_row_per_leaf(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BIASBREAKER_PLUGIN__FAKE__WEIGHTS", '{"christian": 2}')
    result = runner.invoke(app, ["config", "--json"])
    assert result.exit_code == 0, result.output
    rows = [r for r in json.loads(result.stdout) if r["key"].startswith("plugin.fake.weights")]
    assert rows == [
        {
            "key": "plugin.fake.weights.christian",
            "value": 2.0,
            "source": "env BIASBREAKER_PLUGIN__FAKE__WEIGHTS",
        }
    ]


def test_config_check_lists_an_unknown_axis_beside_an_unknown_scorer(
    isolated_config: Path,
) -> None:
    """Trial 12: the axis typo was listed only once the scorer typo was fixed (a second pass)."""
    (isolated_config / "biasbreaker.toml").write_text(
        '[llm]\nclient = "fake"\n[probe]\nscorers = ["decison"]\naxes = ["gender", "rase"]\n'
    )
    result = runner.invoke(app, ["config", "--check"])
    assert result.exit_code == 1
    said = " ".join(result.stderr.split())
    assert "2 problems" in said and "scorer 'decison'" in said
    assert said.count("probe axis 'rase' is not known") == 1
