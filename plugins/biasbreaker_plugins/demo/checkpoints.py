"""Where ``biasbreaker run --checkpoint`` checkpoints its threads: a SQLite file or PostgreSQL.

``--checkpoint FILE`` names a new SQLite file (LangGraph's ``AsyncSqliteSaver``);
``--checkpoint postgresql://...`` (or ``postgres://``) a PostgreSQL database, through LangGraph's
``AsyncPostgresSaver`` (the ``postgres`` extra: ``langgraph-checkpoint-postgres`` and
``psycopg``). Either way a run only *starts* threads: a checkpoint that already holds one of the
run's threads (``input-<line>``) is refused before anything is written, because that thread
would be continued instead of started. Resume such threads with ``Command(resume=...)`` on the
same checkpointer (docs/demo.md §5, docs/langgraph.md §6).

A database URL may carry a password; every message here goes through
:func:`~biasbreaker.redaction.redact_text`, which hides URL user info.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from biasbreaker.errors import ConfigError
from biasbreaker.redaction import redact_text

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
"""URL prefixes that make ``--checkpoint`` a PostgreSQL database rather than a file."""

INSTALL_HINT = "install the PostgreSQL extra: pip install 'biasbreaker[postgres]'"


def is_postgres_url(value: str) -> bool:
    """Whether ``value`` is a PostgreSQL connection URL (``postgresql://`` or ``postgres://``)."""
    return value.lower().startswith(POSTGRES_SCHEMES)


@dataclass(frozen=True)
class PostgresCheckpoint:
    """``--checkpoint postgresql://...``: a PostgreSQL database to checkpoint into.

    Args:
        url: The libpq connection URL (a password in it is never printed).
    """

    url: str

    @property
    def shown(self) -> str:
        """The URL as messages show it (user info redacted)."""
        return redact_text(self.url)

    def __str__(self) -> str:
        return self.shown


def _psycopg() -> Any:
    try:
        import psycopg
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"--checkpoint postgresql://...: {INSTALL_HINT} ({exc})") from exc
    return psycopg


def check_postgres_checkpoint(target: PostgresCheckpoint, threads: Sequence[str]) -> None:
    """Check that the database is reachable and holds none of ``threads`` yet.

    Reads only: the tables are created when the run opens the saver
    (:func:`postgres_saver`). Runs before ``--out`` is touched.

    Args:
        target: The database.
        threads: The thread ids the run will start (``input-<line>``).

    Raises:
        ConfigError: The extra is not installed, the database cannot be reached, or it holds
            a checkpoint of one of ``threads`` (the message names the first few and the fixes).
    """
    psycopg = _psycopg()
    try:
        with psycopg.connect(target.url, autocommit=True, connect_timeout=10) as conn:
            exists = conn.execute("SELECT to_regclass('checkpoints') IS NOT NULL").fetchone()
            if not exists or not exists[0]:
                return
            taken = [
                row[0]
                for row in conn.execute(
                    "SELECT DISTINCT thread_id FROM checkpoints WHERE thread_id = ANY(%s) "
                    "ORDER BY thread_id LIMIT 3",
                    (list(threads),),
                )
            ]
    except psycopg.Error as exc:
        raise ConfigError(
            redact_text(
                f"--checkpoint {target.url}: cannot read it as a PostgreSQL database: "
                f"{type(exc).__name__}: {exc}"
            )
        ) from exc
    if taken:
        raise ConfigError(
            f"--checkpoint {target.shown}: the database already holds thread(s) "
            f"{', '.join(taken)}; they would be continued instead of started. Resume them "
            "from it (docs/demo.md §5), or use another database or schema "
            "(?options=-csearch_path%3Dmy_schema), or delete those threads"
        )


@asynccontextmanager
async def postgres_saver(target: PostgresCheckpoint) -> AsyncIterator[Any]:
    """An ``AsyncPostgresSaver`` on ``target``, its tables created (``setup()``).

    Raises:
        ConfigError: The extra is missing or the database cannot be opened or set up.
    """
    psycopg = _psycopg()
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    async with AsyncExitStack() as stack:
        try:
            saver = await stack.enter_async_context(AsyncPostgresSaver.from_conn_string(target.url))
            await saver.setup()
        except psycopg.Error as exc:
            raise ConfigError(
                redact_text(
                    f"--checkpoint {target.url}: cannot set it up as a LangGraph checkpoint "
                    f"database: {type(exc).__name__}: {exc}"
                )
            ) from exc
        yield saver


__all__ = [
    "INSTALL_HINT",
    "POSTGRES_SCHEMES",
    "PostgresCheckpoint",
    "check_postgres_checkpoint",
    "is_postgres_url",
    "postgres_saver",
]
