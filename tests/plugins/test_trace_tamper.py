"""Tampering with real traces: every edit is detected (docs/control.md §7, the detection table).

The corpus is real: the traces of ``biasbreaker demo --quick`` (the LangGraph adapter, guarded
and calibration runs) and one ``biasbreaker simulate`` trace per preset. Edits come in two kinds:

- **as edited**: a line changed (every field of every record kind: numbers nudged up and down,
  enums swapped to every other legal value, booleans flipped, strings changed, keys dropped or
  added), lines deleted, inserted, duplicated or moved, with and without renumbering, the trace
  cut after every line. Every one must be detected: ``verify_trace`` raises ``TraceError``
  (malformed) or reports a violation naming the step;
- **edited and re-chained**: the forger also recomputes every digest after the edit. The replay
  and must-trip catch what changes a decision; what changes nothing a verifier can recompute
  (a consistently regenerated or shortened trace) needs a signature, which catches it.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from biasbreaker.cli import app
from biasbreaker.dot import PRESETS
from biasbreaker.errors import TraceError
from biasbreaker.trace import SIGNING_KEY_ENV
from biasbreaker.trace.signing import load_public_key, write_key_pair
from biasbreaker.verify import verify_trace

runner = CliRunner()

STATES = ("normal", "warning", "intervention", "recovery", "escalated")
ACTIONS = ("proceed", "halt", "reroute", "escalate")
TRANSITIONS = (
    "trip",
    "warn",
    "calm",
    "recover-start",
    "escalate",
    "retry",
    "relapse-escalate",
    "relapse",
    "recover",
    "hold",
)
ENUMS: dict[str, tuple[str, ...]] = {
    "state": STATES,
    "action": ACTIONS,
    "transition": TRANSITIONS,
    "kind": ("header", "step", "seal"),
    "probation": ("hold", "half-open"),
    "strategy": ("skeptics", "madera", "none"),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[bytes]]:
    """Real traces, as lists of lines (without newlines): the demo's and every preset's."""
    root = tmp_path_factory.mktemp("corpus")
    result = runner.invoke(app, ["demo", "--quick", "--out", str(root / "demo")])
    assert result.exit_code == 0, result.output
    traces = {
        str(p.relative_to(root)): p.read_bytes().split(b"\n")[:-1]
        for p in sorted((root / "demo" / "traces").rglob("*.jsonl"))
    }
    for preset in PRESETS:
        out = root / f"{preset}.jsonl"
        done = runner.invoke(app, ["simulate", preset, "--seed", "3", "--out", str(out)])
        assert done.exit_code == 0, done.output
        traces[preset] = out.read_bytes().split(b"\n")[:-1]
    for name, lines in traces.items():
        assert _verdict(lines) == "holds", name  # untouched, every trace verifies
    return traces


def _verdict(lines: list[bytes]) -> str:
    """``"holds"``, ``"malformed: …"`` or ``"violated: …"`` (the first violation)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        try:
            report = verify_trace(path)
        except TraceError as exc:
            return f"malformed: {exc}"
    if report.holds:
        return "holds"
    for prop in report.all_reports():
        if prop.violations:
            v = prop.violations[0]
            return f"violated: {prop.name}: step {v.step}: {v.message}"
    return "violated"


def _dump(obj: Any) -> bytes:
    return rfc8785.dumps(obj)


def _rechain(lines: list[bytes]) -> list[bytes]:
    """What a forger does after an edit: recompute every ``prev`` (and each seal's count)."""
    out: list[bytes] = []
    steps = 0
    for index, raw in enumerate(lines):
        obj = json.loads(raw)
        if index:
            obj["prev"] = hashlib.sha256(out[-1]).hexdigest()
        if obj.get("kind") == "seal":
            obj["steps"] = steps
            obj.pop("signature", None)
        elif obj.get("kind") == "step":
            steps += 1
        out.append(_dump(obj))
    return out


def _renumber(lines: list[bytes]) -> list[bytes]:
    out, step = [], 0
    for raw in lines:
        obj = json.loads(raw)
        if obj.get("kind") == "step":
            obj["step"] = step
            step += 1
        out.append(_dump(obj))
    return out


# -- field edits ---------------------------------------------------------------------------


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in a record (nested objects included)."""
    out: list[tuple[Any, ...]] = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            out.append((*prefix, key))
            out += _paths(value, (*prefix, key))
    return out


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def _edits(value: Any, key: Any) -> list[Callable[[], Any]]:
    """Every edit of one value: nudges, every other enum value, flips, changes, nulls."""
    if isinstance(value, bool):
        return [lambda: not value, lambda: None]
    if isinstance(value, (int, float)):
        out: list[Callable[[], Any]] = [lambda: value + 1, lambda: -1 if value == 0 else value - 1]
        if isinstance(value, float) or key in ("fast", "slow", "mixing_ratio"):
            x = float(value)
            out += [
                lambda: math.nextafter(x, math.inf),
                lambda: math.nextafter(x, -math.inf) if x > 0 else x + 1e-9,
                lambda: x * 1.001 if x else 1e-6,
                lambda: x * 0.999 if x else 1e-6,
            ]
        return [*out, lambda: None, lambda: str(value)]
    if isinstance(value, str):
        others = [v for v in ENUMS.get(key, ()) if v != value]
        return [*(lambda v=v: v for v in others), lambda: value + "x", lambda: None]
    if value is None:
        return [lambda: 0, lambda: "x", lambda: {}]
    if isinstance(value, dict):
        return [lambda: {**value, "extra": 1}, lambda: None, lambda: []]
    return [lambda: None]


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    copy = json.loads(json.dumps(obj))
    target = _get(copy, path[:-1])
    target[path[-1]] = value
    return copy


def _drop(obj: Any, path: tuple[Any, ...]) -> Any:
    copy = json.loads(json.dumps(obj))
    del _get(copy, path[:-1])[path[-1]]
    return copy


def _all_field_edits(line: bytes) -> list[tuple[str, bytes]]:
    obj = json.loads(line)
    out = []
    for path in _paths(obj):
        value = _get(obj, path)
        for edit in _edits(value, path[-1]):
            new = edit()
            if new == value and type(new) is type(value):
                continue
            out.append((f"{'.'.join(map(str, path))} = {new!r}", _dump(_set(obj, path, new))))
        out.append((f"drop {'.'.join(map(str, path))}", _dump(_drop(obj, path))))
        parent = _get(obj, path[:-1])
        if isinstance(parent, dict):
            added = _set(obj, (*path[:-1], "added"), 1)
            out.append((f"add {'.'.join(map(str, (*path[:-1], 'added')))}", _dump(added)))
    return out


def _representative(corpus: dict[str, list[bytes]]) -> list[bytes]:
    """A demo trace with every record kind the machine writes: a trip with a hook, a seal."""
    for name, lines in corpus.items():
        kinds = [json.loads(line) for line in lines[1:]]
        if name.startswith("demo/traces/guarded") and any(k.get("intervention") for k in kinds):
            return lines
    raise AssertionError("no demo trace with an intervention")


def test_every_field_edit_of_every_record_kind_is_detected(
    corpus: dict[str, list[bytes]],
) -> None:
    lines = _representative(corpus)
    checked = 0
    for index, line in enumerate(lines):  # the header, every step, the seal
        for what, edited in _all_field_edits(line):
            if edited == line:
                continue
            verdict = _verdict([*lines[:index], edited, *lines[index + 1 :]])
            assert verdict != "holds", f"line {index + 1}: {what} was not detected"
            if verdict.startswith("violated"):
                assert "step " in verdict, verdict
            checked += 1
    assert checked > 200


def _edited(lines: list[bytes], data: st.DataObject) -> list[bytes]:
    """One edit drawn from every kind the issue lists."""
    kind = data.draw(
        st.sampled_from(
            ["field", "delete", "duplicate", "insert", "move", "truncate"],
        ),
        label="edit",
    )
    n = len(lines)
    if kind == "field":
        index = data.draw(st.integers(0, n - 1), label="line")
        choices = _all_field_edits(lines[index])
        _, edited = data.draw(st.sampled_from(choices), label="field edit")
        return [*lines[:index], edited, *lines[index + 1 :]]
    if kind == "truncate":
        return lines[: data.draw(st.integers(1, n - 1), label="keep")]
    index = data.draw(st.integers(1, n - 1), label="line")
    if kind == "delete":
        out = [*lines[:index], *lines[index + 1 :]]
    elif kind == "duplicate":
        out = [*lines[: index + 1], lines[index], *lines[index + 1 :]]
    elif kind == "insert":
        where = data.draw(st.integers(1, n), label="at")
        out = [*lines[:where], lines[index], *lines[where:]]
    else:
        where = data.draw(st.integers(1, n - 1), label="to")
        rest = [*lines[:index], *lines[index + 1 :]]
        out = [*rest[:where], lines[index], *rest[where:]]
    if data.draw(st.booleans(), label="renumber"):
        out = _renumber(out)
    return out


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_every_edit_of_a_real_trace_is_detected(
    corpus: dict[str, list[bytes]], data: st.DataObject
) -> None:
    name = data.draw(st.sampled_from(sorted(corpus)), label="trace")
    lines = corpus[name]
    edited = _edited(lines, data)
    assume(edited != lines)
    verdict = _verdict(edited)
    assert verdict != "holds", name
    if verdict.startswith("violated"):
        assert "step " in verdict, verdict


# -- edited and re-chained: the replay, must-trip, and where only a signature helps ---------------


def _steps(lines: list[bytes]) -> list[tuple[int, dict[str, Any]]]:
    return [(i, json.loads(line)) for i, line in enumerate(lines) if b'"kind":"step"' in line]


def _rewrite(lines: list[bytes], index: int, **fields: Any) -> list[bytes]:
    obj = json.loads(lines[index])
    obj.update(fields)
    return _rechain([*lines[:index], _dump(obj), *lines[index + 1 :]])


def _first(lines: list[bytes], transition: str) -> int:
    return next(i for i, step in _steps(lines) if step["transition"] == transition)


@pytest.mark.parametrize("preset", ["recovery", "persistent", "spike", "oscillate-near-threshold"])
def test_rechained_decision_edits_are_caught_by_the_replay(
    corpus: dict[str, list[bytes]], preset: str
) -> None:
    lines = corpus[preset]
    trip = _first(lines, "trip")
    hidden = _rewrite(
        lines,
        trip,
        state="normal",
        action="proceed",
        transition="hold",
        reason="normal",
        intervention=None,
        payload_sha256=None,
        episode=0,
        attempt=0,
    )
    verdict = _verdict(hidden)
    assert verdict.startswith("violated: replay"), verdict
    report_lines = _report(hidden)
    assert "must-trip v1: VIOLATED" in report_lines  # the missed trip, named as such
    # the whole episode rewritten as normal: still caught (the scores and EWMAs say otherwise)
    normal = list(lines)
    for index, step in _steps(lines):
        if step["state"] != "normal":
            step.update(
                state="normal",
                action="proceed",
                transition="hold",
                reason="normal",
                intervention=None,
                payload_sha256=None,
                episode=0,
                attempt=0,
            )
            normal[index] = _dump(step)
    episode = _report(_rechain(normal))
    assert "replay v1: VIOLATED" in episode and "must-trip v1: VIOLATED" in episode
    # a local score changed at a step that is not a flip: fast no longer follows from it
    calm = next(i for i, s in _steps(lines) if s["transition"] == "hold" and s["scores"])
    scores = json.loads(lines[calm])["scores"]
    node = sorted(scores)[0]
    changed = _rewrite(lines, calm, scores={**scores, node: scores[node] * 0.5 + 0.01})
    assert "replay: step" in _verdict(changed) and "fast" in _verdict(changed)
    # fast itself changed
    fast = json.loads(lines[calm])["fast"]
    assert "fast: recorded" in _verdict(_rewrite(lines, calm, fast=fast * 1.01 + 1e-6))
    # the header's tau_enter lowered (staying above tau_exit)
    header = json.loads(lines[0])
    th = header["thresholds"]
    lowered = {**th, "tau_enter": (th["tau_enter"] + th["tau_exit"]) / 2}
    assert _verdict(_rewrite(lines, 0, thresholds=lowered)).startswith("violated: replay")
    # a record deleted, duplicated or moved, with the steps renumbered
    middle = trip + 3
    assert _verdict(_rechain(_renumber([*lines[:middle], *lines[middle + 1 :]]))) != "holds"
    assert _verdict(_rechain(_renumber([*lines[:trip], lines[trip], *lines[trip:]]))) != "holds"
    moved = [*lines[:trip], lines[trip + 1], lines[trip], *lines[trip + 2 :]]
    assert _verdict(_rechain(_renumber(moved))) != "holds"


def test_rechained_budget_edits_are_caught_where_an_episode_shows_them(
    corpus: dict[str, list[bytes]],
) -> None:
    lines = corpus["recovery"]  # trips, retries and escalates: the budget is visible
    header = json.loads(lines[0])
    for field, value in (("cooldown_steps", header["cooldown_steps"] + 1), ("max_retries", 5)):
        verdict = _verdict(_rewrite(lines, 0, **{field: value}))
        assert verdict.startswith("violated: replay"), (field, verdict)


def _report(lines: list[bytes]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        return runner.invoke(app, ["verify", str(path)]).stdout


def test_what_only_a_signature_detects(
    tmp_path: Path, corpus: dict[str, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = corpus["recovery"]
    # 1. undetectable without a signature: the last records deleted and the rest re-sealed, a
    #    budget that never shows (no episode) changed, a trace regenerated from invented scores
    shortened = _rechain([*lines[:60], lines[-1]])
    assert _verdict(shortened) == "holds"
    quiet = corpus["control"]  # never trips: max_retries has no visible consequence
    assert _verdict(_rewrite(quiet, 0, max_retries=7)) == "holds"
    invented = runner.invoke(
        app, ["simulate", "control", "--seed", "99", "--out", str(tmp_path / "i.jsonl")]
    )
    assert invented.exit_code == 0
    regenerated = (tmp_path / "i.jsonl").read_bytes().split(b"\n")[:-1]
    assert _verdict(regenerated) == "holds"  # a consistent run, just not the one that happened
    # 2. the same, on a signed trace: the key holder's public key tells them apart
    private, public, _ = write_key_pair(tmp_path / "key")
    other, _, _ = write_key_pair(tmp_path / "other")
    signed = tmp_path / "signed.jsonl"
    monkeypatch.setenv(SIGNING_KEY_ENV, str(private))
    done = runner.invoke(app, ["simulate", "recovery", "--seed", "3", "--out", str(signed)])
    assert done.exit_code == 0, done.output
    key = load_public_key(public)
    assert verify_trace(signed, public_key=key).holds
    forged = tmp_path / "forged.jsonl"
    signed_lines = signed.read_bytes().split(b"\n")[:-1]
    forged.write_bytes(
        b"".join(x + b"\n" for x in _rechain([*signed_lines[:60], signed_lines[-1]]))
    )
    assert not verify_trace(forged, public_key=key).holds  # re-sealed without the key
    monkeypatch.setenv(SIGNING_KEY_ENV, str(other))
    resigned = tmp_path / "resigned.jsonl"
    runner.invoke(app, ["simulate", "control", "--seed", "99", "--out", str(resigned)])
    assert verify_trace(resigned).holds  # signed consistently, by someone
    assert not verify_trace(resigned, public_key=key).holds  # but not by the key holder
    result = runner.invoke(app, ["verify", str(resigned), "--public-key", str(public)])
    assert result.exit_code == 1
    assert "signed by another key" in result.stdout
    assert runner.invoke(app, ["verify", str(signed), "--public-key", str(public)]).exit_code == 0


def test_a_trace_cut_back_to_an_earlier_seal_needs_the_manifest(tmp_path: Path) -> None:
    """Cut at a pause's seal, a trace is the one that was sealed then: only its head tells."""
    from biasbreaker.calibration import ControlStatistics
    from biasbreaker.machine import ControlMachine, MachineConfig
    from biasbreaker.trace import TraceWriter
    from biasbreaker.types import Thresholds

    config = MachineConfig(
        Thresholds(0.5, 0.35, 0.25, 0.05), control=ControlStatistics(0.1, 0.05, 9)
    )
    path = tmp_path / "traces" / "t.jsonl"
    path.parent.mkdir()
    with TraceWriter(path, config.trace_header(), signer=None) as writer:
        machine = ControlMachine(config, recorder=writer)
        for fast in (0.1, 0.2):
            machine.step(fast, 0.0)
        writer.seal()  # a pause
        cut = path.read_bytes()
        machine.step(0.1, 0.0)
        writer.seal()  # the end
        head = writer.head
    (tmp_path / "results.jsonl").write_text(
        json.dumps({"trace": "traces/t.jsonl", "trace_head": head}) + "\n"
    )
    path.write_bytes(cut)
    assert verify_trace(path).holds  # the trace alone cannot show it
    result = runner.invoke(
        app, ["verify", str(tmp_path / "traces"), "--manifest", str(tmp_path / "results.jsonl")]
    )
    assert result.exit_code == 1
    assert "changed: head" in result.stdout
