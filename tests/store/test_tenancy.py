"""`set_tenant`, `begin_in_tenant` and `execute_in_tenant`: the Postgres setting row-level security
reads, for one transaction only."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import Connection, text

from agentforge.store import parse_database_url
from agentforge.store.migrate import run_with_connection
from agentforge.store.tenancy import (
    TENANT_SETTING,
    begin_in_tenant,
    execute_in_tenant,
    set_tenant,
    setting_of,
)
from tests.store.conftest import autocommit_connection, driver_of

_CURRENT = text(f"SELECT current_setting('{TENANT_SETTING}', true)")
_CURRENT_DRIVER = f"SELECT current_setting('{TENANT_SETTING}', true)"


def test_an_empty_tenant_is_refused_before_any_statement() -> None:
    with pytest.raises(ValueError, match="a tenant id is required"):
        set_tenant(None, "")  # type: ignore[arg-type]  # no connection is touched


@pytest.mark.parametrize("tenant", ["", "o'brien", "a b", "x" * 129, "t;DROP", "t\n"])
def test_a_tenant_id_that_is_not_plain_is_never_written_into_a_statement(tenant: str) -> None:
    with pytest.raises(ValueError, match="must be plain"):
        setting_of(tenant)


def test_a_plain_tenant_id_is_written_for_the_transaction_or_the_session() -> None:
    assert setting_of("acme-2_b") == f"SELECT set_config('{TENANT_SETTING}', 'acme-2_b', true)"
    assert setting_of("acme-2_b", local=False) == f"SELECT set_config('{TENANT_SETTING}', 'acme-2_b', false)"


async def test_the_setting_lasts_for_its_transaction_only(database_url: str) -> None:
    target = parse_database_url(database_url)
    if target.dialect != "postgresql":
        pytest.skip("SQLite has no settings: its queries filter by tenant")
    seen: list[str | None] = []

    def within_and_after(conn: Connection) -> None:
        with conn.begin():
            set_tenant(conn, "tenant-a")
            seen.append(conn.execute(_CURRENT).scalar())
        with conn.begin():
            seen.append(conn.execute(_CURRENT).scalar() or None)

    await asyncio.to_thread(run_with_connection, target, within_and_after)

    assert seen == ["tenant-a", None]


@pytest.mark.parametrize(
    "tenant",
    ["tenant-a", "it's; SELECT set_config('app.tenant_id', 'tenant-b', true); --"],
    ids=["plain id, one round trip", "id needing quotes, the long way"],
)
async def test_begin_in_tenant_opens_a_transaction_scoped_to_exactly_that_tenant(
    database_url: str, tenant: str
) -> None:
    async with _driver(database_url) as driver:
        await begin_in_tenant(driver, tenant)
        assert driver.is_in_transaction()
        assert await driver.fetchval(_CURRENT_DRIVER) == tenant  # verbatim: the id is no SQL
        await driver.execute("ROLLBACK")
        assert not await driver.fetchval(_CURRENT_DRIVER)


async def test_begin_in_tenant_refuses_an_empty_tenant_before_any_statement() -> None:
    with pytest.raises(ValueError, match="a tenant id is required"):
        await begin_in_tenant(None, "")  # no connection is touched


@pytest.mark.parametrize(
    "tenant",
    ["tenant-a", "it's; SELECT set_config('app.tenant_id', 'tenant-b', true); --"],
    ids=["plain id, one message", "id needing quotes, the long way"],
)
async def test_execute_in_tenant_runs_its_statement_in_exactly_that_tenant_and_commits(
    database_url: str, tenant: str
) -> None:
    async with _driver(database_url) as driver:
        await driver.execute("CREATE TEMP TABLE seen (tenant text, value text)")
        insert = f"INSERT INTO seen SELECT current_setting('{TENANT_SETTING}'), $1::text"
        status = await execute_in_tenant(driver, tenant, insert, "x-1")
        assert status == "INSERT 0 1"
        assert not driver.is_in_transaction()
        assert not await driver.fetchval(_CURRENT_DRIVER)  # the setting ended with it
        # Committed, the argument verbatim; an argument needing quotes takes the long way.
        await execute_in_tenant(driver, tenant, insert, "it's")
        assert await driver.fetch("SELECT tenant, value FROM seen ORDER BY value") == [
            (tenant, "it's"),
            (tenant, "x-1"),
        ]


async def test_execute_in_tenant_rolls_back_a_failed_statement_whole(database_url: str) -> None:
    async with _driver(database_url) as driver:
        await driver.execute("CREATE TEMP TABLE seen (value int)")
        failing = "WITH written AS (INSERT INTO seen VALUES (1)) SELECT 1 / (length($1) - 3)"
        with pytest.raises(Exception, match="division by zero"):
            await execute_in_tenant(driver, "tenant-a", failing, "abc")
        assert not driver.is_in_transaction()
        assert await driver.fetchval("SELECT count(*) FROM seen") == 0


async def test_execute_in_tenant_refuses_an_empty_tenant_before_any_statement() -> None:
    with pytest.raises(ValueError, match="a tenant id is required"):
        await execute_in_tenant(None, "", "SELECT 1")  # no connection is touched


@contextlib.asynccontextmanager
async def _driver(database_url: str) -> AsyncIterator[Any]:
    """The asyncpg connection of a fresh engine on `database_url` (autocommit: the test's own
    statements say where transactions begin); Postgres only."""
    async with autocommit_connection(
        database_url, "SQLite has no settings: its queries filter by tenant"
    ) as conn:
        yield await driver_of(conn)
