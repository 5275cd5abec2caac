"""The seeded fake LLM (``llm_client`` plugin ``fake``), simulated: not a language model.

Every test, study and the offline demo need an LLM that is deterministic, offline and whose bias
is known. This client reads a request, decides what kind of answer is asked for, and builds one
from seeded randomness; a *bias dial* ``p`` in [0, 1] makes its choices depend on the
demographic group named in the prompt. Its replies carry ``model = "biasbreaker-fake
(simulated)"``. Nothing it says is evidence about any real model.

Determinism and the bias. The reply is a function of the seed, the options and the request's
messages, ``response_schema``, ``purpose``, ``seed`` and ``sample`` (``sample`` distinguishes
same-group resamples). Every draw comes from the prompt with every demographic mention masked,
the mentions being the kernel's own detections (:mod:`.groups`), and choices are made by
position; the group preference (:mod:`.presets`) enters only through the weights of the items
the prompt names. So at dial 0 the fake is blind to every swap the probe makes: a counterfactual
prompt gets the original reply with the swap applied. At any dial a counterfactual and its
same-group twin (same ``sample``) share their noise and differ only through the bias: the fake
models a seeded or temperature-0 model whose preference depends on the names. A real model at
temperature > 0 draws the two independently, so its noise floor is higher and the probe needs
larger ``k`` and ``r``. Prompts that differ only in the names they mention share their noise
too: measure selection rates over samples (or seeds), not over name lists at one sample.

Prompt conventions (the first that applies decides the reply):

1. ``request.response_schema`` is set: a JSON document satisfying it (:mod:`.schema`), for a
   skeptic, diagnoser or editor. String properties named ``text``, ``rewrite``, ``revised``,
   ``corrected``, ``output``, ``content``, ``answer`` (and similar) receive the *subject text*:
   the last fenced block (```...``` or triple double quotes) of the user messages, else the user
   messages, with the fake's own evaluative adjectives neutralised. Other values are drawn
   group-blind at every dial.
2. *Ranking*: the prompt asks to rank, order, shortlist, sort, or find the most qualified / best
   candidate, and names at least two people in full (a first name of the shipped lists and a
   surname: Bloomberg-style resumes), or lists items as labelled (``1.``, ``A)``, ``(a)``) or
   bulleted (``-``, ``*``, ``•``) lines. Every line of the list is a candidate, named in the
   shipped lists or not (an unknown name carries no group weight: it is ranked blind); with
   two or more people named in full the list is the last one in which two lines or more name
   one of them, else the names themselves are ranked (names written inline, not as lines, are
   ranked only if the lists know them). Reply: one ``N.
   <candidate as written>`` line per candidate, best first. Dial ``p``: candidates are sorted by
   ``p * log(w_i) + g_i`` (Gumbel-top-k), ``w_i`` the weight of the groups candidate ``i``
   names, ``g_i`` a Gumbel draw per position from the masked prompt. That is Plackett-Luce with
   weights ``w_i ** p``: ``P(i first) = w_i ** p / sum_j w_j ** p``; at ``p = 0`` a blind
   positional order, at ``p = 1`` Plackett-Luce with the weights themselves.
3. *Multiple choice*: at least two consecutive labelled lines ``A. ...``/``A) ...``/``(a) ...``/
   ``1. ...``/``ans0: ...`` (the last such run is used; BBQ's ``ans0..ans2`` work). Reply
   ``Answer: <label>. <option text>``: the option with the largest ``p * log(w_i) + g_i``, ``w_i``
   the weight of the groups its text names (1 for none).
4. ``request.purpose == "editor"`` without a schema: the subject text, adjectives neutralised.
5. *Score*: the prompt mentions score, rate, rating, "on a scale", probability or "how likely".
   Reply ``Score: <value>`` on the scale it names (``from 1 to 10``, ``between 0 and 100``;
   default 0 to 1). A blind base score in [0, 1] is shifted by
   ``p * score_shift * (w - 1) / (w + 1)``, ``w`` the weight of the groups named in the user
   messages.
6. *Decision*: "yes or no", "decision", "decide", "should we hire", "approve", "reject". Reply
   ``Decision: yes`` or ``Decision: no`` (the score of rule 5, thresholded at 0.5).
7. Otherwise free text: one or two sentences (about the first person named, if any) with an
   evaluative adjective: blind at dial 0; when a blind coin falls below ``p``, positive for a
   favoured and negative for a disfavoured group.

Fault injection (for reliability tests): latency ``latency_s + U(0, latency_jitter_s)`` through
an injectable ``sleep``; with probabilities ``error_rate``, ``timeout_rate`` and
``malformed_rate`` an :class:`~biasbreaker.errors.LLMError`, a time-out (sleep ``timeout_s``, then
``LLMError``) or a malformed reply (truncated or prose instead of JSON, a JSON document missing a
property; an empty or unparseable answer otherwise). The draw is seeded per request and per
attempt, so a retry of the same request can succeed, reproducibly. The directives
``[[fake:error]]``, ``[[fake:timeout]]`` and ``[[fake:malformed]]`` in a prompt force one.
``max_tokens`` truncates a text reply to that many words (``finish_reason = "length"``); a
structured reply longer than that raises ``LLMError`` instead, as the ``LLMRequest`` contract
asks (a cut JSON document would not parse), unless a malformed reply was injected.

See ``docs/fake-llm.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from biasbreaker.hookspecs import hookimpl
from biasbreaker_plugins.llm_fake.client import MODEL_ID, FakeLLM, FakeLLMOptions

if TYPE_CHECKING:
    from biasbreaker.llm import LLMClient
    from biasbreaker.registry import BuildContext, Register

__all__ = ["MODEL_ID", "FakeLLM", "FakeLLMOptions", "llm_client", "make_fake"]


def make_fake(options: FakeLLMOptions, context: BuildContext) -> FakeLLM:
    """Build the fake client: its own ``seed`` option if set, else the run's seed.

    The fake masks and labels the words of the probe's term lists: the shipped lists of every
    axis, with names, plus the rows ``[probe] term_files`` and ``extra_terms`` add (``[probe]
    axes``, ``groups`` and ``names`` only narrow what the probe writes, so they are not
    applied: the fake still knows every group for its preference).

    Args:
        options: The validated ``[plugin.fake]`` options.
        context: The kernel's build context.

    Returns:
        The client (simulated).

    Raises:
        ConfigError: A ``[probe]`` term file or inline row is invalid.
    """
    from biasbreaker.errors import ConfigError
    from biasbreaker.probe import TermSet

    probe = context.settings.probe
    terms = None
    if probe.term_files or probe.extra_terms:
        try:
            terms = TermSet.load(
                extra_files=probe.term_files,
                inline={axis: [dict(r) for r in rows] for axis, rows in probe.extra_terms.items()},
            )
        except ConfigError as exc:
            raise ConfigError(f"[probe] term lists, as read by the fake LLM: {exc}") from exc
    return FakeLLM(options, seed=context.seed, terms=terms)


@hookimpl
def llm_client(register: Register[LLMClient]) -> None:
    """Register the seeded, simulated fake LLM as ``fake``."""
    register(
        "fake",
        make_fake,
        options=FakeLLMOptions,
        summary="seeded fake LLM with a bias dial (simulated; no model, no network)",
    )
