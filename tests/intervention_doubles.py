"""Test doubles for the intervention tests (not the project's fake LLM; clearly test-only).

``ScriptedLLM`` answers each request with ``script(request, payload)``, where ``payload`` is the
text inside the request's nonce-fenced PAYLOAD block (or ``None``); it records every request
and how many calls were in flight at once.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from biasbreaker.llm import LLMRequest, LLMResponse

PAYLOAD_BLOCK = re.compile(
    r"<<<BEGIN PAYLOAD (?P<n>[0-9a-f]{16})>>>\n```text\n(?P<body>.*)\n```\n<<<END PAYLOAD (?P=n)>>>",
    re.DOTALL,
)


def fenced_payload(request: LLMRequest) -> str | None:
    user = "\n".join(m.content for m in request.messages if m.role == "user")
    match = PAYLOAD_BLOCK.search(user)
    return match.group("body") if match else None


Script = Callable[[LLMRequest, str | None], str | Awaitable[str]]


class ScriptedLLM:
    """A deterministic LLM test double driven by a script function."""

    model = "scripted-test-double"

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[LLMRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            out = self.script(request, fenced_payload(request))
            if not isinstance(out, str):
                out = await out
            return LLMResponse(text=out, model=self.model)
        finally:
            self.in_flight -= 1

    async def aclose(self) -> None:
        return None


def verdict_json(
    decision: str = "revise",
    *,
    confidence: float = 0.7,
    revision: str | None = "fixed",
    evidence: list[str] | None = None,
    critique: str = "c",
    attribute: str | None = "gender",
) -> str:
    return json.dumps(
        {
            "decision": decision,
            "critique": critique,
            "revision": revision,
            "confidence": confidence,
            "evidence": evidence if evidence is not None else ["fact"],
            "attribute": attribute,
        }
    )


class StaticSkeptic:
    """A skeptic returning a fixed verdict after optionally awaiting a gate."""

    def __init__(
        self,
        kind: str,
        verdict: Any,
        *,
        gate: Callable[[], Awaitable[None]] | None = None,
        error: BaseException | None = None,
    ) -> None:
        self._kind = kind
        self.verdict = verdict
        self.gate = gate
        self.error = error

    @property
    def kind(self) -> str:
        return self._kind

    async def review(self, request: Any) -> Any:
        if self.gate is not None:
            await self.gate()
        if self.error is not None:
            raise self.error
        return self.verdict


class Barrier:
    """Counts concurrently running reviews; opens when ``parties`` are inside at once.

    Thread-safe: the panel runs each review in a worker thread on its own event loop.
    """

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.inside = 0
        self.max_inside = 0
        self.event = threading.Event()
        self._lock = threading.Lock()

    async def __call__(self) -> None:
        with self._lock:
            self.inside += 1
            self.max_inside = max(self.max_inside, self.inside)
            if self.inside >= self.parties:
                self.event.set()
        try:
            while not self.event.is_set():
                await asyncio.sleep(0.001)
        finally:
            with self._lock:
                self.inside -= 1
