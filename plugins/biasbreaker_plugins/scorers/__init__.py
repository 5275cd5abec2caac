"""First-party scorers of the ``scorer`` extension point.

``lexical``, ``semantic``, ``sentiment`` and ``decision``.

Importing this module is cheap: rouge-score, nltk, vaderSentiment and sentence-transformers
are imported by the factories, when a scorer is selected and built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from biasbreaker.hookspecs import hookimpl
from biasbreaker_plugins.scorers.decision import DecisionOptions
from biasbreaker_plugins.scorers.lexical import LexicalOptions
from biasbreaker_plugins.scorers.semantic import (
    SEMANTIC_INSTALL,
    SEMANTIC_MODULES,
    SemanticOptions,
)
from biasbreaker_plugins.scorers.sentiment import SentimentOptions

if TYPE_CHECKING:
    from biasbreaker.registry import BuildContext, Register
    from biasbreaker_plugins.scorers.decision import DecisionScorer
    from biasbreaker_plugins.scorers.lexical import LexicalScorer
    from biasbreaker_plugins.scorers.semantic import SemanticScorer
    from biasbreaker_plugins.scorers.sentiment import SentimentScorer


def make_lexical(options: LexicalOptions, context: BuildContext) -> LexicalScorer:
    """Build the ``lexical`` scorer."""
    from biasbreaker_plugins.scorers.lexical import LexicalScorer

    return LexicalScorer(options)


def make_semantic(options: SemanticOptions, context: BuildContext) -> SemanticScorer:
    """Build the ``semantic`` scorer (loads the packaged MiniLM model)."""
    from biasbreaker_plugins.scorers.semantic import SemanticScorer

    return SemanticScorer(options)


def make_sentiment(options: SentimentOptions, context: BuildContext) -> SentimentScorer:
    """Build the ``sentiment`` scorer."""
    from biasbreaker_plugins.scorers.sentiment import SentimentScorer

    return SentimentScorer(options)


def make_decision(options: DecisionOptions, context: BuildContext) -> DecisionScorer:
    """Build the ``decision`` scorer."""
    from biasbreaker_plugins.scorers.decision import DecisionScorer

    return DecisionScorer(options)


@hookimpl
def scorer(register: Register[object]) -> None:
    """Register the four first-party scorers."""
    register(
        "lexical",
        make_lexical,
        options=LexicalOptions,
        summary="1 − ROUGE-L / BLEU similarity (LangFair's formulas) on mapped-back text",
    )
    register(
        "semantic",
        make_semantic,
        options=SemanticOptions,
        summary="cosine distance of all-MiniLM-L6-v2 embeddings (semantic extra, offline)",
        requires=SEMANTIC_MODULES,
        install=SEMANTIC_INSTALL,
    )
    register(
        "sentiment",
        make_sentiment,
        options=SentimentOptions,
        summary="VADER sentiment gap",
    )
    register(
        "decision",
        make_decision,
        options=DecisionOptions,
        summary="label flip or normalised rank change of decisions",
    )
