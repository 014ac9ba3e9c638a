"""Postgres tenant reads: each opens its own transaction with its tenant and ends it, and a
connection never goes back to the pool still inside one (it would carry its tenant along). The
same for `rows`, the driver's reads on the connections the readers keep: none is kept inside a
transaction or after a failure."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Final

import pytest
from sqlalchemy import Connection, bindparam, select, text

from agentforge.store import Store, parse_database_url
from agentforge.store.engine import DatabaseTarget, postgres_engine
from agentforge.store.readers import PoolReaders
from agentforge.store.schema import session
from agentforge.store.tenancy import TENANT_SETTING, begin_in_tenant
from tests.store.builders import new_session, session_created

_SEEN: Final = text(f"SELECT pg_backend_pid(), current_setting('{TENANT_SETTING}', true)")
# A backend's state, seen from another one (None: gone, or the one asking).
_STATE: Final = text("SELECT state FROM pg_stat_activity WHERE pid = :pid AND pid <> pg_backend_pid()")


class _Refused(Exception):
    pass


def _postgres(database_url: str) -> DatabaseTarget:
    target = parse_database_url(database_url)
    if target.dialect != "postgresql":
        pytest.skip("SQLite readers are threads with their own connections and no tenant setting")
    return target


@contextlib.asynccontextmanager
async def _kept_readers(database_url: str, *, pool_size: int, kept: int) -> AsyncIterator[PoolReaders]:
    """Readers keeping `kept` connections of a pool of `pool_size`, closed with their engine."""
    engine = postgres_engine(_postgres(database_url), pool_size=pool_size)
    readers = PoolReaders(engine, kept=kept)
    try:
        yield readers
    finally:
        await readers.close()
        await engine.dispose()


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


def _state(conn: Connection, pid: int) -> str | None:
    state = conn.execute(_STATE, {"pid": pid}).scalar_one_or_none()
    return None if state is None else str(state)


async def test_rows_run_in_their_tenant_on_a_kept_connection_left_idle(database_url: str) -> None:
    async with _kept_readers(database_url, pool_size=1, kept=1) as readers:
        [(pid, tenant)] = await readers.rows("tenant-a", _SEEN, {}, list)
        assert tenant == "tenant-a"
        await readers.settled()
        # Kept between reads outside any transaction: nothing of tenant-a's is left on it.
        assert await readers.run_across_tenants(_state, pid) == "idle"
        assert [tuple(row) for row in await readers.rows("tenant-b", _SEEN, {}, list)] == [(pid, "tenant-b")]


async def test_rows_that_fail_never_keep_their_connection(database_url: str) -> None:
    async with _kept_readers(database_url, pool_size=1, kept=1) as readers:
        [(pid, _)] = await readers.rows("tenant-a", _SEEN, {}, list)
        await readers.settled()
        with pytest.raises(Exception, match="division by zero"):
            await readers.rows("tenant-a", text("SELECT 1 / 0"), {}, list)
        [(again, tenant)] = await readers.rows("tenant-b", _SEEN, {}, list)
        assert (again != pid, tenant) == (True, "tenant-b")


async def test_cancelled_rows_never_keep_their_connection(database_url: str) -> None:
    async with _kept_readers(database_url, pool_size=1, kept=1) as readers:
        [(pid, _)] = await readers.rows("tenant-a", _SEEN, {}, list)
        await readers.settled()
        read = asyncio.ensure_future(readers.rows("tenant-a", text("SELECT pg_sleep(30)"), {}, list))
        while await readers.run_across_tenants(_state, pid) != "active":  # each look yields to the read
            pass
        read.cancel()
        with pytest.raises(asyncio.CancelledError):
            await read
        [(again, tenant)] = await readers.rows("tenant-b", _SEEN, {}, list)
        assert (again != pid, tenant) == (True, "tenant-b")


_TERMINATE: Final = text("SELECT pg_terminate_backend(pid) FROM unnest(CAST(:pids AS int[])) AS pid")


def _terminate(conn: Connection, pids: list[int]) -> None:
    conn.execute(_TERMINATE, {"pids": pids})


async def test_rows_after_postgres_dropped_the_kept_connections_read_on_fresh_ones(database_url: str) -> None:
    """A restart (here: their backends terminated) ends every kept connection: the read that finds
    out is run again, once, on a fresh connection, and the other dead ones are dropped with it."""
    async with _kept_readers(database_url, pool_size=3, kept=2) as readers:
        first = await asyncio.gather(*(readers.rows(t, _SEEN, {}, list) for t in ("tenant-a", "tenant-b")))
        await readers.settled()
        dead = [row[0][0] for row in first]
        assert len(set(dead)) == 2
        await readers.run_across_tenants(_terminate, dead)
        for tenant in ("tenant-a", "tenant-b"):
            [(pid, seen)] = await readers.rows(tenant, _SEEN, {}, list)
            assert (pid not in dead, seen) == (True, tenant)
            await readers.settled()


async def test_rows_beyond_the_kept_connections_take_the_pools(database_url: str) -> None:
    engine = postgres_engine(_postgres(database_url), pool_size=2)
    readers = PoolReaders(engine, kept=0)
    try:
        [(pid, tenant)] = await readers.rows("tenant-a", _SEEN, {}, list)
        assert tenant == "tenant-a"
        assert await readers.run_across_tenants(_seen) == (pid, None)  # back in the pool, ended
    finally:
        await engine.dispose()


async def test_rows_find_no_other_tenants_rows_without_a_filter_of_their_own(
    store: Store, database_url: str
) -> None:
    """Row-level security, not the statement, keeps tenant-b from tenant-a's session."""
    _postgres(database_url)
    created = new_session()
    await store.write(session_created(created, "tenant-a"))
    engine = postgres_engine(_postgres(database_url), pool_size=1)
    readers = PoolReaders(engine, kept=1)
    unfiltered = select(session.c.id).where(session.c.id == bindparam("b_id"))
    try:
        assert await readers.rows("tenant-b", unfiltered, {"b_id": created.id}, list) == []
        assert [row[0] for row in await readers.rows("tenant-a", unfiltered, {"b_id": created.id}, list)] == [
            created.id
        ]
    finally:
        await readers.close()
        await engine.dispose()


async def test_concurrent_rows_each_see_their_own_tenant(database_url: str) -> None:
    """Reads overlapping the ROLLBACKs of earlier ones (on kept connections or the pool's)."""
    engine = postgres_engine(_postgres(database_url), pool_size=2)
    readers = PoolReaders(engine, kept=2)
    tenants = [f"tenant-{i % 3}" for i in range(24)]
    try:
        for _ in range(3):
            found = await asyncio.gather(*(readers.rows(tenant, _SEEN, {}, list) for tenant in tenants))
            assert [rows[0][1] for rows in found] == tenants
        await readers.settled()
        pids = {rows[0][0] for rows in found}
        states = [await readers.run_across_tenants(_state, pid) for pid in sorted(pids)]
        assert set(states) <= {"idle", None}
    finally:
        await readers.close()
        await engine.dispose()
