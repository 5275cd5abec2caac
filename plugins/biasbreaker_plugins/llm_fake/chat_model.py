"""The seeded fake as a LangChain chat model: a real ``BaseChatModel``, simulated replies.

:class:`FakeChatModel` puts any biasbreaker :class:`~biasbreaker.llm.LLMClient` — normally the
seeded fake (:class:`~biasbreaker_plugins.llm_fake.client.FakeLLM`, **simulated**, with its
bias dial) — behind LangChain's chat-model interface, so graphs written the way LangGraph users
write them (``MessagesState``, ``model.invoke(state["messages"])``, ``bind_tools``, token
streaming) can be guarded and tested offline::

    model = FakeChatModel(client=FakeLLM(FakeLLMOptions(bias=1.0, favoured="man"), seed=0),
                          tool_for={"yes": "approve_loan", "no": "deny_loan"})
    agent = model.bind_tools([approve_loan, deny_loan])

* ``invoke`` sends the conversation (system, human and AI text; tool results as user text) to
  the client with the probe's current sample index (:func:`biasbreaker.probe.current_sample`),
  so the probe's same-group resamples are distinct draws, as at temperature > 0;
* ``stream`` yields the reply word by word (``on_llm_new_token``, so LangGraph's
  ``stream_mode="messages"`` sees tokens);
* with tools bound, a reply ``Decision: <word>`` whose word ``tool_for`` maps to a bound tool
  becomes a tool call to it (arguments ``{"reason": <reply>}``, a deterministic id): a biased
  decision becomes a biased tool call.

Importing this module imports ``langchain_core`` (installed with the ``langgraph`` extra); the
fake's plugin entry point does not.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field

from biasbreaker.llm import ChatMessage, LLMClient, LLMRequest, complete_sync
from biasbreaker.probe import current_sample

_DECISION = re.compile(r"Decision:\s*(\w+)", re.IGNORECASE)


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return " ".join(
        part if isinstance(part, str) else str(part.get("text", ""))
        for part in content
        if isinstance(part, str) or part.get("type") == "text"
    )


def _chat(message: BaseMessage) -> ChatMessage:
    role = {"system": "system", "ai": "assistant"}.get(message.type, "user")
    text = _text(message)
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = ", ".join(call["name"] for call in message.tool_calls)
        text = f"{text}\n(called {calls})".strip()
    return ChatMessage(role, text)  # type: ignore[arg-type]


class FakeChatModel(BaseChatModel):
    """A LangChain chat model over a biasbreaker LLM client (the seeded fake in tests).

    Args:
        client: The client answering each request (``FakeLLM`` for a simulated model).
        tool_for: Decision word (``"yes"``, ``"no"``) -> the name of the tool a reply
            ``Decision: <word>`` calls when that tool is bound.
        temperature: Passed on in every request.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: Any = Field(description="The biasbreaker LLMClient that answers.")
    tool_for: dict[str, str] = Field(default_factory=dict)
    temperature: float = 0.0
    bound_tools: tuple[str, ...] = ()

    @property
    def _llm_type(self) -> str:
        return "biasbreaker-fake-chat"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> FakeChatModel:
        """A copy that may call ``tools`` (functions, ``@tool`` tools, pydantic models)."""
        names = tuple(convert_to_openai_tool(tool)["function"]["name"] for tool in tools)
        return self.model_copy(update={"bound_tools": names})

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        client: LLMClient = self.client
        request = LLMRequest(
            tuple(_chat(m) for m in messages),
            temperature=self.temperature,
            sample=current_sample(),
        )
        text = complete_sync(client, request).text
        found = _DECISION.search(text)
        tool = self.tool_for.get(found.group(1).lower()) if found else None
        if tool is not None and tool in self.bound_tools:
            digest = hashlib.sha256(f"{tool}:{text}".encode()).hexdigest()[:12]
            call = {"name": tool, "args": {"reason": text}, "id": f"call_{digest}"}
            return AIMessage(content="", tool_calls=[call])
        return AIMessage(content=text)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._reply(messages)
        if reply.tool_calls:
            calls = [
                {"name": c["name"], "args": _json(c["args"]), "id": c["id"], "index": i}
                for i, c in enumerate(reply.tool_calls)
            ]
            chunk = ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=calls))
            if run_manager is not None:
                run_manager.on_llm_new_token("", chunk=chunk)
            yield chunk
            return
        words = re.findall(r"\S+\s*", str(reply.content)) or [""]
        for word in words:
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word))
            if run_manager is not None:
                run_manager.on_llm_new_token(word, chunk=chunk)
            yield chunk


def _json(args: Mapping[str, Any]) -> str:
    return json.dumps(dict(args), sort_keys=True)


__all__ = ["FakeChatModel"]
