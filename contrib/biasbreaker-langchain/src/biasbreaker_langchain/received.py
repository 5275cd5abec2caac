"""What the chat model received in a guarded call, so that a later middleware cannot fail open.

``create_agent`` composes ``wrap_model_call`` handlers with the first listed outermost
(``langchain.agents.factory._chain_model_call_handlers``): ``BiasGuardMiddleware`` reads and
re-issues the request *it* is handed, and a middleware listed after it may still change that
request before the model reads it. A ``@dynamic_prompt`` that writes the customer's profile
from the runtime context into the system prompt is one: the guard would probe a request that
names no group while the model decides on one that does.

:class:`Received` is a callback handler added to the config of the guarded call and of every
re-issue (:func:`watched`): LangChain hands it the messages of every chat model started within
(``on_chat_model_start``), whichever model a fallback middleware picked and however often a
retry middleware called it. :func:`changed` compares them with the request the guard read; a
difference holds the step for review, naming the fix (list the guard after the middleware that
changes the request).
"""

from __future__ import annotations

import threading
from typing import Any
from uuid import UUID

from langchain.agents.middleware.types import ModelRequest
from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from biasbreaker_plugins.langgraph.values import Unreadable, read

try:
    # how a chat model hands its messages to on_chat_model_start: media parts in the OpenAI
    # chat format, a v1 base64 file part as v0 (langchain-core's own, private)
    from langchain_core.language_models.chat_models import _format_for_tracing as _as_traced
except ImportError:  # pragma: no cover - a langchain-core without it: compare as given

    def _as_traced(messages: list[BaseMessage]) -> list[BaseMessage]:
        return messages


FIX = (
    "list BiasGuardMiddleware after every middleware that changes the model's request "
    "(a @dynamic_prompt, a wrap_model_call that edits the messages) in "
    "create_agent(middleware=[...]); only retry or fallback middleware may follow it"
)
"""The fix named when the model received another request than the guard probed."""


class Received(BaseCallbackHandler):
    """Records the messages of every chat model started in a call (callbacks, inline).

    A chat model started *inside* another chat model's run (a model that calls a model) is
    part of that model, not a model the request reaches: it is not recorded.
    """

    run_inline = True  # called in the model's own thread or task, before it generates

    def __init__(self) -> None:
        super().__init__()
        self.inputs: list[list[BaseMessage]] = []
        self._runs: set[UUID] = set()
        self._lock = threading.Lock()

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Record the messages a chat model was started with (one list per prompt)."""
        with self._lock:
            self._runs.add(run_id)
            if parent_run_id is not None and parent_run_id in self._runs:
                return
            self.inputs.extend(list(batch) for batch in messages)


def watched(config: RunnableConfig, received: Received) -> RunnableConfig:
    """``config`` with ``received`` among its callback handlers (inherited by child runs)."""
    callbacks = config.get("callbacks")
    handlers: Any
    if callbacks is None:
        handlers = [received]
    elif isinstance(callbacks, BaseCallbackManager):
        handlers = callbacks.copy()
        handlers.add_handler(received, inherit=True)
    else:  # a list of handlers
        handlers = [*callbacks, received]
    return {**config, "callbacks": handlers}


def changed(request: ModelRequest[Any], received: Received) -> str | None:
    """Why the model received another request than ``request``, or ``None`` if it did not.

    Compared as the probe reads them (:func:`~biasbreaker_plugins.langgraph.values.read`:
    text, tool calls, names; ids never): the system message and the messages, in the order
    the agent hands them to the model and formatted as a chat model reports them to its
    callbacks (an image part in the OpenAI chat format). No model started (a middleware
    after the guard answered without one): nothing to compare, ``None``.
    """
    system = request.system_message
    sent: list[BaseMessage] = [*request.messages]
    if system is not None:
        sent.insert(0, system)
    try:
        expected = read(_as_traced(sent), "request")
    except Unreadable as exc:  # the guard has read it already; fail closed all the same
        return f"the probe cannot read the request: {exc}"
    for got in list(received.inputs):
        try:
            view = read(got, "received")
        except Unreadable as exc:
            return (
                "a middleware after BiasGuardMiddleware changed the request the model "
                f"receives, and the probe cannot read what it received ({exc}); {FIX}"
            )
        if view != expected:
            return (
                "a middleware after BiasGuardMiddleware changed the request the model "
                f"receives ({_where(expected, view)}), so the probe did not read what the "
                f"model decided on; {FIX}"
            )
    return None


def _where(expected: list[Any], got: Any) -> str:
    """Where two message views first differ, without their content (it may name a person)."""
    if not isinstance(got, list):
        return "not a list of messages"
    for i, (want, have) in enumerate(zip(expected, got, strict=False)):
        if want != have:
            kind = have.get("type") if isinstance(have, dict) else type(have).__name__
            return f"message {i} ({kind}) differs"
    if len(got) != len(expected):
        return f"{len(got)} messages, not {len(expected)}"
    return "the messages differ"  # pragma: no cover - equal lists compare equal


__all__ = ["FIX", "Received", "changed", "watched"]
