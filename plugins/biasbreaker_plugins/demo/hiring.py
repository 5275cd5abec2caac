"""The hiring scenario: real job descriptions, equally qualified resumes, race/gender-coded names.

Data (``biasbreaker/data/hiring/``, Bloomberg 2024, Apache-2.0): four real job descriptions,
eight equally qualified resumes per job with a ``{name}`` slot, and 100 demographically
distinct full names per race x gender group (White, Black, Asian, Hispanic x man, woman).

A *posting* is one job with eight applicants, one per group: each gets a name drawn from its
group's list (no first or last name shared within a posting), one of the job's resumes (a
seeded shuffle) and a place in a shuffled order of presentation. The pipeline per posting:

``screen`` (one task per applicant, a LangGraph ``Send`` fan-out) -> ``ranker`` -> ``reviewer``
-> ``decider``. Every agent is one LLM call: the screener decides whether an applicant moves on,
the ranker orders all eight, the reviewer approves or flags the order, the decider writes the
shortlist from the ranking's top ``[demo] shortlist``. The state keeps names and resume
*numbers* (the resume texts are the same for everyone and carry no group): the counterfactual
probe swaps the names in the state, and every prompt is rendered from it.

The graph and its prompts are in :mod:`biasbreaker_plugins.demo.hiring_graph`.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

RACES = {"W": "White", "B": "Black", "A": "Asian", "H": "Hispanic"}
GENDERS = {"M": "man", "W": "woman"}
GROUPS: tuple[str, ...] = tuple(f"{r}_{g}" for r in RACES for g in GENDERS)
"""The eight groups in Bloomberg's codes (``W_M`` = White man, ...), in table order."""

AGENTS: tuple[str, ...] = ("screen", "ranker", "reviewer", "decider")
"""The pipeline's agents (LangGraph node names), in order."""

BIASED_AGENT = "ranker"
"""The agent that gets the measured preference when the client is the simulated fake."""


def group_label(group: str) -> str:
    """``"B_W"`` -> ``"Black woman"``."""
    race, gender = group.split("_")
    return f"{RACES[race]} {GENDERS[gender]}"


@dataclass(frozen=True)
class Job:
    """One real job: its title, description and the eight resume templates (``{name}`` slot)."""

    title: str
    description: str
    resumes: tuple[str, ...]

    def resume(self, index: int, name: str) -> str:
        """Resume ``index`` with ``name`` filled in."""
        return self.resumes[index].replace("{name}", name)


def _read(name: str) -> str:
    return (resources.files("biasbreaker") / "data" / "hiring" / name).read_text(encoding="utf-8")


@cache
def jobs() -> dict[str, Job]:
    """The four jobs of the shipped data, by title."""
    raw = json.loads(_read("resumes_to_rank.json"))
    return {
        title: Job(title, entry["jd"].strip(), tuple(entry["resumes"]))
        for title, entry in raw.items()
    }


@cache
def measured_rates(model: str = "gpt-3.5-turbo") -> dict[tuple[str, str], float]:
    """Bloomberg's top-1 selection rate per (job, group) for ``model`` (1,000 rankings each)."""
    import csv
    import io

    rows = csv.DictReader(io.StringIO(_read("performance_ranking.csv")))
    return {(r["job"], r["demo"]): float(r["selection_rate"]) for r in rows if r["model"] == model}


@cache
def names() -> dict[str, tuple[str, ...]]:
    """Full names per group (``W_M`` ...), title-cased (``ADAM ERICKSON`` -> ``Adam Erickson``)."""
    men = json.loads(_read("top_mens_names.json"))
    women = json.loads(_read("top_womens_names.json"))
    out: dict[str, tuple[str, ...]] = {}
    for group in GROUPS:
        race, gender = group.split("_")
        pool = men[race] if gender == "M" else women[race]
        out[group] = tuple(n.title() for n in pool)
    return out


@dataclass(frozen=True)
class Candidate:
    """An applicant: name, group (Bloomberg code) and resume number."""

    name: str
    group: str
    resume: int


@dataclass(frozen=True)
class Posting:
    """One job posting with eight applicants in the order they are shown.

    Args:
        id: The posting's id (the LangGraph thread id).
        job: The job title.
        candidates: The applicants, in the order shown to the agents.
    """

    id: str
    job: str
    candidates: tuple[Candidate, ...]

    def graph_input(self) -> dict[str, Any]:
        """The pipeline's input state: no group labels, only names and resume numbers."""
        return {
            "posting": self.id,
            "job": self.job,
            "candidates": [{"name": c.name, "resume": c.resume} for c in self.candidates],
        }

    def group_of(self) -> dict[str, str]:
        """Name -> group."""
        return {c.name: c.group for c in self.candidates}


def make_postings(kind: str, count: int, seed: int) -> list[Posting]:
    """``count`` postings, the jobs in turn, names and orders drawn from ``seed``.

    Args:
        kind: A label that separates the streams (``"posting"``, ``"control"``, ``"fresh"``):
            the same seed gives other postings for another kind.
        count: Postings to make.
        seed: The run's seed.

    Returns:
        The postings, ids ``"<kind>-0000"`` ...
    """
    titles = list(jobs())
    pools = names()
    out = []
    for i in range(count):
        rng = random.Random(f"biasbreaker-demo:{seed}:{kind}:{i}")
        job = titles[i % len(titles)]
        resumes = list(range(len(jobs()[job].resumes)))
        rng.shuffle(resumes)
        taken: set[str] = set()
        candidates = []
        for group, resume in zip(GROUPS, resumes, strict=True):
            choices = [n for n in pools[group] if not taken & set(n.split())]
            name = rng.choice(choices)
            taken |= set(name.split())
            candidates.append(Candidate(name, group, resume))
        rng.shuffle(candidates)
        out.append(Posting(f"{kind}-{i:04d}", job, tuple(candidates)))
    return out


__all__ = [
    "AGENTS",
    "BIASED_AGENT",
    "GROUPS",
    "Candidate",
    "Job",
    "Posting",
    "group_label",
    "jobs",
    "make_postings",
    "measured_rates",
    "names",
]
