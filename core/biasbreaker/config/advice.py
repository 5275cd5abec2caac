"""Advice on a valid configuration that weakens the guard without saying so.

Every value here passes validation: each is a legitimate choice (sampling to save calls,
a breaker that trips only on fast B_net), but a user who made it by accident would learn it
only from a biased output that went through. ``biasbreaker config`` prints each piece of
advice as a warning and ``guard()`` warns with :class:`ConfigAdviceWarning`; nothing here
changes what the guard does.
"""

from __future__ import annotations

from biasbreaker.config.sections import PROBE_OFF
from biasbreaker.config.settings import Settings


class ConfigAdviceWarning(UserWarning):
    """A guard built with a configuration that lets some outputs through unchecked."""


def advice(settings: Settings) -> tuple[str, ...]:
    """What the configuration gives up, one sentence each, in ``[section] key`` order.

    Args:
        settings: The validated settings.

    Returns:
        The advice, empty for the defaults:

        - ``[probe] probe_rate`` = 0 (:data:`~biasbreaker.config.sections.PROBE_OFF`) or
          below 1 (that share of steps proceeds unprobed);
        - ``[probe] unsupported_language = "proceed"`` (such steps proceed unprobed);
        - ``[probe] adaptive_first`` or ``adaptive_stop`` set while ``adaptive`` is false
          (no effect);
        - ``[probe] per_person = false`` (a preference between two named persons is not
          tested);
        - ``[plugin.langgraph] stream_first = true`` (a held output's events were shown);
        - ``[breaker] tau_enter = 1`` (only a score of exactly 1 trips);
        - ``[breaker] node_trip = false`` (one biased node among clean ones trips only when
          its influence weight reaches ``tau_enter``).
    """
    probe = settings.probe
    breaker = settings.breaker
    out: list[str] = []
    if probe.probe_rate == 0.0:
        out.append(PROBE_OFF)
    elif probe.probe_rate < 1.0:
        out.append(
            f"[probe] probe_rate = {probe.probe_rate}: about "
            f"{100 * (1 - probe.probe_rate):.4g} % of guarded steps are not probed (each "
            "recorded 'not sampled') and their outputs proceed, a biased one too; only the "
            "breaker's state (a trip on an earlier probed step) holds them. Set it to 1 to "
            "probe every step"
        )
    if probe.unsupported_language == "proceed":
        out.append(
            '[probe] unsupported_language = "proceed": a step whose input is in a language '
            f"the term lists do not cover ({', '.join(probe.languages)}) proceeds unprobed "
            "(recorded 'unsupported_language'); the default \"hold\" holds it for review"
        )
    unused = sorted({"adaptive_first", "adaptive_stop"} & probe.model_fields_set)
    if unused and not probe.adaptive:
        out.append(
            f"[probe] {' and '.join(unused)} {'is' if len(unused) == 1 else 'are'} set but "
            "adaptive = false, so every probed step runs the full probe and "
            f"{'it has' if len(unused) == 1 else 'they have'} no effect: set adaptive = true, "
            "or remove them"
        )
    if not probe.per_person:
        out.append(
            "[probe] per_person = false: an input naming persons of different groups of an "
            "axis ('Mary Carter and John Baker') is probed only with variants that move "
            "everyone, which name the same groups, so a step that prefers one of them (the "
            "man) scores 0; the default true moves each person alone"
        )
    if (settings.plugin.get("langgraph") or {}).get("stream_first") is True:
        out.append(
            "[plugin.langgraph] stream_first = true: a guarded node's own tokens and custom "
            "events reach the caller before its output is checked, so a biased output is "
            "shown before it is held (docs/langgraph.md §13); the default false holds them"
        )
    if breaker.tau_enter >= 1.0:
        out.append(
            "[breaker] tau_enter = 1: only a score of exactly 1 trips (every counterfactual "
            "output changed completely and no resample changed at all), so a bias that moves "
            "some variants passes; calibrate it (`biasbreaker calibrate`) or set it below 1"
        )
    if not breaker.node_trip:
        out.append(
            "[breaker] node_trip = false: only fast B_net trips, and B_net is the "
            "influence-weighted mean over the scored nodes, so one biased node among clean "
            "ones trips only when its Katz weight reaches tau_enter "
            f"({breaker.tau_enter}); node_trip = true (the default) also trips on the node's "
            "own score"
        )
    return tuple(out)
