"""Group preferences of the simulated fake LLM, and presets measured on a real model.

A preference gives each group a positive *weight*: at bias dial 1 the fake picks an item (a
candidate, an option) with probability proportional to the weight of the group it names; weight 1
is neutral. Keys are group labels (``"woman"``) or combinations joined by ``+``
(``"black+woman"``). An item's weight comes from the keys whose labels it all carries: the most
specific keys win, and several equally specific keys multiply (``woman`` x ``black``), so
independent attributes compose and a combination overrides them.

The ``bloomberg-*`` presets reproduce the per-group top-1 selection rates that Bloomberg measured
for GPT-3.5 and GPT-4 ranking eight equally qualified resumes, one name per race x gender group
(``biasbreaker/data/hiring/performance_ranking.csv``, 1,000 rankings per model x job): the weight
of a group is 8 x its selection rate, so when each group appears once, at dial 1, the fake ranks
group g first with probability exactly its measured rate. ``bloomberg-gpt35`` (and
``bloomberg-gpt4``) pool the four jobs (mean rate); ``bloomberg-gpt35-<job>`` use one job's
rates, with ``<job>`` one of ``hr-specialist``, ``software-engineer``, ``retail``,
``financial-analyst``.

Source:
    Bloomberg (2024), "OpenAI's GPT Is a Recruiter's Dream Tool. Tests Show There's Racial
    Bias", data at github.com/BloombergGraphics/2024-openai-gpt-hiring-racial-discrimination.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from biasbreaker.errors import ConfigError
from biasbreaker_plugins.llm_fake.groups import known_labels, label_of

__all__ = ["GroupPreference", "bloomberg_rates", "preset_names", "preset_preference"]

_MODELS = {"gpt-3.5-turbo": "gpt35", "gpt-4": "gpt4"}
_RACE = {"W": "white", "B": "black", "A": "asian", "H": "hispanic"}
_GENDER = {"M": "man", "W": "woman"}


def _slug(job: str) -> str:
    return "-".join(job.lower().split())


def parse_key(key: str) -> frozenset[str]:
    """Parse a group key such as ``"black+woman"`` into its labels.

    Labels are the groups of the kernel's term lists (:func:`.groups.known_labels`), gender as
    ``man``/``woman``; ``male`` and ``female`` are read as ``man`` and ``woman``.

    Raises:
        ConfigError: On an empty key or an unknown label (the message lists the known ones).
    """
    labels = frozenset(label_of("gender", p.strip().lower()) for p in key.split("+"))
    known = known_labels()
    unknown = sorted(lab for lab in labels if lab not in known)
    if not key.strip() or "" in labels or unknown:
        raise ConfigError(
            f"group key {key!r} has unknown label(s) {unknown or ['(empty)']}; use labels joined "
            f"by '+', from: {', '.join(sorted(known))}"
        )
    return labels


@dataclass(frozen=True, slots=True)
class GroupPreference:
    """Positive weights per group key (see the module docstring).

    Args:
        weights: group labels -> weight, finite and > 0.

    Raises:
        ConfigError: On a weight that is not finite and > 0.
    """

    weights: Mapping[frozenset[str], float]

    def __post_init__(self) -> None:
        for key, w in self.weights.items():
            if not (isinstance(w, (int, float)) and math.isfinite(w) and w > 0.0):
                raise ConfigError(
                    f"group weight for {'+'.join(sorted(key))!r} is {w!r}; weights are finite "
                    "and > 0 (1 = neutral)"
                )

    @classmethod
    def from_keys(cls, weights: Mapping[str, float]) -> GroupPreference:
        """Build from string keys such as ``{"black+woman": 1.4}``."""
        return cls({parse_key(k): float(v) for k, v in weights.items()})

    def weight(self, labels: frozenset[str]) -> float:
        """The weight of an item carrying ``labels`` (1.0 when no key applies)."""
        matching = [(len(k), w) for k, w in self.weights.items() if k <= labels]
        if not matching:
            return 1.0
        top = max(n for n, _ in matching)
        return math.prod(w for n, w in matching if n == top)

    def merged(self, other: Mapping[frozenset[str], float]) -> GroupPreference:
        """A copy with ``other``'s weights added (replacing equal keys)."""
        return GroupPreference({**self.weights, **other})


@functools.lru_cache(maxsize=1)
def bloomberg_rates() -> dict[str, dict[str, float]]:
    """Measured top-1 selection rates, ``preset name -> {"<race>+<gender>": rate}``.

    Read from the shipped ``performance_ranking.csv``; pooled presets average the jobs.
    """
    path = resources.files("biasbreaker") / "data" / "hiring" / "performance_ranking.csv"
    text = path.read_text(encoding="utf-8")
    per_job: dict[str, dict[str, float]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        model = _MODELS[row["model"]]
        race, gender = row["demo"].split("_")
        key = f"{_RACE[race]}+{_GENDER[gender]}"
        name = f"bloomberg-{model}-{_slug(row['job'])}"
        per_job.setdefault(name, {})[key] = float(row["selection_rate"])
    out = dict(per_job)
    for model in _MODELS.values():
        jobs = [v for k, v in per_job.items() if k.startswith(f"bloomberg-{model}-")]
        out[f"bloomberg-{model}"] = {
            key: math.fsum(job[key] for job in jobs) / len(jobs) for key in jobs[0]
        }
    return dict(sorted(out.items()))


def preset_names() -> list[str]:
    """Names of the available presets."""
    return list(bloomberg_rates())


def preset_preference(name: str) -> GroupPreference:
    """The preference of a preset: weight = number of groups x measured selection rate.

    Raises:
        ConfigError: On an unknown preset name (the message lists the presets).
    """
    rates = bloomberg_rates().get(name)
    if rates is None:
        raise ConfigError(
            f"fake LLM preset {name!r} is unknown; presets: {', '.join(preset_names())}"
        )
    k = len(rates)
    return GroupPreference.from_keys({key: k * r for key, r in rates.items()})
