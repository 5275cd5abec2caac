import pytest
from hypothesis import given
from hypothesis import strategies as st

from biasbreaker.errors import AggregatorError
from biasbreaker.intervention.invariants import (
    anonymise,
    check_panel_result,
    domain_match,
    is_overconfident,
)
from biasbreaker.intervention.types import (
    PanelResult,
    PrunedVerdict,
    SkepticVerdict,
    TrackRecord,
)


def v(kind, decision, conf, evidence=(), revision=None):
    return SkepticVerdict(
        kind=kind,
        decision=decision,
        confidence=conf,
        evidence=evidence,
        revision=revision if decision != "stands" else None,
        critique=kind[:1],
    )


PANEL = [v("a", "stands", 0.95), v("b", "stands", 0.6), v("c", "revise", 0.7, ("fact",), "fix")]


def test_anonymise_strips_identity_and_labels_by_content():
    anon = anonymise(PANEL)
    assert [a.label for a in anon] == ["v1", "v2", "v3"]
    assert all("kind" not in a.to_json() for a in anon)
    assert anonymise(list(reversed(PANEL))) == anon


@given(st.permutations(range(3)), st.permutations(["x", "y", "z"]))
def test_anonymise_is_invariant_to_order_and_relabelling(order, names):
    record = TrackRecord(counts={"a": (8, 10), "b": (1, 10), "c": (5, 10)})
    renamed = dict(zip(["a", "b", "c"], names, strict=False))
    relabelled = TrackRecord(counts={renamed[k]: c for k, c in record.counts.items()})
    panel = [PANEL[i].model_copy(update={"kind": renamed[PANEL[i].kind]}) for i in order]
    assert anonymise(panel, track_record=relabelled) == anonymise(PANEL, track_record=record)


def test_domain_match():
    assert domain_match("Gender", ["gender", "race"]) == 1.0
    assert domain_match("age", ["gender"]) == 0.0
    assert domain_match(None, ["gender"]) == 0.5
    assert domain_match("age", []) == 0.5


def test_is_overconfident_needs_certainty_and_no_evidence():
    assert is_overconfident(v("a", "stands", 0.95))
    assert not is_overconfident(v("a", "stands", 0.95, ("e",)))
    assert not is_overconfident(v("a", "stands", 0.8))
    with pytest.raises(ValueError, match="threshold"):
        is_overconfident(v("a", "stands", 0.8), 0.4)


def _result(**kw):
    base = dict(decision="stands", confidence=1.0, weights={"v1": 1.0, "v2": 1.0, "v3": 1.0})
    base.update(kw)
    return PanelResult(**base)


def test_check_accepts_a_valid_result():
    anon = anonymise(PANEL)
    assert check_panel_result(_result(), anon, aggregator="x").decision == "stands"


def test_check_rejects_pruning_a_dissenter():
    anon = anonymise(PANEL)
    dissenter = next(a for a in anon if a.decision == "revise")
    bad = _result(
        weights={a.label: 1.0 for a in anon if a is not dissenter},
        pruned=(PrunedVerdict(label=dissenter.label, reason="overconfidence"),),
    )
    with pytest.raises(AggregatorError, match="not overconfident"):
        check_panel_result(bad, anon, aggregator="bad")
    bad = bad.model_copy(
        update={"pruned": (PrunedVerdict(label=dissenter.label, reason="disagrees"),)}
    )
    with pytest.raises(AggregatorError, match="only allowed reason"):
        check_panel_result(bad, anon, aggregator="bad")


def test_check_allows_pruning_an_overconfident_verdict():
    anon = anonymise(PANEL)
    loud = next(a for a in anon if a.confidence == 0.95)
    ok = _result(
        weights={a.label: 1.0 for a in anon if a is not loud},
        pruned=(PrunedVerdict(label=loud.label, reason="overconfidence"),),
    )
    check_panel_result(ok, anon, aggregator="x")


@pytest.mark.parametrize(
    ("result", "match"),
    [
        ("not a result", "must return a PanelResult"),
        (_result(weights={"v1": 1.0, "v2": 1.0}), "silently"),
        (_result(weights={"v1": 1.0, "v2": 1.0, "v3": 0.0}), "weight"),
        (_result(weights={"v1": 1.0, "v2": 1.0, "v3": 1.0, "v9": 1.0}), "not given"),
        (_result(decision="reject"), "no kept verdict"),
        (
            _result(
                weights={"v1": 1.0, "v2": 1.0, "v3": 1.0},
                pruned=(PrunedVerdict(label="v1", reason="overconfidence"),),
            ),
            "both kept",
        ),
    ],
)
def test_check_rejects_malformed_results(result, match):
    with pytest.raises(AggregatorError, match=match):
        check_panel_result(result, anonymise(PANEL), aggregator="x")


def test_the_overconfidence_bound_is_in_half_open_range_and_inclusive():
    sure = v("a", "stands", 0.9)
    assert is_overconfident(sure, 0.9)  # confidence == threshold counts
    assert is_overconfident(v("a", "stands", 1.0), 1.0)  # the upper end is allowed
    for bad in (0.5, 1.5, 2.0):
        with pytest.raises(ValueError, match="threshold"):
            is_overconfident(sure, bad)


def test_options_are_keyword_only():
    anon = anonymise(verdicts=PANEL, track_record=None, attributes=())
    assert check_panel_result(result=_result(), verdicts=anon, aggregator="x")
    with pytest.raises(TypeError):
        anonymise(PANEL, None)
    with pytest.raises(TypeError):
        check_panel_result(_result(), anon, "x")


def _loud_pruned(*reasons):
    anon = anonymise(PANEL)
    loud = next(a for a in anon if a.confidence == 0.95)
    return anon, _result(
        weights={a.label: 1.0 for a in anon if a is not loud},
        pruned=tuple(PrunedVerdict(label=loud.label, reason=r) for r in reasons),
    )


def test_check_rejects_an_unknown_pruned_label_a_double_prune_and_any_other_reason():
    anon, ok = _loud_pruned("overconfidence")
    unknown = ok.model_copy(
        update={"pruned": (*ok.pruned, PrunedVerdict(label="v9", reason="overconfidence"))}
    )
    with pytest.raises(AggregatorError, match=r"not given: \['v9'\]"):
        check_panel_result(unknown, anon, aggregator="x")
    both = unknown.model_copy(update={"weights": {**unknown.weights, "v9": 1.0}})
    with pytest.raises(AggregatorError, match=r"not given: \['v9'\]"):  # kept and pruned
        check_panel_result(both, anon, aggregator="x")
    _, twice = _loud_pruned("overconfidence", "overconfidence")
    with pytest.raises(AggregatorError, match="pruned a verdict twice"):
        check_panel_result(twice, anon, aggregator="x")
    for reason in ("zealotry", "overconfidence!", "disagrees"):  # after and before the word
        _, other = _loud_pruned(reason)
        with pytest.raises(AggregatorError, match="only allowed reason"):
            check_panel_result(other, anon, aggregator="x")
    _, built = _loud_pruned("".join(["over", "confidence"]))  # not the interned literal
    check_panel_result(built, anon, aggregator="x")


def test_check_rejects_a_negative_weight_that_skipped_validation():
    """model_copy(update=...) does not validate: the kernel's check must not rely on it."""
    bad = _result().model_copy(update={"weights": {"v1": 1.0, "v2": 1.0, "v3": -1.0}})
    with pytest.raises(AggregatorError, match="v3 weight -1.0"):
        check_panel_result(bad, anonymise(PANEL), aggregator="x")


def test_a_panel_of_hundreds_prunes_every_overconfident_verdict():
    """Past 256 verdicts the label counts are not CPython's cached small ints."""
    panel = [v(f"k{n}", "stands", 0.95) for n in range(300)] + [v("kept", "stands", 0.6)]
    anon = anonymise(panel)
    [kept] = [a.label for a in anon if a.confidence == 0.6]
    result = _result(
        weights={kept: 1.0},
        pruned=tuple(
            PrunedVerdict(label=a.label, reason="overconfidence") for a in anon if a.label != kept
        ),
    )
    assert check_panel_result(result, anon, aggregator="x") is result
