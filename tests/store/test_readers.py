"""Postgres tenant reads: each opens its own transaction with its tenant and ends it, and a
connection never goes back to the pool still inside one (it would carry its tenant along). `rows`,
the driver's reads on the connections the readers keep: each sets its tenant on the connection
first unless it holds that tenant already, none is kept inside a transaction or after a failure,
and none goes back to the pool."""

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
        # Kept between reads outside any transaction; the next read sets its own tenant.
        assert await readers.run_across_tenants(_state, pid) == "idle"
        assert [tuple(row) for row in await readers.rows("tenant-b", _SEEN, {}, list)] == [(pid, "tenant-b")]
        assert [tuple(row) for row in await readers.rows("tenant-b", _SEEN, {}, list)] == [(pid, "tenant-b")]
        assert [tuple(row) for row in await readers.rows("tenant-a", _SEEN, {}, list)] == [(pid, "tenant-a")]


_ALL_SESSIONS: Final = select(session.c.id, session.c.tenant_id)  # no tenant filter of its own


async def test_rows_on_one_kept_connection_see_their_tenants_rows(database_url: str, store: Store) -> None:
    """Row-level security, not a filter of the statement's, keeps each read to its tenant, on one
    kept connection going back and forth between tenants."""
    _postgres(database_url)
    mine, theirs = new_session(), new_session()
    await store.write(session_created(mine, tenant_id="tenant-a"))
    await store.write(session_created(theirs, tenant_id="tenant-b"))
    async with _kept_readers(database_url, pool_size=1, kept=1) as readers:
        for tenant, expected in (("tenant-a", mine), ("tenant-b", theirs), ("tenant-a", mine)):
            found = await readers.rows(tenant, _ALL_SESSIONS, {}, list)
            assert [tuple(row) for row in found] == [(expected.id, tenant)]
        [(pid, _)] = await readers.rows("tenant-a", _SEEN, {}, list)
        assert [tuple(row) for row in await readers.rows("tenant-c", _ALL_SESSIONS, {}, list)] == []
        [(again, _)] = await readers.rows("tenant-c", _SEEN, {}, list)
        assert again == pid  # all on one connection


async def test_kept_connections_never_go_back_to_the_pool(database_url: str) -> None:
    """Their sessions hold a tenant: closed with the readers, the pool opens a fresh one."""
    engine = postgres_engine(_postgres(database_url), pool_size=1)
    readers = PoolReaders(engine, kept=1)
    try:
        [(pid, _)] = await readers.rows("tenant-a", _SEEN, {}, list)
        await readers.close()
        async with engine.connect() as conn:
            again, tenant = await conn.run_sync(_seen)
        assert (again != pid, tenant) == (True, None)
    finally:
        await engine.dispose()


async def test_rows_that_fail_never_keep_their_connection(database_url: str) -> None:
    async with _kept_readers(database_url, pool_size=1, kept=1) as readers:
        [(pid, _)] = await readers.rows("tenant-a", _SEEN, {}, list)
        with pytest.raises(Exception, match="division by zero"):
            await readers.rows("tenant-a", text("SELECT 1 / 0"), {}, list)
        [(again, tenant)] = await readers.rows("tenant-b", _SEEN, {}, list)
        assert (again != pid, tenant) == (True, "tenant-b")


async def test_cancelled_rows_never_keep_their_connection(database_url: str) -> None:
    async with _kept_readers(database_url, pool_size=1, kept=1) as readers:
        [(pid, _)] = await readers.rows("tenant-a", _SEEN, {}, list)
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
        dead = [row[0][0] for row in first]
        assert len(set(dead)) == 2
        await readers.run_across_tenants(_terminate, dead)
        for tenant in ("tenant-a", "tenant-b"):
            [(pid, seen)] = await readers.rows(tenant, _SEEN, {}, list)
            assert (pid not in dead, seen) == (True, tenant)


async def test_rows_beyond_the_kept_connections_wait_briefly_then_take_the_pools(database_url: str) -> None:
    """More reads at once than kept connections: each waits a few milliseconds for one a read gives
    back, then takes one of the pool's, so a slow (or hung) read holds up no other: the hot reads
    include every request's authentication. A read cancelled while waiting takes none with it."""
    async with _kept_readers(database_url, pool_size=2, kept=1) as readers:
        [(pid, _)] = await readers.rows("tenant-a", _SEEN, {}, list)
        slow = asyncio.ensure_future(readers.rows("tenant-a", text("SELECT pg_sleep(0.5)"), {}, list))
        while await readers.run_across_tenants(_state, pid) != "active":  # each look yields to it
            pass
        waiting = [asyncio.ensure_future(readers.rows(t, _SEEN, {}, list)) for t in ("tenant-b", "tenant-c")]
        cancelled = asyncio.ensure_future(readers.rows("tenant-d", _SEEN, {}, list))
        await asyncio.sleep(0)  # every read is waiting now
        cancelled.cancel()

        seen = [tuple(row) for read in waiting for row in await read]

        assert not slow.done(), "the reads behind the slow one waited for it"
        assert [tenant for _, tenant in seen] == ["tenant-b", "tenant-c"]
        assert all(other != pid for other, _ in seen)  # the pool's
        await slow
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert [tuple(row) for row in await readers.rows("tenant-a", _SEEN, {}, list)] == [(pid, "tenant-a")]


async def test_rows_without_kept_connections_take_the_pools(database_url: str) -> None:
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
        pids = {rows[0][0] for rows in found}
        states = [await readers.run_across_tenants(_state, pid) for pid in sorted(pids)]
        assert set(states) <= {"idle", None}
    finally:
        await readers.close()
        await engine.dispose()
