"""Hook specifications: the extension points of biasbreaker.

Plugins implement these with ``@hookimpl``. Each hook hands the plugin a ``register``
callback (:class:`~biasbreaker.registry.Register`) through which it contributes *named*
implementations; the configuration chooses among them by name. An implementation of a hook
may take a subset of the spec's arguments, never more.

Every hook is called once per plugin host, after all plugins are loaded, to fill the
registry; it must only call ``register`` (no I/O, no heavy imports). Factories run later, and
only for implementations the configuration selects: installed but unselected implementations
are listed by ``biasbreaker plugins``, never built or called.

A factory is called as ``factory(options, context)``: ``options`` is an instance of the model
given as ``register(..., options=Model)`` and validated from ``[plugin.<name>]``; ``context``
is a :class:`~biasbreaker.registry.BuildContext`. A factory that raises is reported as a
:class:`~biasbreaker.errors.PluginError` naming the plugin and its distribution, and the
control plane fails closed (halts) on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from biasbreaker.llm import LLMClient
    from biasbreaker.registry import Register
    from biasbreaker.trace.sink import TraceBackend

PROJECT = "biasbreaker"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def classify_route(register: Register[object]) -> None:
    """Register routers that choose a repair strategy for a halted step.

    The factory returns an object with ``route(context: InterventionContext) -> str`` returning
    ``"skeptics"``, ``"madera"`` or ``"none"``. ``context`` carries the tripping step, per-node
    local scores in [0, 1], Katz weights summing to 1, a short per-node score history, the
    attempt number and the frozen payload.

    Kernel checks on the result: a value outside the three routes is a ``PluginError``; a router
    that raises fails closed (the attempt counts as failed, the machine retries then escalates).

    Called: the hook once per host; ``route`` once per intervention attempt, with the selected
    router (``[intervention] router``). Not first-result.

    .. versionadded:: 0.1.0
    """


@hookspec
def skeptic(register: Register[object]) -> None:
    """Register skeptics: adversarial reviewers of a frozen payload.

    The factory returns an object with a ``kind`` attribute (str; panel members must be of
    distinct kinds) and ``async review(request) -> SkepticVerdict``. The payload under review is
    untrusted text: the skeptic delimits it and must not let it change the reply format or the
    instructions. The verdict says whether the payload stands, a critique, an optional proposed
    revision, a confidence in [0, 1] and the evidence cited.

    Kernel checks on the result: a panel has >= 2 skeptics of distinct kinds (else a
    ``ConfigError`` at configuration time); confidences are clamped to [0, 1]; a skeptic that
    raises, times out or returns an unparseable reply (after one retry) is a failed skeptic with
    its reason recorded; fewer than 2 valid verdicts fail the panel closed.

    Called: the hook once per host; ``review`` once per panel run for each selected skeptic
    (``[intervention] skeptics``), concurrently.

    .. versionadded:: 0.1.0
    """


@hookspec
def diagnoser(register: Register[object]) -> None:
    """Register diagnosers: MADERA's first stage, locating the biased logical jump.

    The factory returns an object with ``async diagnose(payload: str, context) -> Diagnosis``
    (the suspect span, the demographic attribute involved, a query for counter-evidence).

    Kernel checks on the result: a diagnoser that raises fails the repair closed.

    Called: the hook once per host; ``diagnose`` once per MADERA round (at most
    ``[intervention] max_rewrites`` rounds per attempt).

    .. versionadded:: 0.1.0
    """


@hookspec
def retriever(register: Register[object]) -> None:
    """Register retrievers: MADERA's second stage, finding counter-evidence.

    The factory returns an object with ``retrieve(query: str, *, top_k: int) -> list[Evidence]``
    searching a user-supplied corpus, best first, at most ``top_k`` items, each with a score.
    No retriever may reach the network unless its own options say so.

    Kernel checks on the result: at most ``top_k`` items are used; an empty result makes the
    editor keep the payload (no evidence, no rewrite).

    Called: the hook once per host; ``retrieve`` once per MADERA round.

    .. versionadded:: 0.1.0
    """


@hookspec
def editor(register: Register[object]) -> None:
    """Register editors: MADERA's third stage, rewriting the payload with the evidence.

    The factory returns an object with
    ``async rewrite(payload: str, diagnosis, evidence) -> str``.

    Kernel checks on the result: every rewrite is re-scored by the probe's scorers; the loop
    stops when the score clears ``tau_exit`` or after ``max_rewrites``, returning the best
    attempt flagged not-converged.

    Called: the hook once per host; ``rewrite`` once per MADERA round.

    .. versionadded:: 0.1.0
    """


@hookspec
def aggregator(register: Register[object]) -> None:
    """Register aggregators of skeptic verdicts.

    The factory returns an object with ``aggregate(verdicts) -> PanelResult``: a decision
    (stands / revise / reject), the chosen corrected payload, an aggregate confidence in
    [0, 1] and the verdicts pruned with the reason for each. Verdicts arrive anonymised.

    Kernel checks on the result: confidence in [0, 1]; a verdict may be pruned only for
    overconfidence (high certainty, no evidence), never for disagreeing with the majority,
    else ``AggregatorError``.

    Called: the hook once per host; ``aggregate`` once per panel run, with the selected
    aggregator (``[intervention] aggregator``).

    .. versionadded:: 0.1.0
    """


@hookspec
def calibrator(register: Register[object]) -> None:
    """Register calibrators that choose thresholds from control (unbiased) runs.

    The factory returns an object with
    ``calibrate(trajectories, *, target_false_halt_rate) -> Thresholds`` where each trajectory
    is one control run's sequence of (fast, slow) B_net values and ``Thresholds`` holds
    ``tau_enter > tau_exit`` and ``tau_warn``.

    Kernel checks on the result: thresholds finite, non-negative and ``tau_enter > tau_exit``,
    else ``ThresholdError``; too few runs for the target is an error saying how many are needed.

    Called: the hook once per host; ``calibrate`` once per ``biasbreaker calibrate`` or
    ``calibrate_thresholds`` call, with ``[calibration] calibrator``.

    .. versionadded:: 0.1.0
    """


@hookspec
def framework_adapter(register: Register[object]) -> None:
    """Register adapters that guard an agent framework's graph.

    The factory returns an adapter object for one framework (the first-party one is
    ``langgraph``); it wraps the user's graph so every guarded node's output is staged,
    probed and gated by the control machine before any downstream node can read it.

    Kernel checks on the result: none beyond the adapter's own tests; the adapter must import
    its framework lazily, inside the factory.

    Called: the hook once per host; the factory when a guarded graph is built
    (``[adapter] framework``).

    .. versionadded:: 0.1.0
    """


@hookspec
def scorer(register: Register[object]) -> None:
    """Register scorers: divergence between original and counterfactual outputs.

    The factory returns a :class:`biasbreaker.probe.scoring.Scorer`: ``name``,
    ``compares_neutralised`` (whether counterfactual outputs are mapped back to the original
    groups before comparison, as lexical metrics need) and a batched
    ``divergence(originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]``,
    one value per pair in [0, 1] (0 = identical, 1 = maximally different).

    Kernel checks on the result: one value per pair, each finite and in [0, 1], else
    ``ProbeError`` (the probe fails closed: the step halts, it is never waved through).

    Called: the hook once per host; ``divergence`` once or a few times per probed step, for each
    selected scorer (``[probe] scorers``).

    .. versionadded:: 0.1.0
    """


@hookspec
def llm_client(register: Register[LLMClient]) -> None:
    """Register LLM clients (the ``biasbreaker.llm.LLMClient`` protocol).

    The factory returns an object with ``model`` and ``async complete(LLMRequest) ->
    LLMResponse`` and ``async aclose()``. Secrets (API keys) come from environment variables
    named in the options, never from the TOML file itself, and are never logged.

    Kernel checks on the result: the object satisfies ``LLMClient`` (else ``PluginError``);
    client errors surface as ``LLMError`` and the control plane fails closed on them.

    Called: the hook once per host; the factory once per kernel (``[llm] client``), on first
    use; ``complete`` for every LLM call of guarded agents, skeptics and MADERA stages.

    .. versionadded:: 0.1.0
    """


@hookspec
def trace_sink(register: Register[TraceBackend]) -> None:
    """Register trace sinks: where the run-trace records of guarded threads are stored.

    The factory returns a :class:`~biasbreaker.trace.sink.TraceBackend`:
    ``open_sink(location, *, adapter, fsync) -> TraceSink`` (what a framework adapter writes
    each thread's records through) and ``open_store(location) -> LineStore`` (the stored
    canonical lines, read by ``biasbreaker verify``, ``calibrate`` and ``trace export``). A
    database sink is registered under its URL scheme (``sqlite``, ``postgresql``): the
    commands open a URL with the implementation its scheme names. Every stored line must be
    the exact bytes the file trace would hold (same schema, chain and seals), so an export
    is byte-identical and verifies as the file does.

    Kernel checks on the result: the object has ``open_sink`` and ``open_store`` (else
    ``PluginError``); a store's ``append`` must refuse a line at a ``seq`` the thread already
    holds with ``TraceError`` (two writers), never overwrite or drop it.

    Called: the hook once per host; the factory when a guarded graph is built
    (``[trace] sink``, default ``file``), or when a command is given a URL.

    .. versionadded:: 0.2.0
    """
