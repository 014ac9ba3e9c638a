"""The database side of several replicas on one Postgres: run leases and the cluster's channel.

Run leases are session-level advisory locks, all held on one connection of the replica (one loop
per session cluster-wide, see runtime/cluster.py). They end with that connection: a replica that
dies (kill -9 closes its sockets) loses every lease at once, which is how the others notice.
The channel is a LISTEN/NOTIFY channel named after the schema (channels are per database, schemas
share them): replicas announce event positions, deltas, new input, aborts and ended runs on it.
Each connection is used by one coroutine at a time (asyncpg allows no concurrent queries).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Callable, Sequence
from typing import Any, Final

from agentforge.store.engine import DatabaseTarget

log = logging.getLogger(__name__)

# Postgres refuses payloads of 8000 bytes and more; what is left is for the envelope.
NOTIFY_LIMIT: Final = 7000

_LEASE_KEYS = "hashtext('agentforge.run'), hashtext(current_schema() || ':' || $1)"
_TRY_LEASE: Final = f"SELECT pg_try_advisory_lock({_LEASE_KEYS})"
# Every live replica of the schema holds this lock (keyed by its id) on its lease connection.
_ROSTER = "hashtext('agentforge.replica:' || current_schema())"
_JOIN: Final = f"SELECT pg_advisory_lock({_ROSTER}, hashtext($1))"
_COUNT: Final = f"""SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = {_ROSTER}::oid
AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"""
_RELEASE: Final = f"SELECT pg_advisory_unlock({_LEASE_KEYS})"
# Several payloads in one statement: delivered at its commit, in array order.
_NOTIFY: Final = "SELECT count(pg_notify($1, p)) FROM unnest(CAST($2 AS text[])) AS p"

OnMessage = Callable[[str], None]


def channel_name(schema: str | None) -> str:
    """One channel per schema, short enough for an identifier whatever the schema is called."""
    return "agentforge_" + hashlib.sha256((schema or "public").encode()).hexdigest()[:20]


class ClusterLink:
    """Three connections: leases, notifying, listening. Open with `await ClusterLink.open(...)`."""

    def __init__(self, leases: Any, notifier: Any, listener: Any, channel: str) -> None:
        self._leases = leases
        self._notifier = notifier
        self._listener = listener
        self.channel = channel
        self._lease_lock = asyncio.Lock()
        self._notify_lock = asyncio.Lock()

    @classmethod
    async def open(cls, target: DatabaseTarget, on_message: OnMessage) -> ClusterLink:
        dsn = target.url.set(drivername="postgresql").render_as_string(hide_password=False)
        settings = {"search_path": target.schema} if target.schema else {}
        opened: list[Any] = []
        try:
            for _ in range(3):
                opened.append(await _connect(dsn, settings))
            channel = channel_name(target.schema)
            await opened[2].add_listener(channel, lambda _c, _pid, _ch, payload: on_message(payload))
        except BaseException:
            for conn in opened:
                with contextlib.suppress(Exception):
                    await conn.close()
            raise
        return cls(opened[0], opened[1], opened[2], channel)

    async def try_lease(self, session_id: str) -> bool:
        """Take the session's run lease unless another replica holds it (re-entrant here)."""
        async with self._lease_lock:
            return bool(await self._leases.fetchval(_TRY_LEASE, session_id))

    async def release(self, session_id: str) -> None:
        async with self._lease_lock:
            await self._leases.fetchval(_RELEASE, session_id)

    async def lease_free(self, session_id: str) -> bool:
        """Whether no replica holds the session's lease right now (this one included)."""
        async with self._lease_lock:
            if not await self._leases.fetchval(_TRY_LEASE, session_id):
                return False
            await self._leases.fetchval(_RELEASE, session_id)
            return True

    async def join(self, replica: str) -> None:
        """Be counted among the live replicas until this connection ends."""
        async with self._lease_lock:
            await self._leases.fetchval(_JOIN, replica)

    async def replica_count(self) -> int:
        """How many replicas of this schema are alive (this one included)."""
        async with self._lease_lock:
            return int(await self._leases.fetchval(_COUNT))

    async def notify(self, payloads: Sequence[str]) -> None:
        """Send payloads (each under NOTIFY_LIMIT bytes) on the channel, in order."""
        if payloads:
            async with self._notify_lock:
                await self._notifier.fetchval(_NOTIFY, self.channel, list(payloads))

    async def close(self) -> None:
        for conn in (self._listener, self._notifier, self._leases):
            with contextlib.suppress(Exception):
                await conn.close()


async def _connect(dsn: str, settings: dict[str, str]) -> Any:
    import asyncpg  # here: a SQLite server never loads the Postgres driver

    return await asyncpg.connect(dsn, server_settings=settings)
