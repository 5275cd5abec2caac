"""The ``sqlite`` trace sink: every thread's trace lines in one append-only SQLite table.

``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (SQLAlchemy's form). The
database is opened in WAL mode with a busy time-out, so worker processes on one machine can
share it; ``INSERT ... ON CONFLICT DO NOTHING`` on the primary key ``(thread_id, seq)`` makes a
second writer's line at a taken seq a :class:`~biasbreaker.errors.TraceError`.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from biasbreaker.errors import ConfigError
from biasbreaker.trace.sink import check_scheme
from biasbreaker.trace.store import StoreSink
from biasbreaker_plugins.trace_sinks.rows import TABLE, SqlLines

CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (thread_id TEXT NOT NULL, "
    "seq INTEGER NOT NULL CHECK (seq >= 0), line BLOB NOT NULL, "
    "PRIMARY KEY (thread_id, seq)) WITHOUT ROWID"
)
BUSY_TIMEOUT_S = 30.0
"""Seconds a writer waits for another process's write lock before failing."""


def sqlite_path(url: str, key: str = "[trace] url") -> Path:
    """The database file of a ``sqlite:///PATH`` URL.

    Raises:
        ConfigError: Not a ``sqlite:///`` URL, or an in-memory database (not shared by
            workers, lost at exit).
    """
    check_scheme(url, "sqlite", key)
    rest = url.split("://", 1)[1]
    if not rest.startswith("/") or rest in ("/", "/:memory:") or "?" in rest:
        raise ConfigError(
            f"{key} = {url!r}: give a database file as sqlite:///relative.db or "
            "sqlite:////absolute/path.db (no host, no in-memory database, no query)"
        )
    return Path(rest[1:])


class SqliteStore(SqlLines):
    """The ``biasbreaker_trace_lines`` table of one SQLite database.

    Args:
        url: ``sqlite:///PATH``.
        create: Create the database and table if missing (a sink); else the file must exist
            (a command reading it).
        fsync: ``synchronous=FULL`` (durable against power loss) instead of ``NORMAL``.

    Raises:
        ConfigError: A bad URL, or the database cannot be opened.
    """

    def __init__(self, url: str, *, create: bool = True, fsync: bool = False) -> None:
        self.path = sqlite_path(url)
        super().__init__()
        self.location = url
        self._mark = "?"
        self._errors = sqlite3.Error
        if not create and not self.path.is_file():
            raise ConfigError(f"{url}: no SQLite database at {self.path}")
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_S,
                isolation_level=None,
                check_same_thread=False,
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
            if create:
                self._db.execute(CREATE)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"{url}: cannot open the SQLite trace store: {exc}") from exc


class SqliteBackend:
    """The ``sqlite`` sink's backend."""

    def open_sink(self, location: str, *, adapter: str, fsync: bool) -> StoreSink:
        """A sink writing to the database at ``location`` (created if missing)."""
        return StoreSink(SqliteStore(location, fsync=fsync), adapter=adapter)

    def open_store(self, location: str) -> SqliteStore:
        """The existing database at ``location``, to read."""
        return SqliteStore(location, create=False)


__all__ = ["SqliteBackend", "SqliteStore", "sqlite_path"]
