"""The run's ``runtime.context``, which the probe varies with the node's state.

LangGraph 1.x passes run-scoped data beside the state: ``graph.invoke(state,
context={"applicant": "Ms. Mary Carter"})``, read by a node as ``runtime.context`` (a declared
``runtime: Runtime[Context]`` parameter, or ``get_runtime()``). A node that decides on it is
biased on data the state does not hold: varying the state only, the probe saw the same
context in every re-run and scored 0. So a probed call's input view carries the context's
view under :data:`CONTEXT_KEY` (a ``bb_`` key, which no application state key can be):
the probe detects and swaps mentions in it like in any state key, a context field that
carries a protected attribute the text probe cannot vary (``{"age": 63}``) holds the step
as a state field does, and each re-run gets a runtime whose ``context`` is the variant's,
rebuilt into the context's own type (:func:`~.values.rebuild`: a dataclass stays a
dataclass). A context the probe cannot read holds the step (the key named).

``config["configurable"]`` values are varied the same way (:mod:`.configurable`).
"""

from __future__ import annotations

from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONF, CONFIG_KEY_RUNTIME

__all__ = ["CONTEXT_KEY", "context_of", "with_context"]

CONTEXT_KEY: Final = "bb_context"
"""The key of the run's ``runtime.context`` in a probed call's input view."""


def context_of(config: RunnableConfig | None) -> Any:
    """The run's ``runtime.context`` in a task with ``config``, or ``None`` (none given)."""
    runtime = ((config or {}).get(CONF) or {}).get(CONFIG_KEY_RUNTIME)
    return None if runtime is None else runtime.context


def with_context(config: RunnableConfig, context: Any) -> RunnableConfig:
    """A copy of ``config`` whose runtime (``runtime``, ``get_runtime()``) has ``context``.

    ``config`` itself when it has no runtime (then no node can read a context either).
    """
    conf = dict(config.get(CONF) or {})
    runtime = conf.get(CONFIG_KEY_RUNTIME)
    if runtime is None:
        return config
    conf[CONFIG_KEY_RUNTIME] = runtime.override(context=context)
    out: dict[str, Any] = dict(config)
    out[CONF] = conf
    return out  # type: ignore[return-value]
