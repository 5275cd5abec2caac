"""Measure the local model on this machine: model load time and generation speed.

Run ``python -m biasbreaker_local_smollm2.measure`` (needs the ``[model]`` extra). It loads the
model through :class:`~biasbreaker_local_smollm2.client.LocalSmolLM2Client`, then times
``--runs`` free-text replies and ``--runs`` JSON-constrained replies, and prints one JSON
document: load seconds, and per run the completion tokens, wall seconds and tokens/s (wall
time includes prompt processing, so this is end-to-end throughput, not decode speed alone).
The 1-minute load average before and after is printed too: on a shared machine the numbers
move with it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from collections.abc import Sequence
from typing import Any

from biasbreaker.llm import LLMRequest
from biasbreaker_local_smollm2.client import LocalSmolLM2Client
from biasbreaker_local_smollm2.plugin import LocalSmolLM2Options

PROMPT = "Write three sentences about a nurse named Maria who starts a new job."
SCHEMA = {
    "type": "object",
    "properties": {"stands": {"type": "boolean"}, "critique": {"type": "string"}},
    "required": ["stands", "critique"],
}
JSON_PROMPT = (
    "Review this claim for demographic bias and answer in JSON with keys 'stands' (boolean) "
    "and 'critique' (string): 'Older applicants learn new software slowly.'"
)


async def _runs(
    client: LocalSmolLM2Client, request: LLMRequest, runs: int
) -> list[dict[str, float]]:
    out = []
    for i in range(runs):
        started = time.perf_counter()
        reply = await client.complete(
            LLMRequest(
                messages=request.messages,
                max_tokens=request.max_tokens,
                response_schema=request.response_schema,
                seed=i,
            )
        )
        seconds = time.perf_counter() - started
        out.append(
            {
                "completion_tokens": reply.completion_tokens,
                "prompt_tokens": reply.prompt_tokens,
                "seconds": round(seconds, 3),
                "tokens_per_s": round(reply.completion_tokens / seconds, 2),
            }
        )
    return out


def _summary(runs: list[dict[str, float]]) -> dict[str, Any]:
    rates = [r["tokens_per_s"] for r in runs]
    return {"runs": runs, "median_tokens_per_s": round(statistics.median(rates), 2)}


async def measure(runs: int, max_tokens: int, n_threads: int) -> dict[str, Any]:
    """Load the model and time generations.

    Args:
        runs: Replies per mode (free text, JSON), >= 1.
        max_tokens: Token cap per reply.
        n_threads: llama.cpp threads.

    Returns:
        The measurements as a JSON-serialisable dict.
    """
    load_before = os.getloadavg()[0]
    client = LocalSmolLM2Client(LocalSmolLM2Options(n_threads=n_threads), default_seed=0)
    started = time.perf_counter()
    client.load()
    load_s = time.perf_counter() - started
    free = await _runs(client, LLMRequest.chat(PROMPT, max_tokens=max_tokens), runs)
    structured = await _runs(
        client, LLMRequest.chat(JSON_PROMPT, max_tokens=max_tokens, response_schema=SCHEMA), runs
    )
    await client.aclose()
    return {
        "model": client.model,
        "model_bytes": client.model_path.stat().st_size,
        "n_threads": n_threads,
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "load_seconds": round(load_s, 3),
        "free_text": _summary(free),
        "json_schema_grammar": _summary(structured),
        "loadavg_1min_before": round(load_before, 2),
        "loadavg_1min_after": round(os.getloadavg()[0], 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; prints the measurements as JSON.

    Args:
        argv: Arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status.
    """
    parser = argparse.ArgumentParser(prog="python -m biasbreaker_local_smollm2.measure")
    parser.add_argument("--runs", type=int, default=3, help="replies per mode (default 3)")
    parser.add_argument("--max-tokens", type=int, default=64, help="cap per reply (default 64)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads (default 2)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.max_tokens < 1 or args.threads < 1:
        parser.error("--runs, --max-tokens and --threads must be >= 1")
    result = asyncio.run(measure(args.runs, args.max_tokens, args.threads))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
