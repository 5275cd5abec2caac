"""The ``bm25`` retriever: Okapi BM25 over a JSON Lines counter-evidence corpus, via ``bm25s``.

Registered through the ``biasbreaker`` entry-point group like any third-party plugin. The
corpus format is biasbreaker's (``id``, ``text``, optional ``source``; see
``biasbreaker.intervention.corpus``); with no ``corpus`` option the retriever searches
biasbreaker's shipped demo corpus. ``bm25s`` (and numpy) are imported inside the factory, so
loading the plugin costs nothing until it is selected.

Source:
    Robertson & Zaragoza (2009), "The Probabilistic Relevance Framework: BM25 and Beyond";
    Lù (2024), "BM25S: Orders of magnitude faster lexical search via eager sparse scoring",
    arXiv 2407.03618.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from biasbreaker.hookspecs import hookimpl
from biasbreaker.intervention.corpus import CorpusRecord, load_corpus
from biasbreaker.intervention.types import Evidence
from biasbreaker.registry import BuildContext, Register


class BM25Options(BaseModel):
    """Options of the ``bm25`` retriever (``[plugin.bm25]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    corpus: str | None = Field(
        None, description="JSON Lines corpus path (id, text, optional source); unset = demo."
    )
    k1: float = Field(1.5, gt=0.0, le=10.0, description="BM25 term-frequency saturation k1.")
    b: float = Field(0.75, ge=0.0, le=1.0, description="BM25 length normalisation b.")
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = Field(
        "lucene", description="BM25 variant, as named by bm25s."
    )
    stopwords: str | None = Field(
        "en", description="Stop-word list for bm25s.tokenize ('en'), or unset for none."
    )


class BM25Retriever:
    """BM25 search over a fixed corpus.

    Args:
        records: The corpus records.
        options: The plugin options.
    """

    def __init__(self, records: tuple[CorpusRecord, ...], options: BM25Options) -> None:
        import bm25s

        self._bm25s: Any = bm25s
        self.records = records
        self.options = options
        self._index: Any = bm25s.BM25(k1=options.k1, b=options.b, method=options.method)
        tokens = bm25s.tokenize(
            [r.text for r in records], stopwords=options.stopwords, show_progress=False
        )
        self._index.index(tokens, show_progress=False)

    def retrieve(self, query: str, *, top_k: int) -> list[Evidence]:
        """The best ``top_k`` records for ``query`` with a BM25 score > 0, best first.

        Args:
            query: Free-text query.
            top_k: Maximum number of results, >= 1.

        Returns:
            Evidence items (ties broken by corpus order).
        """
        query_tokens = self._bm25s.tokenize(
            [query], stopwords=self.options.stopwords, show_progress=False
        )
        k = min(top_k, len(self.records))
        docs, scores = self._index.retrieve(query_tokens, k=k, show_progress=False)
        hits = [
            (-float(score), int(doc))
            for doc, score in zip(docs[0], scores[0], strict=True)
            if float(score) > 0.0
        ]
        hits.sort()
        return [
            Evidence(
                id=self.records[doc].id,
                text=self.records[doc].text,
                source=self.records[doc].source,
                score=-neg,
            )
            for neg, doc in hits
        ]


def make_bm25(options: BM25Options, context: BuildContext) -> BM25Retriever:
    """Build the ``bm25`` retriever over the configured (or demo) corpus."""
    return BM25Retriever(load_corpus(options.corpus), options)


@hookimpl
def retriever(register: Register[object]) -> None:
    """Register the ``bm25`` retriever."""
    register("bm25", make_bm25, options=BM25Options, summary="Okapi BM25 via bm25s (contrib)")
