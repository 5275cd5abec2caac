"""The plugin host: loads the ``biasbreaker`` entry-point group and fills the registry.

Entry points are loaded one at a time (sqlfluff's pattern), so one broken plugin does not hide
the others: its failure is recorded with the plugin's name, distribution, version and the
original exception, and commands that do not need it keep working. ``strict=True`` (the CLI's
``--strict``) makes any failure fatal. First-party plugins are entry points of the
``biasbreaker`` distribution, loaded exactly like a third party's.

Which plugins are imported: with ``wanted`` (what the configuration selects, see
:class:`~biasbreaker.catalog.Wanted`), a plugin whose distribution declares its implementations
in its metadata (:mod:`biasbreaker.catalog`) is imported only if one of them is wanted; the
others are listed from their metadata (status ``declared``), and none of their code runs. A
plugin that declares nothing is always imported (nothing else says what it provides). Without
``wanted`` every plugin is imported (``biasbreaker plugins --verbose``).

Environment:
    ``BIASBREAKER_DISABLE_PLUGINS=a,b``: entry-point names never loaded (pluggy ``set_blocked``);
    names are case-sensitive, and one that matches no installed plugin is a notice.
    ``BIASBREAKER_TRACE_PLUGINS=1``: log every load, registration and hook call at INFO.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy
from pydantic import BaseModel

from biasbreaker import hookspecs
from biasbreaker.catalog import Declared, Wanted, declaration_problems, read_declarations
from biasbreaker.errors import PluginError, PluginLoadError
from biasbreaker.points import EXTENSION_POINTS, PointName
from biasbreaker.registry import (
    Factory,
    Implementation,
    NoOptions,
    Registry,
    check_registration,
)

log = logging.getLogger("biasbreaker.plugins")

GROUP = "biasbreaker"
"""The entry-point group plugins declare themselves in."""

DISABLE_ENV = "BIASBREAKER_DISABLE_PLUGINS"
TRACE_ENV = "BIASBREAKER_TRACE_PLUGINS"


@dataclass(frozen=True)
class PluginInfo:
    """What the host knows about one plugin.

    Args:
        name: The entry-point name (the plugin's name).
        target: The entry point's ``module:attr`` target, or the module name.
        distribution: The distribution declaring it, ``None`` for in-process registrations.
        version: The distribution's version, or ``None``.
        status: ``"loaded"``, ``"failed"``, ``"disabled"``, or ``"declared"`` (listed from its
            metadata, not imported: nothing it declares is wanted).
        hooks: The extension points the plugin implements (empty if it failed to import; for
            a declared plugin, those of its declarations).
        error: The import or registration error, for ``status == "failed"``.
        declared: What its distribution declares it provides, or ``None`` if nothing.
    """

    name: str
    target: str
    distribution: str | None
    version: str | None
    status: str
    hooks: tuple[str, ...] = ()
    error: PluginLoadError | None = None
    declared: Declared | None = None


def disabled_from_env(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The plugin names listed in ``BIASBREAKER_DISABLE_PLUGINS`` (comma-separated)."""
    env = os.environ if environ is None else environ
    raw = env.get(DISABLE_ENV, "")
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


def _dist_of(ep: metadata.EntryPoint) -> tuple[str | None, str | None]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None, None
    return dist.metadata["Name"], dist.version


@dataclass
class PluginHost:
    """A pluggy ``PluginManager`` with biasbreaker's hookspecs, loader and bookkeeping.

    Args:
        autoload: Load the ``biasbreaker`` entry-point group on construction. Tests of the kernel
            pass ``False`` and register throwaway plugins instead.
        strict: Raise the first :class:`PluginLoadError` instead of recording it.
        disabled: Entry-point names to block; ``None`` reads ``BIASBREAKER_DISABLE_PLUGINS``.
        wanted: What the configuration needs: a plugin that declares its implementations is
            imported only if it provides one of these; ``None`` imports every plugin.

    Attributes:
        notices: Warnings for the user that are not load failures, e.g. a name in
            ``BIASBREAKER_DISABLE_PLUGINS`` that matches no installed plugin (also logged).

    Raises:
        PluginLoadError: With ``strict=True``, when a plugin fails to import (here) or to
            register (:meth:`build_registry`).
    """

    autoload: bool = True
    strict: bool = False
    disabled: frozenset[str] | None = None
    wanted: Wanted | None = None
    pm: pluggy.PluginManager = field(init=False)
    infos: dict[str, PluginInfo] = field(init=False, default_factory=dict)
    notices: list[str] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        if self.disabled is None:
            self.disabled = disabled_from_env()
        for name in sorted(self.disabled):
            self.pm.set_blocked(name)
        if os.environ.get(TRACE_ENV, "") not in ("", "0"):
            self.pm.add_hookcall_monitoring(
                lambda hook, impls, kwargs: log.info("hook %s -> %d impls", hook, len(impls)),
                lambda outcome, hook, impls, kwargs: None,
            )
            if not log.handlers and not logging.getLogger().handlers:
                logging.basicConfig(level=logging.INFO)
            log.setLevel(logging.INFO)
        if self.autoload:
            self.load_entry_points()

    @property
    def failures(self) -> list[PluginLoadError]:
        """Every recorded load failure, in load order."""
        return [i.error for i in self.infos.values() if i.error is not None]

    def load_entry_points(
        self,
        entry_points: Iterable[metadata.EntryPoint] | None = None,
        declarations: Iterable[metadata.EntryPoint] | None = None,
    ) -> list[PluginLoadError]:
        """Load and register the entry points of the ``biasbreaker`` group, one at a time.

        With :attr:`wanted`, a plugin whose declarations (:mod:`biasbreaker.catalog`) hold
        nothing wanted is not imported: it is recorded as ``declared``.

        Args:
            entry_points: The entry points to load; ``None`` reads the installed group.
            declarations: The ``biasbreaker.implementations`` entry points; ``None`` reads the
                installed group.

        Returns:
            The load failures of this call (also kept in :attr:`failures`).

        Raises:
            PluginLoadError: With ``strict=True``, on the first failure.
        """
        eps = (
            list(metadata.entry_points(group=GROUP)) if entry_points is None else list(entry_points)
        )
        declared, notices = read_declarations(eps, declarations)
        for notice in notices:
            log.warning("%s", notice)
            self.notices.append(notice)
        failures: list[PluginLoadError] = []
        for ep in sorted(eps, key=lambda e: (e.name, e.value)):
            dist, version = _dist_of(ep)
            if self.pm.is_blocked(ep.name):
                self.infos.setdefault(
                    ep.name, PluginInfo(ep.name, ep.value, dist, version, "disabled")
                )
                log.info("plugin %s (%s) disabled by %s", ep.name, dist, DISABLE_ENV)
                continue
            pairs = declared.get(ep.name)
            if (
                self.wanted is not None
                and pairs is not None
                and not self.wanted.needs(pairs)
                and ep.name not in self.infos
            ):
                hooks = tuple(sorted({point for point, _ in pairs}))
                self.infos[ep.name] = PluginInfo(
                    ep.name, ep.value, dist, version, "declared", hooks=hooks, declared=pairs
                )
                log.info("plugin %s (%s) not imported: nothing declared is wanted", ep.name, dist)
                continue
            if ep.name in self.infos and self.infos[ep.name].status == "loaded":
                prior = self.infos[ep.name]
                if prior.target == ep.value and prior.distribution == dist:
                    continue
                exc: BaseException = PluginError(
                    f"entry-point name {ep.name!r} is already used by {prior.target} "
                    f"({prior.distribution} {prior.version})"
                )
                err = PluginLoadError(ep.name, dist, version, exc, target=ep.value)
            else:
                try:
                    plugin = ep.load()
                    self.pm.register(plugin, name=ep.name)
                except Exception as load_exc:
                    err = PluginLoadError(ep.name, dist, version, load_exc, target=ep.value)
                    err.__cause__ = load_exc
                else:
                    self._record_loaded(ep.name, ep.value, dist, version, plugin, pairs)
                    log.info("plugin %s loaded from %s %s", ep.name, dist, version)
                    continue
            if self.strict:
                raise err from err.original
            log.warning("%s", err)
            failures.append(err)
            self.infos[ep.name] = PluginInfo(ep.name, ep.value, dist, version, "failed", error=err)
        if entry_points is None:
            self._check_disabled_names({ep.name for ep in eps})
        return failures

    def _check_disabled_names(self, installed: set[str]) -> None:
        """Note every ``BIASBREAKER_DISABLE_PLUGINS`` name that blocks no installed plugin."""
        for name in sorted((self.disabled or frozenset()) - installed):
            same_case = sorted(n for n in installed if n.lower() == name.lower())
            hint = (
                f" (names are case-sensitive: did you mean {same_case[0]!r}?)" if same_case else ""
            )
            notice = (
                f"{DISABLE_ENV} names {name!r}, which is no installed plugin{hint}; it disables "
                f"nothing. Installed plugins: {', '.join(sorted(installed)) or 'none'}"
            )
            log.warning("%s", notice)
            self.notices.append(notice)

    def register(
        self,
        plugin: object,
        *,
        name: str,
        distribution: str | None = None,
        version: str | None = None,
    ) -> None:
        """Register an in-process plugin object (a module, class or instance with hookimpls).

        Args:
            plugin: The object carrying ``@hookimpl`` functions.
            name: Its plugin name.
            distribution: Distribution to report, if any.
            version: Version to report, if any.

        Raises:
            PluginError: If the name is taken or blocked, or the object implements no hook or
                a hook with unknown arguments.
        """
        if self.pm.is_blocked(name):
            raise PluginError(f"plugin {name!r} is disabled by {DISABLE_ENV}")
        try:
            self.pm.register(plugin, name=name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            raise PluginError(f"cannot register plugin {name!r}: {exc}") from exc
        target = getattr(plugin, "__name__", type(plugin).__name__)
        self._record_loaded(name, target, distribution, version, plugin)

    def unregister(self, name: str) -> None:
        """Remove a plugin registered under ``name`` (no error if absent)."""
        if self.pm.has_plugin(name):
            self.pm.unregister(name=name)
        self.infos.pop(name, None)

    def _record_loaded(
        self,
        name: str,
        target: str,
        dist: str | None,
        version: str | None,
        plugin: object,
        declared: Declared | None = None,
    ) -> None:
        hooks = tuple(
            sorted(
                caller.name
                for caller in self.pm.get_hookcallers(plugin) or []
                if caller.name in {p.name for p in EXTENSION_POINTS}
            )
        )
        self.infos[name] = PluginInfo(
            name, target, dist, version, "loaded", hooks=hooks, declared=declared
        )

    def build_registry(self) -> Registry:
        """Call every extension-point hook of every loaded plugin and collect the registrations.

        A plugin whose hook raises, or that passes ``register`` an invalid name, options model
        or factory, fails as a whole: none of its registrations is kept, it is recorded as
        ``failed`` (:attr:`failures`, ``biasbreaker plugins``) with what it did wrong, and the
        other plugins' implementations stay available. A plugin that failed before (an earlier
        call) is not called again.

        Returns:
            The registry. Duplicate names are recorded in :attr:`Registry.conflicts`; the
            plugins that failed to load or register are named in its "not available" errors.

        Raises:
            PluginLoadError: With ``strict=True``, on the first plugin that fails to register.
        """
        staged: list[Implementation[Any]] = []
        failed: dict[str, PluginLoadError] = {}
        hooks = Hooks(self)
        for point in EXTENSION_POINTS:
            for name, problem, exc in hooks.collect(point.name, staged.append, skip=failed):
                prior = self.infos.get(name)
                dist, version = (prior.distribution, prior.version) if prior else (None, None)
                err = PluginLoadError(
                    name,
                    dist,
                    version,
                    exc,
                    target=prior.target if prior else name,
                    problem=problem,
                )
                err.__cause__ = exc
                if self.strict:
                    raise err from exc
                log.warning("%s", err)
                failed[name] = err
                self.infos[name] = PluginInfo(
                    name,
                    prior.target if prior else name,
                    dist,
                    version,
                    "failed",
                    hooks=prior.hooks if prior else (),
                    error=err,
                )
        registry = Registry(
            declared={
                info.name: (
                    info.declared or (),
                    f"{info.distribution} {info.version or '?'}"
                    if info.distribution
                    else "not from a distribution",
                )
                for info in self.infos.values()
                if info.status == "declared"
            },
            disabled={
                info.name: (
                    f"{info.distribution} {info.version or '?'}"
                    if info.distribution
                    else "not from a distribution"
                )
                for info in self.infos.values()
                if info.status == "disabled"
            },
            failed={
                info.name: str(info.error)
                for info in self.infos.values()
                if info.status == "failed" and info.error is not None
            },
        )
        for impl in staged:
            if impl.plugin not in failed:
                registry.add(impl)
        for info in self.infos.values():
            if info.status != "loaded":
                continue
            pairs = {(i.point, i.name) for i in registry.registered_by(info.name)}
            for problem in declaration_problems(info.name, info.declared, pairs):
                if problem not in self.notices:
                    log.warning("%s", problem)
                    self.notices.append(problem)
        return registry


class Hooks:
    """The typed facade through which kernel code calls hooks (never ``pm.hook`` directly).

    Each extension-point hook is called once per plugin, with a ``register`` callback bound to
    that plugin, so every registration is attributed to its plugin and distribution.
    """

    def __init__(self, host: PluginHost) -> None:
        self._host = host

    def collect(
        self,
        point: PointName,
        add: Callable[[Implementation[Any]], None],
        *,
        skip: Container[str] = (),
    ) -> list[tuple[str, str, Exception]]:
        """Let every plugin implementing ``point`` register its implementations through ``add``.

        One plugin's failure does not stop the others. A plugin whose registration is invalid
        fails even if its hook catches the :class:`PluginError` that ``register`` raised.

        Args:
            point: The extension point (hook) name.
            add: Receives each valid registration, in order.
            skip: Plugin names not to call (they failed already); plugins whose status is
                ``failed`` are skipped too.

        Returns:
            One ``(plugin, problem, exception)`` per plugin that failed in this hook: the hook
            raised, or it passed ``register`` an invalid name, options model or factory.
            ``problem`` says what it did wrong. Its registrations from this hook may already
            have been passed to ``add``: the caller discards them.
        """
        caller = getattr(self._host.pm.hook, point)
        failures: list[tuple[str, str, Exception]] = []
        for impl in caller.get_hookimpls():
            info = self._host.infos.get(impl.plugin_name)
            if impl.plugin_name in skip or (info is not None and info.status == "failed"):
                continue
            dist = info.distribution if info else None
            version = info.version if info else None
            invalid: list[PluginError] = []
            register = _bind_register(add, invalid, point, impl.plugin_name, dist, version)
            kwargs: dict[str, Any] = {"register": register}
            try:
                impl.function(**{a: kwargs[a] for a in impl.argnames})
            except Exception as exc:
                if invalid and exc is invalid[0]:
                    failures.append((impl.plugin_name, str(exc), exc))
                else:
                    failures.append((impl.plugin_name, f"its {point} hook raised {exc!r}", exc))
                continue
            if invalid:
                failures.append((impl.plugin_name, str(invalid[0]), invalid[0]))
                continue
            log.info("plugin %s registered into %s", impl.plugin_name, point)
        return failures


def _bind_register(
    add: Callable[[Implementation[Any]], None],
    invalid: list[PluginError],
    point: PointName,
    plugin: str,
    dist: str | None,
    version: str | None,
) -> Callable[..., None]:
    def register(
        name: str,
        factory: Factory[object],
        *,
        options: type[BaseModel] = NoOptions,
        summary: str = "",
        requires: Sequence[str] = (),
        install: str = "",
    ) -> None:
        try:
            check_registration(plugin, point, name, options, requires, install)
            if not callable(factory):
                raise PluginError(
                    f"plugin {plugin!r} registered {point} {name!r} with a factory that is not "
                    f"callable: {factory!r}"
                )
        except PluginError as exc:
            invalid.append(exc)
            raise
        add(
            Implementation(
                point,
                name,
                factory,
                options,
                summary,
                plugin,
                dist,
                version,
                requires=tuple(requires),
                install=install,
            )
        )

    return register
