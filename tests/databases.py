"""The `database_url` fixture, once per dialect: SQLite in a temp file, Postgres in a fresh schema.

Postgres runs when AGENTFORGE_TEST_DATABASE_URL points at a server (e.g.
postgresql://postgres@127.0.0.1:5432/test) and skips with that reason otherwise; each test gets its
own schema, dropped afterwards. Store tests and the end-to-end `live` server both run on it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from agentforge.store import parse_database_url, sqlite_url

POSTGRES_URL_ENV = "AGENTFORGE_TEST_DATABASE_URL"


@pytest.fixture(params=["sqlite", "postgres"])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield sqlite_url(tmp_path / "data")
        return
    base = os.environ.get(POSTGRES_URL_ENV)
    if not base:
        pytest.skip(f"{POSTGRES_URL_ENV} not set")
    schema = f"store_test_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(parse_database_url(base).url)
    try:
        async with admin.begin() as conn:
            await conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
        yield make_url(base).update_query_dict({"schema": schema}).render_as_string(hide_password=False)
        async with admin.begin() as conn:
            await conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
    finally:
        await admin.dispose()
