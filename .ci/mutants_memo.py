"""A pytest plugin for mutant groups whose tests build many guards (``-p mutants_memo``).

The ``middleware-*`` groups' tests build a ``BiasGuardMiddleware`` (a kernel, its plugins,
the probe's term lists and patterns) in almost every test, and the kernel builds the
adapter twice (``validate`` then ``build``): measured with cProfile over the group's three
test files, about 60 % of their time went to code no mutant of the group touches, done again
per test with the same inputs and the same result:

- ``patterns._alternation``, the trie-shaped regex of the term lists and the name book
  (a ``str`` from a list of ``str``);
- ``importlib.metadata.entry_points(group=...)`` and the distribution names of the entry
  points (``plugins._dist_of``, ``catalog._dist_name``), which read every installed
  distribution's metadata files again on each call.

This plugin memoizes those, in the test process only, so each mutant's test run computes
each once. Every value memoized is immutable (``str``, a tuple of ``str``, an
``EntryPoints`` tuple), and the installed distributions do not change during a test run, so
a test sees exactly what it would see without the plugin: the verdict on a mutant is the
same, it only comes sooner. It also runs last the tests that start other Python processes
(:data:`LAST`), which pay the full cost again: with ``pytest -x`` a mutant killed by any
other test stops before them; a surviving mutant still runs every test.
"""

from __future__ import annotations

import functools
import importlib.metadata as metadata
from typing import Any

import pytest

LAST = ("test_a_review_resumes_in_another_process_with_a_sqlite_store",)
"""Test function names run after every other test (each starts two Python processes)."""


def _memoize() -> None:
    from biasbreaker import catalog, plugins
    from biasbreaker.probe import patterns

    alternation = patterns._alternation

    @functools.cache
    def _cached_alternation(surfaces: tuple[str, ...]) -> str:
        return alternation(list(surfaces))

    def memo_alternation(surfaces: Any) -> str:
        return _cached_alternation(tuple(surfaces))

    entry_points = metadata.entry_points

    @functools.cache
    def _cached_entry_points(params: tuple[tuple[str, Any], ...]) -> Any:
        return entry_points(**dict(params))

    def memo_entry_points(**params: Any) -> Any:
        return _cached_entry_points(tuple(sorted(params.items())))

    def by_entry_point(fn: Any) -> Any:
        cache: dict[tuple[str, str, str, Any], Any] = {}

        def memo(ep: Any) -> Any:
            dist = getattr(ep, "dist", None)
            key = (ep.name, ep.value, ep.group, None if dist is None else str(dist._path))
            if key not in cache:
                cache[key] = fn(ep)
            return cache[key]

        return memo

    patterns._alternation = memo_alternation  # type: ignore[assignment]
    metadata.entry_points = memo_entry_points  # type: ignore[assignment]
    plugins._dist_of = by_entry_point(plugins._dist_of)  # type: ignore[assignment]
    catalog._dist_name = by_entry_point(catalog._dist_name)  # type: ignore[assignment]


def pytest_configure(config: pytest.Config) -> None:
    """Memoize before any test module is imported."""
    _memoize()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the tests of :data:`LAST` to the end, in their order."""
    last = [i for i in items if getattr(i, "originalname", i.name) in LAST]
    items[:] = [i for i in items if i not in last] + last
