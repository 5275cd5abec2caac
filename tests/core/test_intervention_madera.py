import pytest
from hypothesis import given
from hypothesis import strategies as st

from biasbreaker.errors import InterventionError
from biasbreaker.intervention.madera import Madera
from biasbreaker.intervention.types import Diagnosis, Evidence, ReviewRequest


class Diag:
    def __init__(self):
        self.seen = []

    async def diagnose(self, payload, context):
        self.seen.append(payload)
        return Diagnosis(span=payload[:5], attribute="gender", query="equal qualifications")


class Retr:
    def __init__(self, n=2):
        self.n = n

    def retrieve(self, query, *, top_k):
        return [Evidence(id=f"e{i}", text=f"fact {i}", score=1.0) for i in range(self.n)]


class Edit:
    def __init__(self):
        self.count = 0

    async def rewrite(self, payload, diagnosis, evidence):
        self.count += 1
        return f"rewrite-{self.count}"


def scores(mapping):
    async def rescore(text, diagnosis, evidence):
        assert isinstance(diagnosis, Diagnosis)
        assert all(isinstance(e, Evidence) for e in evidence)
        return mapping[text]

    return rescore


REQ = ReviewRequest(payload="biased", seed=1)


async def test_stops_when_a_rewrite_clears_tau_exit():
    m = Madera(Diag(), Retr(), Edit(), max_rewrites=5)
    res = await m.run(
        "biased", REQ, rescore=scores({"rewrite-1": 0.5, "rewrite-2": 0.1}), tau_exit=0.2
    )
    assert res.converged and res.stop_reason == "converged"
    assert len(res.attempts) == 2 and res.best.text == "rewrite-2"


async def test_budget_returns_the_best_attempt_not_the_last():
    diag = Diag()
    m = Madera(diag, Retr(), Edit(), max_rewrites=3)
    res = await m.run(
        "biased",
        REQ,
        tau_exit=0.1,
        rescore=scores({"rewrite-1": 0.4, "rewrite-2": 0.3, "rewrite-3": 0.35}),
    )
    assert not res.converged and res.stop_reason == "budget"
    assert res.best.text == "rewrite-2" and res.attempts[-1].text == "rewrite-3"
    # each round works from the best text so far
    assert diag.seen == ["biased", "rewrite-1", "rewrite-2"]


async def test_no_evidence_means_no_rewrite():
    edit = Edit()
    res = await Madera(Diag(), Retr(n=0), edit).run("biased", REQ, rescore=scores({}), tau_exit=0.2)
    assert res.stop_reason == "no-evidence" and res.best is None and edit.count == 0


async def test_top_k_bounds_the_evidence():
    class Greedy(Retr):
        def retrieve(self, query, *, top_k):
            return super().retrieve(query, top_k=top_k)  # ignores top_k: returns n

    got = []

    class Spy(Edit):
        async def rewrite(self, payload, diagnosis, evidence):
            got.append(len(evidence))
            return await super().rewrite(payload, diagnosis, evidence)

    await Madera(Diag(), Greedy(n=9), Spy(), max_rewrites=1, top_k=2).run(
        "b", REQ, rescore=scores({"rewrite-1": 0.0}), tau_exit=0.1
    )
    assert got == [2]


@given(
    st.integers(1, 8), st.lists(st.floats(0.0, 1.0), min_size=8, max_size=8), st.floats(0.0, 1.0)
)
async def test_rewriting_is_bounded_and_best_is_the_minimum(max_rewrites, values, tau):
    mapping = {f"rewrite-{i + 1}": v for i, v in enumerate(values)}
    edit = Edit()
    res = await Madera(Diag(), Retr(), edit, max_rewrites=max_rewrites).run(
        "b", REQ, rescore=scores(mapping), tau_exit=tau
    )
    assert edit.count == len(res.attempts) <= max_rewrites
    assert res.best.score == min(a.score for a in res.attempts)
    assert res.converged == (res.best.score < tau)


async def test_bad_stage_results_fail_the_loop():
    with pytest.raises(InterventionError, match="rescore"):
        await Madera(Diag(), Retr(), Edit()).run(
            "b", REQ, rescore=scores({"rewrite-1": -1}), tau_exit=0.1
        )

    class BadRetr:
        def retrieve(self, query, *, top_k):
            return ["text"]

    with pytest.raises(InterventionError, match="retriever 'BadRetr' returned list; .*Evidence"):
        await Madera(Diag(), BadRetr(), Edit()).run("b", REQ, rescore=scores({}), tau_exit=0.1)
    with pytest.raises(InterventionError, match="max_rewrites"):
        Madera(Diag(), Retr(), Edit(), max_rewrites=0)


class Raising:
    async def diagnose(self, payload, context):
        raise ValueError("no diagnosis")

    def retrieve(self, query, *, top_k):
        raise RuntimeError("retriever exploded")

    async def rewrite(self, payload, diagnosis, evidence):
        raise OSError("editor down")


@pytest.mark.parametrize(
    ("stage", "expected"),
    [
        ("diagnoser", "diagnoser 'dx' raised ValueError: no diagnosis"),
        ("retriever", "retriever 'nu3-retr' raised RuntimeError: retriever exploded"),
        ("editor", "editor 'ed' raised OSError: editor down"),
    ],
)
async def test_a_stage_that_raises_is_named_with_the_cause_chained(stage, expected):
    stages = {"diagnoser": Diag(), "retriever": Retr(), "editor": Edit(), stage: Raising()}
    names = {"diagnoser": "dx", "retriever": "nu3-retr", "editor": "ed"}
    madera = Madera(stages["diagnoser"], stages["retriever"], stages["editor"], names=names)
    with pytest.raises(InterventionError) as info:
        await madera.run("b", REQ, rescore=scores({"rewrite-1": 0.0}), tau_exit=0.1)
    assert str(info.value) == expected
    assert info.value.__cause__ is not None
