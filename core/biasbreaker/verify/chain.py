"""Tamper evidence: the hash chain, the seals and their signatures (schema version 2).

Checked over the bytes as written (:mod:`biasbreaker.trace.chain`):

- every line after the header carries ``prev`` equal to the digest of the line before it, so
  an edited, deleted, inserted, duplicated or moved line breaks the link after it;
- every seal counts the step records before it;
- the trace ends with a seal: one that does not was cut, by a crash or by deleting its last
  records, and the two cannot be told apart;
- a signed seal's Ed25519 signature verifies against the public key it names; with a public
  key given, every seal must be signed by that key (and there must be one).

A version-1 trace has no chain: it is reported *unchained* (nothing here can be checked) and
holds, unless a public key is given, which it cannot satisfy.

Source:
    ``docs/control.md`` §6 (the chain and the seals) and §7 (what it detects).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from operator import attrgetter

from biasbreaker.trace.chain import line_digest, seal_message
from biasbreaker.trace.lines import AnyLine, SealLine
from biasbreaker.trace.signing import signature_valid
from biasbreaker.verify.report import PropertyReport, Violation, ViolationLog

_PREV = attrgetter("prev")


class ChainVerifier:
    """Streaming verifier of the chain, the seals and the signatures (module docstring).

    Args:
        header_line: The header line's bytes (the chain's root).
        version: The trace's schema version.
        public_key: The public key (base64, as
            :func:`~biasbreaker.trace.signing.load_public_key` returns it) every seal must be
            signed with, or ``None`` (signatures are checked against the key each seal names).
    """

    name = "chain"
    version = "v1"

    def __init__(self, header_line: bytes, version: int, public_key: str | None = None) -> None:
        self._chained = version >= 2
        self._head = hashlib.sha256(header_line.rstrip(b"\n")).hexdigest()
        self._public_key = public_key
        self._lines = 1
        self._steps = 0
        self._seals = 0
        self._signed = 0
        self._keys: set[str] = set()
        self._last_is_seal = False
        self._last_seal_steps: int | None = None
        self._log = ViolationLog()

    def resume(self, line_before: bytes, steps: int) -> None:
        """Check from a line in the middle of the trace (:mod:`biasbreaker.verify.split`).

        The chain continues from ``line_before`` (the line before the first one observed) and
        ``steps`` step records precede it; lines are counted from 0 (the join adds the lines
        before).

        Args:
            line_before: The bytes of the line before, with or without its newline.
            steps: The step records before the first line observed.
        """
        self._head = line_digest(line_before)
        self._lines = 0
        self._steps = steps

    @property
    def head(self) -> str:
        """The digest of the last line seen (the chain head)."""
        return self._head

    def observe(
        self, raw: Sequence[bytes], decoded: Sequence[AnyLine], *, seals: bool = True
    ) -> None:
        """Check the next lines: their bytes (without newlines) and their decoded records.

        Args:
            raw: The lines' bytes.
            decoded: Their decoded records.
            seals: ``False`` if the caller knows that none of the lines is a seal: then, when
                every ``prev`` matches, they are checked as two lists (the digests and the
                ``prev`` fields); any mismatch is checked line by line, as with ``True``.
        """
        if not self._chained:
            self._steps += len(decoded)
            return
        head = self._head
        sha256 = hashlib.sha256
        if not seals and raw:
            digests = [sha256(line).hexdigest() for line in raw]
            prevs = list(map(_PREV, decoded))
            if prevs[0] == head and prevs[1:] == digests[:-1]:
                self._lines += len(digests)
                self._steps += len(digests)
                self._last_is_seal = False
                self._head = digests[-1]
                return
        for line, record in zip(raw, decoded, strict=True):
            self._lines += 1
            if record.prev != head:  # type: ignore[union-attr]
                self._broken(record)
            head = sha256(line).hexdigest()
            if type(record) is SealLine:
                self._seal(record)
            else:
                self._steps += 1
                self._last_is_seal = False
        self._head = head

    def _where(self, record: AnyLine) -> tuple[int, str]:
        if type(record) is SealLine:
            return self._steps, f"line {self._lines} (the seal after step {self._steps - 1})"
        step = record.step  # type: ignore[union-attr]
        return step, f"line {self._lines} (step {step})"

    def _broken(self, record: AnyLine) -> None:
        step, where = self._where(record)
        before = "the header" if self._lines == 2 else f"line {self._lines - 1}"
        self._log.add(
            step,
            f"{where}: prev does not match the digest of {before}: {before} was edited, or "
            "a line was deleted, inserted or moved here",
        )

    def _seal(self, seal: SealLine) -> None:
        self._seals += 1
        self._last_is_seal = True
        self._last_seal_steps = seal.steps
        step, where = self._where(seal)
        if seal.steps != self._steps:
            self._log.add(
                step,
                f"{where}: the seal counts {seal.steps} step record(s), but {self._steps} precede "
                "it: step records were deleted or inserted",
            )
        signature = seal.signature
        if signature is None:
            if self._public_key is not None:
                self._log.add(step, f"{where}: the seal is not signed (a public key was given)")
            return
        self._signed += 1
        self._keys.add(signature.key)
        if self._public_key is not None and signature.key != self._public_key:
            self._log.add(step, f"{where}: the seal is signed by another key ({signature.key})")
        elif not signature_valid(signature.key, seal_message(seal.steps, seal.prev), signature.sig):
            self._log.add(step, f"{where}: the seal's signature does not verify")

    def report(self) -> PropertyReport:
        """Return the verdict, after every line was observed."""
        if not self._chained:
            count = self._log.count
            kept = list(self._log.kept)
            if self._public_key is not None:
                count += 1
                kept.append(
                    Violation(self._steps, "a version-1 trace has no seals, so none is signed")
                )
            return PropertyReport(
                self.name,
                self.version,
                0,
                count,
                tuple(kept),
                "unchained: a version-1 trace carries no digests, so edits, deletions and "
                "truncation cannot be detected",
                what="nothing (unchained)",
                vacuous="the trace is unchained (schema version 1)",
            )
        if not self._last_is_seal:
            after = "the header" if self._steps == 0 else f"step {self._steps - 1}"
            self._log.add(
                self._steps,
                f"the trace ends without a seal after {after}: it was cut (a crash, or its "
                "last records deleted), or the run is still being written",
            )
        if self._public_key is not None and self._seals == 0:
            self._log.add(self._steps, "no seal to check the public key against")
        signed = ""
        if self._signed:
            keys = ", ".join(sorted(self._keys))
            checked = "the given key" if self._public_key is not None else f"key {keys}"
            signed = f", {self._signed} signed (by {checked})"
        what = f"{self._lines} line(s) linked, {self._seals} seal(s){signed}"
        note = "" if self._signed else "unsigned: the chain shows edits, not who wrote it"
        return PropertyReport(
            self.name,
            self.version,
            self._lines,
            self._log.count,
            tuple(self._log.kept),
            note,
            what=what,
        )


__all__ = ["ChainVerifier"]
