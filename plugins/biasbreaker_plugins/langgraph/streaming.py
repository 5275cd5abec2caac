"""Streaming without leaks: a guarded node's stream events wait for its output's promotion.

What a LangGraph node streams reaches the caller through *sinks* in its task's config:

* ``stream_mode="messages"`` — a ``StreamMessagesHandler`` callback (tokens of every chat
  model called in the node, and the messages the node returns);
* ``"tools"`` — a ``StreamToolCallHandler`` callback;
* ``"custom"`` — the runtime's ``stream_writer`` (``get_stream_writer()``, the ``writer``
  argument);
* ``astream_events`` / ``astream_log`` — their callback handlers' ``send_stream``: a guarded
  graph refuses those two APIs (the node's own run would show its held output in its
  ``on_chain_end`` event) unless ``stream_first`` is set; reached through a parent graph's
  call, their handlers are left out of the guarded node's own call and of the probe's re-runs;
* a graph invoked *inside* the node, with ``subgraphs=True`` — the parent's stream protocol
  (``config["configurable"]["__pregel_stream"]``).

A guarded node's own call runs with **capturing** copies of those sinks (:func:`capturing`):
its events are recorded in a :class:`Capture`, in order, and handed to the real sinks only
when its output is promoted (:meth:`Capture.release`) — at once when the breaker lets it
through in the node's own task, later from ``bb_breaker`` or ``bb_review`` when a held
output is let through unchanged. When the output is held, repaired, edited or rejected its
events are dropped (they show the biased output) and a ``biasbreaker`` custom event says what
happened (:func:`announce`); a promoted repair or edit reaches ``messages`` consumers as the
whole messages that were promoted. The probe's re-runs (counterfactual variants, resamples,
re-checks) run with **silenced** sinks (:func:`silenced`): nothing they produce is streamed,
no callback handler of the run sees them, LangSmith's own tracing is off
(:func:`unobserved`), and their store writes go to a scratch copy
(:mod:`.scratch_store`). The user's callback handlers (a tracer, a token relay) see the
guarded node's own call live: they observe; they are not a stream the guard holds.

What the node streams is part of its output: when the caller's run streams ``"custom"`` or
``"messages"`` (:func:`compared_kinds`), the node's own call and every probe re-run record
their custom events and the final replies of their chat model calls (the guard's own writer
and :class:`_Replies` handler), and the probe compares them beside the update
(:func:`streamed_view`, :class:`biasbreaker.probe.Routed` ``streamed``).

``[plugin.langgraph] stream_first = true`` (NeMo Guardrails' name for the trade-off) streams
the guarded node's own events live, before the check: lower latency, and a biased output is
shown to the caller before it is held. Probe re-runs stay silenced either way.

Captures of held outputs live in the process that held them (:class:`HeldStreams`): a held
output promoted after a resume in another process promotes its state update as usual, but its
original tokens are not replayed.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.messages import AIMessage, BaseMessage, BaseMessageChunk, convert_to_messages
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tracers._streaming import (
    _StreamingCallbackHandler,
    _V2StreamingCallbackHandler,
)
from langchain_core.tracers.context import tracing_v2_callback_var
from langchain_core.tracers.event_stream import _AstreamEventsCallbackHandler
from langchain_core.tracers.log_stream import LogStreamCallbackHandler
from langgraph._internal._constants import CONF, CONFIG_KEY_RUNTIME, CONFIG_KEY_STREAM
from langgraph.constants import TAG_NOSTREAM
from langgraph.pregel._messages import StreamMessagesHandler
from langgraph.pregel._tools import StreamToolCallHandler
from langgraph.pregel.protocol import StreamProtocol
from langsmith.run_helpers import tracing_context

from biasbreaker.usage import charge_tokens
from biasbreaker_plugins.langgraph._internals import writes_nothing
from biasbreaker_plugins.langgraph.scratch_store import ScratchStore
from biasbreaker_plugins.langgraph.shared import Shared
from biasbreaker_plugins.langgraph.values import Unreadable, read

EVENT_KEY: Final = "biasbreaker"
"""The key of the guard's custom stream event: ``{"biasbreaker": {"event", "node", "key",
"status", "reason"}}``."""

_HANDLER_KINDS: Final[tuple[tuple[type[Any], str, str], ...]] = (
    (StreamMessagesHandler, "messages", "stream"),
    (StreamToolCallHandler, "tools", "stream"),
    (_AstreamEventsCallbackHandler, "events", "send_stream"),
    (LogStreamCallbackHandler, "log", "send_stream"),
)
"""(handler class, event kind, the attribute through which it emits)."""


def _kind_of(handler: Any) -> tuple[str, str] | None:
    for cls, kind, attr in _HANDLER_KINDS:
        if isinstance(handler, cls):
            return kind, attr
    return None


@dataclass
class Capture:
    """The stream events of one guarded call, in order: ``(kind, payload)``.

    Kinds: ``"messages"``, ``"tools"`` (stream chunks ``(namespace, mode, payload)``),
    ``"events"``, ``"log"`` (the ``send_stream`` items), ``"custom"`` (what the node wrote)
    and ``"subgraph"`` (chunks of a graph the node invoked).
    """

    events: list[tuple[str, Any]] = field(default_factory=list)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    compared: frozenset[str] = frozenset()
    """The kinds of what the call streams that the probe compares (:func:`streamed_view`):
    ``"custom"`` when the caller's run streams custom events, ``"messages"`` when it streams
    ``stream_mode="messages"``; empty when it streams neither."""
    replies: list[tuple[int, BaseMessage]] = field(default_factory=list)
    """The replies of the chat models the call ran that ``"messages"`` streams, each with the
    order its model call started in (:class:`_Replies`)."""

    def add(self, kind: str, payload: Any) -> None:
        """Record one event."""
        self.events.append((kind, payload))

    def release(self, config: RunnableConfig | None) -> int:
        """Hand every event to the sinks of ``config``'s task, in order; the count handed.

        An event whose sink the task does not have (its stream mode was not requested) is
        dropped, as it would have been without the guard.
        """
        if not self.events:
            return 0
        sinks = Sinks.of(config)
        handed = 0
        for kind, payload in self.events:
            if sinks.emit(kind, payload):
                handed += 1
        self.events.clear()
        return handed


class _Recorder:
    """Stands in for a ``send_stream`` (``send_nowait``) or a ``stream`` callable."""

    def __init__(self, capture: Capture, kind: str) -> None:
        self.capture = capture
        self.kind = kind

    def __call__(self, payload: Any) -> None:
        self.capture.add(self.kind, payload)

    def send_nowait(self, payload: Any) -> None:
        self(payload)


class _Replies(BaseCallbackHandler):
    """Records the final reply of each chat model call a guarded node makes (the probe's).

    The guard's own handler, on the node's own call and on its re-runs alike, so the probe
    compares like with like: a call tagged ``langsmith:nostream`` is left out, as
    ``stream_mode="messages"`` leaves it out.
    """

    run_inline = True

    def __init__(self, capture: Capture) -> None:
        self.capture = capture
        self._order = itertools.count()
        self._started: dict[UUID, int] = {}

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """Note the call, unless it is not streamed."""
        if not tags or TAG_NOSTREAM not in tags:
            self._started[run_id] = next(self._order)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Record the call's reply (its first generation, as ``"messages"`` streams it)."""
        order = self._started.pop(run_id, None)
        if order is None or not response.generations or not response.generations[0]:
            return
        generation = response.generations[0][0]
        if isinstance(generation, ChatGeneration):
            self.capture.replies.append((order, generation.message))

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Forget a call that failed."""
        self._started.pop(run_id, None)


def _proxy(handler: Any, capture: Capture) -> Any:
    """A copy of a streaming handler that records its events into ``capture``.

    The copy shares the handler's bookkeeping (run metadata, seen message ids), so the real
    handler does not emit a message again that was streamed through the copy.
    """
    found = _kind_of(handler)
    if found is None:
        return handler
    kind, attr = found
    twin = copy.copy(handler)
    setattr(twin, attr, _Recorder(capture, kind))
    return twin


def _callbacks(callbacks: Any, capture: Capture) -> Any:
    if callbacks is None:
        return None
    if isinstance(callbacks, BaseCallbackManager):
        if not any(_kind_of(h) for h in (*callbacks.handlers, *callbacks.inheritable_handlers)):
            return callbacks  # nothing here streams to the caller (an invoke() run)
        manager = callbacks.copy()
        manager.handlers = _handlers(manager.handlers, capture)
        manager.inheritable_handlers = _handlers(manager.inheritable_handlers, capture)
        if "messages" in capture.compared:
            manager.add_handler(_Replies(capture), inherit=True)
        return manager
    if isinstance(callbacks, Sequence):
        handlers = _handlers(list(callbacks), capture)
        return [*handlers, _Replies(capture)] if "messages" in capture.compared else handlers
    return callbacks


def _handlers(handlers: list[Any], capture: Capture) -> list[Any]:
    # astream_events / astream_log handlers are dropped, not copied: their copies never finish
    # a run, and a guarded graph refuses those APIs itself (a parent's may reach a subgraph)
    return [
        _proxy(h, capture)
        for h in handlers
        if (_kind_of(h) or ("", ""))[0] not in ("events", "log")
    ]


def _no_op(payload: Any) -> None:
    """A stream writer that writes nothing."""


def reported_tokens(response: LLMResult) -> int:
    """The tokens (prompt + completion) a LangChain model call's result reports, or 0.

    The chat replies' ``usage_metadata["total_tokens"]`` summed over every generation, else
    the provider's ``llm_output["token_usage"]["total_tokens"]`` (LangChain's OpenAI
    integration), else 0: nothing reported.
    """
    total = 0
    for generations in response.generations:
        for generation in generations:
            message = getattr(generation, "message", None)
            usage = getattr(message, "usage_metadata", None)
            if usage:
                total += int(usage.get("total_tokens") or 0)
    if total:
        return total
    usage = (response.llm_output or {}).get("token_usage")
    if isinstance(usage, Mapping):
        reported = usage.get("total_tokens")
        if isinstance(reported, int) and not isinstance(reported, bool):
            return max(reported, 0)
    return 0


class _Metered(BaseCallbackHandler):
    """Charges what each LangChain model call of a probe re-run reports to the probe's budget.

    :func:`~biasbreaker.usage.charge_tokens` (the meter of the re-run's context: its step's
    :class:`~biasbreaker.probe.budget.StepMeter`, none without a budget), so ``[probe]
    max_tokens_per_run`` sees a node's ``ChatOpenAI`` as it sees biasbreaker's own clients.
    """

    run_inline = True

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        """Charge the call's reported tokens."""
        charge_tokens(reported_tokens(response))


class _Streams(BaseCallbackHandler, _StreamingCallbackHandler[Any]):
    """A probe re-run's stand-in for the streaming handler the node's own call had.

    A LangChain chat model calls its streaming method (``_stream``) when a streaming handler
    is attached (``stream_mode="messages"``) and ``_generate`` otherwise; a model whose two
    methods answer differently would be compared with itself through another method, and the
    caller's stream mode would move the score. With this handler the re-runs take the path
    the node's own call took; it passes every chunk through and keeps nothing.
    """

    run_inline = True

    def tap_output_aiter(self, run_id: UUID, output: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """The chunks as they are."""
        return output

    def tap_output_iter(self, run_id: UUID, output: Iterator[Any]) -> Iterator[Any]:
        """The chunks as they are."""
        return output


class _StreamsV2(_Streams, _V2StreamingCallbackHandler):
    """:class:`_Streams` for a node whose streaming handler takes LangChain's v2 event path."""


def _stream_stand_in(config: RunnableConfig) -> _Streams | None:
    """What makes a re-run's chat models stream as the node's own call did, or ``None``.

    The node's own call keeps every handler but ``astream_events``/``astream_log`` ones
    (:func:`_handlers`); a streaming one among them (v2 before v1) makes its models stream.
    """
    kept = [
        h for h in _config_handlers(config) if (_kind_of(h) or ("", ""))[0] not in ("events", "log")
    ]
    if any(isinstance(h, _V2StreamingCallbackHandler) for h in kept):
        return _StreamsV2()
    if any(isinstance(h, _StreamingCallbackHandler) for h in kept):
        return _Streams()
    return None


def _with_sinks(
    config: RunnableConfig, capture: Capture | None, record: Capture | None = None
) -> RunnableConfig:
    """``config`` whose stream sinks record into ``capture``.

    Without a capture (a probe re-run's, :func:`silenced`): no sink and no callback handler
    but the guard's own: a silent stand-in for the caller's streaming handler, so the re-run's
    chat models stream as the node's own call did (:class:`_Streams`), the re-run's reported
    tokens charged (:class:`_Metered`) and, with a ``record``, what the probe compares
    recorded into it (its ``compared`` kinds: the custom events, the chat models' replies).
    """
    out: dict[str, Any] = dict(config)
    if capture is None:
        stand_in = _stream_stand_in(config)
        own: list[Any] = [_Metered()] if stand_in is None else [stand_in, _Metered()]
        if record is not None and "messages" in record.compared:
            own.insert(0, _Replies(record))
        out["callbacks"] = own
    else:
        out["callbacks"] = _callbacks(config.get("callbacks"), capture)
    writer: Callable[[Any], None] = _no_op if capture is None else _Recorder(capture, "custom")
    if record is not None and "custom" in record.compared:
        writer = _Recorder(record, "custom")
    conf = dict(config.get(CONF) or {})
    runtime = conf.get(CONFIG_KEY_RUNTIME)
    if runtime is not None:
        conf[CONFIG_KEY_RUNTIME] = runtime.override(stream_writer=writer)
    parent = conf.get(CONFIG_KEY_STREAM)
    if parent is not None:
        if capture is None:
            del conf[CONFIG_KEY_STREAM]
        else:
            conf[CONFIG_KEY_STREAM] = StreamProtocol(_Recorder(capture, "subgraph"), parent.modes)
    out[CONF] = conf
    return out  # type: ignore[return-value]


def _config_handlers(config: RunnableConfig) -> Sequence[Any]:
    """The callback handlers of ``config`` (a manager's own and inheritable ones, or a list)."""
    callbacks = config.get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        handlers, inheritable = callbacks.handlers, callbacks.inheritable_handlers
        if not inheritable:  # one list or none (an invoke's task has two empty ones)
            return handlers
        if not handlers:
            return inheritable
        return (*handlers, *inheritable)
    if isinstance(callbacks, Sequence):
        return callbacks
    return ()


def streams_anything(config: RunnableConfig) -> bool:
    """Whether a task with ``config`` could stream anything to the caller.

    ``False`` for an ``invoke()`` run: no streaming callback handler, no parent stream, and
    LangGraph's no-op custom writer.
    """
    handlers = _config_handlers(config)
    if handlers and any(_kind_of(h) for h in handlers):
        return True
    conf = config.get(CONF) or {}
    if conf.get(CONFIG_KEY_STREAM) is not None:
        return True
    runtime = conf.get(CONFIG_KEY_RUNTIME)
    return runtime is not None and not writes_nothing(runtime.stream_writer)


def capturing(config: RunnableConfig, capture: Capture) -> RunnableConfig:
    """``config`` with every stream sink recording into ``capture`` instead of streaming.

    ``config`` itself when nothing could stream (:func:`streams_anything`).
    """
    if not streams_anything(config):
        return config
    capture.metadata = dict(config.get("metadata") or {})
    capture.compared = compared_kinds(config)
    return _with_sinks(config, capture)


def compared_kinds(config: RunnableConfig) -> frozenset[str]:
    """What the probe compares of what a task with ``config`` streams (:attr:`Capture.compared`).

    ``"custom"`` when the task has a real custom stream writer, ``"messages"`` when it has a
    ``stream_mode="messages"`` handler: what reaches the caller in those modes is part of the
    node's output, and a node that shows its decision only there (a custom event, the tokens
    of a chat model whose reply it does not return) is compared on it.
    """
    kinds: set[str] = set()
    handlers = _config_handlers(config)
    if any((_kind_of(h) or ("", ""))[0] == "messages" for h in handlers):
        kinds.add("messages")
    runtime = (config.get(CONF) or {}).get(CONFIG_KEY_RUNTIME)
    if runtime is not None and not writes_nothing(runtime.stream_writer):
        kinds.add("custom")
    return frozenset(kinds)


def silenced(config: RunnableConfig, record: Capture | None = None) -> RunnableConfig:
    """``config`` for a probe re-run: nothing it does is seen or kept outside it.

    Every stream sink is removed or made a no-op, and so is every other callback handler
    (yours in ``config["callbacks"]``: a token relay, a tracer), so no handler sees a
    re-run's prompts or replies (the invented applicants of the variants); the runtime's
    store, if any, is a :class:`~.scratch_store.ScratchStore` over it, so a re-run's writes
    stay its own. Run the re-run under :func:`unobserved` too (LangSmith's own tracing).

    Args:
        config: The task's config.
        record: Where the re-run's custom events and chat replies are recorded, for the
            probe to compare (its :attr:`Capture.compared` kinds; the guard's own writer and
            handler, nothing of the caller's), or ``None``.
    """
    out = _with_sinks(config, None, record)
    conf = out.get(CONF) or {}
    runtime = conf.get(CONFIG_KEY_RUNTIME)
    if runtime is not None and runtime.store is not None:
        conf[CONFIG_KEY_RUNTIME] = runtime.override(store=ScratchStore(runtime.store))
    return out


@contextlib.contextmanager
def unobserved() -> Iterator[None]:
    """Within: LangSmith tracing is off, whatever the environment says (probe re-runs).

    LangChain adds a LangSmith tracer to every run when ``LANGSMITH_TRACING`` (or
    ``LANGCHAIN_TRACING_V2``) is set, or inside ``tracing_v2_enabled()``, beside the config's
    callbacks; a re-run must not be traced with the variants' applicants.
    """
    token = tracing_v2_callback_var.set(None)
    try:
        with tracing_context(enabled=False):
            yield
    finally:
        tracing_v2_callback_var.reset(token)


def streamed_view(capture: Capture, update: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON view of what a run of a guarded node streamed, as the probe compares it.

    ``{"custom": {"0": event, ...}, "messages": {"0": reply, ...}}``, each part present only
    when the run streamed something of its kind (``{}`` for nothing): the custom events it
    wrote, in order, and the replies of the chat models it called, in the order the calls
    started, less those it returns in ``update`` (the same message, or its text): a reply
    the node returns is compared there already. A reply is its text, or ``{"text",
    "tool_calls": [{"name", "args"}]}`` when it calls tools. Each item is keyed by its
    position, so the probe's scorers compare item by item.

    Raises:
        Unreadable: A custom event the probe cannot read (its path names it).
    """
    view: dict[str, Any] = {}
    custom = [payload for kind, payload in capture.events if kind == "custom"]
    if "custom" in capture.compared and custom:
        view["custom"] = {
            str(i): read(event, f"stream.custom[{i}]", role="output")
            for i, event in enumerate(custom)
        }
    if "messages" in capture.compared:
        ids, texts = _returned(update)
        replies = [
            _reply_view(message, i)
            for i, (_, message) in enumerate(sorted(capture.replies, key=lambda r: r[0]))
            if not (message.id in ids or (message.text and message.text in texts))
        ]
        kept = [reply for reply in replies if reply]
        if kept:
            view["messages"] = {str(i): reply for i, reply in enumerate(kept)}
    return view


def held_view(capture: Capture) -> tuple[list[dict[str, Any]], str | None]:
    """What releasing ``capture`` would stream, as JSON: shown to a reviewer and approved.

    One item per released thing, in release order: ``{"kind": "custom", "event": ...}`` for a
    custom event; ``{"kind": "messages", "message": ...}`` for a streamed message (its chunks
    joined, at the place of its first chunk; the message's JSON view,
    :func:`~.values.read`); ``{"kind": KIND, "event": ...}`` for another event (``"tools"``,
    ``"subgraph"``: the chunk as the sink receives it). ``[]`` for nothing captured.

    Returns:
        (the items, ``None``) or, when an event is not JSON, (the items with that event's
        ``event`` a marker text ``"<not JSON: ...>"``, why): such a stream cannot be
        approved as it is (:class:`.review.ReviewNode`).
    """
    items: list[dict[str, Any]] = []
    merged: dict[str, tuple[int, BaseMessage]] = {}
    problem: str | None = None
    for i, (kind, payload) in enumerate(capture.events):
        message = _streamed_message(kind, payload)
        if message is not None:
            ident = message.id or f"#{i}"
            if ident in merged:
                place, joined = merged[ident]
                if isinstance(joined, BaseMessageChunk) and isinstance(message, BaseMessageChunk):
                    merged[ident] = (place, joined + message)
                    continue
                ident = f"{ident}#{i}"  # the same id again, whole: a message of its own
            merged[ident] = (len(items), message)
            items.append({"kind": "messages", "message": None})
            continue
        try:
            event = read(payload, f"stream[{i}]", role="output")
        except Unreadable as exc:
            problem = problem or str(exc)
            event = f"<not JSON: {type(payload).__name__}>"
        items.append({"kind": kind, "event": event})
    for ident, (place, message) in merged.items():
        try:
            items[place]["message"] = read(message, f"stream.messages[{ident}]", role="output")
        except Unreadable as exc:
            problem = problem or str(exc)
            items[place]["message"] = f"<not JSON: {type(message).__name__}>"
    return items, problem


def _streamed_message(kind: str, payload: Any) -> BaseMessage | None:
    """The message of a ``"messages"`` chunk ``(namespace, "messages", (message, metadata))``."""
    if kind != "messages" or not isinstance(payload, tuple) or len(payload) != 3:
        return None
    pair = payload[2]
    if isinstance(pair, tuple) and pair and isinstance(pair[0], BaseMessage):
        return pair[0]
    return None


def _returned(update: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """The ids and texts of the messages ``update`` returns (a message, or a list of them)."""
    ids: set[str] = set()
    texts: set[str] = set()
    for value in update.values():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, BaseMessage):
                if item.id:
                    ids.add(item.id)
                if item.text:
                    texts.add(item.text)
    return ids, texts


def _reply_view(message: BaseMessage, position: int) -> Any:
    """A chat reply as the probe compares it: its text, and its tool calls if it makes any."""
    calls = message.tool_calls if isinstance(message, AIMessage) else []
    if not calls:
        return message.text
    return {
        "text": message.text,
        "tool_calls": [
            {
                "name": call["name"],
                "args": read(call["args"], f"stream.messages[{position}].args", role="output"),
            }
            for call in calls
        ],
    }


def injected(
    given: Mapping[str, Any], config: RunnableConfig, names: Sequence[str]
) -> dict[str, Any]:
    """The LangGraph-injected arguments ``names``, rebound to ``config``'s sinks.

    ``config``, ``runtime``, ``writer`` and ``store`` come from ``config`` (capturing or
    silenced: a re-run's store is a scratch copy); without a runtime, ``store`` is passed on
    as given.
    """
    runtime = (config.get(CONF) or {}).get(CONFIG_KEY_RUNTIME)
    values: dict[str, Any] = {}
    for name in names:
        if name == "config":
            values[name] = config
        elif name == "runtime" and runtime is not None:
            values[name] = runtime
        elif name == "writer" and runtime is not None:
            values[name] = runtime.stream_writer
        elif name == "store" and runtime is not None and runtime.store is not None:
            values[name] = runtime.store
        elif name in given:
            values[name] = given[name]
    return values


@dataclass
class Sinks:
    """The real stream sinks of one task's config."""

    handlers: dict[str, list[Any]]
    custom: Callable[[Any], None] | None
    subgraph: Any

    @classmethod
    def of(cls, config: RunnableConfig | None) -> Sinks:
        """The sinks of ``config`` (none for ``None``)."""
        handlers: dict[str, list[Any]] = {}
        custom = None
        subgraph = None
        if config is not None:
            callbacks = config.get("callbacks")
            found: list[Any] = []
            if isinstance(callbacks, BaseCallbackManager):
                found = [*callbacks.handlers, *callbacks.inheritable_handlers]
            elif isinstance(callbacks, Sequence):
                found = list(callbacks)
            for handler in found:
                kind = _kind_of(handler)
                if kind is not None and handler not in handlers.setdefault(kind[0], []):
                    handlers[kind[0]].append(handler)
            conf = config.get(CONF) or {}
            runtime = conf.get(CONFIG_KEY_RUNTIME)
            if runtime is not None:
                custom = runtime.stream_writer
            subgraph = conf.get(CONFIG_KEY_STREAM)
        return cls(handlers, custom, subgraph)

    def emit(self, kind: str, payload: Any) -> bool:
        """Hand one event to its sink; ``False`` when this task has none for it."""
        if kind == "custom":
            if self.custom is None:
                return False
            self.custom(payload)
            return True
        if kind == "subgraph":
            if self.subgraph is None:
                return False
            self.subgraph(payload)
            return True
        handlers = self.handlers.get(kind) or []
        for handler in handlers:
            if kind in ("messages", "tools"):
                handler.stream(payload)
            else:
                handler.send_stream.send_nowait(payload)
        return bool(handlers)

    def messages(
        self, update: Mapping[str, Any], metadata: Mapping[str, Any], namespace: tuple[str, ...]
    ) -> None:
        """Stream the messages of a promoted update (a repair or edit) as whole messages.

        A message may be a LangChain message or, as a reviewer's edit gives it, its JSON form
        (``{"type": "ai", "content": ...}``, or with ``"role"``), which ``add_messages`` turns
        into a message when it is promoted; any other value is no message and not streamed.
        """
        for handler in self.handlers.get("messages") or []:
            for value in update.values():
                items = value if isinstance(value, list) else [value]
                for item in items:
                    message = _as_message(item)
                    if message is not None:
                        handler.stream((namespace, "messages", (message, dict(metadata))))


def _as_message(item: Any) -> BaseMessage | None:
    """``item`` as a LangChain message, if it is one or the JSON form of one, else ``None``."""
    if isinstance(item, BaseMessage):
        return item
    if not (isinstance(item, Mapping) and "content" in item and ("type" in item or "role" in item)):
        return None
    try:
        return convert_to_messages([dict(item)])[0]
    except (ValueError, TypeError, NotImplementedError):
        return None


def announce(
    config: RunnableConfig | None, event: str, node: str, key: str, status: str, reason: str
) -> None:
    """Write the guard's custom event (``{"biasbreaker": {...}}``) to ``config``'s task.

    Args:
        config: The task's config.
        event: ``"held"`` (the output waits for the breaker or a human), ``"released"`` (let
            through unchanged: its held events follow), ``"repaired"``, ``"edited"`` or
            ``"rejected"``.
        node: The guarded node.
        key: The output's key in the staging buffer.
        status: Its staging status (``"tripped"``, ``"held"``, ``"escalated"``, …).
        reason: Why (the breaker's reason, or the probe's).
    """
    sinks = Sinks.of(config)
    if sinks.custom is not None:
        sinks.custom(
            {
                EVENT_KEY: {
                    "event": event,
                    "node": node,
                    "key": key,
                    "status": status,
                    "reason": reason,
                }
            }
        )


class HeldStreams(Shared):
    """Captures of held outputs, by (thread, graph namespace, key), in this process.

    Args:
        size: Captures kept; the oldest is dropped first (its events are then never released).
    """

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._held: OrderedDict[tuple[str, str, str], Capture] = OrderedDict()
        self._lock = threading.Lock()

    def keep(self, where: tuple[str, str, str], capture: Capture) -> None:
        """Keep ``capture`` until its output is decided."""
        with self._lock:
            self._held[where] = capture
            while len(self._held) > self.size:
                self._held.popitem(last=False)

    def take(self, where: tuple[str, str, str]) -> Capture | None:
        """The capture kept for ``where`` (and forget it), or ``None``."""
        with self._lock:
            return self._held.pop(where, None)


def graph_namespace(config: RunnableConfig | None) -> tuple[str, ...]:
    """The namespace of the graph a task runs in (its checkpoint namespace, own segment off)."""
    ns = str(((config or {}).get(CONF) or {}).get("checkpoint_ns") or "")
    return tuple(ns.split("|")[:-1]) if ns else ()


__all__ = [
    "EVENT_KEY",
    "Capture",
    "HeldStreams",
    "Sinks",
    "announce",
    "capturing",
    "compared_kinds",
    "graph_namespace",
    "held_view",
    "injected",
    "silenced",
    "streamed_view",
    "streams_anything",
    "unobserved",
]
