"""The database side of several replicas on one Postgres: run leases and the cluster's channel.

Run leases are session-level advisory locks, all held on one connection of the replica (one loop
per session cluster-wide, see runtime/cluster.py). They end with that connection: a replica that
dies (kill -9 closes its sockets) loses every lease at once, which is how the others notice.
The channel is a LISTEN/NOTIFY channel named after the schema (channels are per database, schemas
share them): replicas announce event positions, deltas, new input, aborts and ended runs on it.
Each connection is used by one coroutine at a time (asyncpg allows no concurrent queries).

Any role that can connect to the database may LISTEN and NOTIFY on any channel, so what replicas
say is sealed (store/seal.py) with the key of `cluster_secret`, which only the runtime role may read:
a notification nobody sealed with it is dropped unread.

A connection that ends (Postgres restarted, the backend terminated, the network lost) is opened
again with backoff. Leases end with their connection: the replica is told which sessions it held
(`on_leases_lost`) before anything else may take them here, and stops those runs. The channel may
have missed notifications meanwhile: the replica is told (`on_gap`) once it listens again, and
whenever a sender's counter shows a notification it never took (store/seal.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

from sqlalchemy import Connection, text

from agentforge.store.engine import DatabaseTarget
from agentforge.store.errors import ClusterUnavailableError
from agentforge.store.seal import SEAL_OVERHEAD, Seal
from agentforge.store.tenancy import execute_in_tenant

log = logging.getLogger(__name__)

T = TypeVar("T")

# Postgres refuses payloads of 8000 bytes and more; sealing adds its envelope and base64 (4/3).
NOTIFY_LIMIT: Final = (7900 * 3) // 4 - SEAL_OVERHEAD
# Backoff between attempts to open a lost connection again.
RECONNECT_FIRST: Final = 0.1
RECONNECT_MAX: Final = 5.0
# How long a lease call waits for its connection to come back before failing.
RECONNECT_WAIT: Final = 10.0
# The cluster connections are pinged this often; one that does not answer in time (a network lost
# without a word) is ended here, well before the server's keepalives end it there. A ping waits its
# turn on its connection untimed: what holds the connection is timed itself (below).
PING_INTERVAL: Final = 5.0
PING_TIMEOUT: Final = 5.0
# Lease calls are instant and a NOTIFY quick: a connection that does not answer one in this long is
# ended (the lease connection's loss stops this replica's runs; a notification goes once more on a
# new connection).
LEASE_CALL_TIMEOUT: Final = 5.0
NOTIFY_TIMEOUT: Final = 5.0
_ROLES: Final = ("leases", "notify", "listen")

_LEASE_KEYS = "hashtext('agentforge.run'), hashtext(current_schema() || ':' || $1)"
_TRY_LEASE: Final = f"SELECT pg_try_advisory_lock({_LEASE_KEYS})"
_RECORDED_LEASE_KEYS = "hashtext('agentforge.run'), hashtext(current_schema() || ':' || $2)"
# Every live replica of the schema holds this lock (keyed by its id) on its lease connection.
_ROSTER = "hashtext('agentforge.replica:' || current_schema())"
_JOIN: Final = f"SELECT pg_advisory_lock({_ROSTER}, hashtext($1))"
# Every replica that listens on the channel holds this lock (keyed by its id) on its listening
# connection: whom announcements reach (runtime/cluster.py stops announcing when nobody else does).
_LISTENING: Final = "hashtext('agentforge.listener:' || current_schema())"
_LISTEN_JOIN: Final = f"SELECT pg_advisory_lock({_LISTENING}, hashtext($1))"
_THIS_DATABASE = "(SELECT oid FROM pg_database WHERE datname = current_database())"
_COUNT: Final = f"""SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = {_ROSTER}::oid
AND database = {_THIS_DATABASE}"""
_OTHERS_LISTENING: Final = _COUNT.replace(_ROSTER, _LISTENING) + " AND objid <> hashtext($1)::oid"
_RELEASE: Final = f"SELECT pg_advisory_unlock({_LEASE_KEYS})"
# Several payloads in one statement: delivered at its commit, in array order.
_NOTIFY: Final = "SELECT count(pg_notify($1, p)) FROM unnest(CAST($2 AS text[])) AS p"
_KEY: Final = "SELECT key FROM cluster_secret WHERE id = 1"
# A first hold taken and recorded in one statement: the row is written only when the lock was got
# (the lock itself is session-level: it outlives the statement's transaction either way).
_TAKE_AND_RECORD: Final = f"""INSERT INTO run_lease (tenant_id, session_id, replica, time_acquired)
SELECT $1::text, $2::text, $3::text, (extract(epoch FROM clock_timestamp()) * 1000)::bigint
WHERE pg_try_advisory_lock({_RECORDED_LEASE_KEYS})
ON CONFLICT (tenant_id, session_id) DO UPDATE
SET replica = EXCLUDED.replica, time_acquired = EXCLUDED.time_acquired"""
# The last hold's row removed and the lease given back in one statement (the unlock takes effect at
# once, the removal at commit: a replica taking the lease meanwhile waits on the row, then writes its own).
_FORGET_AND_RELEASE: Final = f"""WITH gone AS (
DELETE FROM run_lease WHERE tenant_id = $1 AND session_id = $2 AND replica = $3)
SELECT pg_advisory_unlock({_RECORDED_LEASE_KEYS})"""
# The tenant's sessions whose run lease some replica holds now (a row alone may be a dead one's).
# The held run leases are read once (pg_locks is computed on each read), then joined by key.
_LEASED = text(f"""WITH held AS MATERIALIZED (
SELECT DISTINCT objid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
AND classid = hashtext('agentforge.run')::oid AND database = {_THIS_DATABASE})
SELECT r.session_id, r.replica FROM run_lease AS r
JOIN held ON held.objid = hashtext(current_schema() || ':' || r.session_id)::oid
WHERE r.tenant_id = :tenant ORDER BY r.session_id""")
# A `run_lease` row is live while its replica holds its lease: one backend holds both the session's
# run lease and that replica's roster lock. Advisory locks are read once per statement.
_LOCKS = f"""locks AS MATERIALIZED (
SELECT pid, classid, objid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
AND database = {_THIS_DATABASE})"""
_DEAD = f"""time_acquired < :before AND NOT EXISTS (
SELECT 1 FROM locks AS lease JOIN locks AS roster ON roster.pid = lease.pid
WHERE lease.classid = hashtext('agentforge.run')::oid
AND lease.objid = hashtext(current_schema() || ':' || run_lease.session_id)::oid
AND roster.classid = {_ROSTER}::oid AND roster.objid = hashtext(run_lease.replica)::oid)"""
_STALE = text(f"""WITH {_LOCKS}
SELECT tenant_id, session_id, replica FROM run_lease WHERE {_DEAD} ORDER BY time_acquired LIMIT :limit""")
_PURGE = text(f"""WITH {_LOCKS}
DELETE FROM run_lease WHERE tenant_id = :tenant AND session_id = :session AND replica = :replica
AND {_DEAD}""")

# The server probes an idle cluster connection after 10 s, then every 5 s, and ends it after 3
# unanswered probes: a replica cut off without a word (a lost network) loses its leases in about
# 25 s instead of the system default of hours, so another replica can take its turns over.
_KEEPALIVES: Final = {
    "tcp_keepalives_idle": "10",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
}

OnMessage = Callable[[str], None]


def _asyncpg() -> Any:
    import asyncpg  # here: a SQLite server never loads the Postgres driver

    return asyncpg


def _lost() -> tuple[type[BaseException], ...]:
    """A connection that ended: closed under us, or its backend terminated (57P01) mid-query."""
    asyncpg = _asyncpg()
    return (
        asyncpg.PostgresConnectionError,
        asyncpg.InterfaceError,
        asyncpg.exceptions.OperatorInterventionError,
        ConnectionError,
        OSError,
    )


def channel_name(schema: str | None) -> str:
    """One channel per schema, short enough for an identifier whatever the schema is called."""
    return "agentforge_" + hashlib.sha256((schema or "public").encode()).hexdigest()[:20]


def _connect_args(target: DatabaseTarget) -> tuple[str, dict[str, str]]:
    dsn = target.url.set(drivername="postgresql").render_as_string(hide_password=False)
    settings = {"search_path": target.schema} if target.schema else {}
    return dsn, {**settings, **_KEEPALIVES}


def leased_sessions(conn: Connection, tenant_id: str) -> dict[str, str]:
    """Store query (Postgres): the tenant's sessions that a replica runs right now, and which."""
    return {row.session_id: row.replica for row in conn.execute(_LEASED, {"tenant": tenant_id})}


def stale_leases(conn: Connection, acquired_before: int, limit: int) -> list[tuple[str, str, str]]:
    """Store query (Postgres, across tenants): (tenant, session, replica) of `run_lease` rows taken
    before `acquired_before` (ms) whose replica does not hold that lease now (it died, or its lease
    connection was lost and the lease with it)."""
    rows = conn.execute(_STALE, {"before": acquired_before, "limit": limit})
    return [(row.tenant_id, row.session_id, row.replica) for row in rows]


def purge_stale_lease(
    conn: Connection, tenant_id: str, session_id: str, replica: str, acquired_before: int
) -> bool:
    """Store write (Postgres): remove that row if it is still stale (checked again: its replica may
    have taken the lease again meanwhile, which renews the row)."""
    params = {"tenant": tenant_id, "session": session_id, "replica": replica, "before": acquired_before}
    return bool(conn.execute(_PURGE, params).rowcount)


class ClusterLink:
    """Three connections: leases, notifying, listening. Open with `await ClusterLink.open(...)`."""

    def __init__(self, target: DatabaseTarget, on_message: OnMessage, seal: Seal) -> None:
        self._dsn, self._settings = _connect_args(target)
        self.channel = channel_name(target.schema)
        self._on_message = on_message
        self._seal = seal
        self._leases: Any = None
        self._notifier: Any = None
        self._listener: Any = None
        self._leases_ready = asyncio.Event()
        self._lease_lock = asyncio.Lock()
        self._notify_lock = asyncio.Lock()
        self._listen_lock = asyncio.Lock()  # the ping and the listening lock's statement
        self._holds: Counter[str] = Counter()  # this replica's holds on each lease (re-entrant)
        self._lost_holds: Counter[str] = Counter()  # holds that ended with a lost connection
        self._tenants: dict[str, str] = {}  # the tenant of each held lease with a `run_lease` row
        self._replica: str | None = None
        self._reopening: set[asyncio.Task[None]] = set()
        self._watcher: asyncio.Task[None] | None = None
        self._down: set[str] = set()  # roles being opened again
        self._closed = False
        self.on_leases_lost: Callable[[set[str]], None] | None = None
        self._unopened: list[str] = []  # heard while the seal's cipher is built, in order
        self._loading: asyncio.Task[None] | None = None
        # Counted among the listeners again (the listening connection came back): the others may
        # have stopped announcing to this replica meanwhile (runtime/cluster.py).
        self.on_rejoined: Callable[[], None] | None = None
        self.on_gap: Callable[[], None] | None = None
        self.reconnects = 0  # connections opened again after a loss, for tests and logs
        self.heard_own = 0  # our own notifications dropped unopened, for tests
        self.ping_interval = PING_INTERVAL
        self.ping_timeout = PING_TIMEOUT
        self.lease_timeout = LEASE_CALL_TIMEOUT
        self.notify_timeout = NOTIFY_TIMEOUT

    @classmethod
    async def open(cls, target: DatabaseTarget, on_message: OnMessage) -> ClusterLink:
        dsn, settings = _connect_args(target)
        first = await _asyncpg().connect(dsn, server_settings=settings)
        try:
            key = await first.fetchval(_KEY)
        except BaseException:
            await first.close()
            raise
        if key is None:
            await first.close()
            raise RuntimeError("replicas need the cluster key of migration 0011: migrate the database")
        link = cls(target, on_message, Seal(key, channel_name(target.schema)))
        try:
            link._adopt_leases(first)
            link._notifier = await link._connect("notify")
            link._listener = await link._listen()
        except BaseException:
            await link.close()
            raise
        link._watcher = asyncio.get_running_loop().create_task(link._watch(), name="cluster-watch")
        return link

    # --- connections -----------------------------------------------------------------------------

    async def _connect(self, role: str) -> Any:
        conn = await _asyncpg().connect(self._dsn, server_settings=self._settings)
        conn.add_termination_listener(lambda ended: self._ended(role, ended))
        return conn

    def _adopt_leases(self, conn: Any) -> None:
        conn.add_termination_listener(lambda ended: self._ended("leases", ended))
        self._leases = conn
        self._leases_ready.set()

    async def _listen(self) -> Any:
        conn = await self._connect("listen")
        try:
            await conn.add_listener(self.channel, self._heard_from)
            if self._replica is not None:  # counted among the listeners again (`join`)
                await conn.fetchval(_LISTEN_JOIN, self._replica)
        except BaseException:
            await _close_quietly(conn)
            raise
        return conn

    def _ended(self, role: str, conn: Any) -> None:
        """asyncpg's termination callback: a connection of ours closed (ours, or lost)."""
        current = {"leases": self._leases, "notify": self._notifier, "listen": self._listener}[role]
        if self._closed or conn is not current or role in self._down:
            return
        log.warning("cluster: the %s connection was lost", role)
        if role == "notify":
            self._notifier = None  # the next notification opens it again
            return
        self._down.add(role)
        if role == "leases":
            self._leases_lost()
        task = asyncio.get_running_loop().create_task(self._reopen(role), name=f"cluster-reopen:{role}")
        self._reopening.add(task)
        task.add_done_callback(self._reopening.discard)

    def _leases_lost(self) -> None:
        # Advisory locks end with their session: every hold of this replica is gone, now.
        self._leases_ready.clear()
        held = set(self._holds)
        self._lost_holds.update(self._holds)
        self._holds.clear()
        self._tenants.clear()
        if held and self.on_leases_lost is not None:
            _call_back("leases lost", self.on_leases_lost, held)

    async def _reopen(self, role: str) -> None:
        """Open a lost connection again, backing off, until it is open or the link closes: any
        failure (an unexpected one logged) is one more attempt, never the end of trying."""
        delay = RECONNECT_FIRST
        while not self._closed:
            try:
                await self._open_again(role)
            except (*_lost(), _asyncpg().PostgresError):
                pass
            except Exception:
                log.exception("cluster: opening the %s connection again failed unexpectedly", role)
            else:
                self.reconnects += 1
                log.warning("cluster: the %s connection is open again", role)
                if role == "listen" and self.on_gap is not None:
                    _call_back("gap", self.on_gap)  # what was said while nobody listened is lost
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX)

    async def _open_again(self, role: str) -> None:
        if role == "leases":
            conn = await self._connect("leases")
            try:
                if self._replica is not None:
                    await conn.fetchval(_JOIN, self._replica)
            except BaseException:
                await _close_quietly(conn)
                raise
            self._leases = conn
            self._down.discard(role)
            self._leases_ready.set()
        else:
            self._listener = await self._listen()
            self._down.discard(role)
            self._seal.listening_again()
            if self._replica is not None and self.on_rejoined is not None:
                _call_back("rejoined", self.on_rejoined)

    async def _watch(self) -> None:
        """Ping the cluster connections; a ping that fails unexpectedly is logged and the watch goes
        on (the next ping, one interval later, is the backoff)."""
        while not self._closed:
            await asyncio.sleep(self.ping_interval)
            await asyncio.gather(*(self._watch_one(role) for role in _ROLES))

    async def _watch_one(self, role: str) -> None:
        try:
            await self._ping(role)
        except Exception:
            log.exception("cluster: pinging the %s connection failed unexpectedly", role)

    def _current(self, role: str) -> Any:
        return {"leases": self._leases, "notify": self._notifier, "listen": self._listener}[role]

    async def _ping(self, role: str) -> None:
        """Ping `role`'s connection once it is free (only the ping is timed: whoever holds the
        connection is timed on its own); one that does not answer is ended, and its termination
        callback opens it again (leases: stops the runs first; notify: on the next notification)."""
        lock = {"leases": self._lease_lock, "notify": self._notify_lock, "listen": self._listen_lock}[role]
        async with lock:
            conn = self._current(role)
            if conn is None or conn.is_closed() or role in self._down:
                return
            with contextlib.suppress(*_lost()):  # ended: its termination callback does the rest
                await self._answered(role, conn, conn.fetchval("SELECT 1"), self.ping_timeout)

    async def _answered(self, role: str, conn: Any, call: Awaitable[T], timeout: float) -> T:
        """`call` on `conn`, which is ended when it does not answer within `timeout`: a connection
        lost without a word looks just like that."""
        # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation that
        # lands as `call` finishes, and the loops calling this would then never stop.
        try:
            async with asyncio.timeout(timeout):
                return await call
        except TimeoutError:
            log.warning("cluster: the %s connection stopped answering; ending it", role)
            conn.terminate()
            raise ConnectionError(f"the cluster's {role} connection stopped answering") from None

    async def _on_leases(self, query: Callable[[Any], Awaitable[T]]) -> T:
        """Run `query` on the lease connection, waiting (a bounded time) for it to come back."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RECONNECT_WAIT
        while True:
            try:
                if not self._leases_ready.is_set():  # the timer only when there is a wait
                    async with asyncio.timeout_at(deadline):
                        await self._leases_ready.wait()
            except TimeoutError:
                raise ClusterUnavailableError("the cluster's lease connection is lost") from None
            conn = self._leases
            try:
                async with self._lease_lock:
                    return await self._answered("leases", conn, query(conn), self.lease_timeout)
            except _lost():
                if self._leases is conn and not conn.is_closed():
                    raise
                self._ended("leases", conn)  # noticed here first: the callback may not have run yet

    # --- leases ----------------------------------------------------------------------------------

    async def try_lease(self, session_id: str, tenant_id: str | None = None) -> bool:
        """Take the session's run lease unless another replica holds it (re-entrant here).

        With `tenant_id` the first hold is recorded in `run_lease` (status on every replica)."""

        async def take(conn: Any) -> bool:
            if tenant_id is None or self._holds[session_id] or self._replica is None:
                if not await conn.fetchval(_TRY_LEASE, session_id):
                    return False
            else:
                row = (tenant_id, session_id, self._replica)
                try:
                    status = await execute_in_tenant(conn, tenant_id, _TAKE_AND_RECORD, *row)
                except BaseException:
                    with contextlib.suppress(Exception):  # not recorded: not taken (if it was)
                        await conn.fetchval(_RELEASE, session_id)
                    raise
                if status != "INSERT 0 1":
                    return False  # another replica holds it
                self._tenants[session_id] = tenant_id
            self._holds[session_id] += 1
            return True

        return await self._on_leases(take)

    async def release(self, session_id: str) -> None:
        if self._lost_holds[session_id]:  # it ended with its connection: nothing to give back
            self._lost_holds[session_id] -= 1
            if not self._lost_holds[session_id]:
                del self._lost_holds[session_id]
            return

        async def give_back(conn: Any) -> None:
            if not self._holds[session_id]:
                return
            self._holds[session_id] -= 1
            if not self._holds[session_id]:
                del self._holds[session_id]
                tenant_id = self._tenants.pop(session_id, None)
                if tenant_id is not None and self._replica is not None:
                    try:
                        row = (tenant_id, session_id, self._replica)
                        await execute_in_tenant(conn, tenant_id, _FORGET_AND_RELEASE, *row)
                        return
                    except _asyncpg().PostgresError:  # a stale row is ignored: the lock decides
                        log.exception("cluster: could not remove the run_lease row of %s", session_id)
            await conn.fetchval(_RELEASE, session_id)

        with contextlib.suppress(ClusterUnavailableError):  # lost meanwhile: released by Postgres
            await self._on_leases(give_back)

    async def lease_free(self, session_id: str) -> bool:
        """Whether no replica holds the session's lease right now (this one included)."""

        async def probe(conn: Any) -> bool:
            if not await conn.fetchval(_TRY_LEASE, session_id):
                return False
            await conn.fetchval(_RELEASE, session_id)
            return True

        return await self._on_leases(probe)

    def backend_pids(self) -> dict[str, int]:
        """The server process of each open connection, by role (diagnostics, tests)."""
        conns = {"leases": self._leases, "notify": self._notifier, "listen": self._listener}
        return {
            role: conn.get_server_pid()
            for role, conn in conns.items()
            if conn is not None and not conn.is_closed()
        }

    @property
    def sealing_loaded(self) -> bool:
        """Whether the seal's cipher is built (a replica that never heard or spoke to another has
        not: cryptography is ~7 MB), for tests."""
        return self._seal.loaded

    @property
    def refused(self) -> int:
        """Notifications dropped unread: not sealed by a replica, replayed, or stale."""
        return self._seal.refused

    @property
    def gaps(self) -> int:
        """Other replicas' notifications this one should have heard and never took."""
        return self._seal.gaps

    @property
    def holds(self) -> set[str]:
        """The sessions whose lease this replica holds now."""
        return set(self._holds)

    def holding(self, session_id: str) -> bool:
        """Whether this replica holds the session's lease now."""
        return self._holds[session_id] > 0

    async def join(self, replica: str) -> None:
        """Be counted among the live replicas until the lease connection ends, and among the
        listeners until the listening one does (again after each reconnect)."""
        self._replica = replica

        async def join(conn: Any) -> None:
            await conn.fetchval(_JOIN, replica)

        await self._on_leases(join)
        async with self._listen_lock:
            listener = self._listener
            if listener is not None and not listener.is_closed():
                await listener.fetchval(_LISTEN_JOIN, replica)

    async def replica_count(self) -> int:
        """How many replicas of this schema are alive (this one included)."""

        async def count(conn: Any) -> int:
            return int(await conn.fetchval(_COUNT))

        return await self._on_leases(count)

    async def others_listening(self) -> int:
        """How many other replicas of this schema listen on the channel now: whom an announcement
        reaches."""
        replica = self._replica or ""

        async def count(conn: Any) -> int:
            return int(await conn.fetchval(_OTHERS_LISTENING, replica))

        return await self._on_leases(count)

    # --- the channel -----------------------------------------------------------------------------

    async def notify(self, payloads: Sequence[str]) -> None:
        """Send payloads (each under NOTIFY_LIMIT bytes) on the channel, in order.

        Sealed under the lock, so their counters go out in order; sent again once on a new
        connection if the first one was lost (receivers drop a counter they have seen)."""
        if not payloads:
            return
        async with self._notify_lock:
            if not self._seal.loaded:
                await asyncio.to_thread(self._seal.load)
            sealed = [self._seal.seal(payload) for payload in payloads]
            for attempt in range(2):
                conn = self._notifier
                try:
                    if conn is None or conn.is_closed():
                        raise ConnectionError("the notify connection is closed")
                    notified = conn.fetchval(_NOTIFY, self.channel, sealed)
                    await self._answered("notify", conn, notified, self.notify_timeout)
                    return
                except _lost():
                    if attempt or self._closed:
                        raise
                    self._notifier = await self._connect("notify")

    def skip(self) -> None:
        """Something meant for the other replicas will never be sent (this replica's outbox
        overflowed): they see the gap at its next notification and resync (store/seal.py)."""
        self._seal.skip()

    def _heard_from(self, _conn: Any, backend: int, _channel: str, sealed: str) -> None:
        """asyncpg's listener callback. Postgres delivers our own notifications to our listener too:
        one from our notify connection's backend is dropped unopened (the seal's own check stays for
        one sent from a notify connection before it was replaced)."""
        notifier = self._notifier
        if notifier is not None and not notifier.is_closed() and backend == notifier.get_server_pid():
            self.heard_own += 1
            return
        if self._seal.loaded and not self._unopened:
            self._heard(sealed)
            return
        # The first words of another replica: the cipher is built off the loop, and what arrives
        # meanwhile waits for it, in order.
        self._unopened.append(sealed)
        if len(self._unopened) == 1:
            loop = asyncio.get_running_loop()
            self._loading = loop.create_task(self._open_when_loaded(), name="cluster-seal")

    async def _open_when_loaded(self) -> None:
        try:
            await asyncio.to_thread(self._seal.load)
        except asyncio.CancelledError:  # closing
            self._unopened = []
            raise
        except Exception:
            log.exception("cluster: the seal's cipher could not be built; what was heard is lost")
            self._unopened = []
            if self.on_gap is not None:
                _call_back("gap", self.on_gap)
            return
        unopened, self._unopened = self._unopened, []
        for sealed in unopened:
            self._heard(sealed)

    def _heard(self, sealed: str) -> None:
        gaps = self._seal.gaps
        payload = self._seal.open(sealed)
        if self._seal.gaps != gaps:
            self._missed()
        if payload is not None:
            self._on_message(payload)
        elif self._seal.refused and self._seal.refused & (self._seal.refused - 1) == 0:
            log.warning("cluster: %d notification(s) not sealed by a replica dropped", self._seal.refused)

    def _missed(self) -> None:
        """A sender's counter skipped payloads this replica never took (a NOTIFY that failed, one
        refused as stale): whom they concerned is unknown, so every subscriber resyncs."""
        log.warning("cluster: %d gap(s) in other replicas' notifications; resyncing", self._seal.gaps)
        if self.on_gap is not None:
            _call_back("gap", self.on_gap)

    async def close(self) -> None:
        self._closed = True
        for task in [*self._reopening, *(t for t in (self._watcher, self._loading) if t is not None)]:
            task.cancel()
        for conn in (self._listener, self._notifier, self._leases):
            if conn is not None:
                await _close_quietly(conn)


def _call_back(what: str, callback: Callable[..., None], *args: Any) -> None:
    """Tell the replica something from a connection's callback or task: its failure is logged, and
    never ends the connection's handling."""
    try:
        callback(*args)
    except Exception:
        log.exception("cluster: the %s callback failed", what)


async def _close_quietly(conn: Any) -> None:
    with contextlib.suppress(Exception):
        await conn.close()
