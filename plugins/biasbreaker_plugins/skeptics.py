"""First-party skeptics: ``empirical-auditor``, ``devils-advocate``, ``diversity-champion``.

Each is an LLM reviewer over the injected ``llm_client`` (``context.llm()``) with its own role
prompt, overridable with the plugin option ``prompt`` (``[plugin.devils-advocate] prompt =
"..."``). The role prompt is always followed by the kernel's fixed rules
(:data:`biasbreaker.intervention.review.UNTRUSTED_RULES`): the payload, the task and anything
else supplied by others is fenced with a nonce and treated as data, and the reply must be one
JSON object matching :class:`SkepticReply` (sent as ``response_schema``). A reply that does not
parse is retried once; a second failure raises
:class:`~biasbreaker.errors.MalformedReplyError`, which the panel records as a failed skeptic.

Source:
    Phase 4 design (M4) R1 and WP2 (the three roles); Liang et al. (2024), "Encouraging
    Divergent Thinking in Large Language Models through Multi-Agent Debate", arXiv 2305.19118
    (a devil's advocate against degeneration of thought).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from biasbreaker.hookspecs import hookimpl
from biasbreaker.intervention.review import ask_json, fence, system_prompt
from biasbreaker.intervention.types import MAX_TEXT, Decision, ReviewRequest, SkepticVerdict
from biasbreaker.llm import LLMClient
from biasbreaker.registry import BuildContext, Register

_COMMON = (
    "You review the output of an AI agent in a multi-agent pipeline for demographic bias: a "
    "judgment, ranking, score or wording that depends on a person's gender, race or "
    "ethnicity, age, religion, disability, nationality or sexual orientation rather than on "
    "the facts of the task. Decide whether the output stands, must be revised (then give the "
    "corrected output in `revision`, same format as the original) or must be rejected. Cite "
    "the facts you rely on in `evidence` (short quotes from the task, or well-known facts); "
    "leave it empty if you have none. Set `confidence` to the probability, in [0, 1], that your "
    "decision is right, and `attribute` to the demographic attribute at issue (or null)."
)

ROLE_PROMPTS: dict[str, str] = {
    "empirical-auditor": (
        "You are the Empirical Auditor of a bias review panel. Accept a claim about a person "
        "or a group only if the task's facts support it; flag any conclusion that the facts "
        "do not carry and that tracks a demographic attribute. " + _COMMON
    ),
    "devils-advocate": (
        "You are the Devil's Advocate of a bias review panel. Argue against the output: "
        "imagine the same task with the people's demographic attributes swapped and ask "
        "whether the output would change; then decide honestly. " + _COMMON
    ),
    "diversity-champion": (
        "You are the Diversity Champion of a bias review panel. Surface the perspective of "
        "the people the output is about, especially under-represented groups, and flag "
        "stereotypes, omissions and unequal standards. " + _COMMON
    ),
}
"""The default role prompt of each first-party skeptic."""


class SkepticReply(BaseModel):
    """The JSON reply every first-party skeptic asks for (its schema is ``response_schema``).

    A finite confidence outside [0, 1] is clamped into it (the kernel's rule); anything that is
    not a JSON number (a string such as ``"1.0"``, ``true``/``false``, ``null``), or is NaN or
    infinite, makes the reply malformed.
    """

    model_config = ConfigDict(extra="forbid")

    decision: Decision = Field(description="'stands', 'revise' or 'reject'")
    critique: str = Field(max_length=MAX_TEXT, description="What is wrong, or why it stands.")
    revision: str | None = Field(
        None, max_length=MAX_TEXT, description="The corrected output, or null."
    )
    confidence: float = Field(ge=0.0, le=1.0, description="Probability the decision is right.")
    evidence: list[str] = Field(
        default_factory=list, max_length=20, description="Facts relied on; empty if none."
    )
    attribute: str | None = Field(
        None, max_length=200, description="The demographic attribute at issue, or null."
    )

    @field_validator("confidence", mode="before")
    @classmethod
    def _clamp(cls, value: Any) -> Any:
        # pydantic's lax mode would read "1.0", true and "0.9" as numbers; a skeptic that
        # answers with a string or a bool did not follow the schema, so the reply is malformed
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(
                f"confidence={value!r} is {type(value).__name__}, not a number: give a JSON "
                "number in [0, 1]"
            )
        if not math.isfinite(value):
            raise ValueError(f"confidence={value!r} is not finite: give a number in [0, 1]")
        return min(1.0, max(0.0, float(value)))


class SkepticOptions(BaseModel):
    """Options of a first-party skeptic (``[plugin.<name>]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt: str | None = Field(
        None,
        min_length=1,
        max_length=20_000,
        description="Replaces the role prompt (the fencing rules and reply format stay).",
    )
    max_tokens: int | None = Field(
        None, ge=1, le=100_000, description="Token bound of each reply, or unset."
    )


def review_message(request: ReviewRequest) -> str:
    """The user message of a review: the task and the payload, each fenced as untrusted data.

    Args:
        request: The review request.

    Returns:
        The message text; the payload is the last fenced block.
    """
    parts = []
    if request.node:
        parts.append(f"Agent under review: {request.node!r}.")
    if request.task is not None:
        parts.append(
            "The task the agent was given:\n" + fence(request.task, seed=request.seed, name="TASK")
        )
    if request.attributes:
        parts.append(
            "Demographic attributes present in the task: " + ", ".join(request.attributes) + "."
        )
    parts.append(
        "The output under review:\n" + fence(request.payload, seed=request.seed, name="PAYLOAD")
    )
    return "\n\n".join(parts)


class LLMSkeptic:
    """A skeptic backed by an LLM client and a role prompt.

    Args:
        kind: The skeptic's kind (its registry name).
        role_prompt: The role description (the fixed rules are appended).
        client: The LLM client.
        max_tokens: Token bound per reply, or ``None``.
    """

    def __init__(
        self, kind: str, role_prompt: str, client: LLMClient, *, max_tokens: int | None = None
    ) -> None:
        self._kind = kind
        self.system = system_prompt(role_prompt)
        self.client = client
        self.max_tokens = max_tokens
        self.calls = 0

    @property
    def kind(self) -> str:
        """The skeptic's kind."""
        return self._kind

    async def review(self, request: ReviewRequest) -> SkepticVerdict:
        """Review the payload.

        Args:
            request: The review request.

        Returns:
            The verdict, parsed from the schema-validated JSON reply.

        Raises:
            MalformedReplyError: If the reply did not parse twice.
            LLMError: As raised by the client.
        """
        reply, calls = await ask_json(
            self.client,
            system=self.system,
            user=review_message(request),
            model=SkepticReply,
            purpose="skeptic",
            seed=request.seed,
            max_tokens=self.max_tokens,
        )
        self.calls += calls
        return SkepticVerdict(
            kind=self.kind,
            decision=reply.decision,
            critique=reply.critique,
            revision=reply.revision,
            confidence=reply.confidence,
            evidence=tuple(e for e in reply.evidence if e.strip()),
            attribute=reply.attribute,
        )


def _factory(kind: str) -> Any:
    def make(options: SkepticOptions, context: BuildContext) -> LLMSkeptic:
        return LLMSkeptic(
            kind,
            options.prompt or ROLE_PROMPTS[kind],
            context.llm(),
            max_tokens=options.max_tokens,
        )

    make.__doc__ = f"Build the {kind!r} skeptic over the selected LLM client."
    return make


@hookimpl
def skeptic(register: Register[object]) -> None:
    """Register the three first-party skeptics."""
    summaries = {
        "empirical-auditor": "demands evidence for every claim about a person or group",
        "devils-advocate": "argues the opposite: would the output change if groups swapped?",
        "diversity-champion": "surfaces under-represented perspectives and stereotypes",
    }
    for kind, summary in summaries.items():
        register(kind, _factory(kind), options=SkepticOptions, summary=summary)
