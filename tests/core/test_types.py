from __future__ import annotations

import copy
import json
import math
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from biasbreaker.errors import InputError, ScoreError, ThresholdError
from biasbreaker.types import (
    ALLOWED_ACTIONS,
    BreakerAction,
    BreakerDecision,
    BreakerState,
    FrozenPayload,
    InterventionContext,
    InterventionResult,
    Thresholds,
)

TH = Thresholds(0.5, 0.35, 0.2, 0.05)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)

consistent_pairs = st.sampled_from(
    [(state, action) for state, actions in ALLOWED_ACTIONS.items() for action in actions]
)


@st.composite
def decisions(draw: st.DrawFn) -> BreakerDecision:
    state, action = draw(consistent_pairs)
    payload = draw(st.none() | json_values.map(FrozenPayload.of))
    return BreakerDecision(
        state,
        action,
        draw(st.floats(0.0, 1.0)),
        draw(st.floats(0.0, 1.0)),
        draw(st.text(min_size=1, max_size=20)),
        payload,
    )


@given(decisions())
def test_decision_round_trips_through_plain_json(decision: BreakerDecision) -> None:
    text = json.dumps(decision.to_json())
    again = BreakerDecision.from_json(json.loads(text))
    assert again == decision
    assert again.frozen_payload == decision.frozen_payload
    assert pickle.loads(pickle.dumps(decision)) == decision
    assert copy.deepcopy(decision) == decision


def test_decision_fields_are_named_and_immutable() -> None:
    d = BreakerDecision(BreakerState.WARNING, BreakerAction.PROCEED, 0.25, 0.1, "warn")
    assert (d.state, d.action, d.mixing_ratio, d.b_net, d.reason, d.frozen_payload) == (
        BreakerState.WARNING,
        BreakerAction.PROCEED,
        0.25,
        0.1,
        "warn",
        None,
    )
    with pytest.raises(AttributeError):
        d.state = BreakerState.NORMAL  # type: ignore[misc]
    assert "WARNING" in repr(d)


@pytest.mark.parametrize("state", list(BreakerState))
@pytest.mark.parametrize("action", list(BreakerAction))
def test_decision_rejects_every_inconsistent_state_action_pair(
    state: BreakerState, action: BreakerAction
) -> None:
    if action in ALLOWED_ACTIONS[state]:
        assert BreakerDecision(state, action, 0.5, 0.5, "ok").action is action
    else:
        with pytest.raises(
            InputError, match=f"{action.name} is inconsistent with state {state.name}"
        ):
            BreakerDecision(state, action, 0.5, 0.5, "bad")


@pytest.mark.parametrize("ratio", [-0.01, 1.01, math.nan, math.inf, True])
def test_decision_rejects_mixing_ratio_outside_unit_interval(ratio: float) -> None:
    with pytest.raises(ScoreError, match="mixing_ratio"):
        BreakerDecision(BreakerState.NORMAL, BreakerAction.PROCEED, ratio, 0.1, "x")


@pytest.mark.parametrize("b_net", [-1e-9, math.nan, math.inf, "0.3", None])
def test_decision_rejects_invalid_b_net(b_net: object) -> None:
    with pytest.raises(ScoreError, match="b_net"):
        BreakerDecision(BreakerState.NORMAL, BreakerAction.PROCEED, 0.1, b_net, "x")  # type: ignore[arg-type]


def test_decision_rejects_empty_reason_and_unfrozen_payload() -> None:
    with pytest.raises(InputError, match="reason"):
        BreakerDecision(BreakerState.NORMAL, BreakerAction.PROCEED, 0.1, 0.1, "")
    with pytest.raises(InputError, match="freeze"):
        BreakerDecision(BreakerState.INTERVENTION, BreakerAction.HALT, 0.9, 0.6, "x", {"raw": 1})  # type: ignore[arg-type]


def test_decision_from_json_names_missing_field_and_bad_enum() -> None:
    data = BreakerDecision(BreakerState.NORMAL, BreakerAction.PROCEED, 0.1, 0.1, "x").to_json()
    del data["reason"]
    with pytest.raises(InputError, match="'reason'"):
        BreakerDecision.from_json(data)
    with pytest.raises(InputError, match="'halted' is not one of"):
        BreakerDecision.from_json({**data, "reason": "x", "state": "halted"})


# -- thresholds ---------------------------------------------------------------------------------


def test_thresholds_reject_enter_not_above_exit_naming_both_values() -> None:
    with pytest.raises(
        ThresholdError,
        match=r"tau_enter=0\.3 must be greater than "
        r"tau_exit=0\.3",
    ):
        Thresholds(0.3, 0.3, 0.2, 0.05)
    with pytest.raises(ThresholdError, match=r"tau_enter=0\.2"):
        Thresholds(0.2, 0.3, 0.2, 0.05)


@pytest.mark.parametrize(
    ("field", "values"),
    [
        ("kappa", (0.5, 0.3, 0.2, 0.0)),
        ("kappa", (0.5, 0.3, 0.2, -1.0)),
        ("tau_exit", (0.5, 0.0, 0.2, 0.1)),
        ("tau_warn", (0.5, 0.3, -0.1, 0.1)),
        ("tau_enter", (math.nan, 0.3, 0.2, 0.1)),
        ("kappa", (0.5, 0.3, 0.2, math.inf)),
    ],
)
def test_thresholds_reject_bad_values(field: str, values: tuple[float, ...]) -> None:
    with pytest.raises(ThresholdError, match=field):
        Thresholds(*values)


def test_thresholds_round_trip() -> None:
    assert Thresholds.from_json(json.loads(json.dumps(TH.to_json()))) == TH


# -- frozen payloads ----------------------------------------------------------------------------


def test_frozen_payload_is_isolated_from_later_mutation_of_the_original() -> None:
    original = {"answer": "hire", "scores": [0.1, {"deep": [1, 2]}]}
    frozen = FrozenPayload.of(original)
    digest = frozen.sha256
    original["answer"] = "reject"
    original["scores"][1]["deep"].append(3)  # type: ignore[index,union-attr]
    assert frozen.thaw() == {"answer": "hire", "scores": [0.1, {"deep": [1, 2]}]}
    assert frozen.sha256 == digest


def test_frozen_payload_view_is_deeply_read_only_and_thaw_is_independent() -> None:
    frozen = FrozenPayload.of({"a": [1, {"b": 2}]})
    view = frozen.value
    with pytest.raises(TypeError):
        view["a"] = 0  # type: ignore[index]
    with pytest.raises(TypeError):
        view["a"][1]["b"] = 3  # type: ignore[index]
    assert isinstance(view["a"], tuple)  # type: ignore[index]
    copy_1 = frozen.thaw()
    copy_1["a"].append(9)  # type: ignore[index,union-attr]
    assert frozen.thaw() == {"a": [1, {"b": 2}]}


def test_frozen_payload_digest_ignores_key_order_and_detects_content() -> None:
    assert FrozenPayload.of({"a": 1, "b": 2}) == FrozenPayload.of({"b": 2, "a": 1})
    assert FrozenPayload.of({"a": 1}).sha256 != FrozenPayload.of({"a": 2}).sha256
    assert len(FrozenPayload.of(None).sha256) == 64


@pytest.mark.parametrize(
    ("payload", "path", "type_name"),
    [
        ({"a": [1, {2, 3}]}, "payload['a'][1]", "set"),
        ({"a": b"bytes"}, "payload['a']", "bytes"),
        ([object()], "payload[0]", "object"),
    ],
)
def test_freezing_a_non_json_value_names_its_path_and_type(
    payload: object, path: str, type_name: str
) -> None:
    with pytest.raises(InputError) as info:
        FrozenPayload.of(payload)
    assert path in str(info.value)
    assert type_name in str(info.value)


def test_freezing_rejects_nan_non_str_keys_and_cycles() -> None:
    with pytest.raises(InputError, match=r"payload\['x'\] is nan"):
        FrozenPayload.of({"x": math.nan})
    with pytest.raises(InputError, match="keys must be str"):
        FrozenPayload.of({1: "a"})
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(InputError, match="reference cycle"):
        FrozenPayload.of(loop)


def test_frozen_payload_from_json_detects_tampering() -> None:
    data = FrozenPayload.of({"a": 1}).to_json()
    data["value"] = {"a": 2}
    with pytest.raises(InputError, match="altered"):
        FrozenPayload.from_json(data)
    with pytest.raises(InputError, match="altered"):
        FrozenPayload('{"a":1}', "0" * 64)


@given(json_values)
def test_frozen_payload_round_trips(value: object) -> None:
    frozen = FrozenPayload.of(value)
    assert FrozenPayload.from_json(json.loads(json.dumps(frozen.to_json()))) == frozen
    assert FrozenPayload.of(frozen.value) == frozen
    assert FrozenPayload.of(frozen.thaw()) == frozen


# -- intervention context and result ------------------------------------------------------------


def _context(**changes: object) -> InterventionContext:
    fields: dict[str, object] = dict(
        step=7,
        node="writer",
        state=BreakerState.WARNING,
        fast=0.6,
        slow=0.3,
        mixing_ratio=0.88,
        thresholds=TH,
        local_scores={"writer": 0.8, "reader": 0.1},
        weights={"writer": 0.7, "reader": 0.3},
        history={"writer": [0.5, 0.8]},
        attempt=1,
        frozen_payload=FrozenPayload.of({"text": "x"}),
        seed=11,
    )
    fields.update(changes)
    return InterventionContext(**fields)  # type: ignore[arg-type]


def test_context_copies_its_mappings_and_computes_magnitudes() -> None:
    scores = {"writer": 0.8, "reader": 0.1}
    context = _context(local_scores=scores)
    scores["writer"] = 0.0
    assert context.local_scores["writer"] == 0.8
    assert context.magnitudes == {"writer": 0.7 * 0.8, "reader": 0.3 * 0.1}
    assert context.history["writer"] == (0.5, 0.8)
    with pytest.raises(TypeError):
        context.local_scores["writer"] = 1.0  # type: ignore[index]


def test_context_round_trips_through_plain_json() -> None:
    context = _context()
    again = InterventionContext.from_json(json.loads(json.dumps(context.to_json())))
    assert again.to_json() == context.to_json()


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"attempt": 0}, InputError, "attempt"),
        ({"step": -1}, InputError, "step"),
        ({"state": BreakerState.ESCALATED}, InputError, "NORMAL, WARNING or RECOVERY"),
        ({"fast": math.nan}, ScoreError, "fast"),
        ({"local_scores": {"a": -0.1}}, ScoreError, r"local_scores\['a'\]"),
        ({"weights": {"a": math.inf}}, ScoreError, r"weights\['a'\]"),
        ({"history": {"a": [0.1, math.nan]}}, ScoreError, r"history\['a'\]\[1\]"),
        ({"mixing_ratio": 1.5}, ScoreError, "mixing_ratio"),
        ({"node": ""}, InputError, "node"),
    ],
)
def test_context_validates_fields(
    changes: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        _context(**changes)


def test_result_invariants() -> None:
    repaired = FrozenPayload.of({"text": "fixed"})
    ok = InterventionResult(repaired, True, "madera", [{"event": "rewrite", "round": 1}], 0.1)
    assert ok.recheck_passes(0.35)
    assert not ok.recheck_passes(0.1)
    with pytest.raises(InputError, match="converged=True needs"):
        InterventionResult(None, True, "madera", (), 0.1)
    with pytest.raises(InputError, match="converged=True needs"):
        InterventionResult(repaired, True, "madera", (), None)
    with pytest.raises(InputError, match="converged=True needs"):
        InterventionResult(repaired, True, "madera", (), 0.1, error="boom")
    with pytest.raises(InputError, match="strategy='debate'"):
        InterventionResult(strategy="debate")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"trail\[0\]"):
        InterventionResult(trail=["not an object"])  # type: ignore[list-item]
    with pytest.raises(ScoreError, match="recheck_score"):
        InterventionResult(recheck_score=-0.5)
    assert not InterventionResult.noop().recheck_passes(1.0)
    assert not InterventionResult.failed("ValueError: x").recheck_passes(1.0)


def test_result_trail_is_read_only_and_round_trips() -> None:
    event = {"event": "verdict", "skeptic": "auditor", "scores": [0.2, 0.4]}
    result = InterventionResult(FrozenPayload.of("fixed"), True, "skeptics", [event], 0.05)
    event["skeptic"] = "changed"
    assert result.trail[0]["skeptic"] == "auditor"
    with pytest.raises(TypeError):
        result.trail[0]["skeptic"] = "x"  # type: ignore[index]
    again = InterventionResult.from_json(json.loads(json.dumps(result.to_json())))
    assert again.to_json() == result.to_json()
    summary = result.summary()
    assert summary == {
        "strategy": "skeptics",
        "converged": True,
        "recheck_score": 0.05,
        "error": None,
        "events": 1,
        "repaired_sha256": FrozenPayload.of("fixed").sha256,
    }


def test_context_and_result_survive_pickle_and_deepcopy() -> None:
    context = _context()
    result = InterventionResult(FrozenPayload.of("fixed"), True, "madera", [{"e": 1}], 0.1)
    for value in (context, result):
        for clone in (pickle.loads(pickle.dumps(value)), copy.deepcopy(value)):
            assert clone.to_json() == value.to_json()
