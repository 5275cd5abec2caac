"""What the probe reads: a graph's state values as the JSON the probe varies and compares.

The probe (:class:`biasbreaker.probe.Probe`) rewrites the text leaves of a JSON value and
compares JSON outputs. A LangGraph state holds more than JSON — LangChain messages, pydantic
models, dataclasses, enums — so every guarded call is *read* into a JSON **view**: the input
view is what the probe varies (its counterfactual copies are *rebuilt* into values of the
original types, ids and metadata kept), the output view is what it scores and what the
breaker freezes. What cannot be read is never passed as "nothing to see": the step is held
for review, naming the key and the type (:class:`Unreadable`).

=================================  ===========================================  ==============
value                              view                                         varied
=================================  ===========================================  ==============
``str``                            itself                                       its text
``int``, finite ``float``, bool,   itself                                       no
``None``
``list``, ``tuple``                a list of the items' views                   the items
``NamedTuple``                     an object of its fields' views               the fields
``dict`` with ``str`` keys         an object of the values' views (keys kept)   the values
``set``, ``frozenset``             a list of the items' views, sorted           the items
LangChain message (human, ai,      ``{"type", "content", ["name"],              text content,
system, tool, function, chat;      ["tool_calls": [{"name", "args"}]],          parts' text,
chunks)                            ["invalid_tool_calls": [{"name", "args"}]],  human/ai
                                   ["tool", "status"],                          ``name``, tool
                                   ["additional_kwargs"]}``; content parts by   call args, an
                                   :data:`PART_FIELDS`; ``additional_kwargs``   invalid call's
                                   on the input side only (:data:`Role`);       args text, an
                                   never ``id``, metadata, ``tool_call_id``,    input's
                                   an invalid call's error                      kwargs
``RemoveMessage``                  ``{"type": "remove", "id"}``                 no
pydantic model, dataclass          an object of its fields' views               the fields
``enum.Enum`` member               its value's view                             its value
``datetime``/``date``/``time``/    ``str(value)``                               no (kept)
``timedelta``, ``UUID``,
``Decimal``, ``pathlib`` path
a key named in ``opaque``          ``"<opaque: TYPE>"``                         no (kept)
``bytes``, NaN/infinity, any       unreadable: the step is held for review      —
other object
=================================  ===========================================  ==============

A message's content parts are read by type (:data:`PART_FIELDS`): the text a part carries is
read and varied in place; media (images, audio, video) are read as their type only (the probe
cannot vary a face: a stated limit); a document whose text is not inline, or a part of a type
the table does not know, is unreadable. A message ``name`` of words joined by ``_``
(``"Mary_Carter"``, as OpenAI requires) is read with spaces and rebuilt with underscores.

Ids are left out of views on purpose: a chat model gives every reply a fresh random id, so an
output compared or frozen with its id would differ between identical replies (and between two
runs of the same seeded graph). Tool calls are compared as structured name + arguments, so a
tool called only for one group is a decision flip; so is a call that does not parse
(``AIMessage.invalid_tool_calls``: its name and raw argument text), made for one group only.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import math
import pathlib
import re
import types
import typing
import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)
from pydantic import BaseModel

from biasbreaker.types import canonical_json
from biasbreaker_plugins.langgraph.state import plain_json

_OPAQUE_SCALARS: Final = (
    datetime.datetime,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    uuid.UUID,
    decimal.Decimal,
    pathlib.PurePath,
)
_MESSAGE_FIELDS: Final = ("content", "name", "tool_calls")


class Unreadable(ValueError):
    """A value the probe cannot read: the guarded step is held for review.

    Args:
        path: Where the value is, e.g. ``"state['audio']"`` or ``"output['messages'][2]"``.
        type_name: Its type's name.
        why: What is wrong with it (default: "an object the probe cannot read").
    """

    def __init__(self, path: str, type_name: str, why: str = "") -> None:
        self.path = path
        self.type_name = type_name
        self.why = why or "an object the probe cannot read"
        super().__init__(f"{path} is {type_name}: {self.why}")


def _type_name(value: Any) -> str:
    return type(value).__name__


Role = Literal["input", "output"]
"""Which side of a guarded call a value is read for: ``"input"`` (what the node reads, varied
by the probe) or ``"output"`` (what it returns, compared and frozen). The two differ in one
place: a message's ``additional_kwargs`` are user data on the input side (read and varied) and
mostly provider noise on the output side (only a refusal and a legacy function call are read)."""

_TEXT: Final = "text"
"""A part field read with the table (a ``str`` is varied as text)."""
_PARTS: Final = "parts"
"""A part field holding message content (a ``str`` or a list of parts), read part by part."""

_PartSpec = Mapping[str, Any]
"""Field -> :data:`_TEXT`, :data:`_PARTS` or a nested spec (a field that is an object)."""

_TOOL_CALL: Final[_PartSpec] = {"name": _TEXT, "args": _TEXT}
_MEDIA: Final[_PartSpec] = {}
_DOCUMENT: Final[_PartSpec] = {"text": _TEXT, "title": _TEXT, "context": _TEXT}

PART_FIELDS: Final[Mapping[str, _PartSpec]] = {
    # text (a "text" part itself is read as {"type": "text", "text"}, see _part_view)
    "input_text": {"text": _TEXT},  # OpenAI Responses
    "output_text": {"text": _TEXT},
    "summary_text": {"text": _TEXT},
    "refusal": {"refusal": _TEXT},
    "reasoning": {"reasoning": _TEXT, "summary": _PARTS},  # v1 / OpenAI Responses
    "thinking": {"thinking": _TEXT},  # Anthropic; its signature is not text
    "redacted_thinking": {},  # encrypted by the provider: nobody can read it
    # documents: their inline text is read; one without inline text holds (_DOCUMENTS)
    "text-plain": _DOCUMENT,  # v1
    "file": _DOCUMENT,  # v1 / v0 (source_type "text" carries "text") / OpenAI chat
    "input_file": {},  # OpenAI Responses: file_data, file_id or file_url only
    "document": {  # Anthropic: a text source's "data", a content source's parts
        "title": _TEXT,
        "context": _TEXT,
        "source": {"data": _TEXT, "content": _PARTS},
    },
    "search_result": {"title": _TEXT, "content": _PARTS},  # Anthropic
    "tool_result": {"content": _PARTS},  # Anthropic, in a human turn
    # media: the probe cannot see a face or hear a voice (docs/langgraph.md §11, a limit)
    "image": _MEDIA,
    "image_url": _MEDIA,
    "input_image": _MEDIA,
    "audio": _MEDIA,
    "input_audio": _MEDIA,
    "video": _MEDIA,
    "media": _MEDIA,
    # tools
    "tool_call": _TOOL_CALL,
    "tool_call_chunk": _TOOL_CALL,
    "invalid_tool_call": _TOOL_CALL,
    "server_tool_call": _TOOL_CALL,
    "server_tool_call_chunk": _TOOL_CALL,
    "server_tool_result": {"status": _TEXT, "output": _TEXT},
    "function_call": {"name": _TEXT, "arguments": _TEXT},  # OpenAI Responses
    "tool_use": {"name": _TEXT, "input": _TEXT},  # Anthropic
    "server_tool_use": {"name": _TEXT, "input": _TEXT},
    "input_json_delta": {"partial_json": _TEXT},  # Anthropic, streamed tool input
    "non_standard": {"value": _TEXT},  # v1: a provider's payload, read with the table
}
"""How each content part type is read (besides ``"text"``): the fields read into its view
(text, structured values, nested content); every other field — ids, indexes, MIME types,
``extras``, base64 data, URLs, file ids, signatures — is not text and is neither read nor
varied. A part of a type not listed here, or without a ``type``, is :class:`Unreadable`."""

_DOCUMENTS: Final = frozenset({"text-plain", "file", "input_file", "document"})
"""Part types whose text the model reads: one whose text is not inline (base64 data, a URL,
a file id) is text the probe cannot read, so it holds (:func:`_inline_text`)."""


def _inline_text(part: Mapping[str, Any]) -> bool:
    """Whether a document part carries its text inline (where the probe reads it)."""
    kind = part.get("type")
    if kind == "document":
        source = part.get("source")
        if not isinstance(source, Mapping):
            return False
        if source.get("type") == "text":
            return isinstance(source.get("data"), str)
        return source.get("type") == "content" and "content" in source
    return kind != "input_file" and isinstance(part.get("text"), str)


def _project(value: Mapping[str, Any], spec: _PartSpec, path: str, role: Role) -> dict[str, Any]:
    """The fields of ``value`` that ``spec`` names, each read as the spec says."""
    out: dict[str, Any] = {}
    for key, kind in spec.items():
        if key not in value:
            continue
        item = value[key]
        if kind == _PARTS:
            out[key] = _content_view(item, f"{path}.{key}", role)
        elif isinstance(kind, Mapping):
            if isinstance(item, Mapping):
                out[key] = _project(item, kind, f"{path}.{key}", role)
        else:
            out[key] = read(item, f"{path}.{key}", role=role)
    return out


def _merge(original: Any, view: Any, spec: _PartSpec) -> Any:
    """``original`` with the fields ``spec`` names rebuilt from ``view`` (all else kept)."""
    if not isinstance(original, Mapping) or not isinstance(view, Mapping):
        return original
    changes: dict[str, Any] = {}
    for key, kind in spec.items():
        if key not in original or key not in view:
            continue
        if kind == _PARTS:
            changes[key] = _rebuild_content(original[key], view[key])
        elif isinstance(kind, Mapping):
            changes[key] = _merge(original[key], view[key], kind)
        else:
            changes[key] = rebuild(original[key], view[key])
    return {**original, **changes} if changes else original


def _part_view(part: Any, path: str, role: Role) -> Any:
    """A content part's view (see :data:`PART_FIELDS`).

    Raises:
        Unreadable: A part that is not a ``str`` or an object, of an unknown type, or a
            document whose text is not inline.
    """
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        raise Unreadable(path, _type_name(part), "a message part the probe cannot read")
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": str(part.get("text", ""))}
    spec = PART_FIELDS.get(kind) if isinstance(kind, str) else None
    if spec is None:
        raise Unreadable(
            path,
            f"a {kind!r} content part" if isinstance(kind, str) else "a content part without type",
            "a message part the probe cannot tell apart (neither text, nor a known document, "
            "media or tool block: docs/langgraph.md, 'What the probe reads')",
        )
    if kind in _DOCUMENTS and not _inline_text(part):
        raise Unreadable(
            path,
            f"a {kind!r} content part",
            "a document whose text is not inline (base64 data, a URL or a file id): the probe "
            "cannot read or vary it; send its text in the part (a text-plain part, an Anthropic "
            "text source) so the probe varies it",
        )
    return {"type": kind, **_project(part, spec, path, role)}


def _content_view(content: Any, path: str, role: Role = "input") -> Any:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return [_part_view(part, f"{path}[{i}]", role) for i, part in enumerate(content)]
    raise Unreadable(path, _type_name(content), "message content that is neither text nor parts")


_UNDERSCORED: Final = re.compile(r"[^\s_]+(?:_[^\s_]+)+")
"""A message ``name`` of words joined by ``_`` (OpenAI refuses spaces in ``name``)."""


def _name_view(name: str) -> str:
    """A message ``name`` as the probe reads it: ``"Mary_Carter"`` as ``"Mary Carter"``."""
    return name.replace("_", " ") if _UNDERSCORED.fullmatch(name) else name


def _rebuild_name(original: str, view: Any) -> Any:
    """The varied ``name`` in ``original``'s form: ``"Diana Vu"`` for ``"Mary_Carter"``.

    Gives ``"Diana_Vu"``; exact, since the view of an underscored name has no spaces of its
    own (an unvaried view gives the original back).
    """
    if isinstance(view, str) and _UNDERSCORED.fullmatch(original):
        return view.replace(" ", "_")
    return view


_KWARGS_ELSEWHERE: Final = frozenset({"refusal", "function_call"})
"""``additional_kwargs`` keys a message view reads under their own names."""
_KWARGS_FIELDS: Final[Mapping[str, _PartSpec]] = {"audio": {"transcript": _TEXT}}
"""``additional_kwargs`` keys read by their fields only: OpenAI's spoken reply, whose
``transcript`` is text and whose ``data`` is base64 audio."""


def _kwargs_keys(message: BaseMessage) -> list[str]:
    """The ``additional_kwargs`` keys an input view reads as user data.

    All but a refusal and a function call (read under their own names) and a provider's raw
    ``tool_calls`` when the message's parsed ``tool_calls`` (or invalid ones) carry them.
    """
    parsed = bool(
        getattr(message, "tool_calls", None) or getattr(message, "invalid_tool_calls", None)
    )
    return [
        key
        for key in message.additional_kwargs
        if key not in _KWARGS_ELSEWHERE and not (key == "tool_calls" and parsed)
    ]


def _kwargs_view(message: BaseMessage, path: str) -> dict[str, Any]:
    extra = message.additional_kwargs
    out: dict[str, Any] = {}
    for key in _kwargs_keys(message):
        spec = _KWARGS_FIELDS.get(key)
        where = f"{path}.additional_kwargs[{key!r}]"
        if spec is not None and isinstance(extra[key], Mapping):
            out[key] = _project(extra[key], spec, where, "input")
        else:
            out[key] = read(extra[key], where, role="input")
    return out


def _message_view(message: BaseMessage, path: str, role: Role) -> dict[str, Any]:
    if isinstance(message, RemoveMessage):
        return {"type": "remove", "id": message.id}
    view: dict[str, Any] = {
        "type": message.type,
        "content": _content_view(message.content, f"{path}.content", role),
    }
    if message.type in ("human", "ai", "chat") and message.name is not None:
        view["name"] = _name_view(message.name)
    calls = getattr(message, "tool_calls", None)
    if calls:
        view["tool_calls"] = [
            {
                "name": call["name"],
                "args": read(call["args"], f"{path}.tool_calls[{i}].args", role=role),
            }
            for i, call in enumerate(calls)
        ]
    invalid = getattr(message, "invalid_tool_calls", None)
    if invalid:
        # a call the model made but that does not parse is still a call made (for one group
        # only, a decision flip): its name and raw argument text are compared
        view["invalid_tool_calls"] = [
            {"name": call.get("name"), "args": call.get("args")} for call in invalid
        ]
    extra = message.additional_kwargs
    # decisions a provider writes beside the text: a refusal (OpenAI's "refusal") or a
    # legacy function call made for one group only is a flip too
    if isinstance(extra.get("refusal"), str):
        view["refusal"] = extra["refusal"]
    call = extra.get("function_call")
    if isinstance(call, Mapping):
        view["function_call"] = {
            "name": str(call.get("name")),
            "arguments": read(call.get("arguments"), f"{path}.function_call.arguments", role=role),
        }
    if role == "input":
        # what a node reads beside the text is user data (a KYC record, a profile model);
        # on the output side it is mostly provider noise, and is not compared
        kwargs = _kwargs_view(message, path)
        if kwargs:
            view["additional_kwargs"] = kwargs
    finish = _finish_reason(message)
    if finish is not None:
        # a provider that stops for one group only (a content filter) decides as a refusal does
        view["finish_reason"] = finish
    if message.type == "tool":
        view["tool"] = message.name
        view["status"] = getattr(message, "status", "success")
        artifact = getattr(message, "artifact", None)
        if artifact is not None:  # what the tool returned beside the text the model sees
            view["artifact"] = read(artifact, f"{path}.artifact", role=role)
    return view


FINISH_KEYS = ("finish_reason", "stop_reason", "done_reason")
"""Where providers put why a reply ended in ``response_metadata`` (OpenAI and Gemini,
Anthropic, Ollama), read as a message view's ``finish_reason``: ``"content_filter"`` for one
group only is a flip."""


def _finish_reason(message: BaseMessage) -> str | None:
    metadata = getattr(message, "response_metadata", None)
    if not isinstance(metadata, Mapping):
        return None
    for key in FINISH_KEYS:
        value = metadata.get(key)
        if isinstance(value, str):
            return value
    return None


def read(value: Any, path: str = "value", *, role: Role = "input") -> Any:
    """The JSON view of ``value`` (see the module's table).

    Args:
        value: A state value.
        path: Where it is, for the error message.
        role: ``"input"`` (default) for what a guarded node reads, ``"output"`` for what it
            returns: a message's ``additional_kwargs`` are read on the input side only
            (:data:`Role`).

    Returns:
        Plain JSON (``dict``/``list``/``str``/``int``/``float``/``bool``/``None``).

    Raises:
        Unreadable: ``value`` (or a part of it) is bytes, NaN/infinity, a dict key that is
            not a ``str``, an object of a type the table does not list, a message content
            part of a type :data:`PART_FIELDS` does not list, or a document part without
            inline text.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise Unreadable(path, repr(value), "JSON has no NaN or infinity")
        return value
    # exact builtin containers and messages first: the ABC checks below are slow
    if kind is list:
        return [read(item, f"{path}[{i}]", role=role) for i, item in enumerate(value)]
    if kind is not dict and isinstance(value, BaseMessage):
        return _message_view(value, path, role)
    if isinstance(value, enum.Enum):
        return read(value.value, path, role=role)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return bool(value) if isinstance(value, bool) else int(value)
    if isinstance(value, float):
        return read(float(value), path, role=role)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise Unreadable(
                    f"{path}[{key!r}]", _type_name(key), "a dict key that is not a str"
                )
            out[key] = read(item, f"{path}[{key!r}]", role=role)
        return out
    if _is_named_tuple(value):
        return {
            name: read(getattr(value, name), f"{path}.{name}", role=role) for name in value._fields
        }
    if isinstance(value, (list, tuple)):
        return [read(item, f"{path}[{i}]", role=role) for i, item in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        items = [read(item, f"{path}{{…}}", role=role) for item in value]
        return sorted(items, key=canonical_json)
    if isinstance(value, BaseMessage):
        return _message_view(value, path, role)
    if isinstance(value, BaseModel):
        return {
            name: read(getattr(value, name), f"{path}.{name}", role=role)
            for name in type(value).model_fields
        }
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: read(getattr(value, f.name), f"{path}.{f.name}", role=role)
            for f in dataclasses.fields(value)
        }
    if isinstance(value, _OPAQUE_SCALARS):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise Unreadable(
            path, _type_name(value), "bytes, whose text encoding the probe cannot know"
        )
    raise Unreadable(path, _type_name(value))


def read_values(
    values: Mapping[str, Any],
    where: str,
    opaque: frozenset[str] = frozenset(),
    *,
    role: Role = "input",
) -> dict[str, Any]:
    """The JSON view of a state (or an update): key -> :func:`read` of its value.

    Args:
        values: State key -> value.
        where: ``"state"`` or ``"output"``, for the error path.
        opaque: Keys read as ``"<opaque: TYPE>"`` (never varied, never compared).
        role: ``"input"`` (a node's state, what the probe varies) or ``"output"`` (its
            update, what the probe compares), as :func:`read`.

    Raises:
        Unreadable: As :func:`read`, with the key in the path.
    """
    if not opaque and plain_json(values):
        return dict(values)  # the common case: plain JSON is its own view
    return {
        key: f"<opaque: {_type_name(value)}>"
        if key in opaque
        else read(value, f"{where}[{key!r}]", role=role)
        for key, value in values.items()
    }


def readable(values: Mapping[str, Any], opaque: frozenset[str] = frozenset()) -> bool:
    """Whether :func:`read_values` reads ``values`` without raising, judged at a glance.

    ``True`` only for what it certainly reads: plain JSON of exact builtin types, and a value
    or list of LangChain messages each with text content, no tool calls (valid or invalid),
    no legacy function call and not a tool's message (whose artifact is read). Costs a
    fraction of the read itself, so the view of such an output can be built only when needed.

    Args:
        values: State key -> value (an update).
        opaque: Keys read as ``"<opaque: TYPE>"`` whatever they hold.

    Returns:
        ``True``: the read succeeds. ``False`` means "read it to know", never "unreadable".
    """
    for key, value in values.items():
        if key in opaque:
            continue
        for item in value if type(value) is list else (value,):
            kind = type(item)
            if kind is AIMessage and _AI_FIELDS_IN_DICT:  # a node's reply, the commonest
                if not _plain_ai_message(item):
                    return False
            elif kind in _MESSAGE_CLASSES:  # a message is no plain JSON
                if not _plain_message(item):
                    return False
            elif not (plain_json(item) or _plain_message(item)):
                return False
    return True


_MESSAGE_CLASSES: Final = frozenset({AIMessage, HumanMessage, SystemMessage})
"""Message classes known without ``isinstance`` (through pydantic's ABC metaclass) by
:func:`_plain_message`; neither is a ``RemoveMessage``."""


_AI_FIELDS: Final = ("content", "type", "tool_calls", "invalid_tool_calls", "additional_kwargs")

_AI_FIELDS_IN_DICT: Final = all(name in AIMessage.model_fields for name in _AI_FIELDS) and not any(
    name in vars(klass) for klass in AIMessage.__mro__ for name in _AI_FIELDS
)
"""Whether an ``AIMessage``'s instance dict holds what reading these fields as attributes
returns: each is a declared pydantic field (kept in the instance's ``__dict__``, never in its
extras) and no class of its MRO defines the name (a property there would be read instead)."""


def _plain_ai_message(message: AIMessage) -> bool:
    """:func:`_plain_message` of an exact ``AIMessage``, its fields read from its ``__dict__``.

    Pydantic's ``BaseModel.__getattr__`` sends every attribute read of a message through
    Python's slow lookup; this reads the instance dict once and its fields from it, which
    :data:`_AI_FIELDS_IN_DICT` says give the same values.
    """
    fields = message.__dict__
    extra = fields.get("additional_kwargs")
    return (
        type(fields.get("content")) is str
        and fields.get("type") != "tool"
        and not fields.get("tool_calls")
        and not fields.get("invalid_tool_calls")
        and type(extra) is dict
        and extra.get("function_call") is None
    )


def _plain_message(value: Any) -> bool:
    """Whether ``value`` is a message whose view :func:`_message_view` builds without raising."""
    if type(value) not in _MESSAGE_CLASSES:
        if not isinstance(value, BaseMessage):
            return False
        if isinstance(value, RemoveMessage):
            return True
    return (
        type(value.content) is str
        and value.type != "tool"
        and not getattr(value, "tool_calls", None)
        and not getattr(value, "invalid_tool_calls", None)
        and type(value.additional_kwargs) is dict
        and value.additional_kwargs.get("function_call") is None
    )


def _rebuild_content(original: Any, view: Any) -> Any:
    if isinstance(original, str):
        if not isinstance(view, str):
            raise ValueError("message content changed kind")
        return view
    if not isinstance(view, list) or len(view) != len(original):
        raise ValueError("message parts changed in number")
    parts: list[Any] = []
    for part, seen in zip(original, view, strict=True):
        if isinstance(part, str):
            parts.append(seen if isinstance(seen, str) else part)
        elif isinstance(part, Mapping) and part.get("type") == "text" and isinstance(seen, Mapping):
            parts.append({**part, "text": seen.get("text", part.get("text"))})
        elif isinstance(part, Mapping) and isinstance(part.get("type"), str):
            parts.append(_merge(part, seen, PART_FIELDS.get(part["type"], {})))
        else:
            parts.append(part)
    return parts


def _rebuild_message(message: BaseMessage, view: Any) -> BaseMessage:
    if isinstance(message, RemoveMessage) or not isinstance(view, Mapping):
        return message
    changes: dict[str, Any] = {"content": _rebuild_content(message.content, view.get("content"))}
    if "name" in view and message.type in ("human", "ai", "chat"):
        name = message.name
        changes["name"] = view["name"] if name is None else _rebuild_name(name, view["name"])
    calls = getattr(message, "tool_calls", None)
    if calls:
        seen = view.get("tool_calls") or []
        if len(seen) != len(calls):
            raise ValueError("tool calls changed in number")
        changes["tool_calls"] = [
            {**call, "args": rebuild(call["args"], item.get("args", call["args"]))}
            for call, item in zip(calls, seen, strict=True)
        ]
    invalid = getattr(message, "invalid_tool_calls", None)
    if invalid:
        seen = view.get("invalid_tool_calls") or []
        if len(seen) != len(invalid):
            raise ValueError("invalid tool calls changed in number")
        changes["invalid_tool_calls"] = [
            {**call, "args": _raw_args(call.get("args"), item)}
            for call, item in zip(invalid, seen, strict=True)
        ]
    extra = dict(message.additional_kwargs)
    if isinstance(extra.get("refusal"), str) and isinstance(view.get("refusal"), str):
        extra["refusal"] = view["refusal"]
    call = extra.get("function_call")
    if isinstance(call, Mapping) and isinstance(view.get("function_call"), Mapping):
        arguments = view["function_call"].get("arguments", call.get("arguments"))
        extra["function_call"] = {**call, "arguments": rebuild(call.get("arguments"), arguments)}
    kwargs = view.get("additional_kwargs")
    if isinstance(kwargs, Mapping):  # an input view: the user data beside the text
        keys = _kwargs_keys(message)
        if set(kwargs) != set(keys):
            raise ValueError("a message's additional_kwargs changed keys")
        for key in keys:
            spec = _KWARGS_FIELDS.get(key)
            if spec is not None and isinstance(extra[key], Mapping):
                extra[key] = _merge(extra[key], kwargs[key], spec)
            else:
                extra[key] = rebuild(extra[key], kwargs[key])
    if extra != message.additional_kwargs:
        changes["additional_kwargs"] = extra
    artifact = getattr(message, "artifact", None)
    if message.type == "tool" and artifact is not None and "artifact" in view:
        changes["artifact"] = rebuild(artifact, view["artifact"])
    return message.model_copy(update=changes)


def _raw_args(original: Any, item: Any) -> Any:
    """An invalid tool call's raw argument text from its rewritten view (else as it was)."""
    args = item.get("args") if isinstance(item, Mapping) else None
    return args if isinstance(args, str) and isinstance(original, str) else original


def _is_named_tuple(value: Any) -> bool:
    """Whether ``value`` is a ``typing.NamedTuple`` / ``collections.namedtuple`` instance.

    Read by its field names, not as a list: ``Applicant(sex="F", age=63)`` as a list would
    hide the keys that make ``"F"`` a coded attribute (:mod:`biasbreaker.probe.fields`), and
    the step would pass as *not applicable*. A named tuple's type is also not built from one
    iterable (``Applicant(["F", 63])`` raises), so it is rebuilt with ``_make``.
    """
    return isinstance(value, tuple) and isinstance(getattr(type(value), "_fields", None), tuple)


def _renamed_keys(original: Mapping[Any, Any], view: Mapping[Any, Any]) -> dict[str, str]:
    """The ``str`` keys of ``original`` that ``view`` renamed: old -> new, paired in order.

    The probe swaps mentions in dict keys too (docs/detection.md, "Dict keys") and keeps
    their order, so a variant renames ``"Jamal Washington"`` to ``"Greg Baker"`` in place:
    the keys of ``original`` missing from ``view`` are paired, in order, with the keys of
    ``view`` missing from ``original``.

    Raises:
        ValueError: The two have different numbers of keys, or a renamed key is not a ``str``.
    """
    gone = [k for k in original if k not in view]
    new = [k for k in view if k not in original]
    if len(gone) != len(new) or not all(isinstance(k, str) for k in (*gone, *new)):
        raise ValueError("an object's keys changed")
    return dict(zip(gone, new, strict=True))


def rebuild(original: Any, view: Any) -> Any:
    """``original`` with the varied parts of ``view`` (a rewritten :func:`read` of it) put back.

    Structure, types, ids and metadata come from ``original``; text (and whatever the table
    says is varied) from ``view``. Values the table keeps (opaque scalars, ``RemoveMessage``)
    are returned as they were.

    A dict key ``view`` renamed (the probe swaps mentions in keys) is renamed in the result,
    its value rebuilt from the renamed key's (:func:`_renamed_keys`).

    Raises:
        ValueError: ``view`` does not have ``original``'s shape (a key or item missing or
            added, a text turned into another kind).
        Unreadable: An enum has no member of the new value (:func:`_not_a_member`).
    """
    if isinstance(original, (bool, type(None))) or type(original) in (int, float, str):
        if type(original) is str and not isinstance(view, str):
            raise ValueError(f"a text became {type(view).__name__}")
        return view
    if isinstance(original, enum.Enum):
        value = rebuild(original.value, view)
        if value == original.value:
            return original
        try:
            return type(original)(value)
        except ValueError as exc:
            raise _not_a_member(original, value) from exc
    if isinstance(original, _OPAQUE_SCALARS):
        return original
    if isinstance(original, Mapping):
        if not isinstance(view, Mapping) or len(view) != len(original):
            raise ValueError("an object's keys changed")
        renamed = _renamed_keys(original, view)
        rebuilt = {
            renamed.get(k, k): rebuild(v, view[renamed.get(k, k)]) for k, v in original.items()
        }
        if type(original) is dict:
            return rebuilt
        try:
            return type(original)(rebuilt)  # type: ignore[call-arg]
        except TypeError:  # a mapping type that cannot be built from a dict: a plain dict
            return rebuilt
    if _is_named_tuple(original):
        if not isinstance(view, Mapping) or set(view) != set(original._fields):
            raise ValueError("a named tuple's fields changed")
        return original._make(rebuild(getattr(original, f), view[f]) for f in original._fields)
    if isinstance(original, (list, tuple)):
        # a view is a list, or, read the fast way (plain JSON is its own view: read_values),
        # the tuple itself: a config value's view always is, and a resample's is rebuilt
        if not isinstance(view, (list, tuple)) or len(view) != len(original):
            raise ValueError("a list changed in length")
        items = [rebuild(item, seen) for item, seen in zip(original, view, strict=True)]
        return items if isinstance(original, list) else type(original)(items)
    if isinstance(original, (set, frozenset)):
        ordered = sorted(original, key=lambda item: canonical_json(read(item)))
        if not isinstance(view, list) or len(view) != len(ordered):
            raise ValueError("a set changed in size")
        return type(original)(rebuild(item, seen) for item, seen in zip(ordered, view, strict=True))
    if isinstance(original, BaseMessage):
        return _rebuild_message(original, view)
    if isinstance(original, BaseModel):
        if not isinstance(view, Mapping):
            raise ValueError("a model became something else")
        fields = type(original).model_fields
        changes = {
            name: rebuild(getattr(original, name), view[name]) for name in fields if name in view
        }
        return original.model_copy(update=changes)
    if dataclasses.is_dataclass(original) and not isinstance(original, type):
        if not isinstance(view, Mapping):
            raise ValueError("a dataclass became something else")
        changes = {
            f.name: rebuild(getattr(original, f.name), view[f.name])
            for f in dataclasses.fields(original)
            if f.init and f.name in view
        }
        return dataclasses.replace(original, **changes)
    if isinstance(original, (str, int, float)):
        return type(original)(view)
    return original


def _not_a_member(member: enum.Enum, value: Any) -> Unreadable:
    """Why a variant of an enum member's value cannot be rebuilt: the enum has no such member.

    The probe varies a member's value like any text (``E.A = "Mr. Aidan Carter"`` names a
    person) and the node cannot be called on a value its enum does not have; guessing another
    member would compare the node on an input the variant did not say. So the step is held
    (fail closed), naming the enum and the fix. The path is the value's; :func:`rebuild_values`
    names the key.
    """
    kind = type(member)
    return Unreadable(
        "value",
        f"the enum member {kind.__name__}.{member.name}",
        f"its value {member.value!r} names a protected group, and a counterfactual variant of "
        f"it ({value!r}) is no member of {kind.__name__}, so the node cannot be called on the "
        "variant: keep the person in a str field and the choice in the enum",
    )


def rebuild_values(
    values: Mapping[str, Any],
    view: Mapping[str, Any],
    opaque: frozenset[str] = frozenset(),
    where: str = "state",
) -> dict[str, Any]:
    """:func:`rebuild` of every key of ``values`` (opaque keys passed through as they are).

    Args:
        values: Key -> value, the templates.
        view: Key -> a (rewritten) view of each.
        opaque: Keys passed through.
        where: What ``values`` are, for the path of an :class:`Unreadable` (``"state"``,
            ``"config['metadata']"``).

    Raises:
        Unreadable: A value no variant of which can be rebuilt (an enum member whose varied
            value is no member; the path names the key).
        ValueError: As :func:`rebuild`, or ``view`` lacks a key of ``values``.
    """
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key in opaque:
            out[key] = value
        elif key not in view:
            raise ValueError(f"the variant lacks the key {key!r}")
        else:
            try:
                out[key] = rebuild(value, view[key])
            except Unreadable as exc:
                raise Unreadable(f"{where}[{key!r}]", exc.type_name, exc.why) from exc
    return out


def state_values(state: Any) -> dict[str, Any]:
    """A node's input state as a mapping: a dict as it is, a model or dataclass by field.

    Raises:
        Unreadable: ``state`` is none of those (a node with a root-value schema).
    """
    if isinstance(state, Mapping):
        return dict(state)
    if isinstance(state, BaseModel):
        return {name: getattr(state, name) for name in type(state).model_fields}
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    raise Unreadable("state", _type_name(state), "a state that is not a dict, model or dataclass")


def rebuild_state(state: Any, values: Mapping[str, Any]) -> Any:
    """``state`` (as a node received it) with ``values`` in place of its fields."""
    if isinstance(state, Mapping):
        return {**state, **values}
    if isinstance(state, BaseModel):
        return state.model_copy(update=dict(values))
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return dataclasses.replace(state, **values)
    return state


# -- the same table, on annotations (what guard() checks when it builds the graph) ------------


def annotation_problem(annotation: Any, _seen: frozenset[int] = frozenset()) -> str | None:
    """Why the probe could not read values of type ``annotation``, or ``None`` if it can.

    ``Any``, ``object``, type variables and unresolved forward references give ``None``:
    their values are checked when they are read. A union is unreadable if any member is.

    Returns:
        ``None``, or the unreadable part, e.g. ``"bytes"`` or ``"Connection (an object the
        probe cannot read)"``.
    """
    if annotation is Any or annotation is object or annotation is None:
        return None
    if isinstance(annotation, (typing.TypeVar, typing.ForwardRef, str)):
        return None
    if id(annotation) in _seen:
        return None
    seen = _seen | {id(annotation)}
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return annotation_problem(args[0], seen)
    if origin is Literal:
        return None
    if origin is Union or origin is types.UnionType:
        for member in args:
            problem = annotation_problem(member, seen)
            if problem is not None:
                return problem
        return None
    if origin is not None:
        if isinstance(origin, type) and issubclass(origin, (bytes, bytearray, memoryview)):
            return origin.__name__
        if getattr(origin, "__qualname__", "") in ("Required", "NotRequired", "ReadOnly"):
            return annotation_problem(args[0], seen) if args else None
        for arg in args:
            if arg is Ellipsis:
                continue
            problem = annotation_problem(arg, seen)
            if problem is not None:
                return problem
        return None
    if not isinstance(annotation, type):
        return None
    if annotation is type(None):
        return None
    if issubclass(annotation, (bytes, bytearray, memoryview)):
        return annotation.__name__
    if issubclass(annotation, (str, int, float, bool, enum.Enum, BaseMessage, *_OPAQUE_SCALARS)):
        return None
    if issubclass(annotation, (list, tuple, dict, set, frozenset)):
        if typing.is_typeddict(annotation) or isinstance(
            getattr(annotation, "_fields", None), tuple
        ):
            return _fields_problem(annotation, seen)
        return None
    if issubclass(annotation, BaseModel) or dataclasses.is_dataclass(annotation):
        return _fields_problem(annotation, seen)
    return f"{annotation.__name__} (an object the probe cannot read)"


def _fields_problem(schema: type[Any], seen: frozenset[int]) -> str | None:
    try:
        hints = typing.get_type_hints(schema, include_extras=True)
    except (NameError, TypeError):
        return None
    for name, hint in hints.items():
        problem = annotation_problem(hint, seen)
        if problem is not None:
            return f"{problem} (in its field {name!r})"
    return None


__all__ = [
    "Unreadable",
    "annotation_problem",
    "read",
    "read_values",
    "readable",
    "rebuild",
    "rebuild_state",
    "rebuild_values",
    "state_values",
]
