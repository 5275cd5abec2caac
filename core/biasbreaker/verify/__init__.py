"""How a run trace is checked (``biasbreaker verify``).

:func:`verify_trace` streams one trace once through every verifier;
:func:`verify_traces` checks a set of traces and aggregates the verdicts per property.

- :mod:`~biasbreaker.verify.verifier` — :func:`verify_trace` and its report;
- :mod:`~biasbreaker.verify.properties` — one verifier per property;
- :mod:`~biasbreaker.verify.traceset` — a set of traces, one verdict per property;
- :mod:`~biasbreaker.verify.report` — the report types the verifiers share.

Source:
    ``ARCHITECTURE.md`` §6; ``docs/control.md`` §7.
"""

from biasbreaker.verify.properties.rlb import PROPERTY_VERSION, RLBReport
from biasbreaker.verify.report import PropertyReport, Violation
from biasbreaker.verify.traceset import (
    PropertyTotal,
    ReportSpool,
    TraceSetVerification,
    trace_files,
    verify_traces,
)
from biasbreaker.verify.verifier import DEFAULT_MAX_HISTORY, VerificationReport, verify_trace

__all__ = [
    "DEFAULT_MAX_HISTORY",
    "PROPERTY_VERSION",
    "PropertyReport",
    "PropertyTotal",
    "RLBReport",
    "ReportSpool",
    "TraceSetVerification",
    "VerificationReport",
    "Violation",
    "trace_files",
    "verify_trace",
    "verify_traces",
]
