"""The hash chain of a run trace (schema version 2).

Every line of a version-2 trace is the RFC 8785 canonical JSON of its record followed by a
newline (:func:`biasbreaker.trace.records.record_line`). A line's *digest* is the SHA-256 (hex)
of those canonical bytes, without the newline. Every line after the header carries ``prev``,
the digest of the line before it, so the chain is rooted in the header: changing, deleting,
inserting or moving any line breaks the link of the line after it. The *head* of a trace is the
digest of its last line; a seal's ``prev`` is the head at the seal, and a finished trace's head
is the digest of its final seal, which ``results.jsonl`` and ``report.md`` list.

Because the digests are over RFC 8785 text, a verifier in another language reproduces them
either from the bytes as written or from the parsed record with any RFC 8785 implementation.

Source:
    RFC 8785, "JSON Canonicalization Scheme (JCS)" (Rundgren, Jordan, Erdtman 2020);
    FIPS 180-4 (SHA-256); ``docs/control.md`` §6.
"""

from __future__ import annotations

import hashlib
from typing import Final

import rfc8785

DIGEST_LENGTH: Final = 64
"""Characters of a digest: SHA-256 in lowercase hex."""


def line_digest(line: bytes) -> str:
    """The digest of one trace line: SHA-256 (hex) of its bytes without the trailing newline.

    Args:
        line: The line as read, with or without its trailing newline.

    Returns:
        64 lowercase hex characters.
    """
    if line.endswith(b"\n"):
        line = line[:-1]
    return hashlib.sha256(line).hexdigest()


def seal_message(steps: int, head: str) -> bytes:
    """The bytes a seal's signature signs: the RFC 8785 form of the seal without its signature.

    Args:
        steps: The seal's step count.
        head: The seal's chain head (its ``prev``).

    Returns:
        ``{"kind":"seal","prev":<head>,"steps":<steps>}`` as canonical UTF-8 bytes.
    """
    return rfc8785.dumps({"kind": "seal", "prev": head, "steps": steps})


__all__ = ["DIGEST_LENGTH", "line_digest", "seal_message"]
