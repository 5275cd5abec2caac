"""One guarded model call: what the guard reads of it, and how it is re-issued.

:class:`Call` is a call in progress (its request and reply, their JSON views, what the probe
made of it, its held tokens). The views are the graph adapter's
(:func:`biasbreaker_plugins.langgraph.values.read`): the request as
``{"system", "messages"}`` (:func:`input_view`), the reply as ``{"messages",
["structured"]}`` (:func:`output_view`), built lazily for a reply read at a glance
(:func:`plain_reply`). A re-issue (a counterfactual variant of the request, a resample, a
re-check) runs the inner handler on :func:`rebuilt` messages, silenced, and fails when its
model received another request (:func:`check_received`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.types import Command

from biasbreaker.errors import PluginError
from biasbreaker.types import LazyPayload
from biasbreaker_langchain.received import Received, changed, watched
from biasbreaker_plugins.langgraph.probing import stop_iteration
from biasbreaker_plugins.langgraph.state import plain_json
from biasbreaker_plugins.langgraph.streaming import Capture, capturing
from biasbreaker_plugins.langgraph.values import read, rebuild

_T = TypeVar("_T")


@dataclass
class Call:
    """One guarded model call in progress (views, what the probe made of it, held tokens)."""

    request: ModelRequest[Any]
    response: ModelResponse[Any]
    command: Command[Any] | None
    config: RunnableConfig
    capture: Capture
    input_view: Any = None
    reply: LazyPayload | Any = None
    outcome: dict[str, str] = field(default_factory=dict)
    hold: str | None = None
    sampled: bool = False
    score: float | None = None
    coverage: dict[str, int] | None = None

    @functools.cached_property
    def thread(self) -> str:
        """The run's trace key (:func:`thread_of`), computed when first needed."""
        return thread_of(self.config)

    @property
    def view(self) -> Any:
        """The JSON view of the reply (:func:`output_view`).

        Built on the first read when :attr:`reply` defers it (a reply certainly read:
        :func:`plain_reply`).
        """
        reply = self.reply
        return reply.value if isinstance(reply, LazyPayload) else reply


def as_response(result: Any) -> tuple[ModelResponse[Any], Command[Any] | None]:
    """A handler's result as (``ModelResponse``, the ``Command`` an inner middleware added)."""
    if isinstance(result, ExtendedModelResponse):
        return result.model_response, result.command
    if isinstance(result, AIMessage):
        return ModelResponse(result=[result]), None
    if isinstance(result, ModelResponse):
        return result, None
    raise PluginError(
        f"the model call returned {type(result).__name__}; BiasGuardMiddleware expects a "
        "ModelResponse, an AIMessage or an ExtendedModelResponse from the inner handler"
    )


def output_view(response: ModelResponse[Any]) -> dict[str, Any]:
    """The JSON view of a reply: ``{"messages": [...], ["structured": ...]}``.

    Raises:
        Unreadable: A message or the structured response cannot be read.
    """
    view: dict[str, Any] = {"messages": read(list(response.result), "reply")}
    if response.structured_response is not None:
        view["structured"] = read(response.structured_response, "reply.structured_response")
    return view


def plain_reply(response: ModelResponse[Any]) -> bool:
    """Whether :func:`output_view` reads ``response`` without raising, judged at a glance.

    ``True`` only for what it certainly reads: no structured response, and exact
    ``AIMessage`` replies with text content, tool calls whose arguments are plain JSON
    (:func:`~biasbreaker_plugins.langgraph.state.plain_json`), no invalid tool calls, no
    legacy function call, and ``additional_kwargs`` of plain JSON without OpenAI's
    ``"audio"`` (read by its fields). The fields are read from the message's ``__dict__``
    (pydantic's attribute reads are slow), which :data:`AI_FIELDS_IN_DICT` says gives the
    same values. ``False`` means "read it to know", never "unreadable".
    """
    if not AI_FIELDS_IN_DICT or response.structured_response is not None:
        return False
    for message in response.result:
        if type(message) is not AIMessage:
            return False
        fields = message.__dict__
        extra = fields.get("additional_kwargs")
        calls = fields.get("tool_calls")
        if (
            type(fields.get("content")) is not str
            or not isinstance(fields.get("name"), (str, type(None)))
            or fields.get("invalid_tool_calls")
            or type(calls) is not list
            or type(extra) is not dict
            or "audio" in extra
            or extra.get("function_call") is not None
            or not plain_json(list(extra.values()))
        ):
            return False
        for call in calls:
            if type(call) is not dict or "name" not in call or "args" not in call:
                return False
            if not plain_json(call["args"]):
                return False
    return True


AI_FIELDS_IN_DICT: Final = all(
    name in AIMessage.model_fields and not any(name in vars(klass) for klass in AIMessage.__mro__)
    for name in ("content", "name", "tool_calls", "invalid_tool_calls", "additional_kwargs")
)
"""Whether an ``AIMessage``'s instance dict holds what reading these fields as attributes
returns: each is a declared pydantic field and no class of its MRO defines the name."""


def input_view(request: ModelRequest[Any]) -> dict[str, Any]:
    """The JSON view of a request: ``{"system": view or None, "messages": [...]}``.

    Raises:
        Unreadable: A message cannot be read.
    """
    system = request.system_message
    return {
        "system": None if system is None else read(system, "request.system_message"),
        "messages": read(list(request.messages), "request.messages"),
    }


def rebuilt(request: ModelRequest[Any], view: Mapping[str, Any]) -> ModelRequest[Any]:
    """``request`` with the messages of a counterfactual view (ids and metadata kept)."""
    messages = rebuild(list(request.messages), view["messages"])
    system = request.system_message
    if system is not None:
        varied = rebuild(system, view["system"])
        assert isinstance(varied, SystemMessage)
        return request.override(messages=messages, system_message=varied)
    return request.override(messages=messages)


def check_received(request: ModelRequest[Any], received: Received) -> None:
    """Fail a re-issue whose model received another request than ``request``.

    Raises:
        PluginError: A middleware after the guard changed the re-issued request (the probe
            then fails closed: the step is held, this reason named).
    """
    moved = changed(request, received)
    if moved is not None:
        raise PluginError(f"re-issue: {moved}")


def reissue(config: RunnableConfig, handler: Callable[[Any], Any], request: Any) -> Any:
    """A sync re-issue in a worker thread; a ``StopIteration`` becomes a ``RuntimeError``.

    asyncio cannot set a ``StopIteration`` on a future, so a re-issue whose model ran out of
    replies (a fake chat model's iterator) would wait out ``call_timeout_s`` and be blamed on
    a time-out (:func:`~biasbreaker_plugins.langgraph.probing.stop_iteration`).
    """
    try:
        return with_config(config, handler, request)
    except StopIteration as exc:
        raise stop_iteration("the model call", exc) from exc


def thread_of(config: RunnableConfig) -> str:
    """The trace key of a run: its thread id (``"default"`` without one), plus a namespace."""
    conf = config.get("configurable") or {}
    thread = str(conf.get("thread_id", "default"))
    namespace = str(conf.get("checkpoint_ns", ""))
    # the model node's own namespace is "model:<task id>"; only a parent graph's part counts
    parent = "|".join(part for part in namespace.split("|")[:-1] if part)
    return f"{thread}/{parent.replace(':', '_')}" if parent else thread


def watching(config: RunnableConfig, capture: Capture, received: Received | None) -> RunnableConfig:
    """The config of the guarded call: its streams captured, what its model receives watched.

    ``config`` itself when nothing streams and nothing watches
    (:func:`~biasbreaker_plugins.langgraph.streaming.capturing`, ``received`` ``None``).
    """
    given = capturing(config, capture)
    return given if received is None else watched(given, received)


def with_config(config: RunnableConfig, fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` with ``config`` as the config its runnables inherit."""
    token = var_child_runnable_config.set(config)
    try:
        return fn(*args)
    finally:
        var_child_runnable_config.reset(token)


__all__ = [
    "AI_FIELDS_IN_DICT",
    "Call",
    "as_response",
    "check_received",
    "input_view",
    "output_view",
    "plain_reply",
    "rebuilt",
    "reissue",
    "thread_of",
    "watching",
    "with_config",
]
