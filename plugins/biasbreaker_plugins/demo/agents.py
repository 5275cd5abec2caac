"""The LLM clients of the demo's agents, and a counter of every LLM call.

Every agent of the demo is an LLM call through the configured ``llm_client`` (``[llm] client``).
With a real client (``openai-compatible``, ``local-smollm2``, ...) every agent uses that one
client. With the simulated ``fake`` client, and only then, the demo gives its *biased agent*
(the hiring ranker) its own fake options: the bias dial ``[demo] fake_bias`` and the measured
preference ``[demo] fake_preset`` for the posting's job (``bloomberg-gpt35-retail``), built by
the fake's own factory through the registry; every other agent gets the fake at dial 0. The
intervention (skeptics, MADERA) always uses the kernel's client, as configured.

:class:`DemoKernel` is the kernel with one addition: its ``llm()`` counts calls, so the summary
can report every LLM call the run made (agents, probe re-runs, skeptics, editors), and tallies
calls and tokens per role (:mod:`biasbreaker.usage`).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from biasbreaker.errors import ConfigError
from biasbreaker.kernel import Kernel
from biasbreaker.llm import LLMClient, LLMRequest, LLMResponse
from biasbreaker.usage import UsageTally, current_tally, role_of

FAKE = "fake"
"""Registry name of the simulated fake client."""


@dataclass
class CallCounter:
    """LLM calls made, by purpose (``agent``, ``skeptic``, ``editor``, ...).

    Thread-safe: skeptics and MADERA stages call from worker threads.
    """

    by_purpose: Counter[str] = field(default_factory=Counter)
    usage: UsageTally = field(default_factory=UsageTally, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, purpose: str) -> None:
        """Count one call for ``purpose``."""
        with self._lock:
            self.by_purpose[purpose] += 1

    @property
    def total(self) -> int:
        """Every call counted."""
        return sum(self.by_purpose.values())


class CountingClient:
    """An :class:`~biasbreaker.llm.LLMClient` that counts the calls it passes on.

    Args:
        inner: The client that answers.
        counter: Where calls are counted (shared by every client of a run).
    """

    def __init__(self, inner: LLMClient, counter: CallCounter) -> None:
        self.inner = inner
        self.counter = counter

    @property
    def model(self) -> str:
        """The inner client's model."""
        return self.inner.model

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Count the call, let the inner client answer it, tally its tokens.

        The run's tally gets them, and the tally of the :func:`~biasbreaker.usage.tallied`
        block in progress (one input's run) too.
        """
        self.counter.count(request.purpose)
        role = role_of(request.purpose)
        tallies = [self.counter.usage]
        local = current_tally()
        if local is not None and local is not self.counter.usage:
            tallies.append(local)
        for tally in tallies:
            tally.call(role)
        reply = await self.inner.complete(request)
        for tally in tallies:
            tally.reply(role, reply)
        return reply

    async def aclose(self) -> None:
        """Close the inner client."""
        await self.inner.aclose()


class DemoKernel(Kernel):
    """The kernel, whose ``llm()`` client counts its calls in :attr:`counter`."""

    counter: CallCounter
    _counting: CountingClient | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.counter = CallCounter()
        self._counting = None

    @classmethod
    def wrap(cls, kernel: Kernel) -> DemoKernel:
        """A counting kernel with the same settings and plugins as ``kernel``."""
        return cls(kernel.loaded, kernel.host)

    def llm(self) -> LLMClient:
        """The selected client (built once), counting every call.

        Built again, and wrapped again, after :meth:`validate` closed the one it built.
        """
        inner = super().llm()
        if self._counting is None or self._counting.inner is not inner:
            self._counting = CountingClient(inner, self.counter)
        return self._counting


def job_slug(job: str) -> str:
    """``"HR specialist"`` -> ``"hr-specialist"`` (the fake presets' job suffix)."""
    return "-".join(re.findall(r"[a-z0-9]+", job.lower()))


@dataclass
class AgentClients:
    """Which client each agent calls.

    Args:
        default: The client of every agent without an override.
        overrides: ``(agent, job)`` -> client (``job`` may be ``None`` for every job).
        simulated: Whether the clients are the simulated fake.
        notes: One line per agent setting, for the demo's output.
    """

    default: LLMClient
    overrides: Mapping[tuple[str, str | None], LLMClient] = field(default_factory=dict)
    simulated: bool = False
    notes: tuple[str, ...] = ()

    def client(self, agent: str, job: str | None = None) -> LLMClient:
        """The client of ``agent`` (for ``job``)."""
        return self.overrides.get((agent, job), self.overrides.get((agent, None), self.default))


def _fake(kernel: Kernel, options: Mapping[str, Any]) -> LLMClient:
    """A fake client with ``options`` over ``[plugin.fake]``, built by its own factory."""
    impl = kernel.registry.get("llm_client", FAKE)
    base = kernel.options("llm_client", FAKE).model_dump()
    try:
        validated = impl.options.model_validate({**base, **options})
    except ValueError as exc:
        raise ConfigError(f"[demo] fake options {dict(options)!r} are invalid: {exc}") from exc
    client = impl.factory(validated, kernel)
    if not isinstance(client, LLMClient):
        raise ConfigError(f"llm_client {FAKE!r} built {type(client).__name__}, not an LLMClient")
    return client


def agent_clients(
    kernel: DemoKernel,
    *,
    biased_agent: str | None,
    jobs: Iterable[str] = (),
    fake_seed: int | None = None,
) -> AgentClients:
    """The clients of a run's agents, all counting into ``kernel.counter``.

    Args:
        kernel: The run's kernel.
        biased_agent: The agent that gets ``[demo] fake_bias`` and ``fake_preset`` (fake only),
            or ``None`` for a control run (dial 0 everywhere).
        jobs: The jobs whose preset the biased agent needs (``fake_preset-<job>``).
        fake_seed: Seed of the demo's fake agents (``None``: the run's seed); control runs
            measured after calibration use another seed.

    Returns:
        The clients, with a note per agent setting for the output.

    Raises:
        ConfigError: The demo's fake options are invalid.
        PluginError: The configured client cannot be built.
    """
    counter = kernel.counter
    name = kernel.selected("llm_client")[0]
    if name != FAKE:
        client = kernel.llm()  # counts its calls
        return AgentClients(
            default=client,
            simulated=False,
            notes=(f"every agent calls the configured client {name!r} ({client.model})",),
        )
    demo = kernel.settings.demo
    seed: dict[str, Any] = {} if fake_seed is None else {"seed": fake_seed}
    blind = CountingClient(_fake(kernel, {**seed, "bias": 0.0, "preset": None}), counter)
    overrides: dict[tuple[str, str | None], LLMClient] = {}
    notes = []
    if biased_agent is not None and demo.fake_bias > 0.0:
        for job in jobs:
            preset = f"{demo.fake_preset}-{job_slug(job)}"
            overrides[(biased_agent, job)] = CountingClient(
                _fake(kernel, {**seed, "bias": demo.fake_bias, "preset": preset}), counter
            )
        notes.append(
            f"{biased_agent}: simulated fake LLM at bias dial {demo.fake_bias:g} with the "
            f"preset {demo.fake_preset}-<job> (GPT-3.5/GPT-4 top-1 selection rates measured by "
            "Bloomberg, 2024)"
        )
        notes.append("every other agent: simulated fake LLM at bias dial 0 (group-blind)")
    else:
        notes.append("every agent: simulated fake LLM at bias dial 0 (group-blind)")
    return AgentClients(default=blind, overrides=overrides, simulated=True, notes=tuple(notes))


__all__ = [
    "FAKE",
    "AgentClients",
    "CallCounter",
    "CountingClient",
    "DemoKernel",
    "agent_clients",
    "job_slug",
]
