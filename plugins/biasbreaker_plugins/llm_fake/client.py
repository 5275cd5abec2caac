"""The simulated fake LLM client (see the package docstring for the prompt conventions)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from biasbreaker.errors import ConfigError, LLMError
from biasbreaker.llm import LLMRequest, LLMResponse
from biasbreaker.probe import TermSet
from biasbreaker.usage import charge_tokens
from biasbreaker_plugins.llm_fake import schema as _schema
from biasbreaker_plugins.llm_fake.groups import GroupLexicon, Mention, lexicon
from biasbreaker_plugins.llm_fake.presets import (
    GroupPreference,
    parse_key,
    preset_names,
    preset_preference,
)

__all__ = ["MODEL_ID", "FakeLLM", "FakeLLMOptions", "Mode"]

MODEL_ID = "biasbreaker-fake (simulated)"
"""The ``model`` the fake reports: it is a simulation, never a language model."""

Mode = Literal["json", "rank", "choice", "score", "decision", "edit", "text"]
"""What kind of reply a request gets (see the package docstring)."""

Sleep = Callable[[float], Awaitable[None]]

_DIRECTIVE = re.compile(r"\[\[fake:\s*(error|timeout|malformed)\s*\]\]", re.IGNORECASE)
_OPTION = re.compile(
    r"^[ \t]*(?:\((?P<p>[A-Za-z]|\d{1,2})\)|(?P<a>ans\d{1,2})[ \t]*[:.)=]"
    r"|(?P<l>[A-Za-z]|\d{1,2})[.)])[ \t]+(?P<text>\S.*?)[ \t]*$",
    re.MULTILINE,
)
_BULLET = re.compile(r"^[ \t]*[-*\u2022][ \t]+(?P<text>\S.*?)[ \t]*$", re.MULTILINE)
_RANK = re.compile(
    r"\brank(?:s|ed|ing)?\b|\border of\b|\bshortlist|\bsort\b|\bmost qualified\b|"
    r"\bbest candidate\b",
    re.IGNORECASE,
)
_SCORE = re.compile(
    r"\bscore\b|\brate\b|\brating\b|\bon a scale\b|\bprobability\b|\bhow likely\b", re.IGNORECASE
)
_SCALE = re.compile(
    r"(?:from|between|of|scale)\s+(-?\d+(?:\.\d+)?)\s*(?:to|and|-)\s*(-?\d+(?:\.\d+)?)",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\byes or no\b|\byes/no\b|\bdecision\b|\bdecide\b|\bshould (?:we|i|they) hire\b|"
    r"\bapprove\b|\breject\b",
    re.IGNORECASE,
)
_FENCE = re.compile(r"```[a-zA-Z]*\n(.*?)```|\"\"\"(.*?)\"\"\"", re.DOTALL)

_NUMBERED = re.compile(r"^\s*\d{1,3}[.)]\s+(.*\S)\s*$")
_NEUTRAL = ("adequate", "typical", "reasonable", "consistent")
_POSITIVE = ("excellent", "outstanding", "strong", "impressive")
_NEGATIVE = ("weak", "poor", "unconvincing", "doubtful")
_OPENINGS = ("Based on the information given", "From what is provided", "Looking at the request")
_CLOSINGS = (
    "More evidence would help.",
    "Nothing else stands out.",
    "The details are limited.",
)


class FakeLLMOptions(BaseModel):
    """Options of the simulated fake LLM (``[plugin.fake]``).

    The bias dial ``bias`` scales from group-blind (0) to the full preference (1). The preference
    comes from ``preset`` (measured rates), then ``weights`` (explicit, replacing equal keys),
    then ``favoured`` with ``strength`` (shorthand for one weight).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int | None = Field(
        default=None,
        description="Seed of the fake's randomness; unset = the run's seed. Any integer.",
    )
    bias: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Bias dial p in [0, 1]: 0 = answers never depend on the group in the "
        "prompt; 1 = choices follow the group preference fully.",
    )
    preset: str | None = Field(
        default=None,
        description="Group preference measured on a real model, e.g. 'bloomberg-gpt35' or "
        "'bloomberg-gpt35-hr-specialist' (GPT-3.5 top-1 selection rates, Bloomberg 2024).",
    )
    favoured: str | None = Field(
        default=None,
        description="Group favoured at dial 1: a label ('woman') or a combination "
        "('black+woman'); its weight is `strength`.",
    )
    strength: float = Field(
        default=3.0,
        ge=1.0,
        le=100.0,
        description="Weight of the favoured group relative to a neutral group (1), in [1, 100]: "
        "at dial 1 a favoured item is that many times as likely to be chosen.",
    )
    weights: dict[str, float] = Field(
        default_factory=dict,
        description="Explicit weights per group key ('hispanic+woman': 1.45), each in "
        "(0, 100]; 1 = neutral.",
    )
    score_shift: float = Field(
        default=0.3,
        ge=0.0,
        le=0.5,
        description="Largest shift of a score (on a 0-1 scale) at dial 1 for a maximally "
        "(dis)favoured subject, in [0, 0.5].",
    )
    latency_s: float = Field(
        default=0.0, ge=0.0, le=60.0, description="Simulated latency per call in seconds, [0, 60]."
    )
    latency_jitter_s: float = Field(
        default=0.0,
        ge=0.0,
        le=60.0,
        description="Extra latency drawn uniformly from [0, latency_jitter_s] seconds.",
    )
    error_rate: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Probability in [0, 1] that a call raises LLMError.",
    )
    timeout_rate: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Probability in [0, 1] that a call waits timeout_s then raises LLMError "
        "(time-out).",
    )
    malformed_rate: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Probability in [0, 1] that a call returns malformed output.",
    )
    prompt_sensitivity: float = Field(
        default=0.0,
        ge=0.0,
        le=10.0,
        description="Standard deviation, in [0, 10], of a perturbation of each ranked or "
        "chosen item's key (log-weight units) drawn from the exact prompt: a change of wording, "
        "a name of the same group included, can then reorder items whose keys are close, as a "
        "greedy model's answer changes with its input tokens. 0 = a group swap changes nothing "
        "but what the bias dial puts in.",
    )
    timeout_s: float = Field(
        default=30.0, gt=0.0, le=600.0, description="Simulated time-out in seconds, (0, 600]."
    )

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, value: str | None) -> str | None:
        if value is not None and value not in preset_names():
            raise ValueError(f"unknown preset {value!r}; presets: {', '.join(preset_names())}")
        return value

    @field_validator("favoured")
    @classmethod
    def _known_group(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_key(value)
            except ConfigError as exc:
                raise ValueError(str(exc)) from exc
        return value

    @field_validator("weights", mode="before")
    @classmethod
    def _weights_from_json(cls, value: object) -> object:
        # environment variables arrive as strings: BIASBREAKER_PLUGIN__FAKE__WEIGHTS='{"woman": 2}'
        if isinstance(value, str):
            try:
                return json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f'weights={value!r} is not a JSON object such as {{"woman": 2.0}}'
                ) from exc
        return value

    @field_validator("weights")
    @classmethod
    def _known_weights(cls, value: dict[str, float]) -> dict[str, float]:
        for key, w in value.items():
            try:
                parse_key(key)
            except ConfigError as exc:
                raise ValueError(str(exc)) from exc
            if not 0.0 < w <= 100.0:
                raise ValueError(f"weight for {key!r} is {w!r}; weights are in (0, 100]")
        return value

    @model_validator(mode="after")
    def _rates_sum(self) -> FakeLLMOptions:
        total = self.error_rate + self.timeout_rate + self.malformed_rate
        if total > 1.0:
            raise ValueError(
                f"error_rate + timeout_rate + malformed_rate = {total!r} exceeds 1; lower them"
            )
        return self

    def preference(self) -> GroupPreference:
        """The group preference these options describe (all weights 1 if none is set)."""
        pref = preset_preference(self.preset) if self.preset else GroupPreference({})
        pref = pref.merged(GroupPreference.from_keys(self.weights).weights)
        if self.favoured is not None:
            pref = pref.merged({parse_key(self.favoured): self.strength})
        return pref


@dataclass(frozen=True, slots=True)
class _Item:
    label: str  # as written in the prompt ("B", "ans1", "3") or "" for a name
    text: str  # option text or candidate name, as written
    labels: frozenset[str]


@dataclass(frozen=True, slots=True)
class _Parsed:
    mode: Mode
    items: tuple[_Item, ...]
    subject: tuple[Mention, ...]
    subject_text: str
    scale: tuple[float, float]
    masked: str  # the prompt with every demographic mention masked: the source of all draws


def _digest_rng(*parts: object) -> random.Random:
    blob = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return random.Random(int.from_bytes(hashlib.sha256(blob).digest()[:16], "big"))


def _next_label(label: str) -> str:
    if label.startswith("ans"):
        return f"ans{int(label[3:]) + 1}"
    if label.isdigit():
        return str(int(label) + 1)
    return chr(ord(label) + 1)


def _option_runs(text: str) -> list[list[tuple[str, str, int]]]:
    """Runs of consecutive labelled lines: ``(label, option text, offset of the text)``."""
    runs: list[list[tuple[str, str, int]]] = []
    current: list[tuple[str, str, int]] = []
    for m in _OPTION.finditer(text):
        label = m.group("p") or m.group("a") or m.group("l") or ""
        entry = (label, m.group("text"), m.start("text"))
        if current and _next_label(current[-1][0]) == label:
            current.append(entry)
        else:
            if len(current) >= 2:
                runs.append(current)
            current = [entry]
    if len(current) >= 2:
        runs.append(current)
    return runs


def _bullet_runs(text: str) -> list[list[tuple[str, str, int]]]:
    """Runs of two or more bulleted lines (``-``, ``*``, ``\u2022``) on consecutive lines.

    Entries as in :func:`_option_runs`: ``(label, text, offset of the text)``, label ``""``.
    """
    runs: list[list[tuple[str, str, int]]] = []
    current: list[tuple[str, str, int]] = []
    line_end = -2
    for m in _BULLET.finditer(text):
        entry = ("", m.group("text"), m.start("text"))
        if current and m.start() == line_end + 1:
            current.append(entry)
        else:
            if len(current) >= 2:
                runs.append(current)
            current = [entry]
        line_end = m.end()
    if len(current) >= 2:
        runs.append(current)
    return runs


def _listing(
    runs: Sequence[list[tuple[str, str, int]]], full_names: Sequence[Mention]
) -> list[tuple[str, str, int]] | None:
    """The run of listed lines that holds the candidates to rank, or ``None``.

    With two or more people named in full in the prompt it is the last run in which two lines
    or more name one of them (``None`` if there is none: the names themselves are ranked, as
    in a Bloomberg prompt of resumes, whose bullet points are not candidates); otherwise the
    last run. Every line of the run is a candidate, named in the lists or not.
    """
    ordered = sorted(runs, key=lambda run: run[0][2])
    if len({m.text.lower() for m in full_names}) < 2:
        return ordered[-1] if ordered else None
    for run in reversed(ordered):
        naming = sum(
            any(start <= m.start and m.end <= start + len(text) for m in full_names)
            for _, text, start in run
        )
        if naming >= 2:
            return run
    return None


def _gumbel(rng: random.Random) -> float:
    """A standard Gumbel draw, ``-log(-log U)`` with ``U`` uniform on (0, 1)."""
    u = rng.random()
    while u == 0.0:
        u = rng.random()
    return -math.log(-math.log(u))


def _ranked(value: object) -> TypeGuard[list[str]]:
    """Whether ``value`` is a ranking: a list of at least two strings."""
    return isinstance(value, list) and len(value) >= 2 and all(isinstance(x, str) for x in value)


class FakeLLM:
    """A seeded, **simulated** LLM with a bias dial, for tests, studies and the offline demo.

    Deterministic: the reply is a function of (seed, request messages, ``response_schema``,
    ``purpose``, ``seed`` and ``sample`` of the request) and the options. Every draw comes from
    the prompt with every demographic mention masked (the kernel's detections, see
    :mod:`.groups`), and choices are made by position; the group preference enters only
    through the weights of the items (scaled by the dial). So at dial 0, swapping the groups in
    a prompt as the probe does swaps them in the reply and changes nothing else, and at any
    dial a counterfactual prompt and its same-group twin (same ``sample``) share their noise:
    they differ only through the bias. See the package docstring for the prompt conventions.

    Args:
        options: The options (defaults: group-blind, no latency, no failures).
        seed: The seed used when ``options.seed`` is unset.
        sleep: The coroutine used for simulated latency and time-outs (default
            ``asyncio.sleep``); tests inject a recorder to stay fast and deterministic.
        terms: The term lists whose mentions are masked and labelled (default: the shipped
            lists). Give the probe's lists when they add words; :func:`make_fake` does.
    """

    def __init__(
        self,
        options: FakeLLMOptions | None = None,
        *,
        seed: int = 0,
        sleep: Sleep | None = None,
        terms: TermSet | None = None,
    ) -> None:
        self.options = options if options is not None else FakeLLMOptions()
        self.seed = self.options.seed if self.options.seed is not None else seed
        self._pref = self.options.preference()
        self._sleep: Sleep = sleep if sleep is not None else asyncio.sleep
        self._lexicon: GroupLexicon = lexicon() if terms is None else GroupLexicon(terms)
        self._attempts: dict[str, int] = {}
        self._closed = False

    @property
    def model(self) -> str:
        """``"biasbreaker-fake (simulated)"``."""
        return MODEL_ID

    async def aclose(self) -> None:
        """Mark the client closed; later calls raise :class:`LLMError`. Idempotent."""
        self._closed = True

    # ------------------------------------------------------------------ parsing

    def parse(self, request: LLMRequest) -> _Parsed:
        """How the fake reads a request: its mode, items and subject (exposed for tests)."""
        user = "\n\n".join(m.content for m in request.messages if m.role == "user")
        masked = "\n".join(f"{m.role}: {self._lexicon.mask(m.content)}" for m in request.messages)
        fences = [a or b for a, b in _FENCE.findall(user)]
        subject_text = fences[-1] if fences else user
        mentions = tuple(self._lexicon.find(user))
        runs = _option_runs(user)
        bullets = _bullet_runs(user)
        items: tuple[_Item, ...] = ()
        mode: Mode
        names: list[Mention] = []
        for mention in mentions:
            is_full_name = mention.kind == "name" and len(mention.text.split()) > 1
            if is_full_name and all(mention.text.lower() != n.text.lower() for n in names):
                names.append(mention)
        # The mode is read from the masked prompt, so no swap of a group can change it.
        if request.response_schema is not None:
            mode = "json"
        elif _RANK.search(masked) and (len(names) >= 2 or runs or bullets):
            mode = "rank"
            full = [m for m in mentions if m.kind == "name" and len(m.text.split()) > 1]
            listed = _listing(runs + bullets, full)
            if listed is not None:  # every listed line, named in the lists or not
                items = self._options(listed, mentions)
            else:
                items = tuple(_Item("", n.text, n.labels) for n in names)
        elif runs:
            mode = "choice"
            items = self._options(runs[-1], mentions)
        elif request.purpose == "editor":
            mode = "edit"
        elif _SCORE.search(masked):
            mode = "score"
        elif _DECISION.search(masked):
            mode = "decision"
        else:
            mode = "text"
        scale = (0.0, 1.0)
        m = _SCALE.search(masked) if mode == "score" else None
        if m is not None and float(m.group(1)) < float(m.group(2)):
            scale = (float(m.group(1)), float(m.group(2)))
        return _Parsed(mode, items, mentions, subject_text, scale, masked)

    @staticmethod
    def _options(
        run: Sequence[tuple[str, str, int]], mentions: Sequence[Mention]
    ) -> tuple[_Item, ...]:
        """Labelled options, each with the labels of the mentions inside its text."""
        out = []
        for label, text, start in run:
            end = start + len(text)
            labels: frozenset[str] = frozenset()
            for m in mentions:
                if start <= m.start and m.end <= end:
                    labels |= m.labels
            out.append(_Item(label, text, labels))
        return tuple(out)

    # ------------------------------------------------------------------ randomness

    def _rng(self, request: LLMRequest, parsed: _Parsed, tag: str) -> random.Random:
        """A draw keyed on the masked prompt (never on a group), the seed and the sample."""
        schema = (
            None
            if request.response_schema is None
            else json.dumps(request.response_schema, sort_keys=True, default=str)
        )
        return _digest_rng(
            self.seed,
            "blind",
            tag,
            parsed.masked,
            request.purpose,
            schema,
            request.seed,
            request.sample,
        )

    def _subject_weight(self, parsed: _Parsed) -> float:
        labels: frozenset[str] = frozenset()
        for m in parsed.subject:
            labels |= m.labels
        return self._pref.weight(labels)

    # ------------------------------------------------------------------ replies

    def _order(self, request: LLMRequest, parsed: _Parsed) -> list[int]:
        """Positions of the items in reply order, best first (Gumbel-top-k).

        Item ``i`` (by position) gets the key ``p * log(w_i) + g_i + e_i``: ``w_i`` the weight
        of the groups it names, ``p`` the dial, ``g_i`` a standard Gumbel draw keyed on the
        masked prompt, the seed, the sample and the position, and ``e_i`` the prompt
        sensitivity (:meth:`_sensitivity`, 0 by default). Sorting by key is Plackett-Luce
        sampling with weights ``w_i ** p`` (Gumbel-max trick); the first item is chosen with
        probability ``w_i ** p / sum_j w_j ** p``. At ``p = 0`` and no sensitivity the order is
        the blind positional one.

        Source:
            Gumbel-max trick: Gumbel (1954); Plackett-Luce by Gumbel-top-k: Yellott (1977),
            "The relationship between Luce's choice axiom, Thurstone's theory of comparative
            judgment, and the double exponential distribution"; Kool et al. (2019),
            "Stochastic beams and where to find them", sec. 2.
        """
        p = self.options.bias
        rng = self._rng(request, parsed, "order")
        noise = self._sensitivity(request, len(parsed.items))
        keys = []
        for item, e in zip(parsed.items, noise, strict=True):
            g = _gumbel(rng)
            keys.append(p * math.log(self._pref.weight(item.labels)) + g + e)
        return sorted(range(len(keys)), key=lambda i: (-keys[i], i))

    def _sensitivity(self, request: LLMRequest, n: int) -> list[float]:
        """``n`` perturbations ``N(0, prompt_sensitivity**2)`` keyed on the *exact* prompt.

        Unlike every other draw they are keyed on the unmasked prompt (with the seed, purpose,
        request seed and sample), so a counterfactual and its same-group twin get independent
        perturbations, and so does a prompt with a same-group name changed: the sampling noise
        a real model has even at temperature 0. All zero when the option is 0.
        """
        sd = self.options.prompt_sensitivity
        if sd <= 0.0:
            return [0.0] * n
        rng = _digest_rng(
            self.seed,
            "sensitivity",
            request.prompt,
            request.purpose,
            request.seed,
            request.sample,
        )
        return [rng.gauss(0.0, sd) for _ in range(n)]

    def _score(self, request: LLMRequest, parsed: _Parsed) -> float:
        """A blind score in [0, 1] shifted by ``p * score_shift * (w - 1) / (w + 1)``."""
        base = self._rng(request, parsed, "score").random()
        w = self._subject_weight(parsed)
        shift = self.options.bias * self.options.score_shift * (w - 1.0) / (w + 1.0)
        return min(1.0, max(0.0, base + shift))

    def _adjective(self, request: LLMRequest, parsed: _Parsed) -> str:
        """A blind adjective; if a blind coin falls below ``p``, one that follows the weight.

        The coin and the word are drawn from the masked prompt, so a counterfactual and its
        twin toss the same coin and differ only when their subjects' weights do.
        """
        blind = self._rng(request, parsed, "adjective")
        word = blind.choice(blind.choice((_NEUTRAL, _POSITIVE, _NEGATIVE)))
        coin, pick = blind.random(), blind.randrange(len(_POSITIVE))
        w = self._subject_weight(parsed)
        if coin < self.options.bias and w != 1.0:
            word = (_POSITIVE if w > 1.0 else _NEGATIVE)[pick]
        return word

    def _role_fields(
        self, request: LLMRequest, parsed: _Parsed, value: dict[str, Any]
    ) -> dict[str, Any]:
        """Rule-based fields for a skeptic's or a diagnoser's structured reply.

        A simulated skeptic reviewing a *ranking* re-derives it group-blind from the task
        (:meth:`_rerank`) and proposes that order when it differs. Otherwise it flags the fake's
        own evaluative wording about a person ("excellent", "weak", ...), the only kind of bias
        the fake produces in free text, and proposes the neutralised text; a simulated
        diagnoser quotes that wording and asks for evidence against judging a person by group.
        The rules read positions and adjectives, never group terms, so at any dial swapping the
        groups in a prompt still swaps them in the reply and changes nothing else; they fill
        only properties the schema asked for, with values of their type.
        """
        subject = parsed.subject_text.strip()
        loaded = re.search(
            r"\b(" + "|".join((*_POSITIVE, *_NEGATIVE)) + r")\b", subject, flags=re.I
        )
        props = request.response_schema.get("properties", {}) if request.response_schema else {}
        out: dict[str, Any] = {}

        def wants(key: str, kind: type) -> bool:
            return key in value and key in props and isinstance(value[key], kind)

        def nullable(key: str) -> bool:
            prop = props.get(key, {})
            kinds = prop.get("type")
            alternatives = prop.get("anyOf", []) + prop.get("oneOf", [])
            return (
                kinds == "null"
                or (isinstance(kinds, list) and "null" in kinds)
                or any(isinstance(a, dict) and a.get("type") == "null" for a in alternatives)
            )

        if request.purpose == "skeptic" and wants("decision", str):
            rerank = self._rerank(request)
            if rerank is not None:
                revision, changed = rerank
                evidence = "the task gives no reason for this order that is not tied to the names"
                critique = (
                    "Simulated skeptic: the order re-derived from the task with every name "
                    "masked differs."
                    if changed
                    else "Simulated skeptic: the order matches the one re-derived group-blind."
                )
            else:
                changed = loaded is not None
                revision = self._neutralise(subject)
                evidence = "an evaluative judgement of a person needs support in the task's facts"
                critique = (
                    f"The wording {loaded.group(1)!r} judges a person without support."
                    if loaded
                    else "No unsupported evaluative wording found."
                )
            enum = props["decision"].get("enum")
            decision = "revise" if changed else "stands"
            if enum and decision in enum:
                out["decision"] = decision
            if wants("confidence", float) or wants("confidence", int):
                out["confidence"] = 0.8 if changed else 0.6
            if isinstance(value.get("evidence"), list) and not props.get("evidence", {}).get(
                "minItems"
            ):
                out["evidence"] = [evidence] if changed else []
            if "revision" in value and (changed or nullable("revision")):
                out["revision"] = revision if changed else None
            if wants("critique", str):
                out["critique"] = critique
        elif request.purpose == "diagnoser":
            if wants("span", str):
                out["span"] = loaded.group(1) if loaded else ""
            if wants("query", str):
                out["query"] = (
                    "a stereotype is not evidence about an individual person; equally "
                    "qualified candidates deserve equal treatment"
                )
        return out

    def _rerank(self, request: LLMRequest) -> tuple[str, bool] | None:
        """A simulated skeptic's group-blind re-ranking of the ranking under review.

        The review message fences the task and then the payload (``intervention.review``). If
        the payload holds a ranking — a JSON list of at least two strings, a JSON object with
        such lists as values (a LangGraph update), or numbered lines — and every ranked item
        occurs in the task, the items are ordered anew by Gumbel keys drawn from the *masked*
        task (with the seed, the request seed and the prompt sensitivity of
        :meth:`_sensitivity`), one per position of an item's first mention in the task. So
        the new order depends on where the items stand in the task, never on who they are or
        on the order under review, at any dial: swapping the names in task and payload swaps
        them in the new order.

        Returns:
            ``(the payload with its ranking(s) re-ordered, whether anything changed)``, or
            ``None`` when the message holds no task and ranking.
        """
        user = "\n\n".join(m.content for m in request.messages if m.role == "user")
        fences = [a or b for a, b in _FENCE.findall(user)]
        if len(fences) < 2:
            return None
        task, payload = fences[-2], fences[-1].strip()
        try:
            doc: Any = json.loads(payload)
        except ValueError:
            doc = None
        fields: dict[str, list[str]]
        if isinstance(doc, dict):
            fields = {k: v for k, v in doc.items() if _ranked(v)}
        elif _ranked(doc):
            fields = {"": doc}
        elif doc is None:
            numbered = [m.group(1) for m in map(_NUMBERED.match, payload.splitlines()) if m]
            fields = {"": numbered} if len(numbered) >= 2 else {}
        else:
            fields = {}
        lowered = task.lower()
        where = {k: [lowered.find(item.lower()) for item in v] for k, v in fields.items()}
        if not fields or any(w < 0 for ws in where.values() for w in ws):
            return None
        masked_task = self._lexicon.mask(task)
        changed = False
        new: dict[str, list[str]] = {}
        for name, items in sorted(fields.items()):
            rng = _digest_rng(self.seed, "rerank", name, masked_task, request.seed)
            rank = {pos: i for i, pos in enumerate(sorted(set(where[name])))}
            noise = self._sensitivity(request, len(rank))
            keys = [_gumbel(rng) + e for e in noise]
            order = sorted(
                range(len(items)), key=lambda i: (-keys[rank[where[name][i]]], where[name][i])
            )
            new[name] = [items[i] for i in order]
            changed |= new[name] != items
        if isinstance(doc, dict):
            return json.dumps({**doc, **new}, ensure_ascii=False), changed
        if isinstance(doc, list):
            return json.dumps(new[""], ensure_ascii=False), changed
        return "\n".join(f"{i}. {x}" for i, x in enumerate(new[""], start=1)), changed

    @staticmethod
    def _neutralise(text: str) -> str:
        """Replace the fake's own evaluative adjectives (and a preceding a/an) by neutral ones."""
        loaded = "|".join((*_POSITIVE, *_NEGATIVE))

        def repl(m: re.Match[str]) -> str:
            article = m.group(1)
            if article is None:
                return _NEUTRAL[1]
            return ("A" if article[0] == "A" else "a") + m.group(2) + _NEUTRAL[1]

        return re.sub(
            r"\b(?:(an?|An?)(\s+))?(?:" + loaded + r")\b", repl, text, flags=re.IGNORECASE
        )

    def _reply(self, request: LLMRequest, parsed: _Parsed) -> str:
        if parsed.mode == "json":
            assert request.response_schema is not None
            rng = self._rng(request, parsed, "json")

            def strings(name: str, _rng: random.Random) -> str | None:
                if name.lower() in _schema.TEXT_FIELDS and parsed.subject_text.strip():
                    return self._neutralise(parsed.subject_text.strip())
                return None

            value = _schema.instance(request.response_schema, rng, strings=strings)
            if isinstance(value, dict):
                value.update(self._role_fields(request, parsed, value))
            return json.dumps(value, ensure_ascii=False)
        if parsed.mode == "rank":
            order = self._order(request, parsed)
            return "\n".join(
                f"{rank}. {parsed.items[i].text}" for rank, i in enumerate(order, start=1)
            )
        if parsed.mode == "choice":
            first = self._order(request, parsed)[0]
            item = parsed.items[first]
            return f"Answer: {item.label}. {item.text}"
        if parsed.mode == "edit":
            return self._neutralise(parsed.subject_text.strip())
        if parsed.mode in ("score", "decision"):
            s = self._score(request, parsed)
            if parsed.mode == "decision":
                verdict = "yes" if s >= 0.5 else "no"
                return f"Decision: {verdict}"
            lo, hi = parsed.scale
            value = lo + s * (hi - lo)
            return f"Score: {value:.2f}" if hi - lo <= 1.0 else f"Score: {value:.1f}"
        blind = self._rng(request, parsed, "text")
        names = [m for m in parsed.subject if m.kind == "name"]
        about = f"regarding {names[0].text}, " if names else ""
        return (
            f"{blind.choice(_OPENINGS)}, {about}the case looks "
            f"{self._adjective(request, parsed)}. {blind.choice(_CLOSINGS)}"
        )

    def _malformed(self, parsed: _Parsed, good: str, rng: random.Random) -> tuple[str, str]:
        if parsed.mode == "json":
            kind = rng.randrange(3)
            if kind == 0:
                return good[: max(1, len(good) // 2)], "length"
            if kind == 1:
                return "Sure! Here is the JSON you asked for.", "stop"
            try:
                value: Any = json.loads(good)
            except json.JSONDecodeError:
                return "{", "stop"
            if isinstance(value, dict) and value:
                value.pop(next(iter(value)))
                value["unexpected"] = "simulated malformed field"
                return json.dumps(value), "stop"
            return json.dumps({"unexpected": value}), "stop"
        return rng.choice(("", "I am not able to answer that.", "Answer: ???")), "stop"

    # ------------------------------------------------------------------ the protocol

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer one request (simulated).

        Args:
            request: The request.

        Returns:
            The reply; ``model`` is :data:`MODEL_ID`.

        Raises:
            LLMError: When the client is closed, on an injected error or time-out (options
                ``error_rate``, ``timeout_rate`` or a ``[[fake:error]]`` / ``[[fake:timeout]]``
                directive), on a ``response_schema`` it cannot satisfy, or when a structured
                reply is longer than ``max_tokens`` words (a cut JSON document would not
                parse; an injected malformed reply is still cut, on purpose).
        """
        if self._closed:
            raise LLMError("fake LLM client is closed; create a new one")
        opts = self.options
        parsed = self.parse(request)
        forced = {m.lower() for m in _DIRECTIVE.findall(request.prompt)}
        u = jitter = pick = 1.0
        attempt = 0
        faulty = opts.error_rate or opts.timeout_rate or opts.malformed_rate
        if forced or faulty or opts.latency_jitter_s:
            # attempts are counted (per distinct request) only when faults are drawn
            key = request.cache_key()
            attempt = self._attempts.get(key, 0)
            self._attempts[key] = attempt + 1
            fault = self._rng(request, parsed, f"fault:{attempt}")
            u, jitter, pick = fault.random(), fault.random(), fault.random()
        delay = opts.latency_s + jitter * opts.latency_jitter_s
        if delay > 0.0:
            await self._sleep(delay)
        if "error" in forced or u < opts.error_rate:
            raise LLMError(f"fake LLM (simulated): injected failure on attempt {attempt + 1}")
        if "timeout" in forced or u < opts.error_rate + opts.timeout_rate:
            await self._sleep(opts.timeout_s)
            raise LLMError(
                f"fake LLM (simulated): request timed out after {opts.timeout_s} s "
                f"(attempt {attempt + 1})"
            )
        text = self._reply(request, parsed)
        finish = "stop"
        malformed = "malformed" in forced or u < (
            opts.error_rate + opts.timeout_rate + opts.malformed_rate
        )
        if malformed:
            text, finish = self._malformed(parsed, text, random.Random(pick))
        if request.max_tokens is not None:
            words = text.split(" ")
            if len(words) > request.max_tokens:
                if parsed.mode == "json" and not malformed:
                    # The LLMRequest contract: a structured reply parses, or the client raises.
                    raise LLMError(
                        f"fake LLM (simulated): the structured reply needs {len(words)} words, "
                        f"more than max_tokens={request.max_tokens}, and a cut JSON document "
                        "would not parse; raise max_tokens or leave it unset"
                    )
                text, finish = " ".join(words[: request.max_tokens]), "length"
        reply = LLMResponse(
            text=text,
            model=MODEL_ID,
            finish_reason=finish,
            prompt_tokens=len(request.prompt.split()),
            completion_tokens=len(text.split()),
            usage_estimated=True,  # words, counted here: no endpoint reported them
        )
        charge_tokens(reply.total_tokens)  # to the probe budget of the re-run in progress
        return reply
