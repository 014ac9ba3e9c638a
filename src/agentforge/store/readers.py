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

The reads of every turn (`rows`: one statement, e.g. the session, the history's changes) skip
SQLAlchemy's per-read machinery on Postgres (a pool checkout, greenlet bridges, the statement's
compiled-cache lookup and result processing: ~0.5 ms of the event loop per read, more than the
round trips themselves): the statement is compiled once and run through asyncpg (prepared once per
connection) on a few connections the readers keep checked out. Such a connection holds its tenant
as a setting of its session (`set_config(..., false)`), set before a read whenever the read's
tenant is another: a read of the same tenant as the one before is its statement alone, one round
trip, which Postgres runs as a transaction of its own (one snapshot), where BEGIN with the
setting, the statement and ROLLBACK took two on its path and three in all. Only `rows` uses these
connections, and it always sets its tenant first; one whose read or setting failed or was
cancelled is invalidated, and they never go back to the pool (closed with the readers), so no
other use of a pooled connection ever finds a tenant set. A read finding them all busy waits a few
milliseconds for one (a read holds it for one round trip), then takes one of the pool's: a slow or
hung read holds up no other. The tenant held by the session means a transaction-mode connection
pooler (PgBouncer's `pool_mode = transaction`) must not sit between the server and Postgres: it
would hand the backend, setting and all, to another client (session mode is fine).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Concatenate, Final, ParamSpec, TypeVar

from sqlalchemy import ClauseElement, Connection, Engine, Executable

from agentforge.store.tenancy import begin_in_tenant, hold_tenant

if TYPE_CHECKING:
    # SQLAlchemy's asyncio layer brings its ORM (~7 MB): only Postgres uses it (engine.py).
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

P = ParamSpec("P")
T = TypeVar("T")

# A row of `Readers.rows`, read by position (a SQLAlchemy row or an asyncpg record).
Values = Sequence[Any]
# Connections Postgres readers keep checked out for `rows` (the store: one per reader); a read
# finding them all busy waits this long for one to be given back, then takes one of the pool's.
KEPT_CONNECTIONS: Final = 2
KEPT_WAIT_SECONDS: Final = 0.005


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
    async def rows(
        self,
        tenant_id: str,
        statement: Executable,
        params: Mapping[str, Any],
        build: Callable[[list[Values]], T],
    ) -> T:
        """`build` of the rows of one statement (values by position; `params` by bind name) read in
        a transaction scoped to `tenant_id`. For the hot reads: cheaper than `run` on Postgres.
        `build` runs where the rows are read (SQLite: in the reader thread, off the loop)."""

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

    async def rows(
        self,
        tenant_id: str,
        statement: Executable,
        params: Mapping[str, Any],
        build: Callable[[list[Values]], T],
    ) -> T:
        return await self.run(_rows, tenant_id, statement, params, build)

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
    """Postgres: a pooled asyncpg connection per read, the query bridged with `run_sync`; `rows`
    through the driver on the connections it keeps (`kept`, taken from the pool as needed; with
    none, each on one of the pool's)."""

    def __init__(self, engine: AsyncEngine, *, kept: int = KEPT_CONNECTIONS) -> None:
        self._engine = engine
        # The same pool; its connections in AUTOCOMMIT mode while a tenant read holds them.
        self._tenant_reads = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._kept = kept
        self._idle: list[_Kept] = []  # kept connections no read is using
        self._taken = 0  # kept connections checked out of the pool (idle or in use)
        # Reads waiting for a kept connection: handed one as a read ends (None: one was dropped,
        # open another).
        self._waiting: deque[asyncio.Future[_Kept | None]] = deque()
        self._compiled: dict[Executable, _Compiled] = {}
        self._closed = False

    async def run(
        self,
        query: Callable[Concatenate[Connection, str, P], T],
        tenant_id: str,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        async with self._tenant_reads.connect() as conn, _tenant_transaction(conn, tenant_id):
            return await conn.run_sync(query, tenant_id, *args, **kwargs)

    async def rows(
        self,
        tenant_id: str,
        statement: Executable,
        params: Mapping[str, Any],
        build: Callable[[list[Values]], T],
        *,
        retry: bool = True,
    ) -> T:
        sql, args = self._compile(statement).bind(params)
        kept = await self._checkout()
        if kept is None:  # none kept (closing, or none to keep): one of the pool's for this read
            async with self._tenant_reads.connect() as conn, _tenant_transaction(conn, tenant_id) as driver:
                found: list[Values] = await driver.fetch(sql, *args)
            return build(found)
        try:
            if kept.tenant != tenant_id:
                kept.tenant = None  # unknown until the setting has answered
                await hold_tenant(kept.driver, tenant_id)
                kept.tenant = tenant_id
            found = await kept.driver.fetch(sql, *args)
        except BaseException as exc:
            await self._drop(kept)
            if not retry or not _connection_lost(exc):
                raise
            # Postgres restarted or dropped us: the other idle kept connections are gone too, and a
            # read is safe to run again, once, on a fresh connection.
            await self._drop_idle()
            return await self.rows(tenant_id, statement, params, build, retry=False)
        if self._closed:
            await self._drop(kept)
        else:
            self._pass_on(kept)
        return build(found)

    async def _checkout(self) -> _Kept | None:
        """An idle kept connection, else a new one up to `kept`, else the next one a read gives
        back within `KEPT_WAIT_SECONDS`: a read holds it for one round trip, where one of the pool's
        would cost its checkout and a transaction of three. None: keep none, take the pool's (also
        when none came back in time: a slow read, or a hung connection, must not hold up the reads
        behind it, the authentication of every request among them)."""
        while True:
            while self._idle:
                kept = self._idle.pop()
                if not kept.driver.is_closed():
                    return kept
                await self._drop(kept)  # ended while idle (Postgres restarted, or ended it)
            if self._closed or self._kept == 0:
                return None
            if self._taken < self._kept:
                return await self._keep_another()
            waiter: asyncio.Future[_Kept | None] = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                await asyncio.wait((waiter,), timeout=KEPT_WAIT_SECONDS)
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._pass_on(waiter.result())  # handed over as this read was cancelled
                raise
            finally:
                with contextlib.suppress(ValueError):
                    self._waiting.remove(waiter)
            if not waiter.done():
                waiter.cancel()
                return None  # none came back in time: one of the pool's for this read
            handed = waiter.result()
            if handed is not None:
                return handed

    async def _keep_another(self) -> _Kept:
        self._taken += 1
        try:
            conn = await self._tenant_reads.connect()
            driver = (await conn.get_raw_connection()).driver_connection
        except BaseException:
            self._taken -= 1
            self._pass_on(None)
            raise
        return _Kept(conn, driver)

    def _pass_on(self, kept: _Kept | None) -> None:
        """Hand `kept` (None: a free place for one) to the first read still waiting; a connection
        nobody waits for goes idle."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(kept)
                return
        if kept is not None:
            self._idle.append(kept)

    async def _drop(self, kept: _Kept) -> None:
        """A kept connection whose state is unknown (a read failed or was cancelled, perhaps with
        its setting still in flight), or one the readers are done with: never used again, and
        never given back to the pool with its tenant set."""
        self._taken -= 1
        self._pass_on(None)  # a read waiting may open another
        # A dead connection may fail to say so again: what matters is that it is never used.
        try:
            await kept.conn.invalidate()
        except Exception:
            # Closing it may then hand it back to the pool, tenant and all: end it at the driver.
            with contextlib.suppress(Exception):
                kept.driver.terminate()
        with contextlib.suppress(Exception):
            await kept.conn.close()

    async def _drop_idle(self) -> None:
        idle, self._idle = self._idle, []
        for kept in idle:
            await self._drop(kept)

    def _compile(self, statement: Executable) -> _Compiled:
        compiled = self._compiled.get(statement)
        if compiled is None:
            if not isinstance(statement, ClauseElement):
                raise TypeError(f"not a SQL statement: {statement!r}")
            compiled = self._compiled[statement] = _Compiled(statement.compile(dialect=self._engine.dialect))
        return compiled

    async def run_across_tenants(
        self, query: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        async with self._engine.connect() as conn:
            return await conn.run_sync(query, *args, **kwargs)

    async def close(self) -> None:
        """The kept connections are closed, never given back to the pool (their tenant is set)."""
        self._closed = True
        for waiter in self._waiting:  # they take the pool's
            if not waiter.done():
                waiter.set_result(None)
        await self._drop_idle()


def _connection_lost(exc: BaseException) -> bool:
    """The connection ended under the read (closed, or its backend terminated), not the read failed."""
    import asyncpg  # here: a SQLite server never loads the Postgres driver

    lost = (
        asyncpg.PostgresConnectionError,
        asyncpg.InterfaceError,
        asyncpg.exceptions.OperatorInterventionError,
        # The protocol's state confused by a termination notice that arrived while it was idle.
        asyncpg.exceptions.InternalClientError,
    )
    return isinstance(exc, (*lost, ConnectionError))


@dataclass(slots=True)
class _Kept:
    """A connection `PoolReaders.rows` keeps checked out, its asyncpg connection, and the tenant its
    session is set to (None: none yet, or not known)."""

    conn: AsyncConnection
    driver: Any
    tenant: str | None = None


class _Compiled:
    """A statement compiled once for asyncpg: its SQL and the order its parameters go in."""

    def __init__(self, compiled: Any) -> None:
        self.sql: str = compiled.string
        self._order: tuple[str, ...] = tuple(compiled.positiontup or ())
        self._compiled = compiled

    def bind(self, params: Mapping[str, Any]) -> tuple[str, list[Any]]:
        values = self._compiled.construct_params(params)
        return self.sql, [values[name] for name in self._order]


def _rows(
    conn: Connection,
    _tenant_id: str,
    statement: Executable,
    params: Mapping[str, Any],
    build: Callable[[list[Values]], T],
) -> T:
    return build(list(conn.execute(statement, params)))


@asynccontextmanager
async def _tenant_transaction(conn: AsyncConnection, tenant_id: str) -> AsyncIterator[Any]:
    """A read transaction on `conn` (AUTOCOMMIT to SQLAlchemy) scoped to `tenant_id`, rolled back
    at the end; a read that fails or is cancelled invalidates the connection, so it never returns
    to the pool."""
    driver = (await conn.get_raw_connection()).driver_connection
    if driver is None:
        raise RuntimeError("the pooled connection is closed")
    try:
        await begin_in_tenant(driver, tenant_id)
        yield driver
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
