"""The run's config data, which the probe varies with the node's state.

``config["configurable"]`` and ``config["metadata"]``. Before LangGraph 1.x's ``context=``,
run-scoped data went in the config:
``graph.invoke(state, {"configurable": {"thread_id": "t1", "applicant": "Ms. Mary Carter"}})``,
read by a node from its ``config`` parameter or ``get_config()``. A node that decides on it
is biased on data the state does not hold: varying the state only, every re-run saw the same
config and the step scored 0 (a fail-open a new-user trial found). The same holds for the
run's ``config["metadata"]`` (``{"metadata": {"user_name": "Mary Carter"}}``: LangGraph hands
it to every node's config, for tracing, and a node can read it like the rest). So a probed
call's input view carries the view of each section's *user* keys, under
:data:`CONFIGURABLE_KEY` and :data:`METADATA_KEY` (``bb_`` keys, which no application state
key can be), read with the table of :mod:`.values`: the probe detects and swaps mentions in
them like in any state key, a key that carries a protected attribute the text probe cannot
vary (``{"sex": "F"}``) holds the step as a state field does, a value the probe cannot read
holds it with the key named, and each re-run gets a config whose user keys are the
variant's, each rebuilt into its own type.

The user keys of a section are all of its keys except LangGraph's own: the ``__…``
internals (``__pregel_…``), the checkpoint coordinates (``thread_id``, ``checkpoint_ns``,
``checkpoint_id``, ``checkpoint_map``; identities, not data) and the ``langgraph_…`` keys
(a node's ``langgraph_step``, ``langgraph_node``, ``langgraph_path``… in its metadata; those
of LangGraph's server). A key whose value names no person (a database handle, a client, a
tenant id) is passed through unread when listed as ``guard(builder,
opaque=["configurable.<key>"])`` or ``opaque=["metadata.<key>"]``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final, Literal

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONF

from biasbreaker_plugins.langgraph.values import read_values, rebuild_values

__all__ = [
    "CONFIGURABLE_KEY",
    "METADATA",
    "METADATA_KEY",
    "METADATA_OPAQUE_PREFIX",
    "OPAQUE_PREFIX",
    "OPAQUE_PREFIXES",
    "configurable_view",
    "kept_config",
    "metadata_view",
    "user_configurable",
    "user_metadata",
    "with_configurable",
    "with_metadata",
]

CONFIGURABLE_KEY: Final = "bb_configurable"
"""The key of the config's ``configurable`` user keys in a probed call's input view."""

METADATA_KEY: Final = "bb_metadata"
"""The key of the config's ``metadata`` user keys in a probed call's input view."""

METADATA: Final[Section] = "metadata"
"""The config's section of run metadata (``RunnableConfig["metadata"]``)."""

OPAQUE_PREFIX: Final = "configurable."
"""How ``guard(opaque=[...])`` names a user key of ``config["configurable"]``."""

METADATA_OPAQUE_PREFIX: Final = "metadata."
"""How ``guard(opaque=[...])`` names a user key of ``config["metadata"]``."""

OPAQUE_PREFIXES: Final = (OPAQUE_PREFIX, METADATA_OPAQUE_PREFIX)
"""Every prefix by which ``guard(opaque=[...])`` names a key of the run's config."""

Section = Literal["configurable", "metadata"]
"""A section of the run's config that holds user data."""

_COORDINATES: Final = frozenset({"thread_id", "checkpoint_ns", "checkpoint_id", "checkpoint_map"})


def _is_user_key(key: Any) -> bool:
    return (
        isinstance(key, str)
        and not key.startswith("__")
        and not key.startswith("langgraph_")
        and key not in _COORDINATES
    )


def _user_keys(
    config: RunnableConfig | Mapping[str, Any] | None, section: Section
) -> dict[str, Any]:
    data: Mapping[str, Any] = (config or {}).get(section) or {}
    return {key: value for key, value in data.items() if _is_user_key(key)}


def user_configurable(config: RunnableConfig | Mapping[str, Any] | None) -> dict[str, Any]:
    """The user keys of ``config["configurable"]`` (module docstring), key -> value."""
    return _user_keys(config, CONF)


def user_metadata(config: RunnableConfig | Mapping[str, Any] | None) -> dict[str, Any]:
    """The user keys of ``config["metadata"]`` (module docstring), key -> value."""
    return _user_keys(config, METADATA)


def kept_config(config: RunnableConfig, opaque: frozenset[str] = frozenset()) -> RunnableConfig:
    """A copy of ``config`` that the node's own call cannot change: what its re-runs are given.

    A node may change its config's sections during its call (``config["metadata"].pop("x")``,
    after deciding on it); the probe's re-runs take their config from the guarded call, so
    they took the changed one and failed ("probed with config['metadata'] keys ['x'], and
    this run has []"), holding a fair node (a new-user trial). Taken before the call: the
    ``configurable`` and ``metadata`` dicts are copies, their user keys' values deep copies
    (an ``opaque`` key's value, a client, is kept as it is, as is one that cannot be copied);
    LangGraph's own keys and the rest of the config are the same objects.

    Args:
        config: The guarded call's config, before the call.
        opaque: ``guard(opaque=...)``: its ``<section>.<key>`` values are not copied.
    """
    out: dict[str, Any] = dict(config)
    for section, prefix in ((CONF, OPAQUE_PREFIX), (METADATA, METADATA_OPAQUE_PREFIX)):
        data = config.get(section)
        if isinstance(data, Mapping):
            out[section] = {
                key: _copied(value)
                if _is_user_key(key) and f"{prefix}{key}" not in opaque
                else value
                for key, value in data.items()
            }
    return out  # type: ignore[return-value]


def _copied(value: Any) -> Any:
    try:
        return copy.deepcopy(value)
    except Exception:  # any object's __deepcopy__ may raise anything
        return value


def _opaque_keys(opaque: frozenset[str], prefix: str) -> frozenset[str]:
    return frozenset(k[len(prefix) :] for k in opaque if k.startswith(prefix))


def _view(
    config: RunnableConfig | None, section: Section, prefix: str, opaque: frozenset[str]
) -> dict[str, Any] | None:
    user = _user_keys(config, section)
    if not user:
        return None
    return read_values(user, f"config[{section!r}]", _opaque_keys(opaque, prefix))


def configurable_view(
    config: RunnableConfig | None, opaque: frozenset[str] = frozenset()
) -> dict[str, Any] | None:
    """The JSON view of the config's ``configurable`` user keys, or ``None`` when it has none.

    Args:
        config: The guarded call's config.
        opaque: ``guard(opaque=...)``; its ``configurable.<key>`` entries are read as
            ``"<opaque: TYPE>"``.

    Raises:
        Unreadable: A user key's value the probe cannot read (the path names the key:
            ``config['configurable']['key']``).
    """
    return _view(config, CONF, OPAQUE_PREFIX, opaque)


def metadata_view(
    config: RunnableConfig | None, opaque: frozenset[str] = frozenset()
) -> dict[str, Any] | None:
    """The JSON view of the config's ``metadata`` user keys, or ``None`` when it has none.

    Args:
        config: The guarded call's config.
        opaque: ``guard(opaque=...)``; its ``metadata.<key>`` entries are read as
            ``"<opaque: TYPE>"``.

    Raises:
        Unreadable: A user key's value the probe cannot read (the path names the key:
            ``config['metadata']['key']``).
    """
    return _view(config, METADATA, METADATA_OPAQUE_PREFIX, opaque)


def _with(
    config: RunnableConfig, view: Any, section: Section, prefix: str, opaque: frozenset[str]
) -> RunnableConfig:
    original = _user_keys(config, section)
    if not isinstance(view, Mapping) or set(view) != set(original):
        raise ValueError(
            f"the step was probed with config[{section!r}] keys "
            f"{sorted(view) if isinstance(view, Mapping) else view!r}, and this run has "
            f"{sorted(original)}; resume the thread with the same {section} keys"
        )
    data: dict[str, Any] = dict(config.get(section) or {})
    data.update(
        rebuild_values(original, view, _opaque_keys(opaque, prefix), f"config[{section!r}]")
    )
    out: dict[str, Any] = dict(config)
    out[section] = data
    return out  # type: ignore[return-value]


def with_configurable(
    config: RunnableConfig, view: Any, opaque: frozenset[str] = frozenset()
) -> RunnableConfig:
    """A copy of ``config`` whose ``configurable`` user keys are rebuilt from a variant's ``view``.

    Args:
        config: The config the re-run gets (its user keys are the originals' templates).
        view: The variant's view of the user keys (:func:`configurable_view`'s shape).
        opaque: As for :func:`configurable_view` (those keys are passed through).

    Raises:
        ValueError: ``config`` has other user keys than ``view`` (a re-check in a run
            started with another config than the step was probed with), or a value does not
            fit its original (:func:`~.values.rebuild`).
    """
    return _with(config, view, CONF, OPAQUE_PREFIX, opaque)


def with_metadata(
    config: RunnableConfig, view: Any, opaque: frozenset[str] = frozenset()
) -> RunnableConfig:
    """A copy of ``config`` whose ``metadata`` user keys are rebuilt from a variant's ``view``.

    Args:
        config: The config the re-run gets (its user keys are the originals' templates).
        view: The variant's view of the user keys (:func:`metadata_view`'s shape).
        opaque: As for :func:`metadata_view` (those keys are passed through).

    Raises:
        ValueError: As for :func:`with_configurable`, for the ``metadata`` keys.
    """
    return _with(config, view, METADATA, METADATA_OPAQUE_PREFIX, opaque)
