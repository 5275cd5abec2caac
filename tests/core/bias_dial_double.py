"""TEST DOUBLE, not the project's fake LLM: a seeded multiple-choice answerer with a bias dial.

It stands in for the ``fake`` llm_client plugin (built on branch ``prop``) until that plugin is
on main. It is an :class:`~biasbreaker.llm.LLMClient` that answers prompts ending in labelled
options (``A. ...``) with ``Answer: <label>. <option>``:

* group-blind part: the option is chosen by position from a seed keyed on the prompt with every
  demographic mention masked (and "a"/"an" before a mask unified) and on ``request.sample`` —
  swapping the groups in a prompt gives the same position, and different samples give
  different answers (sampling noise);
* biased part: with probability ``dial`` (a coin keyed on the unmasked prompt and the sample)
  the option is instead drawn with weights — an option naming a group in ``weights`` weighs
  that much, every other option 1 (the fake's ``weights`` option works the same way).

Simulated behaviour, for tests only.
"""

from __future__ import annotations

import hashlib
import random
import re

from biasbreaker.llm import LLMRequest, LLMResponse, user_messages
from biasbreaker.probe import CounterfactualGenerator

_ARTICLE = re.compile(r"\b[Aa]n?\s+\[MASK\]")
_OPTION = re.compile(r"^\s*([A-Z])[.)]\s+(.*\S)\s*$", re.MULTILINE)


class BiasDialAnswererDouble:
    """Seeded multiple-choice answerer with a bias dial (test double; see the module docstring).

    Args:
        dial: Probability in [0, 1] that an answer follows the group weights.
        weights: Lower-cased group word → weight of an option naming it (1 = neutral).
        seed: Seed.
    """

    model = "bias-dial-answerer-double (test double)"

    def __init__(self, dial: float, weights: dict[str, float], *, seed: int = 0) -> None:
        self.dial = dial
        self.weights = weights
        self.seed = seed
        self._masker = CounterfactualGenerator(seed=seed)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        prompt = user_messages(request.messages)
        options = _OPTION.findall(prompt)
        if len(options) < 2:
            return LLMResponse(text="I cannot tell.", model=self.model)
        masked = _ARTICLE.sub("a [MASK]", str(self._masker.neutralise(prompt)))
        blind = random.Random(_key(self.seed, "blind", masked, request.sample))
        index = blind.randrange(len(options))
        coin = random.Random(_key(self.seed, "coin", prompt, request.sample))
        if coin.random() < self.dial:
            weights = [self._weight(text) for _, text in options]
            index = coin.choices(range(len(options)), weights=weights)[0]
        label, text = options[index]
        return LLMResponse(text=f"Answer: {label}. {text}", model=self.model)

    async def aclose(self) -> None:
        return None

    def _weight(self, option: str) -> float:
        low = option.lower()
        for word, w in self.weights.items():
            if re.search(rf"\b{re.escape(word)}\b", low):
                return w
        return 1.0


def _key(seed: int, kind: str, text: str, sample: int) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return f"{seed}:{kind}:{digest}:{sample}"
