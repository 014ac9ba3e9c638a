"""Programmatic Alembic: the migrations ship inside the package, so an installed wheel can migrate
without an alembic.ini. Everything here blocks; the store calls it through `asyncio.to_thread`.

A database already at `HEAD_REVISION` (every start but the first) is recognised by one read of
`alembic_version`, without importing Alembic: its import and script parsing used to be a large share
of start-up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from sqlalchemy import Connection, inspect, text

from agentforge.store.engine import DatabaseTarget, parse_database_url, postgres_engine, sqlite_engine
from agentforge.store.private import ensure_private_file
from agentforge.store.privileges import grant_runtime_role

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR: Final = Path(__file__).parent / "migrations"
# The newest migration's revision; tests/store/test_migrations.py checks it against the scripts, so
# adding a migration without moving it fails there.
HEAD_REVISION: Final = "0012_history_revision"
VERSION_TABLE: Final = "alembic_version"


class MigrationError(Exception):
    """The server's own role could not bring the schema to head (typically: it is a runtime role
    without DDL rights, and the owner has not migrated yet)."""


def alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def head_revision() -> str:
    return HEAD_REVISION


def scripts_head() -> str | None:
    """The head as Alembic reads it from the migration scripts (slow: imports and parses them)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def upgrade(conn: Connection, revision: str = "head") -> None:
    """Upgrade the database behind `conn` (the env picks the connection up from the config)."""
    from alembic import command

    config = alembic_config()
    config.attributes["connection"] = conn
    command.upgrade(config, revision)


def current_revision(conn: Connection) -> str | None:
    """The revision the database is stamped with (None: never migrated). The migrations are one
    line, so the table holds at most one row, as Alembic's own reading assumes."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    revision: str | None = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
    return revision


_MIGRATION_LOCK = text("SELECT pg_advisory_lock(hashtext('agentforge.migrate'), hashtext(:schema))")


def upgrade_to_head(url: str, *, runtime_role: str | None = None) -> None:
    """Create or upgrade the tables at `url` to the newest revision (and a missing Postgres schema).

    With `runtime_role` (Postgres; `url` is then the owner's): also give that role exactly the
    privileges the server needs (see privileges.py), right after the upgrade, on the same connection.
    """
    target = parse_database_url(url)
    if runtime_role is not None and target.dialect != "postgresql":
        raise ValueError("A runtime role only applies to Postgres")

    def create_and_upgrade(conn: Connection) -> None:
        if target.dialect == "postgresql":
            # Replicas starting together migrate and grant one after the other (concurrent GRANTs
            # on one table fail); the session-level lock ends with this connection.
            conn.execute(_MIGRATION_LOCK, {"schema": target.schema or "public"})
            conn.commit()
        if target.schema is not None:
            create_schema_if_missing(conn, target.schema)
        if current_revision(conn) != HEAD_REVISION:
            upgrade(conn)
        if runtime_role is not None:
            grant_runtime_role(conn, runtime_role)

    run_with_connection(target, create_and_upgrade)


def create_schema_if_missing(conn: Connection, schema: str) -> None:
    # Look first: CREATE SCHEMA IF NOT EXISTS still needs CREATE on the database, which a runtime
    # role given a ready-made schema may not have.
    exists = conn.execute(
        text("SELECT 1 FROM pg_namespace WHERE nspname = :schema"), {"schema": schema}
    ).scalar()
    if not exists:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))  # name checked by parse_database_url
        conn.commit()


def run_with_connection(target: DatabaseTarget, work: Callable[[Connection], None]) -> None:
    """Open a short-lived sync `Connection` to the target, run `work` on it, close everything.

    Postgres only has an async driver here, so its connection lives on a private event loop in the
    calling thread and `work` runs through `run_sync`.
    """
    if target.dialect == "sqlite":
        _run_on_sqlite(target, work)
    else:
        asyncio.run(_run_on_postgres(target, work))


def _run_on_sqlite(target: DatabaseTarget, work: Callable[[Connection], None]) -> None:
    # A new database (and its data directory) is private to the server's user from the start.
    ensure_private_file(target.sqlite_path)
    engine = sqlite_engine(target, pool_size=1, begin="BEGIN IMMEDIATE")
    try:
        with engine.connect() as conn:
            work(conn)
            conn.commit()
    finally:
        engine.dispose()


async def _run_on_postgres(target: DatabaseTarget, work: Callable[[Connection], None]) -> None:
    engine = postgres_engine(target, pool_size=1)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(work)
            await conn.commit()
    finally:
        await engine.dispose()
