"""The Store: durable writes through the ordered writer, and reads, for SQLite or Postgres."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError

from agentforge.model.apikey import ApiKey, StoredApiKey
from agentforge.model.events import SYSTEM_ACTOR, Event
from agentforge.model.message import WithParts
from agentforge.model.part import Part
from agentforge.model.permission import PermissionRequestInfo
from agentforge.model.session import Session
from agentforge.model.webhook import DeliveryStatus, WebhookDelivery
from agentforge.store import audit, keys, nonces, prompt_queue, queries, refusals, webhooks
from agentforge.store.audit import AuditEntry, AuditRecord
from agentforge.store.batch import Mutation
from agentforge.store.cluster import (
    ClusterLink,
    OnMessage,
    leased_sessions,
    purge_stale_lease,
    stale_leases,
)
from agentforge.store.engine import (
    DatabaseTarget,
    Dialect,
    parse_database_url,
    postgres_engine,
    postgres_pool_size,
    sqlite_engine,
)
from agentforge.store.history_cache import HistoryCache
from agentforge.store.migrate import MigrationError, current_revision, upgrade_to_head
from agentforge.store.ownership import SERVER_LOCK_SUFFIX, AdvisoryOwnership, FileOwnership, Ownership
from agentforge.store.parsed import SharedRows
from agentforge.store.privileges import current_role
from agentforge.store.projector import checkpoint_part
from agentforge.store.prompt_queue import QueuedPrompt
from agentforge.store.readers import PoolReaders, Readers, ThreadReaders
from agentforge.store.writer import (
    DEFAULT_BATCH_CAP,
    OrderedWriter,
    Publish,
    TaskWriter,
    ThreadWriter,
    WriterObserver,
)

if TYPE_CHECKING:
    # SQLAlchemy's asyncio layer brings its ORM (~7 MB): only Postgres uses it (engine.py).
    from sqlalchemy.ext.asyncio import AsyncEngine

DEFAULT_READERS: Final = 4

T = TypeVar("T")


class SecondServerError(Exception):
    """A second server process on one SQLite database."""


def _publish_nowhere(_events: list[Event]) -> None:
    """For tools (CLI, migrations, benchmarks) that write without a bus."""


def _dispose_all(*engines: Engine) -> None:
    for engine in engines:
        engine.dispose()


async def _dispose_async(*engines: AsyncEngine | None) -> None:
    for engine in engines:
        if engine is not None:
            await engine.dispose()


def _owner_target(target: DatabaseTarget, owner_url: str | None) -> DatabaseTarget | None:
    """The parsed owner URL, checked against the runtime URL: both Postgres, the same schema."""
    if owner_url is None:
        return None
    if target.dialect != "postgresql":
        raise ValueError("An owner database URL only applies to Postgres")
    owner = parse_database_url(owner_url)
    if owner.dialect != "postgresql":
        raise ValueError("The owner database URL must be a Postgres URL")
    if owner.schema != target.schema:
        raise ValueError(
            f"The owner database URL names schema {owner.schema!r} but the database URL {target.schema!r}"
        )
    return owner


def _first_line(exc: DBAPIError) -> str:
    # The rest is the statement and parameters.
    lines = str(exc.orig).splitlines()
    return lines[0] if lines else type(exc.orig).__name__


async def _migrate_postgres(
    engine: AsyncEngine, url: str, owner_url: str | None, owner: DatabaseTarget | None
) -> AsyncEngine | None:
    """Migrate (as the owner, granting the runtime role, when there is one); return the engine for
    cross-tenant maintenance reads (None: the runtime engine does them)."""
    if owner_url is None or owner is None:
        try:
            await asyncio.to_thread(upgrade_to_head, url)
        except DBAPIError as exc:
            raise MigrationError(
                f"Could not migrate the database ({_first_line(exc)}). If the server runs as a role"
                " without DDL rights, give the owner's URL (database.owner_url or"
                " AGENTFORGE_DATABASE_OWNER_URL) or run `agentforge db migrate` first."
            ) from exc
        return None
    async with engine.connect() as conn:
        runtime_role = await conn.run_sync(current_role)
    owner_engine = postgres_engine(owner, pool_size=0)  # only used at start-up: keeps no connection
    try:
        async with owner_engine.connect() as conn:
            same_role = runtime_role == await conn.run_sync(current_role)
        # One role given twice owns the tables: nothing to grant (doctor flags such a setup).
        grantee = None if same_role else runtime_role
        await asyncio.to_thread(upgrade_to_head, owner_url, runtime_role=grantee)
    except BaseException:
        await owner_engine.dispose()
        raise
    return owner_engine


class Store:
    """Open with `await Store.open(url, publish=callback)`; close with `await store.close()`.

    Writes: `submit(event)` queues a durable event and returns a future; `await write(event)` waits
    until it has committed. Either way the event gets its `seq`, is published after commit, and keeps
    submission order. Do not mutate an event's properties after submitting it.
    Reads: async methods, each scoped to one tenant, but the start-up maintenance reads
    (`open_assistant_messages`, `pending_permission_requests`), which span all tenants.
    On Postgres every transaction sets its tenant for row-level security (see tenancy.py).
    """

    def __init__(
        self,
        dialect: Dialect,
        writer: OrderedWriter,
        readers: Readers,
        dispose: Callable[[], Awaitable[None]],
        ownership: Ownership,
        maintenance: Readers | None = None,
        target: DatabaseTarget | None = None,
        sqlite_path: Path | None = None,
    ) -> None:
        self._dialect = dialect
        self._writer = writer
        self._readers = readers
        self._maintenance = maintenance or readers
        self._dispose = dispose
        self._ownership = ownership
        self._target = target
        self._server_lock: Ownership | None = None
        self._sqlite_path = sqlite_path or Path()
        self._closed = False
        self._shared = SharedRows()  # parsed history rows, reused by the next read (store/parsed.py)
        self._history = HistoryCache()  # each session's last loop read (store/history_cache.py)

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        owner_url: str | None = None,
        publish: Publish | None = None,
        readers: int = DEFAULT_READERS,
        batch_cap: int = DEFAULT_BATCH_CAP,
    ) -> Store:
        """Migrate the database at `url` to the newest schema and start the writer and readers.

        `owner_url` (Postgres): the role that owns the tables. The migrations then run as that role,
        which also grants the role of `url` (the runtime role) exactly what the server needs (see
        privileges.py), and the cross-tenant maintenance reads run as it. Without it, `url`'s role
        migrates and does maintenance itself (local and development setups).
        `publish(events)` is called on the event loop with each batch of committed events, in order.
        """
        target = parse_database_url(url)
        owner = _owner_target(target, owner_url)
        sink = publish or _publish_nowhere
        if target.dialect == "sqlite":
            await asyncio.to_thread(upgrade_to_head, url)
            return cls._open_sqlite(target, sink, readers, batch_cap)
        engine = postgres_engine(target, pool_size=postgres_pool_size(readers), max_overflow=readers)
        try:
            maintenance = await _migrate_postgres(engine, url, owner_url, owner)
        except BaseException:
            await engine.dispose()
            raise
        return cls(
            "postgresql",
            TaskWriter(engine, sink, batch_cap=batch_cap),
            PoolReaders(engine, kept=readers),  # of the pool's two per reader (engine.py)
            lambda: _dispose_async(engine, maintenance),
            AdvisoryOwnership(engine),
            maintenance=None if maintenance is None else PoolReaders(maintenance, kept=0),
            target=target,
        )

    @classmethod
    def _open_sqlite(cls, target: DatabaseTarget, sink: Publish, readers: int, batch_cap: int) -> Store:
        write_engine = sqlite_engine(target, pool_size=1, begin="BEGIN IMMEDIATE")
        read_engine = sqlite_engine(target, pool_size=readers, begin="BEGIN")
        return cls(
            "sqlite",
            ThreadWriter(write_engine, sink, batch_cap=batch_cap),
            ThreadReaders(read_engine, threads=readers),
            lambda: asyncio.to_thread(_dispose_all, write_engine, read_engine),
            FileOwnership(target.sqlite_path),
            sqlite_path=target.sqlite_path,
        )

    @property
    def dialect(self) -> Dialect:
        return self._dialect

    def observe(self, observer: WriterObserver) -> None:
        """Report each batch the writer commits to `observer` (telemetry)."""
        self._writer.observer = observer

    @property
    def writer_queue_depth(self) -> int:
        return self._writer.queue_depth

    @property
    def writer_reads(self) -> int:
        """Reads the writer ran right behind writes (`history_after_writes`), for tests and metrics."""
        return self._writer.reads_done

    @property
    def committed_batches(self) -> int:
        """Transactions the writer has committed (one per group of events), for tests and metrics."""
        return self._writer.committed_batches

    @property
    def writer_alive(self) -> bool:
        return self._writer.alive

    async def schema_revision(self) -> str | None:
        """The migration revision the database is at (a round trip: fails when it is unreachable)."""
        return await self._readers.run_across_tenants(current_revision)

    # --- writes ---------------------------------------------------------------------------------

    def submit(self, event: Event, *, linger: float = 0.0) -> asyncio.Future[Event]:
        """Queue a durable event without waiting. The future fails with StoreWriteError if dropped.
        `linger`: it may wait that long (seconds) for the next submission, to commit with it."""
        return self._writer.submit(event, linger=linger)

    def submit_group(
        self, events: Sequence[Event], *, queue_prompt: str | None = None
    ) -> asyncio.Future[list[Event]]:
        """Queue events to commit all together or not at all (GroupWriteError names the one that
        failed): a user message with its parts, whose ids a client may have chosen. `queue_prompt`:
        the id of that message when it is an accepted `prompt_async`, noted durably in the same
        commit until `finish_prompts` (any replica may run it)."""
        queued = None if queue_prompt is None else QueuedPrompt(queue_prompt, int(time.time() * 1000))
        return self._writer.submit_group(events, queued)

    async def claim_ownership(self) -> bool:
        """Whether this process is the database's only live owner (see ownership.py); the claim is
        kept until `close`."""
        return await self._ownership.claim()

    async def claim_nonce(self, tenant_id: str, nonce: str, expires_at: int) -> bool:
        """Record a signed gateway request's nonce; False when any process already did (a replay)."""
        now = int(time.time())

        def claim(conn: Connection) -> bool:
            return nonces.claim_nonce(conn, tenant_id, nonce, expires_at, now)

        return await self.mutate(tenant_id, "gateway nonce", claim)

    async def admit_refusal(
        self, tenant_id: str, peer: str | None, reason: str, counted: int, *, now_ms: int, window_ms: int
    ) -> int | None:
        """A refused request this process would audit, carrying `counted` refusals it only counted:
        the suppressed count to audit it with, or None when another process audited the same
        (tenant, peer, reason) within the window. SQLite (one process) admits it as it is."""
        if self._target is None:
            return counted
        key = refusals.throttle_key(peer, reason)

        def admit(conn: Connection) -> int | None:
            return refusals.admit(conn, tenant_id, key, counted, now_ms, window_ms)

        return await self.mutate(tenant_id, "audit throttle", admit)

    async def finish_prompts(self, tenant_id: str, session_id: str, through: str) -> None:
        await self._mutated(finishing_prompts(tenant_id, session_id, through))

    async def queued_prompts(self, created_before: int, limit: int = 100) -> list[tuple[str, str, str]]:
        """Maintenance, across tenants: accepted prompts queued before `created_before` (ms)."""
        return await self._maintenance.run_across_tenants(prompt_queue.queued, created_before, limit)

    async def claim_server(self) -> None:
        """SQLite: become the one server process of this database, or raise SecondServerError."""
        if self._target is not None or self._server_lock is not None:
            return  # Postgres: replicas share the database
        lock = FileOwnership(self._sqlite_path, SERVER_LOCK_SUFFIX)
        if not await lock.claim():
            raise SecondServerError(
                f"Another Agent Forge server is already running on {self._sqlite_path}: a SQLite"
                " database serves one process. Stop that server, or use Postgres to run several"
                " replicas (README: Running several replicas)."
            )
        self._server_lock = lock

    async def open_cluster_link(self, on_message: OnMessage) -> ClusterLink | None:
        """Postgres: the connections replicas coordinate through (cluster.py); None on SQLite."""
        if self._target is None:
            return None
        return await ClusterLink.open(self._target, on_message)

    async def leased_sessions(self, tenant_id: str) -> dict[str, str]:
        """Postgres: the tenant's sessions that some replica runs now (their run leases are held and
        recorded, store/cluster.py), with that replica's id; SQLite: none (one process: its runner
        registry knows)."""
        if self._target is None:
            return {}
        return await self._readers.run(leased_sessions, tenant_id)

    async def purge_stale_leases(self, acquired_before: int, limit: int = 100) -> int:
        """Postgres maintenance: remove the `run_lease` rows taken before `acquired_before` (ms) whose
        replica no longer holds the lease (it died, or lost it with its connection); how many went.
        SQLite: none (no rows)."""
        if self._target is None:
            return 0
        purged = 0
        for tenant_id, session_id, replica in await self._maintenance.run_across_tenants(
            stale_leases, acquired_before, limit
        ):
            purge = functools.partial(
                purge_stale_lease,
                tenant_id=tenant_id,
                session_id=session_id,
                replica=replica,
                acquired_before=acquired_before,
            )
            purged += await self.mutate(tenant_id, "purge stale lease", purge)
        return purged

    async def barrier(self) -> None:
        """Wait until everything submitted before this call has been written (or dropped)."""
        await asyncio.shield(self._writer.submit_barrier())

    def publish_after_writes(self, event: Event) -> None:
        """Publish a broadcast-only event once every durable event submitted before it is published."""
        self._writer.publish_after_writes(event)

    @property
    def commits_off_loop(self) -> bool:
        """Whether the writer commits in a thread that runs while the event loop waits (SQLite)."""
        return self._writer.commits_off_loop

    async def write(self, event: Event) -> Event:
        """Write a durable event and wait until it has committed (and been published)."""
        # Shielded: a cancelled caller does not un-submit an event the writer may already be committing.
        return await asyncio.shield(self._writer.submit(event))

    async def mutate(self, tenant_id: str, label: str, apply: Callable[[Connection], T]) -> T:
        """Run `apply(conn)` in the writer's next transaction, ordered with the events, for `tenant_id`;
        return its result once committed. For changes that are not session events (API keys, audit
        entries of their own). `apply` is sync code that runs off the event loop on SQLite."""
        result: T = await self._mutated(Mutation(tenant_id, label, apply))
        return result

    async def _mutated(self, mutation: Mutation) -> Any:
        # Shielded: a cancelled caller does not un-submit a mutation the writer may be committing.
        return await asyncio.shield(self._writer.submit_mutation(mutation))

    def submit_checkpoint(self, tenant_id: str, part: dict[str, Any]) -> asyncio.Future[Any]:
        """Queue a streaming part's content so far (its wire shape) for the writer's next
        transaction, without waiting: see `projector.checkpoint_part`."""
        return self._writer.submit_mutation(checkpointing(tenant_id, dict(part)))

    # --- API keys -------------------------------------------------------------------------------

    async def create_api_key(self, stored: StoredApiKey) -> ApiKey:
        """Store a key; its `key.created` audit entry commits in the same transaction."""

        def create(conn: Connection) -> ApiKey:
            key = keys.insert_api_key(conn, stored)
            audit.append(conn, [AuditEntry(key.tenant, audit.KEY_CREATED, key.created_by, _key_facts(key))])
            return key

        return await self.mutate(stored.key.tenant, "create api key", create)

    async def revoke_api_key(
        self, tenant_id: str, key_id: str, *, actor: str = SYSTEM_ACTOR
    ) -> ApiKey | None:
        """The key, now revoked (it stops authenticating at once); None if the tenant has no such key.
        The `key.revoked` audit entry commits with the revocation."""

        def revoke(conn: Connection) -> ApiKey | None:
            key = keys.revoke_api_key(conn, tenant_id, key_id)
            if key is not None:
                audit.append(conn, [AuditEntry(tenant_id, audit.KEY_REVOKED, actor, _key_facts(key))])
            return key

        return await self.mutate(tenant_id, "revoke api key", revoke)

    async def list_api_keys(self, tenant_id: str) -> list[ApiKey]:
        return await self._readers.run(keys.list_api_keys, tenant_id)

    async def find_api_key(self, tenant_id: str, key_id: str) -> StoredApiKey | None:
        """Read on every authentication, never cached, so a revocation applies at once."""
        params = keys.key_params(tenant_id, key_id)
        return await self._readers.rows(tenant_id, keys.KEY_BY_ID, params, keys.key_from_rows)

    # --- webhook deliveries ------------------------------------------------------------------------

    async def record_webhook_delivery(self, tenant_id: str, delivery: WebhookDelivery) -> None:
        """Store a new delivery, or its outcome so far when it already is."""

        def save(conn: Connection) -> None:
            if webhooks.get_delivery(conn, tenant_id, delivery.id) is None:
                webhooks.insert_delivery(conn, tenant_id, delivery)
            else:
                webhooks.update_delivery(conn, tenant_id, delivery)

        await self.mutate(tenant_id, "webhook.delivery", save)

    async def webhook_deliveries(
        self, tenant_id: str, *, limit: int = 100, status: DeliveryStatus | None = None
    ) -> list[WebhookDelivery]:
        return await self._readers.run(webhooks.list_deliveries, tenant_id, limit=limit, status=status)

    async def webhook_delivery(self, tenant_id: str, delivery_id: str) -> WebhookDelivery | None:
        return await self._readers.run(webhooks.get_delivery, tenant_id, delivery_id)

    async def pending_webhook_deliveries(self, limit: int = 1000) -> list[tuple[str, WebhookDelivery]]:
        return await self._maintenance.run_across_tenants(webhooks.pending_deliveries, limit)

    async def record_audit(
        self,
        tenant_id: str,
        action: str,
        *,
        actor: str,
        session_id: str | None = None,
        data: Mapping[str, Any],
    ) -> AuditRecord:
        """Append an entry of its own (not derived from a session event) to the tenant's audit chain,
        through the ordered writer; returns the chained row once committed."""
        entry = AuditEntry(tenant_id, action, actor, data, session_id=session_id)
        [record] = await self.mutate(tenant_id, f"audit {action}", lambda conn: audit.append(conn, [entry]))
        return record

    async def record_config_loaded(
        self, tenant_id: str, config_digest: str, sources: Sequence[str], *, actor: str
    ) -> AuditRecord | None:
        """Record `config.loaded` with the effective config's digest in `tenant_id`'s chain unless the
        last one recorded there has the same digest; the new row, or None when nothing changed."""
        return await self.mutate(
            tenant_id,
            "audit config.loaded",
            lambda conn: audit.record_config_loaded(conn, tenant_id, config_digest, sources, actor=actor),
        )

    async def close(self) -> None:
        """Write everything already submitted, stop the writer, release connections."""
        if self._closed:
            return
        self._closed = True
        await self._writer.close()
        await self._readers.close()
        await self._ownership.release()
        if self._server_lock is not None:
            await self._server_lock.release()
        await self._dispose()

    # --- reads ----------------------------------------------------------------------------------

    async def get_session(self, tenant_id: str, session_id: str) -> Session | None:
        params = queries.session_params(tenant_id, session_id)
        return await self._readers.rows(tenant_id, queries.SESSION_BY_ID, params, queries.session_from_rows)

    async def list_sessions(
        self,
        tenant_id: str,
        *,
        directory: str | None = None,
        roots: bool = False,
        start: int | None = None,
        search: str | None = None,
        limit: int | None = None,
    ) -> list[Session]:
        return await self._readers.run(
            queries.list_sessions,
            tenant_id,
            directory=directory,
            roots=roots,
            start=start,
            search=search,
            limit=limit,
        )

    async def children(self, tenant_id: str, session_id: str) -> list[Session]:
        return await self._readers.run(queries.children, tenant_id, session_id)

    async def get_message(self, tenant_id: str, session_id: str, message_id: str) -> WithParts | None:
        return await self._readers.run(queries.get_message, tenant_id, session_id, message_id)

    async def list_messages(
        self, tenant_id: str, session_id: str, *, limit: int | None = None, before: str | None = None
    ) -> tuple[list[WithParts], str | None]:
        if before is not None:
            queries.decode_cursor(before)  # fail fast, before taking a connection
        return await self._readers.run(
            queries.list_messages, tenant_id, session_id, limit=limit, before=before
        )

    async def history(
        self, tenant_id: str, session_id: str, *, since_message_id: str | None = None
    ) -> list[WithParts]:
        return await self._readers.run(
            queries.history, tenant_id, session_id, since_message_id=since_message_id
        )

    async def history_since_compaction(self, tenant_id: str, session_id: str) -> list[WithParts]:
        """The session's messages from its newest completed compaction on (with the preserved tail),
        oldest first: what the loop reads per turn, whatever the session's total length.

        Reads only the rows written since the session's last read (store/history_cache.py). The
        messages and parts are shared with the next reads: read-only, change a copy (`model_copy`)."""
        return await self._history.fetch(self._readers, tenant_id, session_id, self._shared)

    def history_after_writes(self, tenant_id: str, session_id: str) -> asyncio.Future[list[WithParts]]:
        """`history_since_compaction` as it is once everything submitted so far has committed.
        SQLite: read by the writer right after committing them, in the same turn of its thread (a
        loop's first step, whose user message was just submitted, saves waiting for that commit and
        then a reader's hop). Postgres: read by the readers as soon as they committed (a read on the
        writer's connection would be round trips the writes behind it wait for), beside what the
        caller does meanwhile (the run's lease)."""
        if self._writer.reads_in_order:
            history, shared = self._history, self._shared
            return self._writer.submit_read(lambda conn: history.read(conn, tenant_id, session_id, shared))
        committed = self._writer.submit_barrier()
        read = asyncio.ensure_future(self._history_behind(committed, tenant_id, session_id))
        read.add_done_callback(_retrieved)  # a read nobody took may fail unseen (the store closing)
        return read

    async def _history_behind(
        self, committed: asyncio.Future[None], tenant_id: str, session_id: str
    ) -> list[WithParts]:
        await committed
        return await self.history_since_compaction(tenant_id, session_id)

    async def open_assistant_messages(self, limit: int = 1000) -> list[tuple[str, WithParts]]:
        """Start-up maintenance, across all tenants: assistant messages not yet completed, oldest
        first, each with its tenant id. While the server runs these are the turns in progress."""
        return await self._maintenance.run_across_tenants(queries.open_assistant_messages, limit)

    async def open_turn_sessions(self, limit: int = 1000) -> list[str]:
        """Maintenance, across all tenants: the sessions of `open_assistant_messages`' messages."""
        return await self._maintenance.run_across_tenants(queries.open_turn_sessions, limit)

    async def get_part(self, tenant_id: str, session_id: str, message_id: str, part_id: str) -> Part | None:
        return await self._readers.run(queries.get_part, tenant_id, session_id, message_id, part_id)

    async def events_after(
        self,
        tenant_id: str,
        session_id: str | None,
        after: int,
        limit: int = 1000,
        *,
        up_to_position: int | None = None,
    ) -> list[Event]:
        """A page of the log: the session's events after seq `after`, or (`session_id` None) the
        tenant's after position `after`; see `queries.events_after`."""
        # A session's page (SSE resume, what replicas read back per announced batch): the hot read.
        if session_id is not None and up_to_position is None:
            params = queries.session_events_params(tenant_id, session_id, after, limit)
            build = queries.events_from_rows(tenant_id)
            return await self._readers.rows(tenant_id, queries.SESSION_EVENTS_AFTER, params, build)
        return await self._readers.run(
            queries.events_after, tenant_id, session_id, after, limit, up_to_position
        )

    async def last_seq(self, tenant_id: str, session_id: str) -> int:
        return await self._readers.run(queries.last_seq, tenant_id, session_id)

    async def log_span(
        self, tenant_id: str, session_id: str | None, *, up_to_position: int | None = None
    ) -> tuple[int, int]:
        return await self._readers.run(queries.log_span, tenant_id, session_id, up_to_position)

    # --- interaction records ----------------------------------------------------------------------

    async def permission_request(self, tenant_id: str, request_id: str) -> PermissionRequestInfo | None:
        return await self._readers.run(queries.permission_request, tenant_id, request_id)

    async def permission_requests(
        self, tenant_id: str, session_id: str, *, decision: str | None = None
    ) -> list[PermissionRequestInfo]:
        """The session's permission requests oldest first (optionally only one kind of decision)."""
        return await self._readers.run(queries.permission_requests, tenant_id, session_id, decision=decision)

    async def pending_permission_requests(self, limit: int = 1000) -> list[tuple[str, PermissionRequestInfo]]:
        """Undecided permission requests of every tenant (start-up recovery), oldest first."""
        return await self._maintenance.run_across_tenants(queries.pending_permission_requests, limit)

    async def tenant_pending_permission_requests(
        self, tenant_id: str, limit: int = 1000
    ) -> list[PermissionRequestInfo]:
        """The tenant's undecided permission requests, oldest first: those of every replica."""
        return await self._readers.run(queries.tenant_pending_permission_requests, tenant_id, limit)

    async def audit_entries(
        self, tenant_id: str, *, after: int = 0, limit: int = 100
    ) -> tuple[list[AuditRecord], int | None]:
        """A page of the tenant's audit chain oldest first (seq > `after`), and the next page's `after`."""
        return await self._readers.run(audit.entries_page, tenant_id, after=after, limit=limit)

    async def todos(self, tenant_id: str, session_id: str) -> list[dict[str, Any]]:
        """The session's todo list as last written by a `todo.updated` event ([] when none)."""
        return await self._readers.run(queries.todos, tenant_id, session_id)


def _key_facts(key: ApiKey) -> dict[str, Any]:
    """What the audit log keeps of a key: never its secret or hash."""
    return {"keyID": key.id, "name": key.name, "roles": sorted(key.roles)}


def checkpointing(tenant_id: str, part: dict[str, Any]) -> Mutation:
    """The writer's mutation checkpointing a streaming part (`projector.checkpoint_part`): it never
    appends to the audit chain, so the writer keeps expecting the chain's head."""
    return Mutation(
        tenant_id,
        "part.checkpoint",
        lambda conn: checkpoint_part(conn, tenant_id, part),
        session_id=part["sessionID"],
        may_audit=False,
    )


def finishing_prompts(tenant_id: str, session_id: str, through: str) -> Mutation:
    """The writer's mutation taking a session's accepted prompts off the queue up to `through`
    (`prompt_queue.finish`): it never appends to the audit chain."""
    return Mutation(
        tenant_id,
        "finish prompts",
        lambda conn: prompt_queue.finish(conn, tenant_id, session_id, through),
        may_audit=False,
    )


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
