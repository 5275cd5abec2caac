"""The scorers and metrics on real outputs: the figures docs/detection.md §6 quotes.

Run ``python docs/studies/validation.py`` to regenerate ``docs/studies/validation.md``;
``--check`` regenerates it in memory and exits 1 when the committed file, or a passage
docs/detection.md quotes from it, differs (``tests/test_validation_study.py`` runs it; the
cosine needs the ``semantic`` extra: sentence-transformers and the packaged all-MiniLM-L6-v2).

Three real data sets, all in the repository:

* **LangFair** (``tests/data/langfair``): 75 male/female response pairs from Azure OpenAI at
  temperature 1 and the metrics LangFair's AutoEval published on them; 3 white/Hispanic pairs
  with LangFair's reference values. Our ``semantic``, ``lexical`` and ``sentiment`` scorers
  recompute them.
* **Bloomberg** (``tests/data/bloomberg``, ``core/biasbreaker/data/hiring``): 8,000 GPT-3.5 and
  GPT-4 rankings of eight equally qualified resumes and the authors' ``performance_ranking.csv``;
  :func:`biasbreaker.metrics.decision.selection_rates` recounts the top-1 rates.
* **BBQ** (``core/biasbreaker/data/bbq``): UnifiedQA-T5-11B answers to the Religion and
  Sexual_orientation questions; :func:`biasbreaker.metrics.bbq.bbq_scores` scores them.
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
import textwrap
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from biasbreaker.metrics.bbq import bbq_scores, load_bbq
from biasbreaker.metrics.decision import selection_rates
from biasbreaker.probe import (
    CounterfactualGenerator,
    CounterfactualMapping,
    ResponsePair,
    score_pairs,
)
from biasbreaker_plugins.quoted import WIDTH, block, study_main
from biasbreaker_plugins.scorers.lexical import LexicalScorer
from biasbreaker_plugins.scorers.sentiment import SentimentOptions, SentimentScorer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
REPORT = HERE / "validation.md"
DOC = HERE.parent / "detection.md"
LANGFAIR = ROOT / "tests" / "data" / "langfair"
RANKINGS = ROOT / "tests" / "data" / "bloomberg" / "rankings_compact.jsonl.gz"
PUBLISHED = ROOT / "core" / "biasbreaker" / "data" / "hiring" / "performance_ranking.csv"
BBQ = ROOT / "core" / "biasbreaker" / "data" / "bbq"
BBQ_CATEGORIES = ("Religion", "Sexual_orientation")
RESAMPLES_PER_PROMPT = 25
"""LangFair drew 25 responses per prompt: the next male response to the same prompt is a
response's same-group resample."""

TOLERANCE = {"cosine": "1e-3", "rouge": "5e-3", "bleu": "5e-3", "vader": "1e-9"}
"""How far ours may be from LangFair's published figure (the reasons: docs/detection.md §6)."""

EMBEDDING_TOLERANCE = 1e-6
"""How far each of our MiniLM embedding components may be from LangFair's reference file: the
largest difference is a few 1e-7 and moves with the CPU's float kernels (4e-7 on one machine,
3e-7 on another), so the study states the bound, not the digit."""


def _fill(text: str) -> str:
    return textwrap.fill(text, WIDTH, break_on_hyphens=False)


def _met(ours: float, published: float, tolerance: str) -> str:
    return tolerance + ("" if abs(ours - published) <= float(tolerance) else " **exceeded**")


def langfair_gender() -> dict[str, Any]:
    """LangFair's AutoEval output: ``male``, ``female`` (75 responses each), ``published``."""
    doc = json.loads((LANGFAIR / "autoeval_results_file.json").read_text(encoding="utf-8"))
    data = doc["counterfactual_responses"]["gender"]["data"]
    return {
        "male": data["male_response"],
        "female": data["female_response"],
        "published": doc["counterfactual_metrics"],
    }


def langfair_race() -> dict[str, Any]:
    """LangFair's 3 white/Hispanic pairs (``text1``, ``text2``) and its ``reference`` values."""
    pairs = json.loads((LANGFAIR / "counterfactual_data_file.json").read_text(encoding="utf-8"))
    ref = json.loads((LANGFAIR / "counterfactual_results_file.json").read_text(encoding="utf-8"))
    return {"text1": pairs["text1"], "text2": pairs["text2"], "reference": ref}


def langfair_passages() -> dict[str, str]:
    """``langfair: gender`` (the table) and ``langfair: more`` (race pairs, map-back, floor).

    Raises:
        ImportError: Without the ``semantic`` extra (the cosine's model).
    """
    from biasbreaker_plugins.scorers.semantic import SemanticOptions, SemanticScorer

    lf = langfair_gender()
    male, female, published = lf["male"], lf["female"], lf["published"]
    semantic = SemanticScorer(SemanticOptions(neutralised=False))
    sentiment = SentimentScorer(SentimentOptions(neutralised=False))
    lexical = LexicalScorer()
    gen = CounterfactualGenerator()

    def mask(t: str) -> str:
        return str(gen.neutralise(t, axes=["gender"], names=False))

    cosine = semantic.report(male, female)["Cosine Similarity"]
    masked = lexical.report([mask(t) for t in male], [mask(t) for t in female])
    raw = lexical.report(male, female)
    vader = sentiment.report(male, female)["Sentiment Bias (strict parity)"]
    rows = [
        ("Cosine similarity (all-MiniLM-L6-v2)", "Cosine Similarity", cosine, "cosine", 5,
         "raw text, as LangFair"),
        ("ROUGE-L similarity", "RougeL Similarity", masked["RougeL Similarity"], "rouge", 5,
         "both sides masked for gender (`--neutralise mask --axis gender --no-names`)"),
        ("BLEU similarity", "Bleu Similarity", masked["Bleu Similarity"], "bleu", 5, "same"),
        ("Sentiment bias, strict parity (VADER neg)", "Sentiment Bias", vader, "vader", 5,
         "raw text"),
    ]  # fmt: skip
    table = [
        "| metric | LangFair published | ours | tolerance | how |",
        "|---|---|---|---|---|",
    ]
    for name, key, ours, tol, digits, how in rows:
        pub = float(published[key])
        fmt = f".{digits}g"
        table.append(
            f"| {name} | {pub:{fmt}} | {ours:{fmt}} | {_met(ours, pub, TOLERANCE[tol])} | {how} |"
        )

    race = langfair_race()
    ref = race["reference"]
    r_lex = lexical.report(race["text1"], race["text2"])
    r_sent = sentiment.report(race["text1"], race["text2"])
    r_cos = semantic.report(race["text1"], race["text2"])["Cosine Similarity"]
    embedded = semantic._model.encode(race["text1"] + race["text2"])
    flat = [v for group in ref["embeddings"] for v in group]
    worst = max(
        abs(a - b) for u, v in zip(flat, embedded, strict=True) for a, b in zip(u, v, strict=True)
    )
    race_equal = (
        abs(r_lex["RougeL Similarity"] - float(ref["test3"])) <= 1e-9
        and abs(r_lex["Bleu Similarity"] - float(ref["test1"])) <= 1e-6 * float(ref["test1"])
        and abs(r_cos - float(ref["test2"])) <= 1e-4
        and r_sent["Sentiment Bias (strict parity)"] == float(ref["test4"])
        and r_sent["Sentiment Bias (weak parity)"] == float(ref["test5"])
    )
    swap = CounterfactualMapping("gender", (("male", "female"), ("female", "male")))
    mapped = lexical.report(male, [str(gen.map_back(t, swap)) for t in female])
    pairs = [
        ResponsePair(
            male[i],
            female[i],
            resample=male[
                (i // RESAMPLES_PER_PROMPT) * RESAMPLES_PER_PROMPT
                + (i % RESAMPLES_PER_PROMPT + 1) % RESAMPLES_PER_PROMPT
            ],
        )
        for i in range(len(male))
    ]
    floor_lex = score_pairs(
        pairs, [LexicalScorer()], neutralisation="mask", mask_axes=["gender"], mask_names=False
    ).scorers[0]
    floor_sent = score_pairs(pairs, [SentimentScorer()], neutralisation="none").scorers[0]

    def excess(s: Any) -> str:
        low, high = s.excess_ci
        return f"excess {s.excess:.3f} with 95% interval [{low:.3f}, {high:.3f}]".replace("-", "−")

    more = (
        f"Not neutralising at all moves ours by "
        f"{abs(raw['RougeL Similarity'] - masked['RougeL Similarity']):.3f} (ROUGE-L) and "
        f"{abs(raw['Bleu Similarity'] - masked['Bleu Similarity']):.3f} (BLEU). LangFair's "
        f"three race pairs: ROUGE-L {r_lex['RougeL Similarity']:.5f}, BLEU "
        f"{r_lex['Bleu Similarity']:.3g}, cosine {r_cos:.5f} (the 384-d embeddings "
        + (
            f"within {EMBEDDING_TOLERANCE:g}"
            if worst <= EMBEDDING_TOLERANCE
            else f"**{worst:.1g} apart**, beyond {EMBEDDING_TOLERANCE:g}"
        )
        + f"), strict parity {r_sent['Sentiment Bias (strict parity)']:g} and weak "
        f"parity {r_sent['Sentiment Bias (weak parity)']:g} — "
        + ("all equal to its reference file." if race_equal else "**not all** equal to its "
           "reference file.")
        + f" Mapping the female responses back to male terms (our probe's way) instead of "
        f"masking both sides gives ROUGE-L {mapped['RougeL Similarity']:.4f} and BLEU "
        f"{mapped['Bleu Similarity']:.4f}. The noise floor on the same data, pairing each male "
        "response with the next male response to the same prompt as its same-group resample: "
        f"lexical divergence male↔female {floor_lex.counterfactual:.4f}, male↔male "
        f"{floor_lex.same_group:.4f}, {excess(floor_lex)}; sentiment (compound) "
        f"{floor_sent.counterfactual:.4f} vs {floor_sent.same_group:.4f}, {excess(floor_sent)}"
        + (
            ": both intervals include 0, so the raw male/female gap LangFair reports is "
            "sampling noise."
            if all(
                f.excess_ci is not None and f.excess_ci[0] < 0 < f.excess_ci[1]
                for f in (floor_lex, floor_sent)
            )
            else ": not both intervals include 0."
        )
    )  # fmt: skip
    return {"langfair: gender": "\n".join(table), "langfair: more": _fill(more)}


def bloomberg_runs() -> dict[tuple[str, str], list[tuple[str, list[str], list[str]]]]:
    """The 1,000 top-level runs per model × job the authors counted (not ``oversampled/``)."""
    out: dict[tuple[str, str], list[tuple[str, list[str], list[str]]]] = defaultdict(list)
    with gzip.open(RANKINGS, "rt", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if not rec["oversampled"]:
                out[(rec["model_dir"], rec["job"])].append(
                    (rec["response"], rec["default_order"], rec["demo_order"])
                )
    return out


def bloomberg_published() -> dict[tuple[str, str], dict[str, dict[str, float]]]:
    """(model, job) -> group -> the published ``top``, ``rate`` and ``ratio``."""
    out: dict[tuple[str, str], dict[str, dict[str, float]]] = defaultdict(dict)
    with PUBLISHED.open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            out[(row["model"], row["job"])][row["demo"]] = {
                "top": float(row["top"]),
                "rate": float(row["selection_rate"]),
                "ratio": float(row["disparate_impact_ratio"]),
            }
    return out


def bloomberg_passage() -> str:
    """``bloomberg``: first-mention against the published table, then strict parsing."""
    runs, published = bloomberg_runs(), bloomberg_published()
    same = unparseable_first = unparseable = 0
    worst_rate = worst_ratio = 0.0
    rows = [
        "| model | job | unparseable (strict) | max Δrate | max ΔDI | lowest impact ratio |",
        "|---|---|---|---|---|---|",
    ]
    for key in sorted(runs):
        first = selection_rates(runs[key], mode="first-mention")
        strict = selection_rates(runs[key])
        pub = published[key]
        unparseable_first += first.n_unparseable
        same += all(first.top[g] == p["top"] for g, p in pub.items())
        unparseable += strict.n_unparseable
        d_rate = max(abs(strict.rates[g] - p["rate"]) for g, p in pub.items())
        d_ratio = max(abs(strict.impact_ratios[g] - p["ratio"]) for g, p in pub.items())
        worst_rate, worst_ratio = max(worst_rate, d_rate), max(worst_ratio, d_ratio)
        low = min(pub, key=lambda g: pub[g]["ratio"])
        rows.append(
            f"| {key[0]} | {key[1]} | {strict.n_unparseable} | {d_rate:.4f} | {d_ratio:.4f} "
            f"| {low} {pub[low]['ratio']:.3f} |"
        )
    n = sum(len(v) for v in runs.values())
    head = (
        f"With their first-mention rule our per-group top-1 counts equal "
        f"`performance_ranking.csv` on {same} of {len(runs)} model × job pairs "
        f"({unparseable_first} unparseable). Our strict parser counts {unparseable} of the "
        f"{n:,} first places it cannot read (misspelt or invented names, refusals) instead of "
        "crediting the next name:"
    )
    tail = (
        f"Strict rates stay within {worst_rate:.4f} of the published ones; impact ratios, which "
        f"divide by the top rate, move by up to {worst_ratio:.3f}. Lowest ratios are the "
        "published ones (first-mention)."
    )
    return "\n".join([_fill(head), "", *rows, "", _fill(tail)])


def bbq_passage() -> str:
    """``bbq``: UnifiedQA-T5-11B's RACE-format answers per category, and the ARC format's."""
    rows = [
        "| category | items | accuracy | ambiguous acc. | disambiguated acc. | bias "
        "(disambiguated) | bias (ambiguous, paper) | bias (ambiguous, HELM) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    arc = []
    unmatched = 0

    def g(x: float | None) -> str:
        return "—" if x is None else f"{x:.4f}".replace("-", "−")

    for category in BBQ_CATEGORIES:
        items = load_bbq(BBQ / f"preds_{category}.jsonl")
        s = bbq_scores(items, [it.extra["unifiedqa-t5-11b_pred_race"] for it in items])
        a = bbq_scores(items, [it.extra["unifiedqa-t5-11b_pred_arc"] for it in items])
        unmatched += s.n_unmatched
        name = category.replace("_", " ")
        rows.append(
            f"| {name} | {s.n:,} | {g(s.accuracy)} | {g(s.accuracy_ambiguous)} "
            f"| {g(s.accuracy_disambiguated)} | {g(s.bias_disambiguated)} "
            f"| {g(s.bias_ambiguous)} | {g(s.bias_ambiguous_helm)} |"
        )
        arc.append(f"{name} {g(a.accuracy)} / {g(a.bias_disambiguated)} / {g(a.bias_ambiguous)}")
    tail = (
        f"RACE format: {unmatched} answers matched no option. ARC format: "
        + ", ".join(arc)
        + " (accuracy / disambiguated / ambiguous bias)."
    )
    return "\n".join([*rows, "", _fill(tail)])


def passages() -> dict[str, str]:
    """Every passage, label -> text, in report order."""
    return {
        **langfair_passages(),
        "bloomberg": bloomberg_passage(),
        "bbq": bbq_passage(),
    }


def report() -> str:
    """``docs/studies/validation.md``: every passage between its markers."""
    parts = [
        "# Scorers and metrics on real outputs",
        "",
        _fill(
            "Generated by `python docs/studies/validation.py` from the real data sets in the "
            "repository (do not edit). docs/detection.md §6 quotes these passages between the "
            "same markers; `--check` (`tests/test_validation_study.py`) fails when this file "
            "or a quoted passage differs from what the script measures."
        ),
    ]
    for label, text in passages().items():
        parts += ["", block(f"validation: {label}", text)]
    return "\n".join(parts) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write the report, or (``--check``) exit 1 naming what differs from it."""
    return study_main(__doc__.splitlines()[0], report, REPORT, DOC, argv)


if __name__ == "__main__":
    sys.exit(main())
