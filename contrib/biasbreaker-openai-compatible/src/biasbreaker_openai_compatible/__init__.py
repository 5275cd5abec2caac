"""biasbreaker LLM client for any OpenAI-compatible chat-completions endpoint.

Select it with ``[llm] client = "openai-compatible"`` and configure it under
``[plugin.openai-compatible]`` (the fields of
:class:`~biasbreaker_openai_compatible.plugin.OpenAICompatibleOptions`).
Importing this package is cheap: httpx is imported only when the client is built.

Modules:
    ``plugin``: the entry-point module (options model, factory, hook).
    ``client``: :class:`~biasbreaker_openai_compatible.client.OpenAICompatibleClient` (httpx).
    ``testing``: a small OpenAI-compatible server for tests and demos (http.server, no httpx).
"""

from __future__ import annotations

__version__ = "0.1.0"
