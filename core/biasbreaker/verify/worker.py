"""The worker of a split verification: ``python -m biasbreaker.verify.worker TRACE CUT [...]``.

:func:`biasbreaker.verify.verify_trace` starts it for a large trace, so the lines from byte
``CUT`` to the end are verified on another core while the calling process verifies the lines
before (:mod:`biasbreaker.verify.split`). It is a fresh interpreter (not a fork or a
multiprocessing spawn), so it works whatever the caller's main module does. Options:
``--max-history W``, ``--public-key KEY`` (base64), ``--warmup-bytes N``. Output: the pickled
:class:`~biasbreaker.verify.split.Half` on stdout, exit 0; exit 1 when the lines around the cut
cannot start a half or a line is malformed (the caller then verifies the trace in one pass and
reports the error itself).
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

from biasbreaker.errors import TraceError
from biasbreaker.verify.split import WARMUP_BYTES, verify_half


def main(argv: list[str]) -> int:
    """Verify the half of ``argv[0]`` from byte ``argv[1]``; print it pickled, or return 1."""
    path, cut, options = Path(argv[0]), int(argv[1]), dict(zip(argv[2::2], argv[3::2], strict=True))
    max_history = options.get("--max-history")
    try:
        half = verify_half(
            path,
            cut,
            max_history=None if max_history is None else int(max_history),
            public_key=options.get("--public-key"),
            warmup_bytes=int(options.get("--warmup-bytes", WARMUP_BYTES)),
        )
    except TraceError:
        return 1
    if half is None:
        return 1
    sys.stdout.buffer.write(pickle.dumps(half))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
