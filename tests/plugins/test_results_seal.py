"""`results.jsonl` is sealed when its log closes, signed with the traces' key when one is set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biasbreaker.trace.signing import SIGNING_KEY_ENV, load_public_key, write_key_pair
from biasbreaker.verify.manifest import check_seal, seal_path
from biasbreaker_plugins.demo.driver import ResultsLog, read_results


def test_closing_the_log_seals_it_and_the_records_stay_one_per_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    seal_path(path).write_text("stale\n")  # a seal of an earlier run never vouches for this one
    log = ResultsLog(path, signer=None)
    assert not seal_path(path).exists()
    log.write({"thread": "t1", "status": "done", "trace": None})
    log.close()
    log.close()  # once
    assert len(read_results(path)) == 1
    seal = json.loads(seal_path(path).read_text())
    assert seal["records"] == 1 and "signature" not in seal
    assert check_seal(path)[1] == []


def test_the_seal_is_signed_with_the_key_the_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("cryptography")
    private, public, _ = write_key_pair(tmp_path / "key")
    monkeypatch.setenv(SIGNING_KEY_ENV, str(private))
    path = tmp_path / "results.jsonl"
    log = ResultsLog(path)
    log.write({"thread": "t1", "status": "review", "trace": None})
    log.close()
    shown, problems = check_seal(path, load_public_key(public))
    assert problems == [] and shown == "signed by the key given"
