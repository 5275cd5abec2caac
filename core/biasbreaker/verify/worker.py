"""The replay worker: ``python -m biasbreaker.verify.worker TRACE`` prints the replay's report.

:func:`biasbreaker.verify.verify_trace` starts it for a large trace, so the replay runs on
another core while the calling process checks the chain and the properties. It is a fresh
interpreter (not a fork or a multiprocessing spawn), so it works whatever the caller's main
module does. Output: the replay's :class:`~biasbreaker.verify.report.PropertyReport` as one JSON
object on stdout; a malformed trace exits 1 with the error on stderr.
"""

from __future__ import annotations

import json
import sys

from biasbreaker.errors import TraceError
from biasbreaker.verify.verifier import replay_file


def main(argv: list[str]) -> int:
    """Replay ``argv[0]`` and print its report; 1 (and the error on stderr) if malformed."""
    try:
        report = replay_file(argv[0])
    except TraceError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(json.dumps(report.to_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
