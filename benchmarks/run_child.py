"""One ``biasbreaker run`` in this process, then its peak RSS and wall time as JSON.

Used by ``benchmarks/test_bench_run.py``, one fresh process per configuration, so each peak is
that configuration's own (``ru_maxrss`` of the process, in KiB on Linux). Usage::

    python benchmarks/run_child.py RESULT.json -- run --graph ... --inputs ... --out ...
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path


def main() -> None:
    result, sep, *args = sys.argv[1:]
    assert sep == "--", "usage: run_child.py RESULT.json -- run ARGS..."
    from biasbreaker.cli import app

    start = time.perf_counter()
    code = 0
    try:
        app(args, standalone_mode=False)
    except SystemExit as exc:  # fail() exits with the status
        code = int(exc.code or 0)
    seconds = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    Path(result).write_text(
        json.dumps({"exit": code, "seconds": seconds, "peak_rss_kib": peak_kib}), "utf-8"
    )


if __name__ == "__main__":
    main()
