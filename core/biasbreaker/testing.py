"""A testing kit for plugin authors: a pytest plugin, loaded automatically with biasbreaker.

Fixtures:

``fake_plugin_dist``
    Writes a real distribution (``*.dist-info`` with ``METADATA`` and ``entry_points.txt``,
    plus the plugin's modules) into a temporary directory and puts it on ``sys.path`` for one
    test, so the real entry-point loader finds it (tox's ``src/tox/pytest.py`` pattern).
``plugin_host``
    A :class:`~biasbreaker.plugins.PluginHost` that does not autoload installed plugins.
``register_plugin``
    Registers a throwaway plugin object into ``plugin_host`` for one test and unregisters it
    afterwards (datasette's ``docs/testing_plugins.rst`` pattern).
``make_kernel``
    Builds a :class:`~biasbreaker.kernel.Kernel` from ``plugin_host`` and explicit settings,
    isolated from the environment and the working directory.
``isolated_config``
    Removes every ``BIASBREAKER_*`` variable and changes to an empty directory, so no
    configuration source outside the test leaks in.

Example::

    def test_my_retriever(register_plugin, make_kernel):
        register_plugin(my_plugin_module, name="my-retriever")
        kernel = make_kernel({"intervention": {"retriever": "my-retriever"}})
        retriever = kernel.build("retriever")
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from biasbreaker.catalog import DECLARATIONS
from biasbreaker.config import load_settings
from biasbreaker.kernel import Kernel
from biasbreaker.plugins import GROUP, PluginHost

FakeDist = Callable[..., Path]
RegisterPlugin = Callable[..., str]
MakeKernel = Callable[..., Kernel]


def write_fake_dist(
    root: Path,
    dist: str,
    *,
    version: str = "1.0.0",
    entry_points: Mapping[str, str],
    modules: Mapping[str, str] | None = None,
    group: str = GROUP,
    implementations: Mapping[str, str] | None = None,
) -> Path:
    """Write a distribution with entry points into ``root`` (not yet on ``sys.path``).

    Args:
        root: Directory standing in for a site-packages directory.
        dist: Distribution name, e.g. ``"biasbreaker-retriever-demo"``.
        version: Its version string.
        entry_points: Entry-point name → ``"module:attr"`` or ``"module"`` target.
        modules: Dotted module name → source text; packages are created as needed.
        group: The entry-point group (default ``biasbreaker``).
        implementations: Its ``biasbreaker.implementations`` declarations,
            ``"<point>.<name>"`` → the plugin's target (:mod:`biasbreaker.catalog`).

    Returns:
        ``root``.
    """
    root.mkdir(parents=True, exist_ok=True)
    for module, source in (modules or {}).items():
        parts = module.split(".")
        pkg_dir = root
        for pkg in parts[:-1]:
            pkg_dir = pkg_dir / pkg
            pkg_dir.mkdir(exist_ok=True)
            (pkg_dir / "__init__.py").touch()
        (pkg_dir / f"{parts[-1]}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    normalized = re.sub(r"[-_.]+", "_", dist)
    info = root / f"{normalized}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8"
    )
    lines = [f"[{group}]"] + [f"{name} = {target}" for name, target in entry_points.items()]
    if implementations:
        lines += ["", f"[{DECLARATIONS}]"]
        lines += [f"{name} = {target}" for name, target in implementations.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (info / "RECORD").write_text("", encoding="utf-8")
    return root


@pytest.fixture
def isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Clear ``BIASBREAKER_*`` variables and chdir into an empty directory; return it."""
    for var in list(os.environ):
        if var.upper().startswith("BIASBREAKER_"):
            monkeypatch.delenv(var)
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    return workdir


@pytest.fixture
def fake_plugin_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDist]:
    """Return ``make(dist, *, version, entry_points, ...)`` installing a fake distribution.

    ``make`` takes the arguments of :func:`write_fake_dist` but ``root``. Each call writes a
    separate site directory and prepends it to ``sys.path``; modules it imported are removed
    from ``sys.modules`` after the test.
    """
    created: list[str] = []
    counter = iter(range(1_000_000))

    def make(
        dist: str,
        *,
        version: str = "1.0.0",
        entry_points: Mapping[str, str],
        modules: Mapping[str, str] | None = None,
        group: str = GROUP,
        implementations: Mapping[str, str] | None = None,
    ) -> Path:
        site = tmp_path / f"site-{next(counter)}"
        write_fake_dist(
            site,
            dist,
            version=version,
            entry_points=entry_points,
            modules=modules,
            group=group,
            implementations=implementations,
        )
        monkeypatch.syspath_prepend(str(site))
        created.extend(m.split(".")[0] for m in (modules or {}))
        return site

    yield make
    for top in set(created):
        for name in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
            del sys.modules[name]


@pytest.fixture
def plugin_host() -> PluginHost:
    """A plugin host that loads no installed plugin and blocks nothing."""
    return PluginHost(autoload=False, disabled=frozenset())


@pytest.fixture
def register_plugin(plugin_host: PluginHost) -> Iterator[RegisterPlugin]:
    """Return ``register(plugin, name=...)`` adding a throwaway plugin to ``plugin_host``."""
    names: list[str] = []

    def register(
        plugin: object,
        name: str | None = None,
        *,
        distribution: str | None = None,
        version: str | None = None,
    ) -> str:
        plugin_name = name or f"undo-{len(names)}"
        plugin_host.register(plugin, name=plugin_name, distribution=distribution, version=version)
        names.append(plugin_name)
        return plugin_name

    yield register
    for plugin_name in names:
        plugin_host.unregister(plugin_name)


@pytest.fixture
def make_kernel(plugin_host: PluginHost, isolated_config: Path) -> MakeKernel:
    """Return ``make(overrides=None, config_file=None)`` building a kernel on ``plugin_host``."""

    def make(
        overrides: Mapping[str, Any] | None = None,
        config_file: str | os.PathLike[str] | None = None,
    ) -> Kernel:
        loaded = load_settings(config_file, cwd=isolated_config, overrides=overrides)
        return Kernel(loaded, plugin_host)

    return make
