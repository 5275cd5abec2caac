"""Everything the adapter takes from LangGraph beyond its public API, in one place.

The public API cannot express "run this node's static successors only if its output was let
through": a node's static edges fire whatever the node returns (a ``Command(goto=...)`` adds
destinations, it never removes any). So, after ``StateGraph.compile()``, the adapter gates the
*edge writers* of every guarded node. What it relies on (checked against langgraph 1.2.x):

* ``CompiledStateGraph.nodes[name]`` is a ``PregelNode`` whose ``writers`` list starts with the
  state-update ``ChannelWrite`` (entries of ``ChannelWriteTupleEntry``) and continues with one
  writer per edge: a ``ChannelWrite`` of ``ChannelWriteEntry("branch:to:<v>", None)`` for a
  static edge, ``ChannelWriteEntry("join:<a+b>:<v>", "<a>")`` for a waiting edge (both added by
  ``attach_edge``), and a writer runnable registered with ``ChannelWrite.register_writer`` for
  each conditional edge (``attach_branch``). Writers receive the node's return value.
* A ``ChannelWriteEntry`` whose ``mapper`` returns ``SKIP_WRITE`` writes nothing.
* ``PregelNode.flat_writers`` and ``.node`` are cached on first use, so gates are installed
  right after ``compile()``, before any run or drawing.
* ``langgraph._internal._runnable.coerce_to_runnable`` turns a node function into the runnable
  ``add_node`` would have made (config injection, sync/async handling).
* A task's run metadata carries ``langgraph_step`` (the super-step) and ``langgraph_path``,
  whose first element is ``"__pregel_push"`` for a ``Send``/push task (:func:`task_of`).
* ``interrupt()`` finds its task through ``var_child_runnable_config``; on Python < 3.11 an
  async run cannot hand that to a sync node's worker thread, so :func:`interrupt_in` sets it.
* ``langgraph._internal._fields.get_update_as_tuples`` is how LangGraph writes a pydantic
  model or dataclass a node returns (:func:`model_update`).
* ``ChannelRead.do_read(config, select=..., fresh=False)`` reads channels a node does not take
  as input — how a conditional edge reads the state — so the guarded nodes and the guard's own
  nodes read the ``bb_`` keys without them being part of any node's input
  (:func:`read_channels`).
* A compiled node's ``tags`` become its tasks' tags; a task tagged ``TAG_HIDDEN`` is left out
  of the ``updates``, ``tasks`` and ``debug`` streams (:func:`hide_tasks`).
* A run that streams no ``"custom"`` events gets a stream writer whose body is ``pass``
  (:func:`writes_nothing`); with no streaming callback handler and no parent stream either, a
  guarded node has nothing to capture and keeps its own config.
* A reducer key's channel is a ``BinaryOperatorAggregate(typ, reducer)``, whose every copy
  (``copy``, ``from_checkpoint``: once per channel per run) strips ``typ`` of ``Annotated`` and
  instantiates it for its empty value. Its ``value`` slot holds what ``get()`` returns,
  ``MISSING`` when the channel is empty (:func:`read_channels` reads it directly); its
  ``update`` starts from the first write when the value is ``MISSING``. After every super-step
  with a task, ``apply_writes`` calls ``update([])`` on every channel that ``is_available()``
  and was not written: an empty channel is skipped. :class:`LeanAggregate` builds on these.
* ``StateGraph.channels`` maps each state key to its channel; a channel's
  ``from_checkpoint(value)`` (``langgraph._internal._typing.MISSING`` for no value) makes a
  fresh copy holding ``value`` and ``update([write])`` applies one write with the key's reducer,
  raising if the reducer refuses it. :func:`write_problem` uses them to try a reviewer's update
  on copies before the review node returns it.

The gates: each guarded node's edge writers skip when the node returns :class:`Halt` (its output
is held); copies of them are added to the breaker nodes, firing only when those return a
:class:`Promote` naming the node (its held output was let through). Drawing
(``get_graph()``) runs writers with ``None`` and reads the branches' declared destinations, so
it shows the user's edges unchanged. :func:`check_layout` fails loudly, naming the node, if a
LangGraph version lays writers out differently.
"""

from __future__ import annotations

import copy as _copy
import dataclasses
import itertools
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langgraph._internal._constants import CONF, CONFIG_KEY_READ, CONFIG_KEY_SCRATCHPAD
from langgraph._internal._fields import get_update_as_tuples
from langgraph._internal._runnable import RunnableCallable, coerce_to_runnable
from langgraph._internal._scratchpad import PregelScratchpad
from langgraph._internal._typing import MISSING
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.constants import TAG_HIDDEN
from langgraph.errors import GraphInterrupt
from langgraph.pregel._algo import local_read
from langgraph.pregel._read import ChannelRead
from langgraph.pregel._write import (
    PASSTHROUGH,
    SKIP_WRITE,
    ChannelWrite,
    ChannelWriteEntry,
    ChannelWriteTupleEntry,
)
from langgraph.types import Command, interrupt
from pydantic import BaseModel

from biasbreaker.errors import ConfigError


# removing this decorator is an equivalent mutant: Halt adds no field, so Command's dataclass
# methods serve it unchanged (it only loses __slots__)
@dataclass(frozen=True, slots=True, kw_only=True)  # pragma: no mutate
class Halt(Command):  # type: ignore[misc, type-arg]
    """What a guarded node returns when its output is held: only ``bb_`` keys, a reroute.

    Its static and conditional successors do not run.
    """


@dataclass(frozen=True, slots=True, kw_only=True)
class Promote(Command):  # type: ignore[misc, type-arg]
    """What a breaker node returns when it lets held outputs through.

    Args:
        promoted: The guarded nodes whose held outputs are promoted by this return; their
            static and conditional successors run as if the node had returned the update.
    """

    promoted: tuple[str, ...] = ()


def _not_halted(output: Any) -> bool:
    return not isinstance(output, Halt)


def _promotes(node: str, output: Any) -> bool:
    return isinstance(output, Promote) and node in output.promoted


def _gated_value(pred: Callable[[Any], bool], entry: ChannelWriteEntry, output: Any) -> Any:
    if not pred(output):
        return SKIP_WRITE
    # `is` -> `==` is an equivalent mutant: PASSTHROUGH is a bare object() and an edge entry's
    # value is None, a node name or PASSTHROUGH, whose == against it is identity
    value = output if entry.value is PASSTHROUGH else entry.value  # pragma: no mutate
    return entry.mapper(value) if entry.mapper is not None else value


def _gate_channel_write(
    writer: ChannelWrite, pred: Callable[[Any], bool], node: str
) -> ChannelWrite:
    entries = []
    for entry in writer.writes:
        if not isinstance(entry, ChannelWriteEntry):
            raise ConfigError(
                f"guarded node {node!r}: unexpected LangGraph edge writer entry {entry!r}; "
                "this langgraph version lays out edges differently from 1.2.x"
            )
        entries.append(
            ChannelWriteEntry(
                entry.channel, PASSTHROUGH, entry.skip_none, partial(_gated_value, pred, entry)
            )
        )
    return ChannelWrite(tuple(entries))


def _gate_branch(
    # `*` -> `/` is an equivalent mutant: every call passes `declare` by keyword
    writer: Runnable[Any, Any],
    pred: Callable[[Any], bool],
    *,  # pragma: no mutate
    declare: bool,
) -> Runnable[Any, Any]:
    def run(output: Any, config: RunnableConfig) -> Any:
        if pred(output):
            writer.invoke(output, config)
        return output

    async def arun(output: Any, config: RunnableConfig) -> Any:
        if pred(output):
            await writer.ainvoke(output, config)
        return output

    gated = RunnableCallable(run, arun, name=None, trace=False)
    static = getattr(writer, "_is_channel_writer", None) if declare else None
    return ChannelWrite.register_writer(gated, static)


def check_layout(compiled: Any, node: str) -> list[Runnable[Any, Any]]:
    """Return the edge writers of ``node``, checking the layout this module relies on.

    Raises:
        ConfigError: The node's writers do not start with the state-update writer, or the
            node was already run (its writers are cached).
    """
    pregel_node = compiled.nodes[node]
    if "flat_writers" in vars(pregel_node) or "node" in vars(pregel_node):
        raise ConfigError(f"guarded node {node!r} was already used before its gates were installed")
    writers = pregel_node.writers
    if not writers or not (
        isinstance(writers[0], ChannelWrite)
        and all(isinstance(e, ChannelWriteTupleEntry) for e in writers[0].writes)
    ):
        raise ConfigError(
            f"guarded node {node!r}: its first writer is not LangGraph's state-update writer; "
            "this langgraph version is not supported by the biasbreaker adapter (1.2.x is)"
        )
    edge_writers: list[Runnable[Any, Any]] = list(writers[1:])
    return edge_writers


def install_gates(compiled: Any, guarded: Iterable[str], promoters: Iterable[str]) -> None:
    """Gate the edge writers of the guarded nodes and give copies to the promoter nodes.

    Args:
        compiled: A ``CompiledStateGraph`` fresh from ``compile()``.
        guarded: The guarded node names.
        promoters: The breaker nodes that may return :class:`Promote`.

    Raises:
        ConfigError: As :func:`check_layout`.
    """
    promoters = list(promoters)
    layouts = {node: check_layout(compiled, node) for node in guarded}
    for node, edge_writers in layouts.items():
        own: list[Runnable[Any, Any]] = []
        for writer in edge_writers:
            if isinstance(writer, ChannelWrite):
                own.append(_gate_channel_write(writer, _not_halted, node))
            else:
                own.append(_gate_branch(writer, _not_halted, declare=True))
        compiled.nodes[node].writers[1:] = own
        for promoter in promoters:
            pred = partial(_promotes, node)
            for writer in edge_writers:
                if isinstance(writer, ChannelWrite):
                    copy: Runnable[Any, Any] = _gate_channel_write(writer, pred, node)
                else:
                    copy = _gate_branch(writer, pred, declare=False)
                compiled.nodes[promoter].writers.append(copy)


def hide_tasks(compiled: Any, nodes: Iterable[str]) -> None:
    """Tag ``nodes`` hidden (``TAG_HIDDEN``): no stream mode shows their tasks or updates.

    For the ``Send`` skeptic branches, whose input is the review request.
    """
    for node in nodes:
        pregel_node = compiled.nodes[node]
        pregel_node.tags = [*(pregel_node.tags or []), TAG_HIDDEN]


def node_function(runnable: Any) -> Callable[..., Any] | None:
    """The plain function behind a node added with ``add_node(fn)``, or ``None``.

    ``add_node`` wraps a function in a ``RunnableCallable`` whose ``func`` is the function
    (sync) or ``None`` with ``afunc`` the coroutine function (async).
    """
    if not isinstance(runnable, RunnableCallable):
        return None
    func = runnable.func if runnable.func is not None else runnable.afunc
    return func


def write_problem(
    channels: Mapping[str, Any], state: Mapping[str, Any], update: Mapping[str, Any]
) -> str | None:
    """Why the graph's reducers would refuse ``update`` on ``state``, or ``None``.

    Each key's write is applied to a fresh copy of its channel holding a deep copy of the
    state's current value (a reducer may mutate it), so nothing of the run is touched. A write
    LangGraph refuses when the review node's writes are applied would fail the super-step
    after the node returned, and again on every later resume of the thread.

    Args:
        channels: ``StateGraph.channels`` of the graph (state key -> channel).
        state: The state the write applies to.
        update: State key -> written value; keys without a channel are skipped.

    Returns:
        ``None``, or ``"key 'k': <Exception>: <message>"`` for the first refused write.
    """
    for key, value in update.items():
        channel = channels.get(key)
        if channel is None:
            continue
        current = _copy.deepcopy(state[key]) if key in state else MISSING
        try:
            channel.from_checkpoint(current).update([value])
        except Exception as exc:  # any reducer error would fail the super-step
            return f"key {key!r}: {type(exc).__name__}: {exc}"
    return None


def as_node_runnable(func: Callable[..., Any], name: str) -> Runnable[Any, Any]:
    """The runnable ``add_node(name, func)`` would store for ``func``."""
    return coerce_to_runnable(func, name=name, trace=False)


def model_update(output: Any) -> dict[str, Any]:
    """A pydantic-model or dataclass node output as the update LangGraph writes for it.

    LangGraph writes a model's fields that are not ``None``, unless set explicitly or their
    default is not ``None`` (``langgraph._internal._fields.get_update_as_tuples``).
    """
    if isinstance(output, BaseModel):
        keys = list(type(output).model_fields)
    else:
        keys = [f.name for f in dataclasses.fields(output)]
    return dict(get_update_as_tuples(output, keys))


def _pass(payload: Any) -> None:  # the shape of LangGraph's no-op writer (no docstring)
    pass


_no_op_codes: list[Any] = []
"""The code objects :func:`writes_nothing` found doing nothing (the last one)."""


def writes_nothing(writer: Any) -> bool:
    """Whether ``writer`` is a stream writer that does nothing (``"custom"`` not streamed).

    ``Pregel.stream`` gives a run that does not stream ``"custom"`` (and is not a subgraph
    streamed by its parent) a local function whose body is ``pass``; the default runtime's
    ``_no_op_stream_writer`` is the same. A writer with any other body (one that puts the
    event on the run's queue) never compares equal, so a real writer is never taken for it.
    Every run's local function has the same code object, so the last one found doing nothing
    is recognised by identity, without comparing its bytecode again.
    """
    code = getattr(writer, "__code__", None)
    if code is None:
        return False
    known = _no_op_codes
    if known and code is known[0]:
        return True
    reference = _pass.__code__
    if (
        code.co_code == reference.co_code
        and code.co_consts == reference.co_consts
        and not code.co_names
    ):
        _no_op_codes[:] = [code]
        return True
    return False


def read_channels(config: RunnableConfig, keys: Iterable[str]) -> dict[str, Any]:
    """The current values of ``keys`` for the running task (a key never written is absent).

    What ``ChannelRead.do_read(config, select=keys, fresh=False)`` returns. A task's read
    function is ``partial(local_read, scratchpad, channels, managed, task)``
    (``langgraph.pregel._algo.prepare_single_task``), which with ``fresh=False`` reads each
    channel with ``get()`` and skips an empty one by catching ``EmptyChannelError``: most of
    the ``bb_`` keys are never written in a run, and raising and catching that exception for
    each of them, on every guarded step, cost about as much as the rest of the read
    (docs/langgraph.md §10). So the channels are read directly, an empty one skipped with
    ``is_available()``; a reducer channel (``BinaryOperatorAggregate``, every ``bb_`` key) by
    its ``value`` slot, which is ``MISSING`` when empty and what ``get()`` returns otherwise,
    without the two method calls per key. Any other read function (or a managed key) goes
    through ``do_read``.
    """
    read = (config.get(CONF) or {}).get(CONFIG_KEY_READ)
    if isinstance(read, partial) and read.func is local_read and len(read.args) == 4:
        channels, managed = read.args[1], read.args[2]
        plain = type(channels) is dict or isinstance(channels, Mapping)  # a dict: no ABC check
        if plain and not (managed and any(k in managed for k in keys)):
            values: dict[str, Any] = {}
            get = channels.get
            for key in keys:
                channel = get(key)
                if type(channel) in _AGGREGATES:
                    value = channel.value
                    if value is not MISSING:
                        values[key] = value
                elif channel is not None and channel.is_available():
                    values[key] = channel.get()
            return values
    return dict(ChannelRead.do_read(config, select=list(keys), fresh=False))


class LeanAggregate(BinaryOperatorAggregate):  # type: ignore[type-arg]
    """A ``bb_`` key's reducer channel: empty (not available) until its first write.

    LangGraph's ``BinaryOperatorAggregate(dict, reducer)`` holds ``{}`` from the start, so it
    is available, and after every super-step ``apply_writes`` updates it with no write; most
    ``bb_`` keys are never written in a run, and those updates of a guarded graph's hidden
    channels cost every step about a fifth of what the guard itself costs. This one holds
    ``MISSING`` until written (LangGraph skips it then), and its first update starts from the
    empty container, so every update reduces exactly as the declared channel's does. Reading
    it: absent until written, where the declared channel read ``{}`` or ``[]``
    (:func:`~biasbreaker_plugins.langgraph.graph.guard_state` still reports the empty value).
    Its copies skip ``__init__`` (they need neither the annotation stripped nor an empty
    value built).
    """

    __slots__ = ()

    def __init__(self, typ: type[Any], operator: Callable[[Any, Any], Any]) -> None:
        super().__init__(typ, operator)
        self.value = MISSING

    def _holding(self, value: Any) -> LeanAggregate:
        new = object.__new__(LeanAggregate)
        new.typ = self.typ
        new.key = self.key
        new.operator = self.operator
        new.value = value
        return new

    def copy(self) -> LeanAggregate:
        """A copy holding the same value."""
        return self._holding(self.value)

    def __deepcopy__(self, memo: dict[int, Any]) -> LeanAggregate:
        """A copy holding a deep copy of the value, or ``MISSING`` (the sentinel itself)."""
        value = self.value
        return self._holding(value if value is MISSING else _copy.deepcopy(value, memo))

    def from_checkpoint(self, checkpoint: Any) -> LeanAggregate:
        """A copy holding ``checkpoint`` (``MISSING``: empty)."""
        if isinstance(checkpoint, _DeltaSnapshot):
            checkpoint = checkpoint.value
        return self._holding(checkpoint)

    def update(self, values: Sequence[Any]) -> bool:
        """Reduce ``values`` into the value, starting from the empty container if empty."""
        if not values:
            return False
        if self.value is MISSING:
            self.value = self.typ()
        return bool(super().update(values))


_AGGREGATES: frozenset[type[Any]] = frozenset({BinaryOperatorAggregate, LeanAggregate})


def lean_channels(channels: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """The reducer channels of ``keys`` rebuilt as :class:`LeanAggregate` channels.

    A ``BinaryOperatorAggregate`` declared ``Annotated[dict[str, ...], reducer]`` strips the
    annotation again each time LangGraph copies it (every channel, at the start of every run);
    the one returned for it is declared ``dict`` (``list`` for a list) with the same reducer,
    empty until first written: the same updates, equal to the original (channels compare by
    their reducer).

    Args:
        channels: State key -> channel (``StateGraph.channels``).
        keys: The keys to rebuild; a key that is absent, not such a channel, or whose empty
            value is neither a ``dict`` nor a ``list`` is left out.

    Returns:
        Key -> rebuilt channel, to update ``channels`` with.
    """
    lean: dict[str, Any] = {}
    for key in keys:
        channel = channels.get(key)
        if type(channel) is not BinaryOperatorAggregate:
            continue
        empty = type(channel.value)
        if empty is dict or empty is list:
            copy = LeanAggregate(empty, channel.operator)
            copy.key = channel.key
            lean[key] = copy
    return lean


def thread_of(config: Mapping[str, Any] | None) -> str:
    """The run's thread id (``"default"`` without one)."""
    conf = (config or {}).get("configurable") or {}
    return str(conf.get("thread_id", "default"))


def trace_key(config: Mapping[str, Any] | None) -> str:
    """The id a run trace is kept under: the thread id, plus the namespace of a subgraph.

    A guarded graph running as a subgraph has its own breaker in its own checkpoint
    namespace (``"<node>:<task id>"``, nested with ``|``), so its trace is its own file:
    ``"<thread>.<node>-<task id>"`` (``:`` and ``|`` written as ``-`` and ``.``).
    """
    conf = (config or {}).get("configurable") or {}
    thread = conf.get("thread_id", "default")
    if type(thread) is not str:
        thread = str(thread)
    ns = conf.get("checkpoint_ns")
    if not ns:  # the root graph outside a task
        return thread
    if type(ns) is not str:
        ns = str(ns)
    if "|" not in ns:  # a task of the root graph ("<node>:<task id>"): no graph namespace
        return thread
    graph = ns.split("|")[:-1]
    return ".".join([thread, *(part.replace(":", "-") for part in graph)])


def task_of(config: Mapping[str, Any] | None) -> tuple[int, str]:
    """(super-step, push suffix) of the running task, from LangGraph's run metadata."""
    meta = (config or {}).get("metadata") or {}
    step = meta.get("langgraph_step", 0)
    if type(step) is not int:
        step = int(step)
    path = meta.get("langgraph_path") or ()
    suffix = ""
    if path and path[0] == "__pregel_push":
        suffix = "#" + ".".join(str(p) for p in path[1:])
    return step, suffix


RERUN_SUBGRAPHS = 1 << 20
"""Where the subgraph counter of re-runs started beside the node's own call begins."""


def own_scratchpad(config: RunnableConfig) -> RunnableConfig:
    """``config`` with a scratchpad of its own: for re-runs started beside the node's own call.

    A task's scratchpad (``config["configurable"]["__pregel_scratchpad"]``) counts the task's
    ``interrupt()`` calls (the index of each resume value), its ``@task`` calls and the graphs
    invoked inside it (a count above 0 is appended to the nested graph's checkpoint
    namespace). Re-runs made after the node's own call take the counts after its own; re-runs
    running beside it would take some of them first, so the node's own ``interrupt()`` could
    be answered with another index's resume value and a graph it invokes could checkpoint
    under another namespace. The re-runs share this copy instead: their counts start at 0
    (the nested graphs' at :data:`RERUN_SUBGRAPHS`, never the node's own), and they see no
    resume value, which re-runs made after the node's own call never see either (it takes
    them); an ``interrupt()`` in a re-run raises, as there, and the probe holds the step.
    ``config`` itself when it has no scratchpad (outside a task).
    """
    conf = config.get(CONF) or {}
    pad = conf.get(CONFIG_KEY_SCRATCHPAD)
    if not isinstance(pad, PregelScratchpad):
        return config
    own = dataclasses.replace(
        pad,
        call_counter=itertools.count().__next__,
        interrupt_counter=itertools.count().__next__,
        get_null_resume=_no_resume,
        resume=[],
        subgraph_counter=itertools.count(RERUN_SUBGRAPHS).__next__,
    )
    return {**config, CONF: {**conf, CONFIG_KEY_SCRATCHPAD: own}}


def _no_resume(consume: bool = False) -> Any:
    """A re-run's ``get_null_resume``: there is none (:func:`own_scratchpad`)."""
    return None


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` or its cause chain is LangGraph's interrupt (``interrupt()`` called)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, GraphInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def interrupt_in(value: Any, config: RunnableConfig) -> Any:
    """LangGraph's ``interrupt(value)``, also inside async runs on Python 3.10.

    ``interrupt()`` finds its task through the current runnable config. On Python < 3.11 an
    async run cannot hand that config to a sync node it executes in a worker thread (asyncio
    tasks take no context argument there), so ``interrupt()`` raises "Called get_config
    outside of a runnable context". The node is given its config anyway; set it for the call.
    """
    if sys.version_info < (3, 11):
        token = var_child_runnable_config.set(config)
        try:
            return interrupt(value)
        finally:
            var_child_runnable_config.reset(token)
    else:
        return interrupt(value)


__all__ = [
    "Halt",
    "LeanAggregate",
    "Promote",
    "as_node_runnable",
    "check_layout",
    "hide_tasks",
    "install_gates",
    "interrupt_in",
    "interrupted",
    "lean_channels",
    "model_update",
    "node_function",
    "own_scratchpad",
    "read_channels",
    "task_of",
    "thread_of",
    "trace_key",
    "write_problem",
    "writes_nothing",
]
