"""The run trace: one JSON Lines record per guarded step, written for later verification.

A trace file is UTF-8 JSON Lines. Line 1 is a header (``"kind": "header"``) carrying the
schema name and version and the run's control configuration (thresholds, cool-down, retry
budget, calibration window, seed). Every further line is one step (``"kind": "step"``), in step
order with no gaps. Each line is canonical JSON (sorted keys, no spaces), so the same seed and
inputs give byte-identical files.

Writing appends and flushes one whole line per record (``fsync`` optional), so a crash loses
at most the line being written. Reading accepts a file whose last line was cut mid-way: it
returns the records up to the last whole line and warns (:class:`TraceTruncatedWarning`). A
last line that lacks only its newline (an editor or another tool dropped it) is a whole record
and is read; appending to such a file first adds the newline. Any other malformed line is a
:class:`~biasbreaker.errors.TraceError` naming the file and line.

Source:
    ``ARCHITECTURE.md`` §6 "Run trace and properties"; ``docs/control.md`` (schema).
"""

from biasbreaker.trace.reader import Trace, TraceReader, TraceTruncatedWarning, read_trace
from biasbreaker.trace.records import (
    SCHEMA,
    SCHEMA_VERSION,
    StepRecord,
    TraceHeader,
    record_line,
)
from biasbreaker.trace.writer import TraceWriter

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "StepRecord",
    "Trace",
    "TraceHeader",
    "TraceReader",
    "TraceTruncatedWarning",
    "TraceWriter",
    "read_trace",
    "record_line",
]
