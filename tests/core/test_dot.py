from __future__ import annotations

import dataclasses
import io
import itertools
import json
import math
from pathlib import Path

import pytest

from biasbreaker.dot import (
    PRESETS,
    SCHEMA,
    BiasSource,
    DotConfig,
    DotStep,
    RepairEvent,
    read_jsonl,
    simulate_dot,
    write_jsonl,
)
from biasbreaker.errors import ConfigError, TraceError
from biasbreaker.propagation import NetworkEwma, katz_influence, network_score

TAU_ENTER, TAU_EXIT, TAU_WARN = 0.3, 0.2, 0.15
SEEDS = range(10)
STEPS = 200


def jsonl_bytes(preset: str | DotConfig, seed: int, steps: int = STEPS) -> bytes:
    buf = io.StringIO()
    write_jsonl(simulate_dot(preset, seed=seed, steps=steps), buf)
    return buf.getvalue().encode("utf-8")


def fast_of(trace: list[DotStep]) -> list[float]:
    out = [s.fast for s in trace]
    assert all(f is not None for f in out)
    return [f for f in out if f is not None]


def slow_of(trace: list[DotStep]) -> list[float]:
    return [s.slow for s in trace if s.slow is not None]


@pytest.mark.parametrize("preset", list(PRESETS))
def test_each_preset_is_byte_identical_per_seed_and_differs_across_seeds(preset: str) -> None:
    first = jsonl_bytes(preset, 7)
    assert first == jsonl_bytes(preset, 7)
    assert first != jsonl_bytes(preset, 8)
    assert len(first.splitlines()) == STEPS


def test_records_are_labelled_simulated_and_round_trip(tmp_path: Path) -> None:
    trace = simulate_dot("recovery", seed=3, steps=60)
    path = tmp_path / "t.jsonl"
    assert write_jsonl(trace, path) == 60
    lines = path.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[0])
    assert rec["schema"] == SCHEMA
    assert rec["simulated"] is True
    assert rec["preset"] == "recovery"
    assert read_jsonl(path) == trace
    path.write_text(lines[0] + "\n{not json\n", encoding="utf-8")
    with pytest.raises(TraceError, match=r"t\.jsonl:2"):
        read_jsonl(path)
    path.write_text(json.dumps(dict(rec, schema="other/1")) + "\n", encoding="utf-8")
    with pytest.raises(TraceError, match="schema"):
        read_jsonl(path)


def test_records_agree_with_the_propagation_functions() -> None:
    cfg = PRESETS["oscillate-near-threshold"]
    trace = simulate_dot(cfg, seed=1, steps=120)
    influence = katz_influence(cfg.graph(), attenuation=cfg.attenuation)
    ewma = NetworkEwma.create(fast_half_life=cfg.fast_half_life, slow_half_life=cfg.slow_half_life)
    for rec in trace:
        scores: dict[str, float | None] = dict(rec.scores)
        scores.update(dict.fromkeys(rec.not_applicable))
        ns = network_score(influence, scores)
        assert ns.b_net == rec.b_net
        assert ns.not_probed == rec.not_probed
        ewma = ewma.update(ns.b_net)
        assert (ewma.fast.value, ewma.slow.value) == (rec.fast, rec.slow)
        assert rec.round == rec.step // cfg.agents
        assert rec.node == cfg.node_names[rec.step % cfg.agents]
    # the first round has agents that have not spoken yet; they are excluded and reported
    assert trace[0].not_probed == ("a1", "a2", "a3", "a4")
    assert trace[0].b_net == trace[0].scores["a0"]
    assert trace[5].not_probed == ()


def test_control_stays_at_the_noise_floor() -> None:
    for seed in SEEDS:
        trace = simulate_dot("control", seed=seed, steps=STEPS)
        assert max(fast_of(trace)) < 0.1
        assert max(slow_of(trace)) < 0.1
        assert all(not s.events for s in trace)


def test_spike_shows_on_fast_not_on_slow() -> None:
    for seed in SEEDS:
        trace = simulate_dot("spike", seed=seed, steps=STEPS)
        fast = fast_of(trace)
        above = [i for i, f in enumerate(fast) if f >= TAU_ENTER]
        assert above, seed
        assert 80 <= above[0] <= 90
        assert len(above) <= 12
        assert max(slow_of(trace)) < TAU_WARN
        assert max(fast[120:]) < 0.1


def test_drift_warns_on_slow_without_tripping_fast() -> None:
    for seed in SEEDS:
        trace = simulate_dot("drift", seed=seed, steps=STEPS)
        assert max(fast_of(trace)) < TAU_ENTER
        slow = slow_of(trace)
        assert max(slow) >= TAU_WARN
        assert max(slow[:100]) < TAU_WARN


def test_oscillation_rises_through_tau_enter_then_stays_in_the_dead_band() -> None:
    for seed in SEEDS:
        fast = fast_of(simulate_dot("oscillate-near-threshold", seed=seed, steps=STEPS))
        first = next(i for i, f in enumerate(fast) if f >= TAU_ENTER)
        after = fast[first:]
        assert min(after) > TAU_EXIT
        assert max(after) < 0.45
        crossings = sum(
            1 for a, b in itertools.pairwise(after) if (a < TAU_ENTER) != (b < TAU_ENTER)
        )
        assert crossings >= 4, (seed, crossings)


def test_recovery_returns_below_tau_exit_for_good() -> None:
    for seed in SEEDS:
        trace = simulate_dot("recovery", seed=seed, steps=STEPS)
        fast = fast_of(trace)
        assert max(fast[40:110]) >= TAU_ENTER
        assert max(fast[115:]) < TAU_EXIT
        assert trace[110].events == ("repair:all", "repair:permanent")


def test_persistent_never_recovers() -> None:
    for seed in SEEDS:
        trace = simulate_dot("persistent", seed=seed, steps=STEPS)
        fast = fast_of(trace)
        first = next(i for i, f in enumerate(fast) if f >= TAU_ENTER)
        assert min(fast[first:]) > TAU_EXIT
        assert fast[-1] >= TAU_ENTER
        repairs = [s.step for s in trace if "repair:all" in s.events]
        assert repairs == [100, 130, 160]
        for r in repairs:  # each repair makes a visible dip
            assert min(fast[r : r + 6]) < fast[r - 1] - 0.08


def test_not_applicable_steps_are_excluded() -> None:
    cfg = dataclasses.replace(PRESETS["recovery"], not_applicable_rate=1.0)
    trace = simulate_dot(cfg, seed=0, steps=30)
    assert all(s.b_net is None and s.fast is None and s.slow is None for s in trace)
    assert trace[-1].not_applicable == cfg.node_names
    some = simulate_dot(dataclasses.replace(cfg, not_applicable_rate=0.3), seed=0, steps=100)
    assert any(s.not_applicable for s in some)
    assert all(s.b_net is not None for s in some if s.scores)


def test_bias_upstream_spreads_further_than_downstream() -> None:
    base = DotConfig(name="chain", topology="chain", noise=0.0, conformity=0.3)
    up = dataclasses.replace(base, sources=(BiasSource("a0", 0.8),))
    down = dataclasses.replace(base, sources=(BiasSource("a4", 0.8),))
    b_up = simulate_dot(up, seed=0, steps=100)[-1].b_net
    b_down = simulate_dot(down, seed=0, steps=100)[-1].b_net
    assert b_up is not None
    assert b_down is not None
    assert b_up > b_down


def test_source_drive_shapes() -> None:
    ramp = BiasSource("a0", 0.6, onset=10, ramp=4)
    assert [ramp.drive(t) for t in (9, 10, 11, 13, 50)] == [0.0, 0.15, 0.3, 0.6, 0.6]
    wave = BiasSource("a0", 0.5, amplitude=0.2, period=4)
    assert [wave.drive(t) for t in range(5)] == [0.5, 0.7, 0.5, 0.3, 0.5]
    burst = BiasSource("a0", 1.0, onset=2, end=4)
    assert [burst.drive(t) for t in range(6)] == [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]


def test_config_validation_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"dot\.conformity"):
        DotConfig(conformity=1.5)
    with pytest.raises(ConfigError, match="unknown agent 'a9'"):
        DotConfig(sources=(BiasSource("a9", 0.5),))
    with pytest.raises(ConfigError, match="unknown agent 'zz'"):
        DotConfig(repairs=(RepairEvent(3, nodes=("zz",)),))
    with pytest.raises(ConfigError, match=r"sources\.period"):
        BiasSource("a0", 0.5, amplitude=0.1)
    with pytest.raises(ConfigError, match=r"sources\.end"):
        BiasSource("a0", 0.5, onset=5, end=5)
    with pytest.raises(ConfigError, match="topology"):
        DotConfig(topology="tree")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="must exceed slow"):
        DotConfig(fast_half_life=30.0, slow_half_life=10.0)
    with pytest.raises(ConfigError, match="presets: control, spike"):
        simulate_dot("nope", seed=0, steps=1)
    with pytest.raises(ConfigError, match="steps"):
        simulate_dot("control", seed=0, steps=-1)
    with pytest.raises(ConfigError, match="seed"):
        simulate_dot("control", seed=1.5, steps=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown keys"):
        DotConfig.from_dict({"agentz": 3})


@pytest.mark.parametrize("preset", list(PRESETS))
def test_config_round_trips_through_json(preset: str) -> None:
    cfg = PRESETS[preset]
    again = DotConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg
    explicit = dataclasses.replace(cfg, edges=(("a0", "a1", 2.0), ("a1", "a0", 1.0)))
    assert DotConfig.from_dict(json.loads(json.dumps(explicit.to_dict()))) == explicit


def test_topologies() -> None:
    for topo, n_edges in (("mesh", 20), ("ring", 5), ("chain", 4), ("star", 8)):
        graph = DotConfig(topology=topo).graph()  # type: ignore[arg-type]
        assert len(graph.edges) == n_edges
    solo = simulate_dot(DotConfig(agents=1), seed=0, steps=3)
    assert [s.node for s in solo] == ["a0"] * 3
    assert all(math.isfinite(s.b_net or 0.0) for s in solo)


def test_propagation_settings_apply_to_a_preset(tmp_path: Path) -> None:
    from biasbreaker.config import load_settings

    settings = load_settings(
        cwd=tmp_path,
        overrides={"propagation": {"attenuation": 0.5, "fast_smoothing": 0.8}},
    ).settings.propagation
    cfg = PRESETS["spike"].with_propagation(settings)
    assert (cfg.attenuation, cfg.fast_smoothing, cfg.slow_smoothing) == (0.5, 0.8, None)
    assert cfg.network_ewma().fast.smoothing == 0.8
    assert cfg.network_ewma().slow == PRESETS["spike"].network_ewma().slow
    assert jsonl_bytes(cfg, 1, 100) != jsonl_bytes("spike", 1, 100)


def test_an_explicit_alpha_beyond_the_bound_is_refused() -> None:
    # the mesh of 5 agents has rho = 4, so alpha must stay below 0.25
    with pytest.raises(ConfigError, match=r"1/rho\(A\) = 0\.25"):
        DotConfig(alpha=0.3)
    assert simulate_dot(DotConfig(alpha=0.2), seed=0, steps=3)[-1].b_net is not None
