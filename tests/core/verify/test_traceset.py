"""A set of traces verified as one: streaming totals, bounded failures, the JSON document."""

from __future__ import annotations

import gc
import json
from pathlib import Path

from tracegen import forge

from biasbreaker.types import BreakerState
from biasbreaker.verify import (
    ReportSpool,
    VerificationReport,
    trace_files,
    verify_trace,
    verify_traces,
)
from machine_traces import write

N, IV = BreakerState.NORMAL, BreakerState.INTERVENTION


def live_reports() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, VerificationReport))


def test_passing_reports_are_not_kept_and_failing_ones_only_up_to_the_bound(
    tmp_path: Path,
) -> None:
    good = [write(tmp_path / f"good-{i:02d}.jsonl", [0.1, 0.6, 0.4, 0.3, 0.1]) for i in range(12)]
    # forged traces: no machine wrote them, so the replay fails on each
    bad = [forge(tmp_path / f"bad-{i}.jsonl", [(N, 0.1), (IV, 0.6), (N, 0.1)]) for i in range(3)]
    before = live_reports()
    seen: list[str] = []
    checked = verify_traces(
        [*good, *bad], keep_failures=2, on_report=lambda key, report: seen.append(key)
    )
    # the result holds two whole reports (the first two failures), never the 12 that pass
    assert live_reports() - before == 2
    assert list(checked.failure_reports) == [str(p) for p in bad[:2]]
    assert checked.failing() == [str(p) for p in bad]
    assert all("replay v1" in checked.failures[str(p)] for p in bad)
    assert list(checked.heads) == seen == [str(p) for p in [*good, *bad]]
    assert checked.heads[str(good[0])] == verify_trace(good[0]).head
    assert checked.count == 15 and not checked.holds
    replay = next(t for t in checked.totals if t.name == "replay v1")
    assert (replay.traces, replay.holding) == (15, 12)


def test_totals_are_the_sums_of_the_reports(tmp_path: Path) -> None:
    paths = [
        write(tmp_path / "one.jsonl", [0.1, 0.6, 0.4, 0.3, 0.1, 0.1, 0.1, 0.1, 0.1]),
        write(tmp_path / "two.jsonl", [0.1] + [0.6] * 10),
        forge(tmp_path / "three.jsonl", [(N, 0.4), (IV, 0.4)] * 3),
    ]
    reports = [verify_trace(p) for p in paths]
    totals = {t.name: t for t in verify_traces(paths).totals}
    assert list(totals)[:3] == ["chain v1", "replay v1", "RLB-v1"]
    rlb = totals["RLB-v1"]
    assert rlb.cycles == sum(r.rlb.cycles_total for r in reports)
    assert rlb.checked == sum(r.rlb.recovery_transitions for r in reports)
    assert rlb.vacuous == sum(1 for r in reports if r.rlb.vacuous)
    for index, name in enumerate(p.name for p in reports[0].properties):
        props = [r.properties[index] for r in reports]
        total = totals[f"{name} {props[0].version}"]
        assert total.traces == 3
        assert total.holding == sum(1 for p in props if p.holds)
        assert total.checked == sum(p.checked for p in props)
        assert total.violations == sum(p.violation_count for p in props)
        assert total.vacuous == sum(1 for p in props if p.vacuous)
    assert not totals["anti-thrash v2"].holds


def document(paths: list[Path], manifest: Path | None = None) -> str:
    """The set's JSON as it was made before it streamed: every report held, dumped at once."""
    checked = verify_traces(paths, manifest=manifest)
    return json.dumps(
        {
            "holds": checked.holds,
            "totals": [t.to_json() for t in checked.totals],
            "traces": {str(p): verify_trace(p).to_json() for p in checked.heads},
            "manifest": None if checked.manifest is None else checked.manifest.to_json(),
        },
        indent=2,
    )


def streamed(paths: list[Path], manifest: Path | None = None) -> str:
    with ReportSpool() as spool:
        checked = verify_traces(paths, manifest=manifest, on_report=spool)
        return "".join(checked.json_chunks(spool))


def test_the_streamed_json_is_the_document_dumped_at_once(tmp_path: Path) -> None:
    write(tmp_path / "t" / "a.jsonl", [0.1, 0.6, 0.4, 0.3, 0.1])
    write(tmp_path / "t" / "b.jsonl", [0.1] + [0.6] * 4)
    forge(tmp_path / "t" / 'c "quoted" é.jsonl', [(N, 0.4), (IV, 0.4)] * 3)
    paths = trace_files([tmp_path / "t"])
    assert streamed(paths) == document(paths)
    manifest = tmp_path / "t" / "results.json"
    manifest.write_text(json.dumps({"trace": "a.jsonl", "trace_head": "0" * 64}) + "\n")
    assert streamed(paths[1:], manifest) == document(paths[1:], manifest)
    assert '"problems": [' in streamed(paths[1:], manifest)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert streamed([], empty) == document([], empty)
    assert '"traces": {}' in streamed([], empty)


def test_the_spool_gives_back_what_it_took_in_pieces(tmp_path: Path) -> None:
    path = write(tmp_path / "a.jsonl", [0.1, 0.6, 0.4])
    with ReportSpool() as spool:
        spool("a", verify_trace(path))
        spool("b", verify_trace(path))
        whole = "".join(spool.chunks())
        assert "".join(spool.chunks(size=7)) == whole
        assert spool.count == 2
    assert json.loads("{" + whole + "}")["b"]["path"] == str(path)
