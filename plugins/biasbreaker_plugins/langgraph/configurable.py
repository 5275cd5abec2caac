"""The run's ``config["configurable"]`` data, which the probe varies with the node's state.

Before LangGraph 1.x's ``context=``, run-scoped data went in the config:
``graph.invoke(state, {"configurable": {"thread_id": "t1", "applicant": "Ms. Mary Carter"}})``,
read by a node from its ``config`` parameter or ``get_config()``. A node that decides on it
is biased on data the state does not hold: varying the state only, every re-run saw the same
config and the step scored 0 (a fail-open a new-user trial found). So a probed call's input
view carries the view of the config's *user* keys under :data:`CONFIGURABLE_KEY` (a ``bb_``
key, which no application state key can be), read with the table of :mod:`.values`: the
probe detects and swaps mentions in it like in any state key, a key that carries a protected
attribute the text probe cannot vary (``{"sex": "F"}``) holds the step as a state field does,
a value the probe cannot read holds it with the key named, and each re-run gets a config whose
user keys are the variant's, each rebuilt into its own type.

The user keys are every key of ``config["configurable"]`` except LangGraph's own: the
``__pregel_…`` internals, the checkpoint coordinates (``thread_id``, ``checkpoint_ns``,
``checkpoint_id``, ``checkpoint_map``; identities, not data) and the ``langgraph_…`` keys of
LangGraph's server. A key whose value names no person (a database handle, a client) is passed
through unread when listed as ``guard(builder, opaque=["configurable.<key>"])``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONF

from biasbreaker_plugins.langgraph.values import read_values, rebuild_values

__all__ = [
    "CONFIGURABLE_KEY",
    "OPAQUE_PREFIX",
    "configurable_view",
    "user_configurable",
    "with_configurable",
]

CONFIGURABLE_KEY: Final = "bb_configurable"
"""The key of the config's user keys in a probed call's input view."""

OPAQUE_PREFIX: Final = "configurable."
"""How ``guard(opaque=[...])`` names a user key of ``config["configurable"]``."""

_COORDINATES: Final = frozenset({"thread_id", "checkpoint_ns", "checkpoint_id", "checkpoint_map"})


def _is_user_key(key: Any) -> bool:
    return (
        isinstance(key, str)
        and not key.startswith("__")
        and not key.startswith("langgraph_")
        and key not in _COORDINATES
    )


def user_configurable(config: RunnableConfig | Mapping[str, Any] | None) -> dict[str, Any]:
    """The user keys of ``config["configurable"]`` (module docstring), key -> value."""
    conf = (config or {}).get(CONF) or {}
    return {key: value for key, value in conf.items() if _is_user_key(key)}


def _opaque_keys(opaque: frozenset[str]) -> frozenset[str]:
    return frozenset(k[len(OPAQUE_PREFIX) :] for k in opaque if k.startswith(OPAQUE_PREFIX))


def configurable_view(
    config: RunnableConfig | None, opaque: frozenset[str] = frozenset()
) -> dict[str, Any] | None:
    """The JSON view of the config's user keys, or ``None`` when it has none.

    Args:
        config: The guarded call's config.
        opaque: ``guard(opaque=...)``; its ``configurable.<key>`` entries are read as
            ``"<opaque: TYPE>"``.

    Raises:
        Unreadable: A user key's value the probe cannot read (the path names the key:
            ``config['configurable']['key']``).
    """
    user = user_configurable(config)
    if not user:
        return None
    return read_values(user, "config['configurable']", _opaque_keys(opaque))


def with_configurable(
    config: RunnableConfig, view: Any, opaque: frozenset[str] = frozenset()
) -> RunnableConfig:
    """A copy of ``config`` whose user keys are rebuilt from a variant's ``view`` of them.

    Args:
        config: The config the re-run gets (its user keys are the originals' templates).
        view: The variant's view of the user keys (:func:`configurable_view`'s shape).
        opaque: As for :func:`configurable_view` (those keys are passed through).

    Raises:
        ValueError: ``config`` has other user keys than ``view`` (a re-check in a run
            started with another config than the step was probed with), or a value does not
            fit its original (:func:`~.values.rebuild`).
    """
    original = user_configurable(config)
    if not isinstance(view, Mapping) or set(view) != set(original):
        raise ValueError(
            f"the step was probed with config['configurable'] keys "
            f"{sorted(view) if isinstance(view, Mapping) else view!r}, and this run has "
            f"{sorted(original)}; resume the thread with the same configurable keys"
        )
    conf = dict(config.get(CONF) or {})
    conf.update(rebuild_values(original, view, _opaque_keys(opaque)))
    out: dict[str, Any] = dict(config)
    out[CONF] = conf
    return out  # type: ignore[return-value]
