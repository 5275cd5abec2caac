"""``BiasState``: the keys a guarded LangGraph graph keeps, with their reducers.

Derive the application's state from it::

    class State(BiasState):
        question: str
        answer: str

Every key is prefixed ``bb_`` so it cannot collide with the application's keys, and every
value is plain JSON (``dict``/``list``/``str``/``float``/``int``/``bool``/``None``), so any
checkpointer stores it, including with ``LANGGRAPH_STRICT_MSGPACK=true`` and LangGraph
Server's orjson. Nothing here imports LangGraph: the reducers are plain functions.

* ``bb_local_scores``: node -> latest local bias score ``b_i`` in [0, 1] (``None`` = not
  applicable); written by the step that probed the node.
* ``bb_katz_weights``: node -> Katz influence weight (they sum to 1), from the graph's edges;
  constant, written by the breaker steps.
* ``bb_network_ewma``: the fast and slow EWMAs of B_net (``NetworkEwma.to_dict()``); written by
  every breaker step.
* ``bb_breaker``: ``{"machine": ControlMachine.snapshot(), "by": "<node>@<step>"}``; written
  by the task that stepped the machine.
* ``bb_unverified_output``: the staging buffer, key -> staged output (see below); ``None``
  deletes an entry. Written by guarded nodes and the breaker nodes.
* ``bb_frozen``: key -> frozen payload record ``{node, payload, status, step, reason}``;
  written by the breaker nodes.
* ``bb_audit_trail``: events (freeze, intervention summary, review), oldest first; M5 builds on
  it.
* ``bb_verdicts``: skeptic outcomes of the ``Send`` fan-out, slot -> outcome (``None``
  deletes); written by the skeptic branches, cleared by ``bb_aggregate``.
* ``bb_reviews``: human review decisions, oldest first; written by the review node.
* ``bb_probe_coverage``: node -> the probe's covering-rotation state, rotation key
  (``"<axis>/<groups named>"``) -> position (``ProbeResult.coverage``; docs/detection.md,
  "Every group covered"); written by the step that probed the node, so the rotation survives
  a checkpoint.

A staged output (``bb_unverified_output[key]``) is ``{"node", "key", "status", "update",
"goto", "input", "score", "step"}``: the node's update held back from the application's keys
(``update``), its ``Command`` destinations (``goto``), the input it was probed on, its local
score, and, once it is known, the breaker step it waits for (``step``: fast, slow, scores). An
update that is not JSON (:func:`json_problem`: a ``set``, an object, NaN or infinity) is held
for review as :func:`shown` renders it, with ``not_json`` saying why; it can be edited or
rejected, never approved, so the staging buffer holds plain JSON only. An output held while
the caller streams has ``stream`` too: the JSON of the stream events kept with it
(:func:`~.streaming.held_view`), which a review shows and an approval releases (with
``stream_not_json`` when one is not JSON: it cannot be approved). A
downstream node reads only the application's keys, so it never sees a staged output; an output
is *promoted* (written to the application's keys, its successors triggered) only when the
breaker lets it through.
"""

from __future__ import annotations

import math
import operator
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal, TypedDict, Union

from biasbreaker.errors import ConfigError, InputError
from biasbreaker.types import FrozenPayload

JSON = Any
"""A plain JSON value (the state keys hold nothing else)."""

BB_PREFIX: Final = "bb_"


def merge_mapping(current: dict[str, Any] | None, update: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer: the union of two mappings, ``update`` winning on shared keys.

    Args:
        current: The channel's value (``None`` before the first write).
        update: One write.

    Returns:
        A new dict; neither argument is mutated.
    """
    merged = dict(current or {})
    merged.update(update or {})
    return merged


def merge_staged(
    current: dict[str, Any] | None, update: dict[str, Any | None] | None
) -> dict[str, Any]:
    """Reducer of the staging buffer: set entries, and delete those written as ``None``.

    Parallel guarded nodes stage under distinct keys in one super-step, so the buffer takes
    several writes per step.

    Args:
        current: The buffer (``None`` before the first write).
        update: key -> staged output, or key -> ``None`` to remove the entry (promoted or
            rejected).

    Returns:
        A new dict; neither argument is mutated.
    """
    merged = dict(current or {})
    for key, value in (update or {}).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def replace_value(current: Any, update: Any) -> Any:
    """Reducer: the latest write wins (used for constants several tasks may rewrite)."""
    return update


def single_breaker_step(current: dict[str, Any] | None, update: dict[str, Any]) -> dict[str, Any]:
    """Reducer of ``bb_breaker``: accept a snapshot only if it is newer than the current one.

    Each write comes from one task that stepped the control machine at least once, so a valid
    sequence of writes has strictly increasing machine step counts. Two writes with the same
    (or a lower) count are two tasks that stepped the *same* breaker state concurrently: the
    guard's concurrency analysis missed a fan-out (for example an unguarded node returning
    ``Command(goto=[...])`` with several targets). The super-step is then rejected, fail
    closed: LangGraph applies none of its writes, so no output of it reaches any node.

    Args:
        current: The current value, ``{"machine": snapshot, "by": label}``, or ``None``/``{}``.
        update: The new value.

    Returns:
        ``update``.

    Raises:
        ConfigError: Two concurrent breaker steps; the message names both and the fix.
    """
    if not current or not update:
        return update
    old = current.get("machine", {}).get("step", -1)
    new = update.get("machine", {}).get("step", -1)
    if new <= old:
        raise ConfigError(
            f"guarded steps {current.get('by')!r} and {update.get('by')!r} stepped the bias "
            "breaker concurrently (both from breaker step "
            f"{min(old, new) - 1}); the graph fans out where the guard did not expect it. "
            "Annotate the routing function's return type (-> Literal[...] or -> str for one "
            "destination; list or Send for a fan-out), or list the nodes after the fan-out in "
            "guard(..., concurrent=[...]) so they are checked one after another"
        )
    return update


class BiasState(TypedDict, total=False):
    """The biasbreaker keys of a guarded graph's state (derive your state from it).

    All keys are optional in the graph's input; guarded steps fill them. See the module
    docstring for what each holds.
    """

    bb_local_scores: Annotated[dict[str, float | None], merge_mapping]
    bb_katz_weights: Annotated[dict[str, float], replace_value]
    bb_network_ewma: Annotated[dict[str, Any], replace_value]
    bb_breaker: Annotated[dict[str, Any], single_breaker_step]
    bb_unverified_output: Annotated[dict[str, Any], merge_staged]
    bb_frozen: Annotated[dict[str, Any], merge_mapping]
    bb_audit_trail: Annotated[list[dict[str, Any]], operator.add]
    bb_verdicts: Annotated[dict[str, Any], merge_staged]
    bb_reviews: Annotated[list[dict[str, Any]], operator.add]
    bb_probe_coverage: Annotated[dict[str, dict[str, int]], merge_mapping]


BB_KEYS: Final[frozenset[str]] = frozenset(BiasState.__annotations__)
"""The names of the biasbreaker state keys."""

STEP_KEYS: Final[tuple[str, ...]] = (
    "bb_breaker",
    "bb_frozen",
    "bb_katz_weights",
    "bb_local_scores",
    "bb_network_ewma",
    "bb_probe_coverage",
)
"""The keys a guarded node's own task reads (``Call.bb``): the machine, the frozen records,
the B_net inputs and the probe's rotation; never the staging buffer, the audit trail, the
verdicts or the reviews, which only the guard's own nodes read."""


def user_part(state: dict[str, Any]) -> dict[str, Any]:
    """The application's part of a state: every key except the ``bb_`` keys."""
    return {k: v for k, v in state.items() if k not in BB_KEYS}


_isfinite: Final = math.isfinite


def plain_json(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is plain JSON of exact builtin types (:func:`json_problem`'s fast path).

    ``False`` also for nesting deeper than 64 (and so for a reference cycle), which
    :func:`json_problem` then checks the slow way.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return _isfinite(value)
    if depth > 64:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not plain_json(item, depth + 1):
                return False
        return True
    if kind is list or kind is tuple:
        return all(plain_json(item, depth + 1) for item in value)
    return False


def json_problem(value: Any, name: str = "output") -> str | None:
    """Why ``value`` cannot be frozen (is not JSON), or ``None`` if it can.

    JSON here is what :func:`biasbreaker.breaker.freeze` accepts: ``None``, bool, int, finite
    float, str, lists/tuples and dicts with ``str`` keys of these. NaN and infinity are not
    JSON.

    Args:
        value: The value to check.
        name: What the message calls the value (its path starts with it).

    Returns:
        ``None``, or the path and type of the first bad value, e.g. ``"output value at
        output['score'] is nan: JSON has no NaN or infinity; ..."``.
    """
    if plain_json(value):
        return None
    try:
        FrozenPayload.of(value)
    except InputError as exc:
        # FrozenPayload calls the value "payload": "payload value at payload['x'] ..."
        return str(exc).replace("payload", name, 2)
    return None


def shown(value: Any, _active: frozenset[int] = frozenset()) -> Any:
    """``value`` as plain JSON for a review request: every non-JSON leaf becomes a marker text.

    A value that is not JSON is written as ``"<not JSON: TYPE REPR>"`` (the repr cut at 120
    characters); a reference cycle as ``"<not JSON: a reference cycle>"``.
    """
    if plain_json(value):
        return value
    if id(value) in _active:
        return "<not JSON: a reference cycle>"
    inner = _active | {id(value)}
    if isinstance(value, Mapping):
        return {str(key): shown(item, inner) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [shown(item, inner) for item in value]
    if json_problem(value) is None:
        return FrozenPayload.of(value).thaw()
    text = repr(value)
    text = text if len(text) <= 120 else text[:117] + "..."
    return f"<not JSON: {type(value).__name__} {text}>"


_PLAIN: Final[Mapping[Any, tuple[type, ...]]] = {
    str: (str,),
    int: (int,),
    float: (int, float),
    bool: (bool,),
    list: (list,),
    dict: (dict,),
    type(None): (type(None),),
    None: (type(None),),
}
_LITERALS: Final = (str, int, bool, type(None))


def _matches(annotation: Any, value: Any) -> bool | None:
    """Whether ``value`` has the annotated type: ``True``/``False``, ``None`` when unchecked."""
    plain = _PLAIN.get(annotation) if isinstance(annotation, type) or annotation is None else None
    if plain is not None:
        if isinstance(value, bool) and bool not in plain:
            return False  # a bool is an int to isinstance, never to a reader of the state
        return isinstance(value, plain)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return _matches(args[0], value)
    if origin is Literal:
        if not all(type(arg) in _LITERALS for arg in args):
            return None
        return any(type(value) is type(arg) and value == arg for arg in args)
    if origin is Union or origin is types.UnionType:
        members = [_matches(arg, value) for arg in args]
        if True in members:
            return True
        return None if None in members else False
    if origin is list or origin is dict:
        if not isinstance(value, origin):
            return False
        parts: list[bool | None] = []
        if origin is list and args:
            parts = [_matches(args[0], item) for item in value]
        elif isinstance(value, dict) and len(args) == 2:
            parts = [_matches(args[0], key) for key in value]
            parts += [_matches(args[1], item) for item in value.values()]
        if False in parts:
            return False
        return None if None in parts else True
    return None


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return repr(annotation).replace("typing.", "")


def annotation_problem(annotation: Any, value: Any, key: str) -> str | None:
    """Why ``value`` does not have the type ``annotation`` declares for state key ``key``.

    A simple check for the plain types a JSON value can have: ``str``, ``int`` (not ``bool``),
    ``float`` (an ``int`` is accepted, ``bool`` is not), ``bool``, ``None``, ``list``/
    ``list[X]`` and ``dict``/``dict[K, V]`` (their items checked the same way), ``Optional``
    and unions of these, ``Literal`` of str/int/bool/None values, and ``Annotated[X, ...]``
    as ``X``. Anything else (``Any``, a TypedDict, a class, a tuple, a ``Literal`` of enum
    members, a type variable) is not checked: a value is refused only when a check says it
    does not match.

    Args:
        annotation: The key's annotation, resolved (as LangGraph's channel holds it).
        value: The value written to the key (JSON).
        key: The key, for the message.

    Returns:
        ``None``, or ``"the edit writes 5 to 'verdict', which the state declares as str"``.
    """
    if _matches(annotation, value) is not False:
        return None
    shown_value = repr(value)
    if len(shown_value) > 120:
        shown_value = shown_value[:117] + "..."
    return (
        f"the edit writes {shown_value} ({type(value).__name__}) to {key!r}, which the state "
        f"declares as {_type_name(annotation)}"
    )


__all__ = [
    "BB_KEYS",
    "BB_PREFIX",
    "STEP_KEYS",
    "BiasState",
    "annotation_problem",
    "json_problem",
    "merge_mapping",
    "merge_staged",
    "plain_json",
    "replace_value",
    "shown",
    "single_breaker_step",
    "user_part",
]
