"""Verifying one run trace: the chain, the replay and every property, in one streaming pass.

The trace is read once, a block of lines at a time (:class:`~biasbreaker.trace.lines.LineBlocks`),
and each block goes to:

- :mod:`~biasbreaker.verify.chain` — the hash chain, the seals and their signatures;
- :mod:`~biasbreaker.verify.replay` — every step re-derived from the header and the recorded
  inputs by an independent implementation of the specification;
- one verifier per property (:mod:`biasbreaker.verify.properties`): RLB-v1, anti-thrash,
  must-trip, bounded retries, terminal escalation, recovery after the cool-down.

Memory is O(1) in the trace's length. A large trace is verified in two halves at once, this
process and a worker process (:mod:`~biasbreaker.verify.split`), whose results are joined into
the report one pass would give; when they do not join, or anything is wrong in the second
half, this process reads on past the cut itself, so the report, the warnings and the errors
are always the one-pass ones.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from biasbreaker.errors import InputError
from biasbreaker.trace.lines import LineBlocks
from biasbreaker.types import JSONValue
from biasbreaker.verify.checks import DEFAULT_MAX_HISTORY, Checks
from biasbreaker.verify.properties.rlb import RLBReport
from biasbreaker.verify.report import PropertyReport
from biasbreaker.verify.split import verify_in_two, worth_splitting


@dataclass(frozen=True, slots=True)
class VerificationReport:
    """Every property's verdict on one trace.

    Args:
        path: The trace file.
        trace_sha256: SHA-256 of the file's bytes.
        steps: Whole step records read.
        truncated: Whether a cut last line was ignored.
        rlb: The RLB-v1 report.
        properties: The other properties' reports, in a fixed order (anti-thrash,
            bounded-retries, escalation-terminal, recovery-after-cooldown, must-trip).
        chain: The chain's report (tamper evidence; *unchained* for a version-1 trace).
        replay: The replay's report.
        version: The trace's schema version.
        head: The chain head: the digest of the trace's last whole line (for a finished run,
            its final seal), as ``results.jsonl`` lists it.
    """

    path: Path
    trace_sha256: str
    steps: int
    truncated: bool
    rlb: RLBReport
    properties: tuple[PropertyReport, ...]
    chain: PropertyReport
    replay: PropertyReport
    version: int
    head: str

    @property
    def holds(self) -> bool:
        """Whether the chain, the replay and every property hold."""
        return (
            self.chain.holds
            and self.replay.holds
            and self.rlb.holds
            and all(p.holds for p in self.properties)
        )

    def all_reports(self) -> tuple[PropertyReport, ...]:
        """Every verdict in one shape, in the order printed: chain, replay, RLB-v1, the rest."""
        return (self.chain, self.replay, self.rlb.as_property_report(), *self.properties)

    @classmethod
    def of(
        cls, checks: Checks, sha256: str, *, truncated: bool, version: int
    ) -> VerificationReport:
        """The report of checks fed every line of a trace.

        Args:
            checks: The checks, after the last line.
            sha256: The file's SHA-256.
            truncated: Whether a cut last line was ignored.
            version: The trace's schema version.
        """
        return cls(
            path=checks.path,
            trace_sha256=sha256,
            steps=checks.steps,
            truncated=truncated,
            rlb=checks.rlb.report(sha256),
            properties=tuple(v.report() for v in checks.others),
            chain=checks.chain.report(),
            replay=checks.replay_report(),
            version=version,
            head=checks.chain.head,
        )

    def to_json(self) -> dict[str, JSONValue]:
        """Return the whole report as plain JSON."""
        return {
            "path": str(self.path),
            "trace_sha256": self.trace_sha256,
            "head": self.head,
            "version": self.version,
            "steps": self.steps,
            "truncated": self.truncated,
            "holds": self.holds,
            "chain": self.chain.to_json(),
            "replay": self.replay.to_json(),
            "rlb": self.rlb.to_json(),
            "properties": [p.to_json() for p in self.properties],
        }


def verify_trace(
    path: str | os.PathLike[str],
    *,
    max_history: int | None = None,
    public_key: str | None = None,
    workers: int | None = None,
) -> VerificationReport:
    """Check the chain, replay every step and check every control property on a run trace.

    Args:
        path: The trace file (JSON Lines, see :mod:`biasbreaker.trace`).
        max_history: ``W`` for RLB-v1; default the trace header's window length, else
            :data:`DEFAULT_MAX_HISTORY`.
        public_key: The Ed25519 public key (base64, as
            :func:`~biasbreaker.trace.signing.load_public_key` returns it) every seal must be
            signed with, or ``None``.
        workers: 1 to verify in this process; 2 to verify the second half of the file in a
            worker process meanwhile (:mod:`~biasbreaker.verify.split`); ``None`` (default):
            2 for a trace of at least :data:`~biasbreaker.verify.split.SPLIT_MIN_BYTES` on a
            machine with two cores or more, else 1. The report does not depend on it.

    Returns:
        The report; ``report.holds`` is true when the chain, the replay and every property
        hold.

    Raises:
        TraceError: If the trace is malformed or its steps are out of order (the message names
            file and line).
        InputError: If ``max_history`` is not an int >= 1, or ``workers`` not 1, 2 or ``None``.
    """
    if max_history is not None and (
        isinstance(max_history, bool) or not isinstance(max_history, int) or max_history < 1
    ):
        raise InputError(f"max_history={max_history!r} must be an int >= 1")
    blocks = LineBlocks(path)
    if workers is not None and (isinstance(workers, bool) or workers not in (1, 2)):
        blocks.close()
        raise InputError(f"workers={workers!r} must be 1 or 2")
    if workers is None:
        workers = 2 if worth_splitting(blocks.path) else 1
    if workers == 2:
        blocks.close()
        split = verify_in_two(blocks.path, max_history=max_history, public_key=public_key)
        if split is not None:
            return VerificationReport.of(
                split.checks, split.sha256, truncated=split.truncated, version=blocks.version
            )
        blocks = LineBlocks(path)  # no place to cut: one pass
    checks = Checks.for_blocks(blocks, max_history=max_history, public_key=public_key)
    checks.feed(blocks)
    return VerificationReport.of(
        checks, blocks.sha256, truncated=blocks.truncated, version=blocks.version
    )


__all__ = ["DEFAULT_MAX_HISTORY", "VerificationReport", "verify_trace"]
