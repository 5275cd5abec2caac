"""The assembled kernel: settings + plugin host + registry + the implementations built so far.

``Kernel.load()`` is what commands and applications call: it loads the configuration (first
pass), loads the plugins, fills the registry, validates the selection and plugin options
(second pass) and then builds implementations lazily, once each, on first use. Nothing that is
not selected is ever built.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel

from biasbreaker.catalog import Wanted
from biasbreaker.config import LoadedSettings, Settings, load_settings, selection
from biasbreaker.errors import (
    BiasbreakerError,
    ConfigError,
    PluginError,
)
from biasbreaker.intervention.router import STRATEGY_POINTS, possible_routes
from biasbreaker.llm import LLMClient, ThreadedClient
from biasbreaker.plugins import PluginHost
from biasbreaker.points import EXTENSION_POINTS, POINTS, PointName
from biasbreaker.redaction import register_environment
from biasbreaker.registry import Registry
from biasbreaker.resolution import resolve_selection, selection_problems
from biasbreaker.types import ROUTES, Route


class Kernel:
    """Configuration, plugins and built implementations for one run or command.

    Satisfies :class:`biasbreaker.registry.BuildContext`, so factories receive it. The selection
    of an extension point is validated (second pass) the first time the point is used, so a
    broken or missing plugin only stops commands that need it; :meth:`check` validates every
    point and every ``[plugin.<name>]`` table at once (``biasbreaker config --check``, and the
    start of every guarded run).

    Args:
        loaded: First-pass settings with provenance.
        host: A plugin host whose plugins are loaded.

    Raises:
        PluginLoadError: With a strict host, a plugin failed to register (its hook raised, or
            it registered an invalid name, options model or factory). A host that is not
            strict records the failure instead (``host.failures``) and the kernel works
            without that plugin's implementations.

    Constructing one registers the environment's secrets
    (:func:`~biasbreaker.redaction.register_environment`): a plugin's error quoting one is
    redacted wherever biasbreaker writes it, in the library as under the command line.
    """

    def __init__(self, loaded: LoadedSettings, host: PluginHost) -> None:
        register_environment()
        self.loaded = loaded
        self.host = host
        self.registry: Registry = host.build_registry()
        self._options: dict[tuple[str, str], BaseModel] = {}
        self._resolved: set[str] = set()
        self._built: dict[tuple[PointName, str], object] = {}
        self._threaded: ThreadedClient | None = None

    def _resolve(self, points: list[PointName] | None) -> None:
        self._options.update(resolve_selection(self.loaded, self.registry, points))
        self._resolved.update(points if points is not None else POINTS)

    def check(self) -> None:
        """Validate the whole selection and every plugin options table (second pass).

        Raises:
            UnknownImplementationError: The one problem is a selected implementation that is
                not installed.
            ConfigError: Any other problem (a duplicate name, an invalid or orphan plugin
                options table), or several problems at once.
        """
        self._resolve(None)

    def check_build(self, *, repairs: bool = True) -> list[str]:
        """Find everything that building a guarded run would find (``config --check``).

        Runs :meth:`check`, then builds every selected implementation whose selection and
        options are valid (so a factory's own checks run, and a missing optional extra such as
        the ``semantic`` scorer's or LangGraph for the ``langgraph`` adapter shows), builds the
        probe (axes, groups, term files, extra terms), the skeptic panel and the MADERA stages,
        and finally closes what it built (implementations built before it stay open). Nothing
        is called on the built objects beyond their construction.

        Args:
            repairs: Whether the run uses the configured repairs. ``False`` for a run whose
                intervention hook replaces them (``guard(hook=...)``): the router and the
                strategies are then not built (a selection problem in them is still listed),
                so a hook needs no LLM client.

        Returns:
            One message per distinct problem, each naming where the failing setting comes
            from; empty when building would succeed. A problem that :meth:`check` finds is
            listed once, not again when building something that needs it fails because of it.
        """
        from biasbreaker.intervention.madera import Madera
        from biasbreaker.intervention.panel import SkepticPanel
        from biasbreaker.probe import build_probe
        from biasbreaker.probe.probe import probe_terms

        before = set(self._built)
        routes: frozenset[Route] = frozenset()
        if repairs:
            try:
                routes = self.repair_routes()
            except BiasbreakerError:
                routes = frozenset(ROUTES)  # the router's own problem is listed below
        unused: set[str] = {p for r in ROUTES if r not in routes for p in STRATEGY_POINTS[r]}
        if not repairs:
            unused.add("classify_route")  # the hook replaces the router and the strategies
        problems: dict[str, str] = {}
        for problem in selection_problems(self.loaded, self.registry)[1]:
            # an unknown name's message already names any plugin that failed or is disabled
            problems[str(problem)] = str(problem)
        unresolved: set[str] = set()  # the same problems, as one point's resolution raises them
        try:
            # the LLM client first: other factories build it through context.llm()
            for point in sorted(EXTENSION_POINTS, key=lambda p: p.name != "llm_client"):
                try:
                    self._resolve([point.name])
                except BiasbreakerError as exc:
                    unresolved.add(str(exc))
                    continue  # listed above
                if point.name in unused:
                    continue  # a strategy the router never routes to is not built
                selected_by = point.selected_by
                for name in self.selected(point.name):
                    where = f"selected by {selected_by} ({self.loaded.source_of(selected_by)})"
                    if name in self.settings.plugin:
                        table = self.loaded.source_of(f"plugin.{name}")
                        where += f"; [plugin.{name}] from {table}"
                    try:
                        self.build(point.name, name)
                    except BiasbreakerError as exc:
                        if not _caused_by(exc, problems.keys() | unresolved):
                            problems.setdefault(str(exc), f"{exc} [{where}{self._mentioned(exc)}]")
            assemblies: list[tuple[str, str, Callable[[Kernel], object]]] = [
                # the term lists alone first: listed even when a scorer fails the probe's build
                ("the probe's term lists", "probe", lambda k: probe_terms(k.settings.probe)),
                ("the probe", "probe", build_probe),
            ]
            if "skeptics" in routes:
                assemblies.append(("the skeptic panel", "intervention", SkepticPanel.from_context))
            if "madera" in routes:
                assemblies.append(("the MADERA stages", "intervention", Madera.from_context))
            for part, section, assemble in assemblies:
                try:
                    assemble(self)
                except BiasbreakerError as exc:
                    if _caused_by(exc, problems.keys() | unresolved):
                        continue  # e.g. an unknown skeptic, listed once above
                    source = self.loaded.source_of(section)
                    problems.setdefault(
                        str(exc),
                        f"{exc} [building {part}; [{section}]: {source}{self._mentioned(exc)}]",
                    )
        finally:
            closing = self._close_since(before)
        for failed in closing:
            problems.setdefault(failed, failed)
        return list(problems.values())

    def validate(self, *, repairs: bool = True) -> None:
        """Validate as ``biasbreaker run`` and ``demo`` do before they write anything.

        Both passes and a build of everything a guarded run builds (:meth:`check_build`);
        what it builds is closed again, and implementations built before stay as they were.
        ``guard()`` in Python calls this, so it refuses what ``run`` refuses (an orphan
        ``[plugin.<name>]`` table, an LLM client whose key variable is not set).

        Args:
            repairs: ``False`` when an intervention hook replaces the configured repairs
                (``guard(hook=...)``): the router and the strategies are not built.

        Raises:
            ConfigError: Listing every problem, each with the source of its setting.
        """
        problems = self.check_build(repairs=repairs)
        if len(problems) == 1:
            raise ConfigError(problems[0])
        if problems:
            raise ConfigError(f"{len(problems)} problems:\n- " + "\n- ".join(problems))

    def _close_since(self, before: set[tuple[PointName, str]]) -> list[str]:
        """Close and forget the implementations built since ``before`` was taken.

        They were built and never called, so they hold no connection bound to a loop; inside
        a running event loop (``guard()`` in a notebook or an async app) they are closed on a
        loop of their own in a helper thread. An implementation whose ``aclose`` (or the
        mere lookup of it: a proxy object's ``__getattr__``) raises is still forgotten, the
        others are still closed, and the failure is returned as a problem naming the plugin.

        Returns:
            One problem per implementation that failed to close (``[]`` when none did).
        """
        problems: list[str] = []
        for key in [k for k in self._built if k not in before]:
            obj = self._built.pop(key)
            try:
                aclose = getattr(obj, "aclose", None)
                if aclose is not None and inspect.iscoroutinefunction(aclose):
                    _run_unused_close(aclose)
            except Exception as exc:
                point, name = key
                impl = self.registry.get(point, name)
                problems.append(
                    f"{point} {name!r} from plugin {impl.plugin!r} ({impl.origin}) failed to "
                    f"close after the build check: {exc!r}; an implementation must close "
                    "(aclose) without raising, or not define aclose"
                )
        return problems

    def _mentioned(self, exc: BaseException) -> str:
        """``; key from source`` for every configured key that a message names.

        A key counts as named when it appears as ``breaker.x`` or ``[breaker] x``, so a
        factory's complaint about another section shows where that section's value came from.
        """
        text = str(exc)
        notes = []
        for key, source in sorted(self.loaded.provenance.items()):
            section, _, leaf = key.rpartition(".")
            if key in text or (section and f"[{section}] {leaf}" in text):
                notes.append(f"; {key} from {source}")
        return "".join(notes)

    def close(self) -> None:
        """Close every built implementation that holds resources, then forget them all.

        An implementation with an ``async aclose()`` (an LLM client's connection pool) is
        closed with :func:`asyncio.run`, so call this outside a running event loop.
        """
        built, self._built = self._built, {}
        for obj in built.values():
            aclose = getattr(obj, "aclose", None)
            if aclose is not None and inspect.iscoroutinefunction(aclose):
                asyncio.run(aclose())

    @classmethod
    def load(
        cls,
        config_file: str | os.PathLike[str] | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, Any] | None = None,
        strict: bool = False,
        host: PluginHost | None = None,
    ) -> Kernel:
        """Load configuration and plugins and validate both.

        Args:
            config_file: ``--config FILE``, or ``None``.
            cwd: Directory searched for ``biasbreaker.toml`` and ``pyproject.toml``.
            overrides: Explicit settings, highest precedence (nested like the TOML).
            strict: Make any plugin load failure fatal.
            host: A prepared plugin host (tests); ``None`` autoloads the entry-point group,
                importing only the plugins the configuration selects and those that declare
                nothing (:func:`wanted`).

        Returns:
            The kernel.

        Raises:
            ConfigError: Invalid configuration (either pass).
            PluginLoadError: With ``strict``, a plugin failed to load or register.
        """
        loaded = load_settings(config_file, cwd=cwd, overrides=overrides)
        if host is None:
            host = PluginHost(strict=strict, wanted=wanted(loaded.settings))
        return cls(loaded, host)

    @property
    def settings(self) -> Settings:
        """The validated configuration tree."""
        return self.loaded.settings

    @property
    def seed(self) -> int:
        """The run's seed."""
        return self.loaded.settings.seed

    def selected(self, point: PointName) -> list[str]:
        """The implementation names selected for ``point``, in configuration order."""
        return selection(self.settings, point)

    def options(self, point: PointName, name: str) -> BaseModel:
        """The validated options of a selected implementation.

        Raises:
            UnknownImplementationError: A selected implementation of ``point`` is not installed.
            ConfigError: If ``name`` is not selected for ``point``, or its options are invalid.
        """
        if point not in self._resolved:
            self._resolve([point])
        try:
            return self._options[(point, name)]
        except KeyError:
            raise ConfigError(
                f"{point} {name!r} is not selected ({POINTS[point].selected_by} = "
                f"{self.selected(point)!r}); select it in the configuration first"
            ) from None

    def build(self, point: PointName, name: str | None = None) -> object:
        """Build an implementation once and cache it.

        Args:
            point: The extension point.
            name: The implementation name; ``None`` means the single selected one.

        Returns:
            The implementation object returned by the plugin's factory.

        Raises:
            ConfigError: ``name`` is ``None`` but several are selected, or ``name`` is not
                selected.
            PluginError: The factory raised or returned ``None``; the message names the plugin
                and distribution, and the original exception is chained.
        """
        if name is None:
            names = self.selected(point)
            if len(names) != 1:
                raise ConfigError(
                    f"{point} has {len(names)} selected implementations {names!r}; "
                    "pass the name to build"
                )
            name = names[0]
        key = (point, name)
        if key in self._built:
            return self._built[key]
        options = self.options(point, name)
        impl = self.registry.get(point, name)
        try:
            obj = impl.factory(options, self)
        except (ConfigError, PluginError):
            raise
        except Exception as exc:
            raise PluginError(
                f"{point} {name!r} from plugin {impl.plugin!r} ({impl.origin}) failed to "
                f"build: {exc!r}"
            ) from exc
        if obj is None:
            raise PluginError(
                f"{point} {name!r} from plugin {impl.plugin!r} ({impl.origin}): its factory "
                "returned None; it must return the implementation object"
            )
        self._built[key] = obj
        return obj

    def repair_routes(self) -> frozenset[Route]:
        """The routes the configured router (``[intervention] router``) can return.

        Only the strategies among them are built (:func:`~biasbreaker.intervention.router.
        possible_routes`): with ``router = "human-review"`` neither the skeptics nor MADERA,
        so no LLM client is needed.

        Raises:
            UnknownImplementationError: The router is not installed.
            PluginError: The router failed to build or declares invalid routes.
        """
        name = self.settings.intervention.router
        return possible_routes(self.build("classify_route", name), name=name)

    def llm(self) -> LLMClient:
        """The selected LLM client (``[llm] client``), built once.

        A client whose ``complete`` is synchronous is returned wrapped in
        :class:`~biasbreaker.llm.ThreadedClient`: each call runs in a worker thread.

        Raises:
            ConfigError: No client is configured (``[llm] client`` unset): the message names
                the three choices (a real client, human review only, the fake by name).
            PluginError: If the factory fails or returns an object that is not an ``LLMClient``.
        """
        if not self.selected("llm_client"):
            raise ConfigError(self._no_client_message())
        client = self.build("llm_client")
        if not isinstance(client, LLMClient):
            name = self.selected("llm_client")[0]
            impl = self.registry.get("llm_client", name)
            raise PluginError(
                f"llm_client {name!r} from plugin {impl.plugin!r} ({impl.origin}) built "
                f"{type(client).__name__}, which lacks model/complete/aclose of LLMClient"
            )
        if not inspect.iscoroutinefunction(client.complete):
            # a synchronous client: every call in a worker thread, never on the event loop
            if self._threaded is None or self._threaded.inner is not client:
                self._threaded = ThreadedClient(client)
            return self._threaded
        return client

    def _no_client_message(self) -> str:
        declared = {
            name
            for info in self.host.infos.values()
            for point, name in info.declared or ()
            if point == "llm_client"
        }
        installed = sorted((set(self.registry.names("llm_client")) | declared) - {"fake"})
        clients = ", ".join(map(repr, installed)) or "none installed besides 'fake'"
        example = installed[0] if installed else "openai-compatible"
        if "openai-compatible" in installed:
            example = "openai-compatible"
        return (
            f"[llm] client is not set ({self.loaded.source_of('llm.client')}), and a part of "
            "this configuration needs an LLM (a skeptic, a MADERA stage, or a graph factory "
            "that takes llm). Choose one: (1) configure a client, e.g. "
            f'[llm] client = "{example}" with its [plugin.{example}] table (installed '
            f"clients: {clients}); (2) route tripped steps to human review only, with no LLM "
            'repair: [intervention] router = "human-review"; (3) for tests and demos only, '
            'name the seeded simulated client explicitly: [llm] client = "fake" (not a '
            "language model)"
        )


def wanted(settings: Settings) -> Wanted:
    """What ``settings`` needs from the plugins: its selected implementations, its tables."""
    points = {(p.name, n) for p in EXTENSION_POINTS for n in selection(settings, p.name)}
    return Wanted(frozenset(points), frozenset(settings.plugin))


def _caused_by(exc: BaseException, messages: Collection[str]) -> bool:
    """Whether ``exc`` or an exception it was raised from or during has one of ``messages``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if str(current) in messages:
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _run_unused_close(aclose: Callable[[], Any]) -> None:
    """Run ``aclose()`` of a never-used implementation to completion, even inside a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(aclose())
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="biasbreaker-close") as pool:
        pool.submit(asyncio.run, aclose()).result()
