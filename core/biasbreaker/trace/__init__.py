"""The run trace: how it is written and read (checking it is :mod:`biasbreaker.verify`).

A trace file is UTF-8 JSON Lines, every line the RFC 8785 canonical JSON of its record. Line 1
is a header (``"kind": "header"``) carrying the schema name and version and the run's control
configuration (thresholds, cool-down, retry budget, calibration window, probation mode, EWMA
smoothing, seed). Every further line is one step (``"kind": "step"``), in step order with no
gaps, or a seal (``"kind": "seal"``). Every line after the header carries ``prev``, the SHA-256
of the line before it (:mod:`~biasbreaker.trace.chain`), and a seal closes the chain at each
pause for review and at the end of a run (optionally signed, :mod:`~biasbreaker.trace.signing`).
The same seed and inputs give byte-identical files.

Writing (:mod:`~biasbreaker.trace.writer`) appends and flushes one whole line per record
(``fsync`` optional), so a crash loses at most the line being written. Reading
(:mod:`~biasbreaker.trace.reader`, decoding in :mod:`~biasbreaker.trace.lines`) accepts a file
whose last line was cut mid-way: it returns the records up to the last whole line and warns
(:class:`TraceTruncatedWarning`). A last line that lacks only its newline is a whole record and
is read; appending to such a file first adds the newline. Any other malformed line is a
:class:`~biasbreaker.errors.TraceError` naming the file and line. Version-1 traces (no chain,
no seals) are still read.

Source:
    ``ARCHITECTURE.md`` §6 "Run trace and properties"; ``docs/control.md`` §6 (schema).
"""

from biasbreaker.trace.chain import line_digest, seal_message
from biasbreaker.trace.reader import Trace, TraceReader, TraceTruncatedWarning, read_trace
from biasbreaker.trace.records import (
    HELD_FOR_REVIEW,
    SCHEMA,
    SCHEMA_VERSION,
    SealRecord,
    Signature,
    StepRecord,
    TraceHeader,
    record_line,
)
from biasbreaker.trace.signing import SIGNING_KEY_ENV, Signer
from biasbreaker.trace.writer import FROM_ENVIRONMENT, TraceWriter, seal_trace

__all__ = [
    "FROM_ENVIRONMENT",
    "HELD_FOR_REVIEW",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SIGNING_KEY_ENV",
    "SealRecord",
    "Signature",
    "Signer",
    "StepRecord",
    "Trace",
    "TraceHeader",
    "TraceReader",
    "TraceTruncatedWarning",
    "TraceWriter",
    "line_digest",
    "read_trace",
    "record_line",
    "seal_message",
    "seal_trace",
]
