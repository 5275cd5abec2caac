"""Checking a set of traces against a manifest: the head digests ``results.jsonl`` lists.

``biasbreaker run`` and ``biasbreaker demo`` write one ``results.jsonl`` record per thread with
its trace (``"trace"``, relative to the output folder) and that trace's head digest when the
thread finished or paused (``"trace_head"``, the digest of its last seal). Given that file, a
set of traces can be checked as a whole, which the traces alone cannot show:

- **missing**: a listed trace does not exist;
- **changed**: a listed trace's head differs from the manifest's — it was cut back (to an
  earlier seal, which the trace alone cannot show), continued, edited or replaced;
- **swapped**: a listed trace's head is the one the manifest gives another trace;
- **extra**: a trace given to verify is not in the manifest;
- **status**: a record says ``done`` and its trace ends escalated (a guarded run that escalates
  pauses for human review, so its record said ``review``). The other direction is not checked:
  a ``review`` may be the graph's own ``interrupt()``, or the escalation of a guarded subgraph,
  whose trace is another file;
- **review**: a record's ``review`` does not hold together: its ``frozen.value`` does not hash
  to its ``frozen.sha256``, that digest is no step's ``payload_sha256`` in the record's trace,
  or its ``held`` (with its ``stream``) does not hash to its ``sha256`` — the held output was
  edited in the manifest (the digests are RFC 8785 SHA-256, :meth:`FrozenPayload.of`); an
  unsigned seal rewritten after the edit does not hide it. A value that shows ``<redacted>``
  (``results.jsonl`` is written redacted: a secret-named key, a secret-shaped text) cannot be
  hashed back, so only its digest is checked against the trace;
- **seal**: the manifest differs from its seal (a record was edited, added or removed after the
  run), or, with a public key, the seal is missing, unsigned or signed by another key.

The seal (:func:`seal_manifest`) is ``results.jsonl.seal`` beside the manifest, written when the
run ends: the SHA-256 of the manifest's bytes and its record count, signed with the key that
signs the traces when one is configured. A signed seal checked with ``--public-key`` binds the
whole manifest (which traces, how many, their heads and statuses) to the key holder: dropping a
trace *and* its record is then caught. Unsigned, the seal only catches an edit that did not
also rewrite it; whoever can rewrite the traces can rewrite an unsigned manifest and its seal,
so keep it apart from the traces, or sign (``docs/control.md`` §6).

Source:
    ``docs/control.md`` §6 and §7.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import rfc8785

from biasbreaker.errors import InputError
from biasbreaker.redaction import REDACTED
from biasbreaker.types import FrozenPayload, JSONValue

if TYPE_CHECKING:
    from biasbreaker.trace.signing import Signer

SEAL_SUFFIX: Final = ".seal"
"""The seal of manifest ``results.jsonl`` is ``results.jsonl.seal``, beside it."""

SEAL_KIND: Final = "manifest-seal"
"""The ``kind`` of a manifest seal."""

ESCALATED: Final = "escalated"
"""The control machine's terminal state: a guarded run that reaches it pauses for review."""


def seal_path(manifest: str | os.PathLike[str]) -> Path:
    """Where the seal of ``manifest`` is: the same name plus :data:`SEAL_SUFFIX`."""
    file = Path(manifest)
    return file.with_name(file.name + SEAL_SUFFIX)


def _count_records(data: bytes) -> int:
    return sum(1 for line in data.splitlines() if line.strip())


def seal_message(sha256: str, records: int) -> bytes:
    """The bytes a manifest seal's signature signs: the RFC 8785 form of the seal without it."""
    return bytes(rfc8785.dumps({"kind": SEAL_KIND, "records": records, "sha256": sha256}))


def seal_manifest(path: str | os.PathLike[str], signer: Signer | None) -> Path:
    """Write the seal of a finished manifest (``results.jsonl``): its digest, signed if a key is.

    The seal is one RFC 8785 JSON object, ``{"kind": "manifest-seal", "records": N, "sha256":
    D}`` plus ``"signature": {"key": K, "sig": S}`` when ``signer`` is given (``sig`` signs the
    object without its signature, like a trace seal). It is written to a temporary file and
    renamed over :func:`seal_path`, so it is never seen half-written.

    Args:
        path: The manifest, complete (nothing is appended to it afterwards).
        signer: The key that signs the run's traces, or ``None`` (unsigned).

    Returns:
        The seal file.

    Raises:
        InputError: The manifest cannot be read or the seal cannot be written.
    """
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise InputError(f"manifest {file}: cannot read it: {exc.strerror or exc}") from None
    digest, records = hashlib.sha256(data).hexdigest(), _count_records(data)
    seal: dict[str, JSONValue] = {"kind": SEAL_KIND, "records": records, "sha256": digest}
    if signer is not None:
        seal["signature"] = {
            "key": signer.public_key,
            "sig": signer.sign(seal_message(digest, records)),
        }
    target = seal_path(file)
    temporary = target.with_name(target.name + ".tmp")
    try:
        temporary.write_bytes(bytes(rfc8785.dumps(seal)) + b"\n")
        os.replace(temporary, target)
    except OSError as exc:
        raise InputError(
            f"manifest seal {target}: cannot write it: {exc.strerror or exc}"
        ) from None
    return target


@dataclass(frozen=True)
class ManifestEntry:
    """One trace a manifest lists.

    Args:
        head: Its head digest, or ``None`` (written before heads were recorded).
        status: The record's ``status`` (``done``, ``review``, ...), or ``None``.
        line: The record's line number in the manifest.
        review: The record's ``review`` (the review request the run paused with), or ``None``.
    """

    head: str | None
    status: str | None = None
    line: int = 0
    review: Mapping[str, object] | None = None


def read_manifest(path: str | os.PathLike[str]) -> dict[Path, str | None]:
    """Read the traces and head digests a ``results.jsonl`` lists.

    Args:
        path: The manifest (JSON Lines; records without a ``"trace"`` are skipped).

    Returns:
        Trace file (resolved against the manifest's folder) -> its head digest, or ``None``
        when the record names the trace without a head (written before heads were recorded).

    Raises:
        InputError: The file cannot be read, a line is not a JSON object, or a ``"trace"`` or
            ``"trace_head"`` is not a string (the message names the file and line).
    """
    return {trace: entry.head for trace, entry in read_manifest_entries(path).items()}


def read_manifest_entries(path: str | os.PathLike[str]) -> dict[Path, ManifestEntry]:
    """Read the traces a ``results.jsonl`` lists, with each record's head and status.

    Returns:
        Trace file (resolved against the manifest's folder) -> its :class:`ManifestEntry`.

    Raises:
        InputError: As :func:`read_manifest`; also a ``"status"`` that is not a string.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"manifest {file}: cannot read it: {exc.strerror or exc}") from None
    out: dict[Path, ManifestEntry] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{file}:{number}: not valid JSON: {exc}") from None
        if not isinstance(record, dict):
            raise InputError(f"{file}:{number}: a manifest line must be a JSON object")
        trace, head = record.get("trace"), record.get("trace_head")
        if trace is None:
            continue
        if not isinstance(trace, str) or (head is not None and not isinstance(head, str)):
            raise InputError(f"{file}:{number}: 'trace' and 'trace_head' must be strings")
        status = record.get("status")
        if status is not None and not isinstance(status, str):
            raise InputError(f"{file}:{number}: 'status' must be a string")
        review = record.get("review")
        out[file.parent / trace] = ManifestEntry(
            head, status, number, review if isinstance(review, dict) else None
        )
    return out


def final_state(path: Path, block: int = 1 << 16) -> str | None:
    """The ``state`` of a trace's last step record, read from its end; ``None`` without one.

    Only the last lines are read (backwards, ``block`` bytes at a time): the chain check
    vouches for them when the trace verifies.
    """
    with path.open("rb") as fh:
        end = fh.seek(0, os.SEEK_END)
        tail = b""
        while True:
            start = max(0, end - block)
            fh.seek(start)
            tail = fh.read(end - start) + tail
            end = start
            lines = tail.split(b"\n")
            # the first piece may be a partial line unless the start of the file was reached
            whole = lines if start == 0 else lines[1:]
            for raw in reversed(whole):
                if not raw.strip():
                    continue
                try:
                    record = json.loads(raw)
                except ValueError:
                    return None
                if not isinstance(record, dict):
                    return None
                if record.get("kind") == "step":
                    state = record.get("state")
                    return state if isinstance(state, str) else None
                if record.get("kind") != "seal":
                    return None  # the header (no step), or not a trace
            if start == 0:
                return None
            tail = lines[0]


def _status_problem(entry: ManifestEntry, trace: Path) -> str | None:
    """What is wrong with a record's status given its trace's final state, or ``None``."""
    if entry.status != "done":
        return None
    try:
        state = final_state(trace)
    except OSError:
        return None
    if state == ESCALATED:
        return (
            "status: the manifest says done, but the trace ends escalated (its run paused for "
            "human review: the record was edited)"
        )
    return None


def _digest(value: object) -> str | None:
    """The RFC 8785 SHA-256 of a JSON value (:meth:`FrozenPayload.of`), ``None`` if it has none."""
    try:
        return FrozenPayload.of(value).sha256
    except (InputError, TypeError, ValueError):
        return None


def _step_digests(trace: Path) -> set[str]:
    """The ``payload_sha256`` of every step record of ``trace`` and of its subgraphs' traces.

    A guarded subgraph's trace is ``<trace stem>.<namespace>.jsonl`` beside it (the thread's
    key with the subgraph's namespace); a review of the subgraph's output is the thread's
    record. A file that cannot be read adds nothing.
    """
    digests: set[str] = set()
    for file in (trace, *sorted(trace.parent.glob(f"{trace.stem}.*{trace.suffix}"))):
        try:
            with file.open(encoding="utf-8") as fh:
                for raw in fh:
                    try:
                        record = json.loads(raw)
                    except ValueError:
                        continue
                    if isinstance(record, dict) and record.get("kind") == "step":
                        digest = record.get("payload_sha256")
                        if isinstance(digest, str):
                            digests.add(digest)
        except OSError:
            continue
    return digests


def _redacted(value: object) -> bool:
    """Whether a JSON value holds :data:`~biasbreaker.redaction.REDACTED` (hidden when written).

    ``results.jsonl`` is written redacted (a secret-named key's value, a secret-shaped text):
    such a value no longer hashes to the digest of what was held, so it cannot be checked.
    """
    if isinstance(value, str):
        return REDACTED in value
    if isinstance(value, dict):
        return any(_redacted(v) for v in value.values())
    if isinstance(value, list):
        return any(_redacted(v) for v in value)
    return False


def _review_problems(entry: ManifestEntry, trace: Path, where: str) -> list[str]:
    """What does not hold together in a record's ``review`` (see the module docstring).

    Args:
        entry: The record's entry.
        trace: Its trace file.
        where: ``manifest:line``, to name the record.
    """
    review = entry.review
    if review is None or not {"held", "frozen", "sha256"} <= set(review):
        return []  # no review, or the graph's own interrupt(): not a guard's review request
    problems: list[str] = []
    frozen = review.get("frozen")
    if isinstance(frozen, dict) and "value" in frozen:
        said, actual = frozen.get("sha256"), _digest(frozen["value"])
        if actual != said and not _redacted(frozen["value"]):
            problems.append(
                f"review: {where}: review.frozen.value hashes to sha256 {actual}, but "
                f"review.frozen.sha256 says {said} (the held output was edited in the manifest)"
            )
        elif said not in _step_digests(trace):
            problems.append(
                f"review: {where}: review.frozen.sha256 {said} is no step's payload_sha256 in "
                f"its trace {trace.name} (the frozen payload was replaced in the manifest)"
            )
    if isinstance(review.get("sha256"), str) and review["sha256"]:
        stream = review.get("stream")
        shown = {"held": review["held"], "stream": stream} if stream else review["held"]
        actual = _digest(shown)
        if actual != review["sha256"] and not _redacted(shown):
            fields = "review.held and review.stream hash" if stream else "review.held hashes"
            problems.append(
                f"review: {where}: {fields} to sha256 {actual}, but review.sha256 says "
                f"{review['sha256']} (the held output was edited in the manifest)"
            )
    return problems


def check_seal(
    manifest: str | os.PathLike[str], public_key: str | None = None
) -> tuple[str, list[tuple[str, str]]]:
    """Check a manifest against its seal (:func:`seal_manifest`).

    Args:
        manifest: The manifest file.
        public_key: The key (base64) that must have signed the seal, or ``None``: a missing
            or unsigned seal is then said, not a problem.

    Returns:
        What the seal shows (for the report) and the problems: ``(seal file, what)``.
    """
    from biasbreaker.trace.signing import signature_valid

    file = Path(manifest)
    where = seal_path(file)
    anyone = "anyone who can rewrite the traces can rewrite it"
    try:
        data = file.read_bytes()
    except OSError:
        return "unsealed", []  # read_manifest has already said why
    try:
        raw = where.read_bytes()
    except FileNotFoundError:
        if public_key is not None:
            return "unsealed", [
                (
                    str(where),
                    "unsigned: --public-key needs the manifest sealed and signed by that key; "
                    f"{where.name} is missing (biasbreaker run and demo write it when the run "
                    "ends, signed when BIASBREAKER_SIGNING_KEY_FILE is set)",
                )
            ]
        return f"unsealed: {anyone}", []
    except OSError as exc:
        return "unreadable seal", [(str(where), f"cannot read it: {exc.strerror or exc}")]
    try:
        seal = json.loads(raw)
    except ValueError:
        seal = None
    records = seal.get("records") if isinstance(seal, dict) else None
    digest = seal.get("sha256") if isinstance(seal, dict) else None
    if (
        not isinstance(seal, dict)
        or seal.get("kind") != SEAL_KIND
        or isinstance(records, bool)
        or not isinstance(records, int)
        or not isinstance(digest, str)
    ):
        return "malformed seal", [(str(where), "malformed: not a manifest seal")]
    problems: list[tuple[str, str]] = []
    actual, count = hashlib.sha256(data).hexdigest(), _count_records(data)
    if actual != digest or count != records:
        problems.append(
            (
                str(file),
                f"edited after it was sealed: {count} record(s), sha256 {actual}; the seal says "
                f"{records} record(s), sha256 {digest} (records edited, added or removed)",
            )
        )
    signature = seal.get("signature")
    if signature is None:
        if public_key is not None:
            problems.append(
                (str(where), "unsigned: --public-key needs the manifest's seal signed by that key")
            )
        return f"sealed, unsigned: {anyone}", problems
    key = signature.get("key") if isinstance(signature, dict) else None
    sig = signature.get("sig") if isinstance(signature, dict) else None
    if (
        not isinstance(key, str)
        or not isinstance(sig, str)
        or not signature_valid(key, seal_message(digest, records), sig)
    ):
        problems.append((str(where), "bad signature: it does not verify against its key"))
        return "signed, signature invalid", problems
    if public_key is None:
        return "signed by the key it names (give --public-key to check whose)", problems
    if key != public_key:
        problems.append((str(where), "signed by another key than the --public-key given"))
        return "signed by another key", problems
    return "signed by the key given", problems


@dataclass(frozen=True)
class ManifestCheck:
    """The set of traces against its manifest.

    Args:
        manifest: The manifest file.
        listed: Traces the manifest lists.
        problems: ``(trace, what)`` for every trace missing, changed, swapped, extra, whose
            status its trace contradicts or whose record's review does not hold together,
            then the seal's problems (``(file, what)``).
        seal: What the seal shows (``signed by the key given``, ``sealed, unsigned: ...``).
    """

    manifest: Path
    listed: int
    problems: tuple[tuple[str, str], ...]
    seal: str = "not checked"

    @property
    def holds(self) -> bool:
        """Whether every listed trace is there with its head and nothing else was given."""
        return not self.problems

    def line(self, name: str | None = None) -> str:
        """One line: ``manifest results.jsonl: HOLDS (320 trace(s) listed, ...; seal)``.

        Args:
            name: How to name the manifest (default: its path as given).
        """
        verdict = "HOLDS" if self.holds else "VIOLATED"
        shown = self.manifest if name is None else name
        return (
            f"manifest {shown}: {verdict} ({self.listed} trace(s) listed, "
            f"{len(self.problems)} problem(s): missing, changed, swapped, extra, status, review or "
            f"seal; "
            f"{self.seal})"
        )

    def to_json(self) -> dict[str, JSONValue]:
        """Return the check as plain JSON."""
        return {
            "manifest": str(self.manifest),
            "holds": self.holds,
            "listed": self.listed,
            "seal": self.seal,
            "problems": [{"trace": t, "problem": p} for t, p in self.problems],
        }


def check_manifest(
    manifest: str | os.PathLike[str],
    listed: Mapping[Path, str | None] | Mapping[Path, ManifestEntry],
    heads: Mapping[Path, str],
    given: Iterable[Path],
    *,
    public_key: str | None = None,
    seal: bool = True,
) -> ManifestCheck:
    """Compare verified traces with a manifest, and the manifest with its seal.

    Args:
        manifest: The manifest file.
        listed: Its entries (:func:`read_manifest_entries`, or :func:`read_manifest`: heads
            only, no status check).
        heads: Each verified trace file -> its head digest.
        given: The trace files given to verify (a given file the manifest does not list is
            extra).
        public_key: The key (base64) the manifest's seal must be signed with, or ``None``.
        seal: Check the seal (:func:`check_seal`).

    Returns:
        The check.
    """
    entries = {
        trace: entry if isinstance(entry, ManifestEntry) else ManifestEntry(entry)
        for trace, entry in listed.items()
    }
    listed = {trace: entry.head for trace, entry in entries.items()}
    owner = {head: trace for trace, head in listed.items() if head is not None}
    resolved = {path.resolve(): head for path, head in heads.items()}
    problems: list[tuple[str, str]] = []
    for trace, head in listed.items():
        actual = resolved.get(trace.resolve())
        if actual is None:
            if not trace.exists():
                problems.append((str(trace), "missing: listed in the manifest, not found"))
            continue
        if head is None or actual == head:
            wrong = _status_problem(entries[trace], trace)
            if wrong is not None:
                problems.append((str(trace), wrong))
            where = f"{Path(manifest).name}:{entries[trace].line}"
            problems.extend((str(trace), p) for p in _review_problems(entries[trace], trace, where))
            continue
        other = owner.get(actual)
        if other is not None:
            problems.append((str(trace), f"swapped: its head is the one listed for {other}"))
        else:
            problems.append(
                (
                    str(trace),
                    f"changed: head {actual} is not the manifest's {head} (cut back, continued, "
                    "edited or replaced)",
                )
            )
    known = {p.resolve() for p in listed}
    problems.extend(
        (str(path), "extra: not listed in the manifest")
        for path in given
        if path.resolve() not in known
    )
    shown = "not checked"
    if seal:
        shown, sealing = check_seal(manifest, public_key)
        problems.extend(sealing)
    return ManifestCheck(Path(manifest), len(listed), tuple(problems), shown)


__all__ = [
    "SEAL_SUFFIX",
    "ManifestCheck",
    "ManifestEntry",
    "check_manifest",
    "check_seal",
    "final_state",
    "read_manifest",
    "read_manifest_entries",
    "seal_manifest",
    "seal_path",
]
