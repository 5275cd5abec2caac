import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from biasbreaker.intervention.types import (
    AnonymousVerdict,
    Diagnosis,
    Evidence,
    MaderaResult,
    PanelResult,
    PanelRun,
    PrunedVerdict,
    ReviewRequest,
    RewriteAttempt,
    SkepticFailure,
    SkepticVerdict,
    TrackRecord,
    TrustScore,
    clamp,
)


def _verdict(**kw):
    base = dict(
        kind="devils-advocate",
        decision="revise",
        critique="x",
        revision="y",
        confidence=0.6,
        evidence=("e",),
        attribute="gender",
    )
    base.update(kw)
    return SkepticVerdict(**base)


@pytest.mark.parametrize("bad", [-0.01, 1.01, math.nan, math.inf])
def test_verdict_confidence_must_be_in_unit_interval(bad):
    with pytest.raises(ValidationError, match="confidence"):
        _verdict(confidence=bad)


def test_verdict_rejects_unknown_decision_and_fields():
    with pytest.raises(ValidationError):
        _verdict(decision="maybe")
    with pytest.raises(ValidationError):
        SkepticVerdict.model_validate({**_verdict().to_json(), "name": "x"})


def test_verdict_is_frozen_and_evidence_flag():
    v = _verdict(evidence=("  ",))
    assert not v.has_evidence
    with pytest.raises(ValidationError):
        v.confidence = 0.1  # type: ignore[misc]


def test_every_type_round_trips_through_json():
    diag = Diagnosis(span="s", attribute="race", query="q", rationale="r")
    attempt = RewriteAttempt(round=1, diagnosis=diag, evidence=("a",), text="t", score=0.1)
    values = [
        _verdict(),
        AnonymousVerdict(
            label="v2", decision="stands", confidence=0.9, reliability=0.3, domain_match=1.0
        ),
        TrustScore.compute(c=1, r=0.5, i=0.5, s_raw=-0.2, s_min=0.1),
        PanelResult(
            decision="revise",
            corrected="c",
            confidence=0.5,
            weights={"v1": 1.0},
            pruned=(PrunedVerdict(label="v2", reason="overconfidence"),),
            trust={"v1": TrustScore.compute(c=0, r=0, i=0, s_raw=0.5, s_min=0.1)},
        ),
        SkepticFailure(kind="k", failure="timeout", reason="late"),
        ReviewRequest(payload="p", task="t", attributes=("gender",), seed=3),
        PanelRun(verdicts=(_verdict(),), closed_reason="1 valid"),
        TrackRecord().observe("a", True).observe("b", False),
        Evidence(id="x", text="y", score=1.5),
        MaderaResult(attempts=(attempt,), best=attempt, converged=True, stop_reason="converged"),
    ]
    for value in values:
        data = value.to_json()
        again = type(value).from_json(data)
        assert again == value
        assert again.to_json() == data


def test_trust_score_clamps_s_and_never_blows_up():
    t = TrustScore.compute(c=1, r=1, i=1, s_raw=0.0, s_min=0.05)
    assert t.s == 0.05 and t.value == pytest.approx(3 / 0.05)
    t = TrustScore.compute(c=1, r=1, i=1, s_raw=-5.0, s_min=0.05)
    assert t.s == 0.05 and math.isfinite(t.value)
    t = TrustScore.compute(c=0, r=0.5, i=0.5, s_raw=7.0, s_min=0.05)
    assert t.s == 1.0 and t.value == 1.0


@given(
    s_raw=st.floats(-1e6, 1e6, allow_nan=False),
    s_min=st.floats(1e-6, 1.0),
    c=st.floats(0, 1),
    r=st.floats(0, 1),
    i=st.floats(0, 1),
)
def test_trust_value_is_finite_and_bounded_for_any_s(s_raw, s_min, c, r, i):
    t = TrustScore.compute(c=c, r=r, i=i, s_raw=s_raw, s_min=s_min)
    assert s_min <= t.s <= 1.0
    assert 0.0 <= t.value <= 3.0 / s_min * (1 + 1e-12)


def test_trust_score_rejects_tampered_or_non_finite_terms():
    t = TrustScore.compute(c=1, r=0.5, i=0.5, s_raw=0.5, s_min=0.1)
    with pytest.raises(ValidationError, match="does not match"):
        TrustScore.from_json({**t.to_json(), "value": 99.0})
    with pytest.raises(ValidationError):
        TrustScore.compute(c=1, r=0.5, i=0.5, s_raw=math.nan, s_min=0.1)
    with pytest.raises(ValidationError):
        TrustScore.compute(c=1, r=0.5, i=0.5, s_raw=0.3, s_min=0.0)


def test_panel_result_rules():
    with pytest.raises(ValidationError, match="stands"):
        PanelResult(decision="stands", corrected="x", confidence=0.5)
    with pytest.raises(ValidationError, match="weight"):
        PanelResult(decision="revise", confidence=0.5, weights={"v1": -1.0})


def test_track_record_laplace_and_validation():
    rec = TrackRecord()
    assert rec.reliability("new") == 0.5
    rec = rec.observe("a", True).observe("a", True).observe("a", False)
    assert rec.reliability("a") == pytest.approx(3 / 5)
    assert rec.counts["a"] == (2, 3)
    with pytest.raises(ValidationError, match="correct"):
        TrackRecord(counts={"a": (3, 2)})


def test_madera_result_consistency():
    diag = Diagnosis(query="q")
    a = RewriteAttempt(round=1, diagnosis=diag, evidence=(), text="t", score=0.5)
    other = RewriteAttempt(round=2, diagnosis=diag, evidence=(), text="u", score=0.4)
    with pytest.raises(ValidationError):
        MaderaResult(converged=True, stop_reason="converged")
    with pytest.raises(ValidationError):
        MaderaResult(attempts=(a,), best=other, stop_reason="budget")


def test_clamp():
    assert clamp(2, 0, 1) == 1 and clamp(-1, 0, 1) == 0
    with pytest.raises(ValueError, match="finite"):
        clamp(math.nan, 0, 1)
