"""The `database_url` fixture, once per dialect: SQLite in a temp file, Postgres in a fresh schema.

Postgres runs when AGENTFORGE_TEST_DATABASE_URL points at a server (e.g.
postgresql://postgres@127.0.0.1:5432/test) and skips with that reason otherwise. It runs the way a
deployment does: two roles, neither superuser nor BYPASSRLS: `agentforge_test_owner` owns each
test's schema and runs the migrations, and the URL a test gets is the runtime role's,
`agentforge_test_runtime`, which row-level security binds. So every Postgres test proves that the
store sets the tenant wherever it reads or writes. `owner_url_for(url)` gives the owner's URL of the
same schema (None on SQLite, which has one role). `database_url` comes migrated to head with the
runtime role granted; `empty_database_url` is a schema with no tables yet (for migration tests).
Each schema is dropped afterwards. Store tests and the end-to-end `live` server both run on it.

Migrating a schema takes ~0.5 s of DDL round trips, paid by about a thousand tests. So the first
migrated schema of a run is migrated for real, by the owner, then dumped with `pg_dump`; every later
one is that dump replayed under a new name in one round trip (~30 ms). Migrations themselves are
tested on `empty_database_url`. Without `pg_dump` every schema is migrated.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import asyncpg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from agentforge.store import parse_database_url, sqlite_url
from agentforge.store.migrate import upgrade_to_head

POSTGRES_URL_ENV = "AGENTFORGE_TEST_DATABASE_URL"
OWNER_ROLE: Final = "agentforge_test_owner"
RUNTIME_ROLE: Final = "agentforge_test_runtime"

# Roles are per cluster: helpers running tests at once may race to create them.
_ROLE_OPTIONS: Final = {
    OWNER_ROLE: "LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB",
    RUNTIME_ROLE: "LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB",
}
_DUPLICATE_OBJECT = "42710"
_UNIQUE_VIOLATION = "23505"  # a racing CREATE ROLE can also fail on pg_authid's unique index
_CONCURRENTLY_UPDATED = "XX000"  # "tuple concurrently updated": a racing GRANT on the database
_roles_ready = False


def owner_url_for(url: str) -> str | None:
    """The owner role's URL for a URL these fixtures gave out; None for SQLite."""
    parsed = make_url(url)
    if parsed.drivername.startswith("sqlite"):
        return None
    return parsed.set(username=OWNER_ROLE, password=None).render_as_string(hide_password=False)


def _role_url(base: str, role: str, schema: str) -> str:
    url = make_url(base).set(username=role, password=None).update_query_dict({"schema": schema})
    return url.render_as_string(hide_password=False)


async def _sqlstate_tolerant(conn: AsyncConnection, statement: str, *tolerated: str) -> None:
    """Run `statement` in a savepoint; a racing helper's error with one of `tolerated` is fine."""
    try:
        async with conn.begin_nested():
            await conn.exec_driver_sql(statement)
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) not in tolerated:
            raise


async def _ensure_roles(conn: AsyncConnection) -> None:
    for role, options in _ROLE_OPTIONS.items():
        await _sqlstate_tolerant(conn, f"CREATE ROLE {role} {options}", _DUPLICATE_OBJECT, _UNIQUE_VIOLATION)
    database = (await conn.exec_driver_sql("SELECT current_database()")).scalar_one()
    can_create = f"SELECT has_database_privilege('{OWNER_ROLE}', current_database(), 'CREATE')"
    granted = (await conn.exec_driver_sql(can_create)).scalar_one()
    if not granted:
        await _sqlstate_tolerant(
            conn, f'GRANT CREATE ON DATABASE "{database}" TO {OWNER_ROLE}', _CONCURRENTLY_UPDATED
        )


_template: str | None = None  # the first migrated schema's dump, its name as `_TEMPLATE_NAME`
_TEMPLATE_NAME: Final = "store_test_template_schema"


async def _migrate(base: str, schema: str) -> None:
    """Bring the new, empty `schema` to head, with the runtime role granted."""
    global _template
    if _template is not None:
        await _run_script(base, _template.replace(_TEMPLATE_NAME, schema))
        return
    owner = _role_url(base, OWNER_ROLE, schema)
    await asyncio.to_thread(upgrade_to_head, owner, runtime_role=RUNTIME_ROLE)
    if shutil.which("pg_dump") is not None:
        _template = await _dump(base, schema)


async def _dump(base: str, schema: str) -> str:
    """The schema's objects, grants and rows as SQL naming it `_TEMPLATE_NAME`."""
    url = make_url(base)
    process = await asyncio.create_subprocess_exec(
        "pg_dump",
        "--inserts",
        f"--schema={schema}",
        f"--host={url.host or '127.0.0.1'}",
        f"--port={url.port or 5432}",
        f"--username={url.username or 'postgres'}",
        url.database or "postgres",
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, **({"PGPASSWORD": url.password} if url.password else {})},
    )
    out, _ = await process.communicate()
    assert process.returncode == 0, "pg_dump failed"
    # psql meta-commands (`\restrict`) are not SQL, and the schema exists before it is filled; its
    # name is unique enough to replace.
    lines = [
        line
        for line in out.decode().splitlines()
        if not line.startswith("\\") and line != f"CREATE SCHEMA {schema};"
    ]
    return "\n".join(lines).replace(schema, _TEMPLATE_NAME)


async def _run_script(base: str, script: str) -> None:
    """Many statements in one simple-query round trip, on a connection of their own (the dump sets
    session settings such as an empty search_path)."""
    url = make_url(base)
    conn = await asyncpg.connect(
        host=url.host, port=url.port, user=url.username, password=url.password, database=url.database
    )
    try:
        await conn.execute(script)
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def _postgres_schema(*, migrated: bool) -> AsyncIterator[str]:
    global _roles_ready
    base = os.environ.get(POSTGRES_URL_ENV)
    if not base:
        pytest.skip(f"{POSTGRES_URL_ENV} not set")
    schema = f"store_test_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(parse_database_url(base).url)
    try:
        async with admin.begin() as conn:
            if not _roles_ready:
                await _ensure_roles(conn)
                _roles_ready = True
            await conn.exec_driver_sql(f'CREATE SCHEMA "{schema}" AUTHORIZATION {OWNER_ROLE}')
        if migrated:
            await _migrate(base, schema)
        try:
            yield _role_url(base, RUNTIME_ROLE, schema)
        finally:
            async with admin.begin() as conn:
                await conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
    finally:
        await admin.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """SQLite: an empty file (the store migrates it). Postgres: the runtime role's URL of a schema
    at head (the owner migrated it and granted the runtime role, as `agentforge db migrate` does)."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path / "data")
        return
    async with _postgres_schema(migrated=True) as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
async def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """Like `database_url` but without tables: migrate it with `owner_url_for(url)`."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path / "data")
        return
    async with _postgres_schema(migrated=False) as url:
        yield url
