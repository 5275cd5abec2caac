"""The chain property: each line's ``prev`` links it to the line before, seals count the steps
before them and, with a public key, must be signed by it. Edits are made without re-linking
(or re-linked, then only the seal counts show them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.trace import TraceWriter
from biasbreaker.trace.chain import line_digest
from biasbreaker.types import Thresholds
from biasbreaker.verify import verify_trace

CONFIG = MachineConfig(thresholds=Thresholds(0.5, 0.35, 0.25, 0.05), cooldown_steps=1)


def write(path: Path, runs: list[int], *, signer: object = None) -> Path:
    """A trace of ``sum(runs)`` NORMAL steps with a seal after each run of steps."""
    with TraceWriter(path, CONFIG.trace_header(), signer=signer) as writer:  # type: ignore[arg-type]
        machine = ControlMachine(CONFIG, recorder=writer.write)
        for count in runs:
            for _ in range(count):
                machine.step(0.1, 0.1)
            writer.seal()
    return path


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def save(path: Path, out: list[str], *, relink: bool) -> Path:
    if relink:  # and renumber the steps
        step = 0
        for n in range(1, len(out)):
            record = json.loads(out[n])
            record["prev"] = line_digest(out[n - 1].encode())
            if "step" in record:
                record["step"], step = step, step + 1
            out[n] = json.dumps(record, sort_keys=True, separators=(",", ":"))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def test_counts_every_line_and_seal(tmp_path: Path) -> None:
    report = verify_trace(write(tmp_path / "t.jsonl", [2, 3]))
    assert report.chain.holds, report.chain.violations
    assert report.chain.what == "8 line(s) linked, 2 seal(s)"  # header, 5 steps, 2 seals
    assert report.chain.note == "unsigned: the chain shows edits, not who wrote it"


@pytest.mark.parametrize("fast", [f"0.{n}" for n in range(2, 10)])  # digests above and below
def test_an_edited_line_breaks_the_link_of_the_next(tmp_path: Path, fast: str) -> None:
    path = write(tmp_path / "t.jsonl", [4])
    out = lines(path)
    out[2] = out[2].replace('"fast":0.1', f'"fast":{fast}')
    [broken] = verify_trace(save(path, out, relink=False)).chain.violations
    assert broken.step == 2
    assert broken.message.startswith("line 4 (step 2): prev does not match the digest of line 3")


def test_an_edited_header_breaks_the_first_link(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", [2])
    out = lines(path)
    record = json.loads(out[0])
    record["meta"] = {"edited": True}
    out[0] = json.dumps(record, sort_keys=True, separators=(",", ":"))
    [broken] = verify_trace(save(path, out, relink=False)).chain.violations
    assert broken.message.startswith(
        "line 2 (step 0): prev does not match the digest of the header"
    )


@pytest.mark.parametrize(("edit", "counted"), [("delete", 2), ("insert", 4)])
def test_a_relinked_deletion_or_insertion_is_caught_by_the_seal_count(
    tmp_path: Path, edit: str, counted: int
) -> None:
    path = write(tmp_path / "t.jsonl", [3])
    out = lines(path)
    if edit == "delete":
        del out[3]
    else:
        out.insert(3, out[3])
    [wrong] = verify_trace(save(path, out, relink=True)).chain.violations
    assert wrong.message.endswith(
        f"the seal counts 3 step record(s), but {counted} precede it: step records were "
        "deleted or inserted"
    ), wrong


def test_a_header_without_steps_or_seal_is_cut_after_the_header(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, CONFIG.trace_header(), signer=None):
        pass
    [cut] = verify_trace(path).chain.violations
    assert cut.message.startswith("the trace ends without a seal after the header"), cut


def test_seals_against_a_public_key(tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    from biasbreaker.trace.signing import Signer, write_key_pair

    private, _, public = write_key_pair(tmp_path / "key")
    other_private, _, other = write_key_pair(tmp_path / "other")
    signed = write(tmp_path / "signed.jsonl", [2, 1], signer=Signer.from_file(private))
    unsigned = write(tmp_path / "unsigned.jsonl", [2])

    report = verify_trace(signed, public_key=public).chain
    assert report.holds, report.violations
    assert report.what == "6 line(s) linked, 2 seal(s), 2 signed (by the given key)"
    assert report.note == ""
    assert verify_trace(signed).chain.what == (
        f"6 line(s) linked, 2 seal(s), 2 signed (by key {public})"
    )  # no key given: every seal's signature is still checked
    by_other = write(tmp_path / "other.jsonl", [1], signer=Signer.from_file(other_private))
    for trace, key, signer in ((signed, other, public), (by_other, public, other)):  # both orders
        wrong = verify_trace(trace, public_key=key).chain.violations
        assert {v.message.split(": ", 1)[1] for v in wrong} == {
            f"the seal is signed by another key ({signer})"
        }
    [not_signed] = verify_trace(unsigned, public_key=public).chain.violations
    assert not_signed.message.endswith("the seal is not signed (a public key was given)")

    forged = lines(signed)
    seal = json.loads(forged[-1])  # the last line: no line links to it
    seal["signature"]["sig"] = json.loads(forged[3])["signature"]["sig"]  # another seal's
    forged[-1] = json.dumps(seal, sort_keys=True, separators=(",", ":"))
    bad = verify_trace(save(tmp_path / "forged.jsonl", forged, relink=False), public_key=public)
    [invalid] = bad.chain.violations
    assert invalid.message.endswith("the seal's signature does not verify")

    path = tmp_path / "empty.jsonl"
    with TraceWriter(path, CONFIG.trace_header(), signer=None):
        pass
    empty = verify_trace(path, public_key=public).chain.violations
    assert [v.message for v in empty][-1] == "no seal to check the public key against"


def test_a_version_1_trace_is_unchained_and_a_public_key_cannot_be_checked(tmp_path: Path) -> None:
    """Version 1 (no ``prev``, no seals): the chain checks nothing, and says so."""
    out = lines(write(tmp_path / "t.jsonl", [3]))
    header = json.loads(out[0])
    header = {k: v for k, v in header.items() if k not in ("probation", "ewma")} | {"version": 1}
    v1 = [json.dumps(header, sort_keys=True, separators=(",", ":"))]
    for line in out[1:]:
        record = json.loads(line)
        if record["kind"] == "step":
            drop = ("prev", "weights", "probe")
            v1.append(json.dumps({k: v for k, v in record.items() if k not in drop}))
    path = save(tmp_path / "v1.jsonl", v1, relink=False)
    report = verify_trace(path).chain
    assert (report.holds, report.checked, report.violation_count) == (True, 0, 0)
    assert report.what == "nothing (unchained)"
    keyed = verify_trace(path, public_key="a" * 44).chain
    assert (keyed.holds, keyed.violation_count) == (False, 1)
    assert keyed.violations[0].message == "a version-1 trace has no seals, so none is signed"


def test_a_trace_cut_after_its_last_step_names_that_step(tmp_path: Path) -> None:
    out = lines(write(tmp_path / "t.jsonl", [4]))
    assert json.loads(out[-1])["kind"] == "seal"
    [cut] = verify_trace(save(tmp_path / "cut.jsonl", out[:-1], relink=False)).chain.violations
    assert cut.message.startswith("the trace ends without a seal after step 3:"), cut
