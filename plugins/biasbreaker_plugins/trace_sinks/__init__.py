"""First-party trace sinks: ``file`` (the default), ``sqlite`` and ``postgresql``.

Registered through the ``biasbreaker`` entry-point group like any third-party plugin. This
module stays cheap to import: each factory imports its sink's module (and, for
``postgresql``, psycopg) only when that sink is selected.

The database sinks keep every thread's trace lines in one append-only table,
``biasbreaker_trace_lines (thread_id, seq, line)`` with primary key ``(thread_id, seq)``, at
``[trace] url`` (``sqlite:///traces.db``, ``postgresql://host/db``); see ``docs/langgraph.md``
§6.
"""

from __future__ import annotations

from biasbreaker.hookspecs import hookimpl
from biasbreaker.registry import BuildContext, NoOptions, Register
from biasbreaker.trace.sink import TraceBackend


def make_file(options: NoOptions, context: BuildContext) -> TraceBackend:
    """Factory of the ``file`` sink."""
    from biasbreaker_plugins.trace_sinks.file import FileBackend

    return FileBackend()


def make_sqlite(options: NoOptions, context: BuildContext) -> TraceBackend:
    """Factory of the ``sqlite`` sink (standard library ``sqlite3``)."""
    from biasbreaker_plugins.trace_sinks.sqlite import SqliteBackend

    return SqliteBackend()


def make_postgresql(options: NoOptions, context: BuildContext) -> TraceBackend:
    """Factory of the ``postgresql`` sink (psycopg 3, the ``postgres`` extra)."""
    from biasbreaker_plugins.trace_sinks.postgres import PostgresBackend

    return PostgresBackend()


@hookimpl
def trace_sink(register: Register[TraceBackend]) -> None:
    """Register the ``file``, ``sqlite`` and ``postgresql`` trace sinks."""
    register(
        "file",
        make_file,
        summary="one JSON Lines trace file per thread at the adapter's trace_path (default)",
    )
    register(
        "sqlite",
        make_sqlite,
        summary="every thread's trace lines in one append-only SQLite table (sqlite:///PATH)",
    )
    register(
        "postgresql",
        make_postgresql,
        summary="every thread's trace lines, from any worker, in one append-only PostgreSQL "
        "table (postgresql://...)",
        requires=("psycopg",),
        install="pip install 'biasbreaker[postgres]'",
    )


__all__ = ["make_file", "make_postgresql", "make_sqlite", "trace_sink"]
