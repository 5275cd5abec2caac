"""A manifest (results.jsonl) against its traces, its seal and each record's status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from biasbreaker.breaker import freeze
from biasbreaker.cli import app
from biasbreaker.machine import ControlMachine
from biasbreaker.trace import TraceWriter
from biasbreaker.trace.chain import line_digest
from biasbreaker.trace.signing import Signer, load_public_key, write_key_pair
from biasbreaker.types import InterventionContext, InterventionResult
from biasbreaker.verify import verify_traces
from biasbreaker.verify.manifest import final_state, seal_manifest, seal_path
from machine_traces import CONFIG

pytest.importorskip("cryptography")
runner = CliRunner()


def fail(context: InterventionContext) -> InterventionResult:
    """A repair that never converges: the run escalates after max_retries."""
    return InterventionResult(freeze("still biased"), False, "madera", (), 0.9)


def trace(path: Path, fasts: list[float], signer: Signer | None = None) -> Path:
    """A sealed trace the machine wrote, its repairs failing (a run that trips escalates)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with TraceWriter(path, CONFIG.trace_header(), signer=signer) as writer:
        machine = ControlMachine(CONFIG, hook=fail, recorder=writer)
        for fast in fasts:
            machine.step(fast, 0.0)
        writer.seal()
    return path


def escalated(path: Path, signer: Signer | None = None) -> Path:
    """A sealed trace of a run that escalated (it paused for review)."""
    return trace(path, [0.1] + [0.9] * 8, signer)


def record(out: Path, thread: str, status: str, breaker: bool = False) -> dict[str, object]:
    """The thread's results.jsonl record, as `biasbreaker run` writes it."""
    last = (out / "traces" / f"{thread}.jsonl").read_bytes().splitlines()[-1]
    assert json.loads(last)["kind"] == "seal"
    return {
        "thread": thread,
        "status": status,
        "review": {"breaker_state": "escalated"} if breaker else None,
        "trace": f"traces/{thread}.jsonl",
        "trace_head": line_digest(last),
    }


def run_folder(tmp_path: Path, signer: Signer | None) -> Path:
    """What `biasbreaker run` leaves: a held (escalated) run, a done run, a sealed manifest."""
    out = tmp_path / "out"
    escalated(out / "traces" / "input-00001.jsonl", signer)
    trace(out / "traces" / "input-00002.jsonl", [0.1, 0.1, 0.1], signer)
    manifest = out / "results.jsonl"
    manifest.write_text(
        json.dumps(record(out, "input-00001", "review", breaker=True))
        + "\n"
        + json.dumps(record(out, "input-00002", "done"))
        + "\n"
    )
    seal_manifest(manifest, signer)
    return out


def drop_held_run(out: Path) -> None:
    """The trial's tampering: the held run's trace and record removed (the review 'done')."""
    (out / "traces" / "input-00001.jsonl").unlink()
    manifest = out / "results.jsonl"
    kept = [line for line in manifest.read_text().splitlines() if "input-00001" not in line]
    manifest.write_text("".join(line + "\n" for line in kept))


def verify(out: Path, *extra: str) -> tuple[int, str]:
    result = runner.invoke(
        app, ["verify", str(out / "traces"), "--manifest", str(out / "results.jsonl"), *extra]
    )
    return result.exit_code, result.stdout


def test_the_escalated_trace_ends_escalated(tmp_path: Path) -> None:
    path = escalated(tmp_path / "t.jsonl")
    assert final_state(path) == "escalated"
    assert final_state(path, block=7) == "escalated"  # read back across blocks
    assert final_state(trace(tmp_path / "n.jsonl", [0.1])) == "normal"


def test_a_signed_untouched_run_holds(tmp_path: Path) -> None:
    private, public, _ = write_key_pair(tmp_path / "key")
    out = run_folder(tmp_path, Signer.from_file(private))
    code, stdout = verify(out, "--public-key", str(public))
    assert code == 0, stdout
    assert "0 problem(s)" in stdout and "signed by the key given" in stdout
    assert stdout.strip().endswith("all properties hold on 2 traces")


def test_dropping_a_held_run_and_its_record_fails_a_signed_manifest(tmp_path: Path) -> None:
    private, public, _ = write_key_pair(tmp_path / "key")
    out = run_folder(tmp_path, Signer.from_file(private))
    drop_held_run(out)
    code, stdout = verify(out, "--public-key", str(public))
    assert code == 1
    assert "edited after it was sealed: 1 record(s)" in stdout
    assert "the seal says 2 record(s)" in stdout


def test_a_missing_seal_fails_with_a_public_key_and_is_said_without(tmp_path: Path) -> None:
    private, public, _ = write_key_pair(tmp_path / "key")
    out = run_folder(tmp_path, Signer.from_file(private))
    drop_held_run(out)
    seal_path(out / "results.jsonl").unlink()
    code, stdout = verify(out, "--public-key", str(public))
    assert code == 1 and "unsigned: --public-key needs the manifest sealed" in stdout
    # unsigned, a consistent set without its seal cannot be told from the original: said so
    code, stdout = verify(out)
    assert code == 0, stdout
    assert "unsealed: anyone who can rewrite the traces can rewrite it" in stdout


def test_a_manifest_resealed_unsigned_or_with_another_key_fails(tmp_path: Path) -> None:
    private, public, _ = write_key_pair(tmp_path / "key")
    other, _, _ = write_key_pair(tmp_path / "other")
    out = run_folder(tmp_path, Signer.from_file(private))
    drop_held_run(out)
    seal_manifest(out / "results.jsonl", None)
    code, stdout = verify(out, "--public-key", str(public))
    assert code == 1 and "unsigned: --public-key needs the manifest's seal signed" in stdout
    seal_manifest(out / "results.jsonl", Signer.from_file(other))
    code, stdout = verify(out, "--public-key", str(public))
    assert code == 1 and "signed by another key than the --public-key given" in stdout
    assert verify(out)[0] == 0  # consistent, by someone: only the key tells


def test_a_forged_signature_fails(tmp_path: Path) -> None:
    private, public, _ = write_key_pair(tmp_path / "key")
    out = run_folder(tmp_path, Signer.from_file(private))
    seal = json.loads(seal_path(out / "results.jsonl").read_text())
    seal["records"] = 1
    seal_path(out / "results.jsonl").write_text(json.dumps(seal))
    code, stdout = verify(out, "--public-key", str(public))
    assert code == 1 and "bad signature" in stdout


def test_a_review_rewritten_as_done_contradicts_its_trace(tmp_path: Path) -> None:
    out = run_folder(tmp_path, None)
    manifest = out / "results.jsonl"
    manifest.write_text(manifest.read_text().replace('"status": "review"', '"status": "done"'))
    seal_manifest(manifest, None)  # resealed: the seal cannot tell, the status can
    code, stdout = verify(out)
    assert code == 1
    assert (
        "input-00001.jsonl: status: the manifest says done, but the trace ends escalated" in stdout
    )


def test_only_done_is_checked_against_the_trace(tmp_path: Path) -> None:
    """A review need not end escalated (the graph's own interrupt(), a subgraph's escalation)."""
    out = run_folder(tmp_path, None)
    manifest = out / "results.jsonl"
    lines = manifest.read_text().splitlines()
    second = json.loads(lines[1])
    second.update(status="review", review={"breaker_state": "escalated"})
    manifest.write_text(lines[0] + "\n" + json.dumps(second) + "\n")
    traces = sorted((out / "traces").glob("*.jsonl"))
    checked = verify_traces(traces, manifest=manifest).manifest
    assert checked is not None
    assert [p for _, p in checked.problems if p.startswith("status")] == []


def test_the_public_key_in_a_seal_is_the_signer_s(tmp_path: Path) -> None:
    private, public, _ = write_key_pair(tmp_path / "key")
    out = run_folder(tmp_path, Signer.from_file(private))
    seal = json.loads(seal_path(out / "results.jsonl").read_text())
    assert seal["signature"]["key"] == load_public_key(public)
    assert seal["kind"] == "manifest-seal" and seal["records"] == 2


def test_a_review_with_held_stream_events_is_checked_over_both(tmp_path: Path) -> None:
    """The review's sha256 covers the held output and its held stream events together: an
    untouched record holds, and an event edited in the manifest is named."""
    from biasbreaker.types import FrozenPayload
    from biasbreaker.verify.manifest import ManifestEntry, _review_problems

    value = {"status": "processed"}
    stream = [{"kind": "custom", "data": {"ui": "Decision: DENY"}}]
    trace = tmp_path / "t.jsonl"
    step = {"kind": "step", "payload_sha256": FrozenPayload.of(value).sha256}
    trace.write_text(json.dumps(step) + "\n", encoding="utf-8")

    def review(events: list[dict[str, object]]) -> ManifestEntry:
        return ManifestEntry(
            None,
            "review",
            1,
            {
                "held": value,
                "stream": events,
                "frozen": {"value": value, "sha256": FrozenPayload.of(value).sha256},
                "sha256": FrozenPayload.of({"held": value, "stream": stream}).sha256,
            },
        )

    assert _review_problems(review(stream), trace, "results.jsonl:1") == []
    edited = [{"kind": "custom", "data": {"ui": "Decision: APPROVE"}}]
    (problem,) = _review_problems(review(edited), trace, "results.jsonl:1")
    assert "review.held and review.stream hash to sha256" in problem
