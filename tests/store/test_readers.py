"""Postgres tenant reads: each opens its own transaction with its tenant and ends it, and a
connection never goes back to the pool still inside one (it would carry its tenant along)."""

from __future__ import annotations

import asyncio
import threading
from typing import Final

import pytest
from sqlalchemy import Connection, text

from agentforge.store import parse_database_url
from agentforge.store.engine import DatabaseTarget, postgres_engine
from agentforge.store.readers import PoolReaders
from agentforge.store.tenancy import TENANT_SETTING, begin_in_tenant

_SEEN: Final = text(f"SELECT pg_backend_pid(), current_setting('{TENANT_SETTING}', true)")


class _Refused(Exception):
    pass


def _postgres(database_url: str) -> DatabaseTarget:
    target = parse_database_url(database_url)
    if target.dialect != "postgresql":
        pytest.skip("SQLite readers are threads with their own connections and no tenant setting")
    return target


def _seen(conn: Connection, *_tenant: str) -> tuple[int, str | None]:
    pid, tenant = conn.execute(_SEEN).one()
    return int(pid), tenant or None


async def test_a_read_runs_in_its_tenant_and_leaves_nothing_behind(database_url: str) -> None:
    engine = postgres_engine(_postgres(database_url), pool_size=1)
    readers = PoolReaders(engine)
    try:
        pid, tenant = await readers.run(_seen, "tenant-a")
        assert tenant == "tenant-a"
        # The same pooled connection next: its transaction, and with it the setting, ended.
        assert await readers.run_across_tenants(_seen) == (pid, None)
    finally:
        await engine.dispose()


async def test_a_read_that_fails_never_gives_its_connection_back(database_url: str) -> None:
    engine = postgres_engine(_postgres(database_url), pool_size=1)
    readers = PoolReaders(engine)
    seen: list[tuple[int, str | None]] = []

    def fail(conn: Connection, tenant_id: str) -> None:
        seen.append(_seen(conn))
        raise _Refused

    try:
        with pytest.raises(_Refused):
            await readers.run(fail, "tenant-a")
        assert seen[0][1] == "tenant-a"
        pid, tenant = await readers.run(_seen, "tenant-b")
        assert (pid != seen[0][0], tenant) == (True, "tenant-b")
        assert await readers.run_across_tenants(_seen) == (pid, None)
    finally:
        await engine.dispose()


async def test_a_cancelled_read_never_gives_its_connection_back(database_url: str) -> None:
    engine = postgres_engine(_postgres(database_url), pool_size=1)
    readers = PoolReaders(engine)
    started = threading.Event()
    pids: list[int] = []

    def slow(conn: Connection, tenant_id: str) -> None:
        pids.append(_seen(conn)[0])
        started.set()
        conn.execute(text("SELECT pg_sleep(30)"))

    try:
        read = asyncio.ensure_future(readers.run(slow, "tenant-a"))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        read.cancel()
        with pytest.raises(asyncio.CancelledError):
            await read
        pid, tenant = await readers.run(_seen, "tenant-b")
        assert (pid != pids[0], tenant) == (True, "tenant-b")
        assert await readers.run_across_tenants(_seen) == (pid, None)
    finally:
        await engine.dispose()


async def test_a_connection_given_back_inside_a_transaction_is_not_pooled(database_url: str) -> None:
    engine = postgres_engine(_postgres(database_url), pool_size=1)
    try:
        async with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as conn:
            driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None
            stray = driver.get_server_pid()
            await begin_in_tenant(driver, "tenant-a")  # and never ended: a bug the pool must catch
        async with engine.connect() as conn:
            pid, tenant = await conn.run_sync(_seen)
        assert pid != stray
        assert tenant is None
    finally:
        await engine.dispose()
