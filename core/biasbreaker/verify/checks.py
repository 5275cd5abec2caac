"""The checks one trace goes through, fed its lines in a single streaming pass.

:class:`Checks` holds the chain verifier, the replay (two for a version-1 trace, one per
probation mode), RLB-v1 and the other property verifiers, and feeds them each block of lines
(:class:`~biasbreaker.trace.lines.LineBlocks`). :func:`~biasbreaker.verify.verify_trace` runs
one over the whole trace; :mod:`~biasbreaker.verify.split` runs two over the two halves of a
large one, in two processes, and joins them.

Source:
    ``docs/control.md`` §7.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

from biasbreaker.errors import TraceError
from biasbreaker.trace.lines import AnyLine, LineBlocks, StepLineV1
from biasbreaker.trace.records import PROBATION_MODES, TraceHeader
from biasbreaker.verify.chain import ChainVerifier
from biasbreaker.verify.properties.anti_thrash import AntiThrashVerifier
from biasbreaker.verify.properties.bounded_retries import BoundedRetriesVerifier
from biasbreaker.verify.properties.cooldown import CooldownVerifier
from biasbreaker.verify.properties.must_trip import MustTripVerifier
from biasbreaker.verify.properties.rlb import RLBVerifier
from biasbreaker.verify.properties.terminal_escalation import TerminalEscalationVerifier
from biasbreaker.verify.replay import Replay
from biasbreaker.verify.report import PropertyReport, Verifier

DEFAULT_MAX_HISTORY = 32
"""W used for RLB-v1 when neither the caller nor the trace header gives one (the ADR's)."""

_STEP = attrgetter("step")


@dataclass
class Checks:
    """Every verifier of one trace, and the number of step records fed so far.

    Args:
        path: The trace file (named in errors).
        chain: The chain, seal and signature verifier.
        replays: The replay, or for a version-1 trace one per probation mode.
        rlb: The RLB-v1 verifier.
        others: Anti-thrash, bounded retries, terminal escalation, recovery after the
            cool-down and must-trip, in the order they are reported.
        steps: Step records fed so far (the next step record must carry this number).
    """

    path: Path
    chain: ChainVerifier
    replays: list[Replay]
    rlb: RLBVerifier
    others: tuple[Verifier, ...]
    steps: int = 0

    @classmethod
    def create(
        cls,
        path: Path,
        header: TraceHeader,
        header_line: bytes,
        *,
        max_history: int | None,
        public_key: str | None,
    ) -> Checks:
        """The checks of a trace with this header, before any line is fed.

        Args:
            path: The trace file.
            header: Its header.
            header_line: The header line's bytes (the chain's root).
            max_history: ``W`` for RLB-v1; ``None``: the header's, else
                :data:`DEFAULT_MAX_HISTORY`.
            public_key: The public key every seal must be signed with, or ``None``.
        """
        window_length = (
            max_history
            if max_history is not None
            else (header.max_history if header.max_history is not None else DEFAULT_MAX_HISTORY)
        )
        # a version-1 header does not say how RECOVERY treated new outputs: replay both modes
        # and keep the one the trace fits
        replays = (
            [Replay(header)]
            if header.probation is not None
            else [Replay(header, probation=mode) for mode in PROBATION_MODES]
        )
        return cls(
            path=path,
            chain=ChainVerifier(header_line, header.version, public_key),
            replays=replays,
            rlb=RLBVerifier(header.control, window_length, header.max_history),
            others=(
                AntiThrashVerifier(header.thresholds, node_trip=header.node_trip),
                BoundedRetriesVerifier(header.max_retries),
                TerminalEscalationVerifier(),
                CooldownVerifier(header.cooldown_steps),
                MustTripVerifier(header.thresholds, node_trip=header.node_trip),
            ),
        )

    @classmethod
    def for_blocks(
        cls, blocks: LineBlocks, *, max_history: int | None, public_key: str | None
    ) -> Checks:
        """:meth:`create` for the trace ``blocks`` reads (its path, header and header line)."""
        return cls.create(
            blocks.path,
            blocks.header,
            blocks.header_line,
            max_history=max_history,
            public_key=public_key,
        )

    def feed(self, blocks: Iterable[tuple[int, list[bytes], list[AnyLine]]]) -> None:
        """Check the next blocks of lines: ``(first line number, raw lines, decoded lines)``.

        A block of step records numbered in order (no seal among them, the commonest block)
        goes to every verifier as it is; any other block is sorted out line by line.

        Raises:
            TraceError: If a step is out of order (the message names file and line).
        """
        consumers: tuple[Verifier | Replay | RLBVerifier, ...] = (
            *self.replays,
            self.rlb,
            *self.others,
        )
        chain = self.chain
        for number, raw, decoded in blocks:
            expected = self.steps
            try:
                steps = list(map(_STEP, decoded))
            except AttributeError:  # a seal (it has no step number)
                steps = None
            records: Sequence[StepLineV1]
            if steps is not None and steps == list(range(expected, expected + len(steps))):
                chain.observe(raw, decoded, seals=False)
                records = decoded  # type: ignore[assignment]
            else:
                chain.observe(raw, decoded)
                records = [line for line in decoded if isinstance(line, StepLineV1)]
                self._check_order(number, decoded)
            self.steps += len(records)
            for consumer in consumers:
                consumer.observe(records)

    def warm(self, records: Sequence[StepLineV1]) -> None:
        """Feed step records to the replay and the properties only (not the chain, no order).

        What :mod:`~biasbreaker.verify.split` does with the records before its range, to
        bring the verifiers to the state they have there; the join checks that they do.
        """
        consumers: tuple[Verifier | Replay | RLBVerifier, ...] = (
            *self.replays,
            self.rlb,
            *self.others,
        )
        for consumer in consumers:
            consumer.observe(records)

    def replay_report(self) -> PropertyReport:
        """The replay's verdict (of a version-1 trace: the probation mode it fits best)."""
        return min(self.replays, key=lambda r: r.violations).report()

    def _check_order(self, number: int, decoded: Sequence[AnyLine]) -> None:
        """Steps are numbered from 0 without gaps (seals do not count), as the reader requires."""
        expected = self.steps
        for offset, line in enumerate(decoded):
            if not isinstance(line, StepLineV1):
                continue
            step = line.step
            if step != expected:
                raise TraceError(
                    f"{self.path}:{number + offset}: step {step} is out of order; expected step "
                    f"{expected}"
                )
            expected += 1


__all__ = ["DEFAULT_MAX_HISTORY", "Checks"]
