"""Where read queries run: SQLite reader threads with their own connections, or the asyncpg pool.

Queries are sync functions over a `Connection` (see `queries.py`); a reader runs one inside a read
transaction, so the queries of one call see one snapshot. A query reads one tenant's rows: `run`
hands it the tenant and, on Postgres, first scopes the transaction to that tenant (`tenancy.py`), so
row-level security and the query's own `tenant_id` filter agree. Only start-up maintenance reads
across tenants (`run_across_tenants`), on a connection whose role the maintenance policy lets see
every row.

On Postgres a tenant read opens its transaction itself, with its tenant, in one round trip
(`begin_in_tenant`) and rolls it back afterwards: its connection runs in SQLAlchemy's AUTOCOMMIT
mode so SQLAlchemy sends no BEGIN of its own. A connection whose transaction could not be ended is
invalidated, never pooled (and the engine refuses to pool one, see `engine.py`).
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection, Engine

from agentforge.store.tenancy import begin_in_tenant

if TYPE_CHECKING:
    # SQLAlchemy's asyncio layer brings its ORM (~7 MB): only Postgres uses it (engine.py).
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

P = ParamSpec("P")
T = TypeVar("T")


class Readers(ABC):
    @abstractmethod
    async def run(
        self,
        query: Callable[Concatenate[Connection, str, P], T],
        tenant_id: str,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Run `query(conn, tenant_id, *args, **kwargs)` in a read transaction scoped to `tenant_id`,
        without blocking the loop."""

    @abstractmethod
    async def run_across_tenants(
        self, query: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """Run a maintenance `query(conn, *args, **kwargs)` that reads every tenant's rows."""

    @abstractmethod
    async def close(self) -> None:
        """Stop reading; the store disposes the engines afterwards."""


class ThreadReaders(Readers):
    """SQLite: a few threads, each keeping one connection open (WAL lets them read while the writer
    writes), so a read costs no pool checkout."""

    def __init__(self, engine: Engine, *, threads: int) -> None:
        self._engine = engine
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="agentforge-store-reader")
        self._local = threading.local()
        self._connections: list[Connection] = []
        self._lock = threading.Lock()

    async def run(
        self,
        query: Callable[Concatenate[Connection, str, P], T],
        tenant_id: str,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        # No setting on SQLite: the query's own tenant_id filter is the isolation.
        return await self.run_across_tenants(query, tenant_id, *args, **kwargs)

    async def run_across_tenants(
        self, query: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: self._run_here(query, *args, **kwargs))

    def _run_here(
        self, query: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        conn = self._connection()
        with conn.begin():
            return query(conn, *args, **kwargs)

    def _connection(self) -> Connection:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.invalidated:
            conn = self._engine.connect()
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    async def close(self) -> None:
        await asyncio.to_thread(self._close_now)

    def _close_now(self) -> None:
        self._executor.shutdown(wait=True)
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()


class PoolReaders(Readers):
    """Postgres: a pooled asyncpg connection per read, the query bridged with `run_sync`."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        # The same pool; its connections in AUTOCOMMIT mode while a tenant read holds them.
        self._tenant_reads = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def run(
        self,
        query: Callable[Concatenate[Connection, str, P], T],
        tenant_id: str,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        async with self._tenant_reads.connect() as conn, _tenant_transaction(conn, tenant_id):
            return await conn.run_sync(query, tenant_id, *args, **kwargs)

    async def run_across_tenants(
        self, query: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        async with self._engine.connect() as conn:
            return await conn.run_sync(query, *args, **kwargs)

    async def close(self) -> None:
        """Nothing of its own: connections go back to the engine's pool, which the store disposes."""


@asynccontextmanager
async def _tenant_transaction(conn: AsyncConnection, tenant_id: str) -> AsyncIterator[None]:
    """A read transaction on `conn` (AUTOCOMMIT to SQLAlchemy) scoped to `tenant_id`, rolled back
    at the end; a read that fails or is cancelled invalidates the connection, so it never returns
    to the pool."""
    driver = (await conn.get_raw_connection()).driver_connection
    if driver is None:
        raise RuntimeError("the pooled connection is closed")
    try:
        await begin_in_tenant(driver, tenant_id)
        yield
    except BaseException:
        # Failed or cancelled, perhaps with BEGIN still in flight (the driver's transaction flag
        # not yet true): the connection's state is unknown, so it is never reused.
        await conn.invalidate()
        raise
    try:
        await driver.execute("ROLLBACK")
    except BaseException:
        await conn.invalidate()
        raise
