"""The `store` fixture, once per dialect (over `database_url`, from tests/databases.py).

On Postgres the store opens the way a deployment runs it: as the runtime role (bound by row-level
security), with the owner's URL for migrations, grants and cross-tenant maintenance reads.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from agentforge.model.events import Event
from agentforge.store import Store, parse_database_url
from agentforge.store.engine import postgres_engine
from tests.databases import owner_url_for


@pytest.fixture
def published() -> list[Event]:
    """Every batch the store publishes, flattened in publish order."""
    return []


@pytest.fixture
async def store(database_url: str, published: list[Event]) -> AsyncIterator[Store]:
    opened = await Store.open(database_url, owner_url=owner_url_for(database_url), publish=published.extend)
    try:
        yield opened
    finally:
        await opened.close()


@contextlib.asynccontextmanager
async def autocommit_connection(database_url: str, why_not_sqlite: str) -> AsyncIterator[AsyncConnection]:
    """Postgres: a fresh engine's connection to `database_url` in autocommit, as the store's writer
    holds one (the caller's statements say where transactions begin); skipped on SQLite, saying
    `why_not_sqlite`."""
    target = parse_database_url(database_url)
    if target.dialect != "postgresql":
        pytest.skip(why_not_sqlite)
    engine = postgres_engine(target, pool_size=1)
    try:
        async with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as conn:
            yield conn
    finally:
        await engine.dispose()


@pytest.fixture
async def writer_connection(store: Store, database_url: str) -> AsyncIterator[AsyncConnection]:
    """A connection like the store's writer's, to the store's database (Postgres: SQLite has one
    writer, whose numbers are cached, never checked)."""
    async with autocommit_connection(
        database_url, "SQLite has one writer: its numbers are cached, never checked"
    ) as conn:
        yield conn


async def driver_of(conn: AsyncConnection) -> Any:
    """The asyncpg connection under `conn`."""
    driver = (await conn.get_raw_connection()).driver_connection
    assert driver is not None
    return driver
