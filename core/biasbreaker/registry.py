"""The name → implementation registry behind every extension point.

Plugins do not hand the kernel objects; they *register named factories* through the
``register`` callback each hook receives (the pattern of llm's ``register_models``). The
configuration then chooses implementations by name, and the kernel builds only the chosen ones:
an installed but unselected implementation is listed, never constructed or called.

A factory is called as ``factory(options, context)`` where ``options`` is an instance of the
pydantic model the implementation declared (validated from ``[plugin.<name>]``) and ``context``
is a :class:`BuildContext`.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

from biasbreaker.errors import (
    DuplicateImplementationError,
    PluginError,
    UnknownImplementationError,
)
from biasbreaker.points import PointName

if TYPE_CHECKING:
    from biasbreaker.config import Settings
    from biasbreaker.llm import LLMClient

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
"""Implementation names are lower-kebab: ``trust``, ``empirical-auditor``, ``openai-compatible``."""

FIRST_PARTY_DISTRIBUTION = "biasbreaker"
"""The distribution of the first-party plugins (``biasbreaker_plugins``)."""

_DISABLE_ENV = "BIASBREAKER_DISABLE_PLUGINS"


class NoOptions(BaseModel):
    """The options model of an implementation that takes none: ``[plugin.<name>]`` must be empty."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class BuildContext(Protocol):
    """What a factory may use while building an implementation.

    The kernel passes its :class:`~biasbreaker.kernel.Kernel`, which satisfies this protocol.
    """

    @property
    def settings(self) -> Settings:
        """The validated configuration tree."""
        ...

    @property
    def seed(self) -> int:
        """The run's seed (``seed`` in the configuration); derive all randomness from it."""
        ...

    def llm(self) -> LLMClient:
        """The selected LLM client (``[llm] client``), built once per kernel."""
        ...

    def build(self, point: PointName, name: str | None = None) -> object:
        """Build (once, cached) the implementation ``name`` of ``point``, or the selected one."""
        ...


Factory = Callable[[Any, BuildContext], T]
"""``factory(options, context) -> implementation``; ``options`` is the declared model's instance."""


class Register(Protocol[T_contra]):
    """The callback a hook receives to contribute named implementations.

    Example:
        ``register("trust", make_trust, options=TrustOptions, summary="trust-weighted vote")``
    """

    def __call__(
        self,
        name: str,
        factory: Factory[T_contra],
        *,
        options: type[BaseModel] = NoOptions,
        summary: str = "",
        requires: Sequence[str] = (),
        install: str = "",
    ) -> None:
        """Register ``factory`` under ``name``.

        Args:
            name: Lower-kebab implementation name, unique within the extension point.
            factory: Called as ``factory(options, context)`` when the implementation is selected.
            options: Pydantic model validating ``[plugin.<name>]``; it should set
                ``extra="forbid"`` and accept strings from the environment.
            summary: One line shown by ``biasbreaker plugins``.
            requires: Top-level modules the factory imports that may be missing (an optional
                extra), e.g. ``("sentence_transformers",)``; ``biasbreaker plugins`` checks them
                with ``importlib.util.find_spec`` (nothing is imported) and says what is missing.
            install: How to get them, e.g. ``"pip install 'biasbreaker[semantic]'"``.

        Raises:
            PluginError: If the name is not lower-kebab, ``options`` is not a pydantic model, or
                ``requires``/``install`` are not strings.
        """
        ...


@dataclass(frozen=True)
class Implementation(Generic[T]):
    """One registered implementation.

    Args:
        point: The extension point.
        name: The implementation's name.
        factory: Its factory.
        options: Its options model.
        summary: One line of description.
        plugin: The registering plugin's name (its entry-point name).
        distribution: The plugin's distribution, or ``None`` for a plugin registered in-process.
        version: The distribution's version, or ``None``.
        requires: Top-level modules its factory needs that may be missing (optional extras).
        install: How to install them, or ``""``.
    """

    point: PointName
    name: str
    factory: Factory[T]
    options: type[BaseModel]
    summary: str
    plugin: str
    distribution: str | None
    version: str | None
    requires: tuple[str, ...] = ()
    install: str = ""

    def missing(self) -> list[str]:
        """The modules of :attr:`requires` that cannot be imported (found without importing)."""
        out = []
        for module in self.requires:
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                out.append(module)
        return out

    @property
    def first_party(self) -> bool:
        """Whether the implementation comes from the ``biasbreaker`` distribution itself."""
        return self.distribution == FIRST_PARTY_DISTRIBUTION

    @property
    def origin(self) -> str:
        """``"<distribution> <version>"`` or ``"plugin <name> (not installed)"``."""
        if self.distribution:
            return f"{self.distribution} {self.version or '?'}"
        return f"plugin {self.plugin}, not from a distribution"


@dataclass
class Registry:
    """All implementations registered by the loaded plugins, by extension point and name.

    Duplicates (two implementations under one name in one extension point) are recorded as
    conflicts rather than raised at once, so ``biasbreaker plugins`` can still show them;
    resolving a conflicted name raises :class:`DuplicateImplementationError`.

    Args:
        declared: Plugins not imported, listed from their metadata: name → (the
            ``(point, name)`` pairs they declare, their origin); their implementations are
            named as installed, but cannot be built until the plugin is imported.
        disabled: Plugins blocked by ``BIASBREAKER_DISABLE_PLUGINS`` (name → origin), named
            when a selected implementation is not available.
        failed: Plugins that failed to import or to register (name → the failure's message),
            named when a selected implementation is not available.
    """

    declared: Mapping[str, tuple[tuple[tuple[str, str], ...], str]] = field(default_factory=dict)
    disabled: Mapping[str, str] = field(default_factory=dict)
    failed: Mapping[str, str] = field(default_factory=dict)
    _by_point: dict[str, dict[str, Implementation[Any]]] = field(default_factory=dict)
    _by_plugin: dict[str, list[Implementation[Any]]] = field(default_factory=dict)
    _conflicts: dict[tuple[str, str], list[Implementation[Any]]] = field(default_factory=dict)

    @property
    def conflicts(self) -> list[DuplicateImplementationError]:
        """Every duplicate registration seen, in registration order."""
        return [self._conflict_error(impls) for impls in self._conflicts.values()]

    def add(self, impl: Implementation[Any]) -> None:
        """Add an implementation; a duplicate name in the same point becomes a conflict."""
        self._by_plugin.setdefault(impl.plugin, []).append(impl)
        slots = self._by_point.setdefault(impl.point, {})
        existing = slots.get(impl.name)
        if existing is None:
            slots[impl.name] = impl
            return
        self._conflicts.setdefault((impl.point, impl.name), [existing]).append(impl)

    def conflicted(self, point: str, name: str) -> bool:
        """Whether ``name`` is registered more than once in ``point``."""
        return (point, name) in self._conflicts

    def registered_by(self, plugin: str) -> list[Implementation[Any]]:
        """Everything ``plugin`` registered, conflicting registrations included, in order."""
        return list(self._by_plugin.get(plugin, []))

    def _conflict_error(self, impls: Sequence[Implementation[Any]]) -> DuplicateImplementationError:
        first = impls[0]
        by = " and ".join(f"by plugin {i.plugin!r} ({i.origin})" for i in impls)
        # Advise dropping a third-party plugin first; disabling a first-party plugin removes
        # every implementation it ships, so say what each choice removes.
        ways = []
        for impl in sorted(impls, key=lambda i: (i.first_party, i.plugin)):
            removed = [f"{i.point}:{i.name}" for i in self.registered_by(impl.plugin)]
            how = []
            if impl.distribution and not impl.first_party:
                how.append(f"uninstall {impl.distribution}")
            how.append(f"set {_DISABLE_ENV}={impl.plugin}")
            kind = " (first-party)" if impl.first_party else ""
            count = "it" if len(removed) == 1 else f"all {len(removed)} of its implementations"
            ways.append(
                f"to drop plugin {impl.plugin!r}{kind}, {' or '.join(how)}, which removes "
                f"{count}: {', '.join(removed)}"
            )
        return DuplicateImplementationError(
            f"{first.point} implementation {first.name!r} is registered twice: {by}. Keep one: "
            + "; ".join(ways)
            + "."
        )

    def names(self, point: PointName) -> list[str]:
        """The sorted implementation names registered for ``point``."""
        return sorted(self._by_point.get(point, {}))

    def get(self, point: PointName, name: str, *, where: str | None = None) -> Implementation[Any]:
        """Look up one implementation.

        Args:
            point: The extension point.
            name: The implementation name.
            where: Where the name came from (config source and key), for the error message.

        Returns:
            The implementation.

        Raises:
            UnknownImplementationError: No installed plugin provides ``name``; the message lists
                what is installed for ``point`` and from which distribution, and the plugins
                that are disabled.
            DuplicateImplementationError: Two plugins registered ``name``.
        """
        conflict = self._conflicts.get((point, name))
        if conflict is not None:
            raise self._conflict_error(conflict)
        impl = self._by_point.get(point, {}).get(name)
        if impl is None:
            raise UnknownImplementationError(self.unknown_message(point, name, where))
        return impl

    def unknown_message(self, point: PointName, name: str, where: str | None) -> str:
        """The message for an unknown name: what is installed, and the likely fix.

        Plugins that are disabled, or that failed to import or register, are named: the
        implementation may be one of theirs.
        """
        installed = {n: impl.origin for n, impl in self._by_point.get(point, {}).items()}
        for pairs, origin in self.declared.values():
            installed.update({n: origin for p, n in pairs if p == point and n not in installed})
        listing = ", ".join(f"{n} ({installed[n]})" for n in sorted(installed)) or "none"
        loc = f" ({where})" if where else ""
        parts = [f"{point} {name!r}{loc} is not available; installed: {listing}."]
        if self.failed:
            failures = " ".join(msg for _, msg in sorted(self.failed.items()))
            parts.append(
                f"Some plugins failed and provide nothing: {failures} If {name!r} comes from "
                "one of them, fix or upgrade that plugin, or select another implementation."
            )
        if self.disabled:
            plugins = ", ".join(f"{p} ({o})" for p, o in sorted(self.disabled.items()))
            parts.append(
                f"{_DISABLE_ENV} disables plugin(s) {plugins}: if {name!r} comes from "
                f"one of them, remove it from {_DISABLE_ENV}."
            )
        if self.failed or self.disabled:
            parts.append(
                "Otherwise install the plugin that provides it (`biasbreaker plugins` lists "
                "what is installed)."
            )
        else:
            parts.append("Is its plugin installed? `biasbreaker plugins` lists what is.")
        return " ".join(parts)

    def __iter__(self) -> Iterator[Implementation[Any]]:
        for point in sorted(self._by_point):
            for name in sorted(self._by_point[point]):
                yield self._by_point[point][name]

    def by_name(self, name: str) -> list[Implementation[Any]]:
        """Every implementation called ``name``, in any extension point."""
        return [impl for impl in self if impl.name == name]

    def installed_names(self) -> list[str]:
        """Every implementation name, registered or declared by a plugin not imported."""
        names = {impl.name for impl in self}
        names.update(n for pairs, _ in self.declared.values() for _, n in pairs)
        return sorted(names)


def check_registration(
    plugin: str,
    point: str,
    name: object,
    options: object,
    requires: object = (),
    install: object = "",
) -> None:
    """Validate what a plugin passed to ``register``.

    Raises:
        PluginError: Naming the plugin, the extension point and the bad value.
    """
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise PluginError(
            f"plugin {plugin!r} registered {point} {name!r}; implementation "
            "names must be lower-kebab ASCII such as 'trust' or 'empirical-auditor'"
        )
    if not (isinstance(options, type) and issubclass(options, BaseModel)):
        raise PluginError(
            f"plugin {plugin!r} registered {point} {name!r} with options={options!r}; "
            "pass a pydantic BaseModel subclass (or omit it for no options)"
        )
    if isinstance(requires, str) or not (
        isinstance(requires, Sequence) and all(isinstance(m, str) and m for m in requires)
    ):
        raise PluginError(
            f"plugin {plugin!r} registered {point} {name!r} with requires={requires!r}; pass a "
            "sequence of module names such as ('sentence_transformers',)"
        )
    if not isinstance(install, str):
        raise PluginError(
            f"plugin {plugin!r} registered {point} {name!r} with install={install!r}; pass a "
            "string such as \"pip install 'biasbreaker[semantic]'\""
        )
