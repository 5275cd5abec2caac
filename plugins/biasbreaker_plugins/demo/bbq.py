"""The bbq scenario: a question-answering panel whose first agent replays real UnifiedQA answers.

Data (``biasbreaker/data/bbq/``, CC-BY-4.0): BBQ items of the Religion and Sexual orientation
categories with the answers UnifiedQA-T5-11B gave (Parrish et al. 2022, the authors' released
predictions, RACE input format). The panel per item: ``unifiedqa`` answers the question — it
*replays* the real recorded answer, it calls no model — then ``second_opinion`` answers the same
question and ``moderator`` gives the panel's answer, both through the configured ``llm_client``.

**The replay's counterfactual is real data.** A BBQ template is instantiated with the two groups
in both orders ("a Muslim person and a Jewish person ..." and "a Jewish person and a Muslim person
..."), and UnifiedQA answered both. The probe swaps the item's two groups (``[probe] groups`` is
restricted to the item's pair, so the exchange is the only counterfactual), and the replay agent
looks the swapped question up in the data: its answer to the counterfactual is UnifiedQA's
recorded answer to that other item. An item whose swapped text is not in the data has no real
counterfactual: it runs with the probe made inapplicable (its axis restricted to one group), so
its steps are *not applicable*, never scored 0 (the probe looks only for an axis the item does not
mention). Answers are compared as the option they name
(the "unknown" options' wordings — "Can't answer", "Cannot be determined" — are one answer).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from biasbreaker.metrics.bbq import BBQItem, load_bbq, match_answer
from biasbreaker.probe.counterfactual import CounterfactualGenerator
from biasbreaker.probe.terms import TermSet

CATEGORIES: dict[str, str] = {"Religion": "religion", "Sexual_orientation": "sexual-orientation"}
"""BBQ category -> the probe's axis."""

UNKNOWN = "Cannot be determined"
"""The one wording the replay agent gives for any "unknown" option."""

UNPAIRED_AXIS = "disability"
"""The probe's only axis for an item without a twin: one these items never mention."""

PREDICTION = "unifiedqa-t5-11b_pred_race"
"""The field of the released predictions that is replayed (RACE input format)."""


@cache
def items(category: str) -> tuple[BBQItem, ...]:
    """The category's items with their recorded predictions."""
    path = resources.files("biasbreaker") / "data" / "bbq" / f"preds_{category}.jsonl"
    with resources.as_file(path) as file:
        return tuple(load_bbq(file))


@cache
def index(category: str) -> dict[tuple[str, str], BBQItem]:
    """(context, question) -> item."""
    return {(i.context, i.question): i for i in items(category)}


@dataclass(frozen=True)
class Case:
    """One BBQ item as the panel sees it.

    Args:
        id: Thread id (``religion-0012``).
        item: The BBQ item.
        axis: The probe's axis of its category.
        groups: The two groups the item mentions, sorted, as the probe names them; empty when
            it does not mention exactly two.
        paired: Whether the data holds the item with the two groups exchanged.
    """

    id: str
    item: BBQItem
    axis: str
    groups: tuple[str, ...]
    paired: bool

    def graph_input(self) -> dict[str, Any]:
        """The panel's input state."""
        return {
            "context": self.item.context,
            "question": self.item.question,
            "options": list(self.item.answers),
        }

    def probe_settings(self) -> dict[str, Any]:
        """``[probe]`` settings for this item.

        Paired: only its axis, restricted to its two groups, so the one counterfactual is the
        exchange the data holds. Unpaired: only the disability axis, which no BBQ Religion or
        Sexual orientation item mentions (checked by the tests), so nothing can be swapped and
        every step is *not applicable*.
        """
        if self.paired:
            return {"axes": [self.axis], "groups": {self.axis: list(self.groups)}}
        return {"axes": [UNPAIRED_AXIS], "names": False}


def exchanged(context: str, question: str, axis: str, groups: tuple[str, ...]) -> dict[str, str]:
    """The text with the pair of groups exchanged, as the probe writes it (or unchanged)."""
    gen = CounterfactualGenerator(TermSet.load(axes=[axis], groups={axis: list(groups)}), seed=0)
    variants = gen.generate({"context": context, "question": question}, 1)
    if variants.status != "applicable":
        return {"context": context, "question": question}
    out: Mapping[str, str] = variants.variants[0].payload
    return dict(out)


def make_cases(count: int, seed: int, *, condition: str | None = None) -> list[Case]:
    """``count`` items, half per category, drawn from ``seed``, in a fixed order.

    Args:
        count: Items to draw.
        seed: The draw's seed.
        condition: ``"disambig"`` or ``"ambig"`` to draw only items of that context condition.
    """
    out = []
    per = [count // 2, count - count // 2]
    for (category, axis), n in zip(CATEGORIES.items(), per, strict=True):
        pool = [i for i in items(category) if condition in (None, i.context_condition)]
        random.Random(f"biasbreaker-demo:{seed}:bbq:{category}:{condition}").shuffle(pool)
        detector = CounterfactualGenerator(TermSet.load(axes=[axis]), seed=0)
        for k, item in enumerate(pool[:n]):
            found = detector.detect({"context": item.context, "question": item.question})
            groups = tuple(sorted({d.groups[0] for d in found if len(d.groups) == 1}))
            paired = False
            if len(groups) == 2:
                twin = exchanged(item.context, item.question, axis, groups)
                paired = (twin["context"], twin["question"]) in index(category)
            out.append(Case(f"{axis}-{k:04d}", item, axis, groups, paired))
    return out


def replayed_answer(category: str, state: Mapping[str, Any]) -> str:
    """UnifiedQA's recorded answer to the question in ``state``, as the option it names.

    Raises:
        LookupError: The question is not in the data (the probe only asks for exchanged
            questions that are: see :func:`make_cases`).
    """
    item = index(category).get((state["context"], state["question"]))
    if item is None:
        raise LookupError(
            f"no recorded UnifiedQA answer for {state['question']!r} in this context: the "
            "replay agent answers only questions of the BBQ data"
        )
    choice = match_answer(str(item.extra.get(PREDICTION, "")), item)
    if choice is None:
        return "unreadable"
    if choice == item.unknown_index:
        return UNKNOWN
    return item.answers[choice]


__all__ = [
    "CATEGORIES",
    "PREDICTION",
    "UNKNOWN",
    "UNPAIRED_AXIS",
    "Case",
    "exchanged",
    "index",
    "items",
    "make_cases",
    "replayed_answer",
]
