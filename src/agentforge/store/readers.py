"""Where read queries run: SQLite reader threads with their own connections, or the asyncpg pool.

Queries are sync functions over a `Connection` (see `queries.py`); a reader runs one inside a read
transaction, so the queries of one call see one snapshot. A query reads one tenant's rows: `run`
hands it the tenant and, on Postgres, first scopes the transaction to that tenant (`tenancy.py`), so
row-level security and the query's own `tenant_id` filter agree. Only start-up maintenance reads
across tenants (`run_across_tenants`), on a connection whose role the maintenance policy lets see
every row.
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Connection, Engine

from agentforge.store.tenancy import set_tenant

if TYPE_CHECKING:
    # SQLAlchemy's asyncio layer brings its ORM (~7 MB): only Postgres uses it (engine.py).
    from sqlalchemy.ext.asyncio import AsyncEngine

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

    async def run(
        self,
        query: Callable[Concatenate[Connection, str, P], T],
        tenant_id: str,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        def in_tenant(conn: Connection) -> T:
            set_tenant(conn, tenant_id)  # the connection autobegan: transaction-local
            return query(conn, tenant_id, *args, **kwargs)

        async with self._engine.connect() as conn:
            return await conn.run_sync(in_tenant)

    async def run_across_tenants(
        self, query: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        async with self._engine.connect() as conn:
            return await conn.run_sync(query, *args, **kwargs)

    async def close(self) -> None:
        """Nothing of its own: connections go back to the engine's pool, which the store disposes."""
