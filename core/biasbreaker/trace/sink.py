"""Trace sinks: the extension point behind where a guarded run's trace records go.

A framework adapter writes each thread's records through a :class:`TraceSink`; which one is
``[trace] sink`` (the ``trace_sink`` hook): ``file`` (the default, one JSON Lines file per
thread, :class:`~biasbreaker.trace.writer.TraceWriter`) or a database sink, which keeps the
*same canonical lines* in a :class:`LineStore` (:class:`~biasbreaker.trace.store.StoreSink`
does the chaining and sealing over any store). A sink's factory returns a
:class:`TraceBackend`, which opens sinks for adapters and stores for the commands.

Source:
    Issue 19 part 2, "Trace store as an extension point"; ``docs/langgraph.md`` §6.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from biasbreaker.errors import ConfigError, PluginError

if TYPE_CHECKING:
    from biasbreaker.config import Settings
    from biasbreaker.machine import ControlMachine
    from biasbreaker.registry import BuildContext
    from biasbreaker.trace.records import StepRecord

FILE_SINK = "file"
"""The default sink's name: one trace file per thread at the adapter's ``trace_path``."""


class TraceSink(Protocol):
    """Where an adapter appends the trace records of its threads.

    Safe to call from several threads of one process. Records of a thread arrive in step order;
    a sink never reorders, drops or duplicates them, and raises
    :class:`~biasbreaker.errors.TraceError` rather than do so.
    """

    @property
    def enabled(self) -> bool:
        """Whether records are kept at all (the file sink with an empty ``trace_path``: no)."""
        ...

    def check_new_run(self, thread_id: str) -> None:
        """Refuse a new run (no breaker state) on a thread whose trace already holds records.

        Raises:
            TraceError: Naming where the records are, the thread and their count.
        """
        ...

    def write(self, thread_id: str, machine: ControlMachine, records: list[StepRecord]) -> None:
        """Append ``records`` (consecutive steps, from the machine's run) to the thread's trace.

        Raises:
            TraceError: The stored header differs, the store is behind the machine, or another
                writer appended to the thread at the same position.
        """
        ...

    def seal(self, thread_id: str) -> None:
        """Seal the thread's trace (a pause for review, or an end); idempotent."""
        ...

    def close(self, thread_id: str | None = None) -> None:
        """Release files or connections (idempotent).

        Args:
            thread_id: Release only what this thread holds (its run returned while other
                threads may still be writing: ``biasbreaker run --concurrency``); ``None``:
                everything.
        """
        ...


class LineStore(Protocol):
    """An append-only table of trace lines: key (thread id, seq), seq 0 the header.

    Each value is one whole canonical line, newline included, exactly the bytes the file trace
    holds; a thread's lines in seq order are its trace file.
    """

    @property
    def location(self) -> str:
        """The store's URL, with any password removed (for messages)."""
        ...

    def threads(self) -> list[str]:
        """The thread ids that hold at least one line, sorted."""
        ...

    def lines(self, thread_id: str) -> list[bytes]:
        """The thread's lines in seq order (empty if it has none).

        Raises:
            TraceError: The seqs are not 0, 1, 2, … (a gap: a row was deleted).
        """
        ...

    def append(self, thread_id: str, seq: int, line: bytes) -> None:
        """Insert one line at ``(thread_id, seq)``, durably, before returning.

        Raises:
            TraceError: The thread already has a line at ``seq`` (another writer appended
                first); the message names the store, the thread and the seq. Nothing is
                written or overwritten.
        """
        ...

    def close(self) -> None:
        """Close the connection (idempotent)."""
        ...


@runtime_checkable
class TraceBackend(Protocol):
    """What a ``trace_sink`` factory returns."""

    def open_sink(self, location: str, *, adapter: str, fsync: bool) -> TraceSink:
        """Open the sink an adapter writes through.

        Args:
            location: The file sink's ``trace_path`` template, or a database sink's URL
                (``[trace] url``); see :func:`sink_location`.
            adapter: The adapter named in each trace header (e.g. ``"langgraph"``).
            fsync: ``[trace] fsync``: make every record durable before returning.

        Raises:
            ConfigError: The location is not one this sink can write.
        """
        ...

    def open_store(self, location: str) -> LineStore:
        """Open the stored lines at ``location`` for reading (a URL of this sink's scheme).

        Raises:
            ConfigError: The sink keeps no line store, or the URL cannot be opened.
        """
        ...


def sink_location(settings: Settings, trace_path: str) -> str:
    """Where the selected sink writes: ``trace_path`` for the file sink, else ``[trace] url``."""
    trace = settings.trace
    return trace_path if trace.sink == FILE_SINK else trace.url


def check_sink_choice(settings: Settings, trace_path: str, *, adapter: str) -> None:
    """Refuse an adapter's ``trace_path`` beside a database sink (one would be ignored).

    Raises:
        ConfigError: ``trace_path`` is set while ``[trace] sink`` is not the file sink; the
            message names ``[plugin.<adapter>] trace_path``, the sink and both fixes.
    """
    sink = settings.trace.sink
    if sink != FILE_SINK and trace_path:
        raise ConfigError(
            f"[plugin.{adapter}] trace_path = {trace_path!r} is set, but [trace] sink = "
            f"{sink!r} stores the trace in the database at [trace] url: remove trace_path, or "
            "set [trace] sink = 'file' to write files"
        )


def build_backend(context: BuildContext) -> TraceBackend:
    """Build the selected ``trace_sink`` (``[trace] sink``) and check its shape.

    Raises:
        PluginError: The factory failed, or returned no ``open_sink``/``open_store``.
    """
    backend = context.build("trace_sink")
    if not isinstance(backend, TraceBackend):
        name = context.settings.trace.sink
        raise PluginError(
            f"trace_sink {name!r} built {backend!r}, which lacks open_sink/open_store; "
            "its plugin must return a biasbreaker.trace.sink.TraceBackend"
        )
    return backend


def open_sink(context: BuildContext, trace_path: str, *, adapter: str = "langgraph") -> TraceSink:
    """The sink an adapter writes its threads' records through, as configured.

    Args:
        context: The kernel (its settings choose the sink).
        trace_path: The adapter's ``trace_path`` option (used by the file sink only).
        adapter: The adapter's name, written into each trace header.

    Raises:
        ConfigError: A database sink whose URL cannot be opened.
        PluginError: As :func:`build_backend`.
    """
    backend = build_backend(context)
    location = sink_location(context.settings, trace_path)
    return backend.open_sink(location, adapter=adapter, fsync=context.settings.trace.fsync)


def url_scheme(url: str) -> str | None:
    """The sink name a URL selects: its scheme (``sqlite:///x.db`` → ``"sqlite"``), or ``None``.

    A driver suffix is dropped (``postgresql+psycopg://`` → ``"postgresql"``); ``postgres`` is
    read as ``postgresql``. A plain path (no ``://``) is not a URL.
    """
    scheme, sep, _ = url.partition("://")
    if not sep or not scheme or "/" in scheme or "\\" in scheme:
        return None
    scheme = scheme.split("+", 1)[0].lower()
    return "postgresql" if scheme == "postgres" else scheme


def is_url(argument: str) -> bool:
    """Whether a command-line argument names a store by URL rather than a file or folder."""
    return url_scheme(argument) is not None


def check_scheme(url: str, name: str, key: str = "[trace] url") -> None:
    """Refuse a URL whose scheme is not the sink's own.

    Raises:
        ConfigError: Naming the key, the URL's scheme and the sink.
    """
    scheme = url_scheme(url)
    if not url:
        raise ConfigError(f"{key} is empty: the {name} trace sink needs a {name}:// URL")
    if scheme != name:
        raise ConfigError(
            f"{key} = {redact_url(url)!r} is not a {name} URL (scheme {scheme!r}); give a "
            f"{name}:// URL, or select the sink its scheme names ([trace] sink)"
        )


def redact_url(url: str) -> str:
    """``url`` with the password of its ``user:password@`` part replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, tail = rest.partition("/")
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        netloc = f"{userinfo}@{host}"
    return f"{scheme}{sep}{netloc}{slash}{tail}"


__all__ = [
    "FILE_SINK",
    "LineStore",
    "TraceBackend",
    "TraceSink",
    "build_backend",
    "check_scheme",
    "check_sink_choice",
    "is_url",
    "open_sink",
    "redact_url",
    "sink_location",
    "url_scheme",
]
