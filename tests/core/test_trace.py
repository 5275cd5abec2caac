from __future__ import annotations

import itertools
import json
import re
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
import rfc8785

from biasbreaker.breaker import freeze
from biasbreaker.calibration import ControlStatistics
from biasbreaker.errors import TraceError
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.trace import (
    SCHEMA,
    SCHEMA_VERSION,
    TraceHeader,
    TraceReader,
    TraceTruncatedWarning,
    TraceWriter,
    line_digest,
    read_trace,
)
from biasbreaker.types import BreakerState, InterventionContext, InterventionResult, Thresholds

TH = Thresholds(0.5, 0.35, 0.25, 0.05)
CONFIG = MachineConfig(
    TH,
    cooldown_steps=2,
    max_retries=2,
    control=ControlStatistics(0.1, 0.05, 500),
    max_history=3,
    seed=4,
)
FASTS = [0.1, 0.2, 0.6, 0.4, 0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.55, 0.2, 0.1]


def hook(context: InterventionContext) -> InterventionResult:
    return InterventionResult(
        freeze({"fixed": context.step}),
        True,
        "madera",
        [{"event": "rewrite", "step": context.step}],
        0.1,
    )


def write_run(path: Path, fasts: list[float] = FASTS, **writer_kwargs: object) -> None:
    with TraceWriter(path, CONFIG.trace_header({"preset": "unit"}), **writer_kwargs) as writer:  # type: ignore[arg-type]
        machine = ControlMachine(CONFIG, hook=hook, recorder=writer)
        for step, fast in enumerate(fasts):
            machine.step(
                fast,
                fast / 2,
                node=f"n{step % 2}",
                local_scores={"n0": fast, "n1": fast / 3},
                payload={"out": step},
            )


def test_trace_round_trips_every_step(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_run(path)
    trace = read_trace(path)
    assert trace.header.thresholds == TH
    assert trace.header.max_history == 3
    assert trace.header.meta == {"preset": "unit"}
    assert [r.step for r in trace.records] == list(range(len(FASTS)))
    assert [r.fast for r in trace.records] == FASTS
    assert trace.records[2].state is BreakerState.INTERVENTION
    assert trace.records[2].intervention is not None
    assert trace.records[2].intervention["strategy"] == "madera"
    assert trace.records[2].payload_sha256 == freeze({"out": 2}).sha256
    assert not trace.truncated
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    assert (header["kind"], header["schema"], header["version"]) == (
        "header",
        SCHEMA,
        SCHEMA_VERSION,
    )
    assert set(json.loads(lines[1])) == {
        "kind",
        "step",
        "node",
        "scores",
        "fast",
        "slow",
        "window",
        "state",
        "action",
        "mixing_ratio",
        "reason",
        "transition",
        "episode",
        "attempt",
        "payload_sha256",
        "intervention",
        "prev",  # schema 2: the digest of the line before (the hash chain)
    }
    # schema 2: every line is its record's RFC 8785 canonical form, chained to the one before
    assert all(line.encode() == rfc8785.dumps(json.loads(line)) for line in lines)
    assert all(
        json.loads(line)["prev"] == line_digest(before.encode())
        for before, line in itertools.pairwise(lines)
    )


def test_same_inputs_give_byte_identical_traces(tmp_path: Path) -> None:
    write_run(tmp_path / "a.jsonl")
    write_run(tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    write_run(tmp_path / "c.jsonl", [*FASTS[:-1], 0.2])
    assert (tmp_path / "a.jsonl").read_bytes() != (tmp_path / "c.jsonl").read_bytes()


def test_each_record_is_flushed_as_it_is_written(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    writer = TraceWriter(path, CONFIG.trace_header(), fsync=True)
    machine = ControlMachine(CONFIG, recorder=writer)
    machine.step(0.1, 0.0)
    machine.step(0.2, 0.0)
    assert len(read_trace(path).records) == 2  # visible before close
    writer.close()
    with pytest.raises(TraceError, match="closed"):
        machine.step(0.1, 0.0)


def test_a_trace_cut_mid_line_is_read_up_to_its_last_whole_record(tmp_path: Path) -> None:
    path = tmp_path / "crash.jsonl"
    write_run(path)
    data = path.read_bytes()
    cut = data[: len(data) - 25]  # inside the last record
    path.write_bytes(cut)
    with pytest.warns(TraceTruncatedWarning, match=r"crash\.jsonl:14: the last line is cut"):
        trace = read_trace(path)
    assert trace.truncated
    assert len(trace.records) == len(FASTS) - 1
    assert trace.whole_bytes == cut.rfind(b"\n") + 1


def test_a_whole_last_record_without_its_newline_is_read(tmp_path: Path) -> None:
    # the new-user report: verify dropped it with a warning, as if it were cut
    path = tmp_path / "nonewline.jsonl"
    write_run(path)
    full = read_trace(path)
    path.write_bytes(path.read_bytes()[:-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", TraceTruncatedWarning)
        trace = read_trace(path)
    assert trace.records == full.records
    assert not trace.truncated and trace.newline_missing
    assert trace.whole_bytes == path.stat().st_size
    # a cut that leaves no whole JSON object is still a cut
    path.write_bytes(path.read_bytes()[:-2])
    with pytest.warns(TraceTruncatedWarning):
        assert len(read_trace(path).records) == len(FASTS) - 1


def test_append_adds_the_missing_newline_first(tmp_path: Path) -> None:
    path = tmp_path / "append.jsonl"
    header = CONFIG.trace_header()
    with TraceWriter(path, header) as writer:
        ControlMachine(CONFIG, recorder=writer).step(0.1, 0.0)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    first = read_trace(path).records[0]
    with TraceWriter(path, header, append=True) as writer:
        writer.write(replace(first, step=1))
    trace = read_trace(path)
    assert [r.step for r in trace.records] == [0, 1]
    assert not trace.newline_missing and path.read_bytes().endswith(b"\n")


def test_append_after_a_crash_drops_the_cut_line_and_continues(tmp_path: Path) -> None:
    full = tmp_path / "full.jsonl"
    write_run(full)
    resumed = tmp_path / "resumed.jsonl"
    # Run 8 steps, snapshot, "crash" mid-way through writing step 8.
    writer = TraceWriter(resumed, CONFIG.trace_header({"preset": "unit"}))
    machine = ControlMachine(CONFIG, hook=hook, recorder=writer)
    for step, fast in enumerate(FASTS[:8]):
        machine.step(
            fast,
            fast / 2,
            node=f"n{step % 2}",
            local_scores={"n0": fast, "n1": fast / 3},
            payload={"out": step},
        )
    snapshot = json.loads(json.dumps(machine.snapshot()))
    writer.close()
    with resumed.open("a", encoding="utf-8") as raw:
        raw.write('{"kind":"step","step":8,"fa')
    writer = TraceWriter(resumed, CONFIG.trace_header({"preset": "unit"}), append=True)
    machine = ControlMachine.restore(snapshot, hook=hook, recorder=writer)
    for step, fast in enumerate(FASTS[8:], start=8):
        machine.step(
            fast,
            fast / 2,
            node=f"n{step % 2}",
            local_scores={"n0": fast, "n1": fast / 3},
            payload={"out": step},
        )
    writer.close()
    assert resumed.read_bytes() == full.read_bytes()


def test_append_refuses_a_different_header(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_run(path)
    with pytest.raises(TraceError, match="header differs"):
        TraceWriter(path, CONFIG.trace_header({"preset": "other"}), append=True)


def test_writer_refuses_out_of_order_steps(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    machine = ControlMachine(CONFIG)
    machine.step(0.1, 0.0)
    machine.step(0.1, 0.0)
    with TraceWriter(path, CONFIG.trace_header()) as writer:
        assert machine.last_record is not None
        with pytest.raises(TraceError, match="step 1 written out of order; expected step 0"):
            writer.write(machine.last_record)


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda lines: lines.__setitem__(3, "{not json"), r":4: not valid JSON"),
        # a block is decoded in one call that skips blank lines and reads two records on one
        # line as two: each is still the bad line it was, even both in one block
        (lambda lines: lines.insert(3, ""), r":4: not valid JSON"),
        (lambda lines: lines.insert(3, " \t "), r":4: not valid JSON"),
        (
            lambda lines: lines.__setitem__(slice(2, 4), [f"{lines[2]} {lines[3]}"]),
            r":3: not valid JSON: Extra data",
        ),
        (
            lambda lines: lines.__setitem__(slice(2, 4), [f"{lines[2]} {lines[3]}", ""]),
            r":3: not valid JSON: Extra data",
        ),
        (lambda lines: lines.__setitem__(3, "[1, 2]"), r":4: a trace line must be a JSON object"),
        (
            lambda lines: lines.__setitem__(3, lines[3].replace('"fast":', '"fst":')),
            r":4: step record is missing the field 'fast'",
        ),
        (
            lambda lines: lines.__setitem__(3, lines[3].replace('"kind":"step"', '"kind":"note"')),
            r":4: expected a step record, got kind 'note'",
        ),
        (
            lambda lines: lines.__setitem__(
                2, lines[2].replace('"state":"normal"', '"state":"escalated"')
            ),
            r":3: step record has action 'proceed', inconsistent with state 'escalated'",
        ),
        (lambda lines: lines.__delitem__(3), r":4: step 3 is out of order; expected step 2"),
        (
            lambda lines: lines.__setitem__(
                0, lines[0].replace(f'"version":{SCHEMA_VERSION}', '"version":9')
            ),
            r":1: trace schema version 9 is not supported",
        ),
        (lambda lines: lines.__setitem__(0, lines[1]), r":1: not a biasbreaker trace header"),
        (
            lambda lines: lines.__setitem__(
                3, re.sub(r'"fast":[0-9.e-]+', '"fast":' + "9" * 400, lines[3])
            ),
            r":4: fast=<an integer beyond the float range> must be a finite number",
        ),
        (
            lambda lines: lines.__setitem__(
                0, lines[0].replace('"node_trip":false', '"node_trip":1')
            ),
            r":1: trace header: node_trip=1 must be true or false",
        ),
    ],
)
def test_malformed_records_raise_trace_error_with_file_and_line(
    tmp_path: Path, mutate: object, match: str
) -> None:
    path = tmp_path / "bad.jsonl"
    write_run(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    mutate(lines)  # type: ignore[operator]
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(TraceError, match="bad.jsonl" + match):
        read_trace(path)


def test_empty_or_missing_trace(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(TraceError, match="empty trace"):
        read_trace(empty)
    with pytest.raises(TraceError, match="cannot read the trace"):
        read_trace(tmp_path / "missing.jsonl")


def test_reader_streams_and_reports_the_file_digest(tmp_path: Path) -> None:
    import hashlib

    path = tmp_path / "run.jsonl"
    write_run(path)
    reader = TraceReader(path)
    with pytest.raises(TraceError, match="only after reading"):
        _ = reader.sha256
    assert sum(1 for _ in reader) == len(FASTS)
    assert reader.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_header_records_node_trip_and_reads_old_headers_as_off(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_run(path)
    header = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert header["node_trip"] is False
    on = replace(CONFIG, node_trip=True).trace_header()
    assert on.to_json()["node_trip"] is True
    assert TraceHeader.from_json(on.to_json()) == on
    del header["node_trip"]  # a trace written before node trips existed
    assert TraceHeader.from_json(header).node_trip is False
