"""Database URLs and engines: SQLite through pysqlite (sync, used from threads), Postgres through asyncpg.

Accepted URLs:
- `sqlite:///relative/path.db`, `sqlite:////absolute/path.db` (also `sqlite+pysqlite://`). In-memory
  SQLite is refused: the writer thread and the reader threads must share one file.
- `postgresql://…`, `postgres://…`, `postgresql+asyncpg://…`, optionally with `?schema=<name>` to keep
  the tables in that schema (sets the connection's `search_path`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import NullPool

from agentforge.store.schema import declare_postgres_predicates

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

DB_FILENAME: Final = "agentforge.db"
SQLITE_BUSY_TIMEOUT_MS: Final = 5000

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_SQLITE_DRIVERS = frozenset({"sqlite", "sqlite+pysqlite"})
_POSTGRES_DRIVERS = frozenset({"postgresql", "postgres", "postgresql+asyncpg"})

Dialect = Literal["sqlite", "postgresql"]


@dataclass(frozen=True, slots=True)
class DatabaseTarget:
    """A parsed database URL: which dialect, the driver URL to connect with, and the Postgres schema."""

    dialect: Dialect
    url: URL
    schema: str | None = None

    @property
    def sqlite_path(self) -> Path:
        if self.dialect != "sqlite" or self.url.database is None:
            raise ValueError("not a SQLite database URL")
        return Path(self.url.database)


def sqlite_url(data_dir: Path) -> str:
    """The default database URL: `<data_dir>/agentforge.db`."""
    return f"sqlite:///{(data_dir / DB_FILENAME).as_posix()}"


def parse_database_url(raw: str) -> DatabaseTarget:
    """Validate a database URL and pick the driver we use for it."""
    try:
        url = make_url(raw)
    except ArgumentError as exc:
        raise ValueError(f"Invalid database URL: {raw!r}") from exc
    if url.drivername in _SQLITE_DRIVERS:
        return _sqlite_target(url)
    if url.drivername in _POSTGRES_DRIVERS:
        return _postgres_target(url)
    raise ValueError(
        f"Unsupported database URL scheme {url.drivername!r}: use sqlite:///<path> or postgresql://…"
    )


def _sqlite_target(url: URL) -> DatabaseTarget:
    if url.query:
        raise ValueError("SQLite URLs take no query parameters")
    if url.database in (None, "", ":memory:"):
        raise ValueError("In-memory SQLite is not supported: the writer and readers share one file")
    return DatabaseTarget("sqlite", url.set(drivername="sqlite+pysqlite"))


def _postgres_target(url: URL) -> DatabaseTarget:
    schema = url.query.get("schema")
    if isinstance(schema, tuple):
        raise ValueError("Give the schema query parameter once")
    if schema is not None and not _SCHEMA_NAME.fullmatch(schema):
        raise ValueError(f"Invalid schema name {schema!r}")
    driver_url = url.set(drivername="postgresql+asyncpg").difference_update_query(["schema"])
    return DatabaseTarget("postgresql", driver_url, schema)


class BeginningSQLiteDialect(SQLiteDialect_pysqlite):
    """pysqlite, with SQLAlchemy (not sqlite3) opening each transaction with our BEGIN statement.

    SQLAlchemy's documented recipe does this from a `begin` event listener, but any engine-level
    connection listener makes every statement dispatch execute events too (~15-20 us per
    transaction on the writer's hot path); the dialect's own `do_begin` hook costs nothing extra.
    """

    # Only transaction control changes, not SQL compilation: the statement cache stays valid.
    supports_statement_cache = True

    def __init__(self, begin: str = "BEGIN", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.begin_statement = begin

    def do_begin(self, dbapi_connection: Any) -> None:
        dbapi_connection.execute(self.begin_statement)


registry.register("sqlite.agentforge", __name__, BeginningSQLiteDialect.__name__)


def sqlite_engine(target: DatabaseTarget, *, pool_size: int, begin: str) -> Engine:
    """A pysqlite engine whose connections run WAL, synchronous=NORMAL, a busy timeout, foreign keys ON.

    `begin` is the statement that opens each transaction: the writer uses `BEGIN IMMEDIATE` so it takes
    the write lock up front (a deferred transaction that reads and then writes can fail with
    SQLITE_BUSY_SNAPSHOT instead of waiting); readers use plain `BEGIN` for a consistent snapshot.
    """
    engine = create_engine(
        target.url.set(drivername="sqlite+agentforge"), pool_size=pool_size, max_overflow=0, begin=begin
    )
    event.listen(engine, "connect", _configure_sqlite_connection)
    return engine


def _configure_sqlite_connection(dbapi_connection: Any, _record: Any) -> None:
    # The dialect emits BEGIN itself; pysqlite's implicit transactions would get in the way.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def postgres_pool_size(readers: int) -> int:
    """The connections a store's pool keeps open: the writer's and the ownership lock's, each held
    for the store's lifetime, and two per reader. Reads of concurrent turns use them all at once:
    a connection beyond the kept ones is opened for one use and closed after it (a new backend
    started, its type codecs set up, every statement it runs prepared again)."""
    return 2 + 2 * readers


def postgres_engine(
    target: DatabaseTarget, *, pool_size: int, max_overflow: int | None = None
) -> AsyncEngine:
    """An asyncpg engine; with a schema, every connection's `search_path` points at it.

    `pool_size` connections are kept open, up to `max_overflow` (default: as many) more are opened
    for one use at a busy time. `pool_size=0`: no pool, each use opens and closes its own connection
    (for rare maintenance work that should not keep a connection open for the process's lifetime).
    """
    # Imported here: SQLAlchemy's asyncio layer brings its ORM (~7 MB), which SQLite never needs.
    from sqlalchemy.ext.asyncio import create_async_engine

    declare_postgres_predicates()
    connect_args: dict[str, Any] = {}
    if target.schema is not None:
        connect_args["server_settings"] = {"search_path": target.schema}
    if pool_size == 0:
        engine = create_async_engine(target.url, poolclass=NullPool, connect_args=connect_args)
    else:
        engine = create_async_engine(
            target.url,
            pool_size=pool_size,
            max_overflow=pool_size if max_overflow is None else max_overflow,
            connect_args=connect_args,
        )
    event.listen(engine.sync_engine.pool, "reset", _refuse_stray_transaction)
    return engine


class StrayTransactionError(Exception):
    """A connection given back with a transaction SQLAlchemy does not know of (see readers.py)."""


def _refuse_stray_transaction(dbapi_connection: Any, _record: Any, _state: Any) -> None:
    # In AUTOCOMMIT mode SQLAlchemy rolls nothing back on return, so a transaction a tenant read
    # opened itself and did not end would carry its tenant into the connection's next use. Raising
    # here makes the pool invalidate the connection instead of keeping it.
    if dbapi_connection.autocommit and dbapi_connection.driver_connection.is_in_transaction():
        raise StrayTransactionError("a pooled connection was given back inside a transaction")
