"""One group-commit transaction: allocate each event's `seq`, project it, append it to the log.

Sync code over a SQLAlchemy `Connection`, shared by the SQLite writer thread and the Postgres writer
task (through `run_sync`). A batch first runs optimistically as one transaction with a single
multi-row insert into the event log (on Postgres, where its writer expects its numbers, held for
one message with its COMMIT: held.py). If anything in it fails (a late write after a delete, a stale
seq cache), the transaction is rolled back and the batch is redone with one savepoint per event, so
that a bad event is dropped alone and the rest still commit; a held batch whose check failed, or
that found a row not as it expected (direct.py `ExpectedRow`), is first written again whole, unheld.

Several writers (replicas on one Postgres database) may write to one session at once. On Postgres
each transaction therefore first takes a transaction-level advisory lock per session it writes, all
in one sorted order and before any audit-chain lock (so two writers cannot deadlock), and reads each
session's last seq under that lock instead of trusting a cache another writer may have outdated.

A batch may hold items of several tenants. On Postgres every statement must run with the tenant
setting of the rows it touches (row-level security, see `tenancy.py`), so the batch is written as
runs of consecutive items of one tenant: at each change of tenant the pending projector writes and
event-log rows are sent, then the setting changes. One tenant's batch stays one multi-row insert.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from sqlalchemy import Connection, Insert, bindparam, func, select, text
from sqlalchemy.exc import IntegrityError

from agentforge.model.events import Event
from agentforge.store import held, prompt_queue
from agentforge.store.audit import CHAIN_LOCK, ChainBuffer, lock_chains
from agentforge.store.audit_events import may_audit, record_event
from agentforge.store.last_numbers import (
    AuditHead,
    ExpectedNumbers,
    check,
    own_sessions,
    read_last_numbers,
    stale,
)
from agentforge.store.last_written import LastWritten
from agentforge.store.projector import (
    KnownRevisions,
    MissingRowError,
    RevisionKey,
    Writes,
    apply_event,
    dumps,
    stamps_history,
)
from agentforge.store.prompt_queue import QueuedPrompt
from agentforge.store.schema import event as event_table
from agentforge.store.tenancy import TENANT_SETTING, plain, set_tenant, setting_of

log = logging.getLogger(__name__)


class StoreWriteError(Exception):
    """A durable event was not written: its batch failed, or it was dropped (e.g. a late write)."""


class GroupWriteError(StoreWriteError):
    """An event group was not written; `event` is the one that failed (None: its whole batch did)."""

    def __init__(self, message: str, event: Event | None = None) -> None:
        super().__init__(message)
        self.event = event


SEQ_CACHE_SIZE: Final = 10_000


@dataclass(frozen=True, slots=True)
class Mutation:
    """A change that is not a session event (API keys, audit entries of their own): `apply(conn)` runs
    inside the writer's transaction, in submission order with the events, on behalf of `tenant_id`.
    It must only touch that tenant's rows; what it returns resolves the submitter's future.
    `session_id`: the session whose rows it writes, locked with the events' sessions (Postgres).
    `may_audit`: whether it may append to the tenant's audit chain (the writer then reads the
    chain's head again before it next appends); False only where it surely does not."""

    tenant_id: str
    label: str
    apply: Callable[[Connection], Any]
    session_id: str | None = None
    may_audit: bool = True


@dataclass(frozen=True, slots=True)
class Applied:
    """A mutation committed; `value` is what its `apply` returned."""

    value: Any


@dataclass(frozen=True, slots=True)
class EventGroup:
    """Events of one tenant written all together or not at all (a user message with its parts).

    Their ids may be a client's choice, so each row must be new: a message or part id any row holds
    (this session's too, in any tenant) fails the group instead of overwriting or vanishing.
    `queued`: a `prompt_async`'s queue entry, written after the events in the same piece (one
    commit accepts the prompt, and a prompt is never queued without its message).
    """

    tenant_id: str
    events: tuple[Event, ...]
    queued: QueuedPrompt | None = None


@dataclass(slots=True)
class Opening:
    """What a Postgres batch's opening did beyond its locks and numbers: the history revisions it
    bumped (to stamp rows with), the audit chain heads it checked, the tenants whose chain lock it
    took. `left_*`, set by the batch before it commits: the revisions and heads it leaves (None: one
    it changed without knowing the value), what the next batch's opening expects."""

    revisions: dict[RevisionKey, int] = field(default_factory=dict)
    heads: dict[str, AuditHead] = field(default_factory=dict)
    audit_locked: tuple[str, ...] = ()
    left_revisions: dict[str, int | None] = field(default_factory=dict)
    left_heads: dict[str, AuditHead | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Checked:
    """The numbers a batch's opening checked (last_numbers.py): sessions' seqs, the tenant's position,
    the history revisions it bumped from, the audit chain head."""

    seqs: dict[str, int]
    position: int
    revisions: dict[str, int]
    head: AuditHead | None


@dataclass(frozen=True, slots=True)
class Committed:
    """An event committed: its session `seq` and its tenant-wide `position` (what resumes read)."""

    seq: int
    position: int


@dataclass(frozen=True, slots=True)
class Grouped:
    """An event group committed; the numbers of each of its events, in order."""

    committed: tuple[Committed, ...]


Item = Event | Mutation | EventGroup

# Per item: an event's committed numbers, a mutation's result, a group's, or why it was dropped.
Outcome = Committed | Applied | Grouped | StoreWriteError

_INSERT_EVENT: Insert = event_table.insert()
# One transaction-level lock per session, then one per tenant for its `position` counter, then its
# audit chain's (audit.py; only a batch of one tenant that may append to it), each set in the order
# of its keys: every writer takes them in that order, sessions before positions and both before the
# audit chains, so none waits on another in a cycle. `count` takes them in the subquery's order.
# The same statement scopes the transaction to the first item's tenant (`tenancy.py`); on the
# store's writer it goes with BEGIN as one message (ids written as literals, see `_opening`).
_LOCKS = (
    "SELECT set_config('{setting}', {tenant}, true),"
    " (SELECT count(pg_advisory_xact_lock(k1, k2)) FROM ("
    " SELECT 0 AS stage, hashtext('agentforge.seq') AS k1, hashtext(current_schema() || ':' || s) AS k2"
    " FROM unnest(CAST({sessions} AS text[])) AS s"
    " UNION SELECT 1, hashtext('agentforge.position'), hashtext(current_schema() || ':' || t)"
    " FROM unnest(CAST({tenants} AS text[])) AS t{audits}"
    " ORDER BY 1, 2, 3) AS keys)"
)
_AUDIT_LOCKS = (
    f" UNION SELECT 2, hashtext('{CHAIN_LOCK}'), hashtext(current_schema() || ':' || a)"
    " FROM unnest(CAST({audits} AS text[])) AS a"
)
_LOCK_SESSIONS = text(
    _LOCKS.format(
        setting=TENANT_SETTING,
        tenant=":tenant",
        sessions=":sessions",
        tenants=":tenants",
        audits=_AUDIT_LOCKS.format(audits=":audits"),
    )
)
_MAX_SEQ = select(func.max(event_table.c.seq)).where(event_table.c.session_id == bindparam("session_id"))
_MAX_POSITION = select(func.max(event_table.c.position)).where(
    event_table.c.tenant_id == bindparam("tenant_id")
)
_MAX_SEQ_AND_POSITION = select(_MAX_SEQ.scalar_subquery(), _MAX_POSITION.scalar_subquery())


K = TypeVar("K")


class SeqCache(Generic[K]):
    """The last committed seq of recently written sessions (or another counter: a tenant's position,
    a session's history revision); the least recently used are forgotten (a miss costs one indexed
    query), so a long-running server does not grow it forever."""

    def __init__(self, capacity: int = SEQ_CACHE_SIZE) -> None:
        self._capacity = capacity
        self._last: OrderedDict[K, int] = OrderedDict()

    def get(self, key: K) -> int | None:
        last = self._last.get(key)
        if last is not None:
            self._last.move_to_end(key)
        return last

    def update(self, committed: dict[K, int]) -> None:
        for key, seq in committed.items():
            self._last[key] = seq
            self._last.move_to_end(key)
        while len(self._last) > self._capacity:
            self._last.popitem(last=False)

    def forget(self, key: K) -> None:
        self._last.pop(key, None)

    def __len__(self) -> int:
        return len(self._last)


class TenantRuns:
    """The statements of one transaction, sent per run of one tenant's items.

    `enter(tenant)` before each item: when the tenant changes (and the database scopes transactions
    by tenant) the projector's pending writes and the pending event-log rows go out under the old
    setting, then the setting changes. Without scoping (SQLite) everything waits for `flush`.
    """

    def __init__(
        self,
        conn: Connection,
        *,
        scoped: bool,
        tenant_id: str | None = None,
        known: KnownRevisions | None = None,
        opening: Opening | None = None,
        written: LastWritten | None = None,
    ) -> None:
        """`tenant_id`: the tenant the transaction is already scoped to, if any. `known`: the
        sessions' last history revisions, when this is the database's only writer (`Writes`).
        `opening`: the revisions its opening bumped and the chain heads and locks it holds.
        `written`: what the writer last wrote of the tool parts under way (`Writes`)."""
        self.writes = Writes(conn, known, written)
        opened = opening or Opening()
        self.writes.revisions.update(opened.revisions)
        # The run's audit entries, inserted with its event-log rows.
        self.chain = ChainBuffer(opened.heads, opened.audit_locked)
        self._scoped = scoped
        self._tenant = tenant_id
        self._log_rows: list[dict[str, Any]] = []

    def enter(self, tenant_id: str) -> None:
        if not self._scoped or tenant_id == self._tenant:
            return
        self.flush()
        set_tenant(self.writes.conn, tenant_id)
        self._tenant = tenant_id

    def log(self, row: dict[str, Any]) -> None:
        """Append an event-log row (sent with the run's other rows as one multi-row insert)."""
        self._log_rows.append(row)

    def flush(self) -> None:
        """Send the projector's pending writes, the event-log rows and the audit entries (on
        Postgres in one statement where they allow it: `Writes`)."""
        self.writes.defer_rows(_INSERT_EVENT, self._log_rows)
        self._log_rows = []
        self.chain.flush(self.writes.conn, self.writes.defer_rows)
        self.writes.finish()


class BatchApplier:
    """Writes batches of durable events; remembers the last committed seq of sessions it wrote.

    `scoped_by_tenant`: set the transaction's tenant before each tenant's items (Postgres).
    On Postgres other writers may write the same sessions: lock them, read their seqs under the lock.
    """

    def __init__(self, *, scoped_by_tenant: bool, seq_cache_size: int = SEQ_CACHE_SIZE) -> None:
        self._scoped = scoped_by_tenant
        self._shared = scoped_by_tenant  # Postgres: replicas may share the database
        self._last_seq = SeqCache[str](0 if self._shared else seq_cache_size)
        # The same bookkeeping per tenant for `position` (keys are tenant ids).
        self._last_position = SeqCache[str](0 if self._shared else seq_cache_size)
        # And per session for its history revision (projector.Writes), so a batch bumps the revisions
        # of all the sessions it writes in one statement instead of one UPDATE … RETURNING each.
        self._last_revision = SeqCache[RevisionKey](0 if self._shared else seq_cache_size)
        # Postgres: what this writer's batches left, checked (not trusted) by the next one.
        self._expected = ExpectedNumbers()
        self._written = LastWritten()  # and what it wrote of the tool parts under way, the same

    def write_batch(self, conn: Connection, events: Sequence[Item]) -> list[Outcome]:
        """Commit what can be committed; return one outcome per event, in order.

        Raises only when the transaction itself cannot be committed (then nothing was written).
        """
        try:
            return self._write_together(conn, events)
        except Exception as exc:
            failed = exc
        if _caused_by(failed, stale) or _caused_by(failed, _held_replace):
            # Its held message wrote nothing: another writer moved the numbers its opening expected
            # (read now), or a row was not as it expected. Written again, sent as it goes.
            try:
                return self._write_together(conn, events, hold=False)
            except Exception as exc:
                failed = exc
        log.debug("batch of %d failed as a whole (%s); retrying event by event", len(events), _short(failed))
        # The cached seqs of these sessions may be what failed (another process wrote): reload them.
        for item in events:
            for event in events_of(item):
                self._last_seq.forget(session_of(event))
                self._last_position.forget(event.tenant_id)
                self._last_revision.forget((event.tenant_id, session_of(event)))
            if isinstance(item, Mutation) and item.session_id:
                self._last_revision.forget((item.tenant_id, item.session_id))
        return self._write_one_by_one(conn, events)

    def _write_together(
        self, conn: Connection, events: Sequence[Item], *, hold: bool = True
    ) -> list[Outcome]:
        draft: dict[str, int] = {}
        positions: dict[str, int] = {}
        outcomes: list[Outcome] = []
        opening = Opening()
        with self._transaction(conn, events, draft, positions, opening, hold=hold) as scoped_to:
            _lock_audit_chains(conn, events)
            runs = TenantRuns(
                conn,
                scoped=self._scoped,
                tenant_id=scoped_to,
                known=self._last_revision,
                opening=opening,
                written=self._written,
            )
            for item in events:
                runs.enter(item.tenant_id)
                if isinstance(item, Mutation):
                    runs.flush()
                    if item.session_id:  # it may bump the session's revision itself
                        runs.writes.forget(item.tenant_id, item.session_id)
                    outcomes.append(Applied(item.apply(conn)))
                    if item.may_audit:
                        runs.chain.forget_heads()  # it may have appended to a chain itself
                    continue
                if isinstance(item, EventGroup):
                    grouped = self._write_group(runs.writes, draft, positions, item, runs.chain)
                    for event, done in zip(item.events, grouped.committed, strict=True):
                        runs.log(event_row(event, done.seq, done.position))
                    outcomes.append(grouped)
                    continue
                seq, position = self._next_numbers(conn, draft, positions, session_of(item), item.tenant_id)
                record_event(runs.writes, item, runs.chain)
                apply_event(runs.writes, item)
                draft[session_of(item)] = seq
                positions[item.tenant_id] = position
                runs.log(event_row(item, seq, position))
                outcomes.append(Committed(seq, position))
            runs.flush()
            _leaves(opening, events, runs)
        self._last_seq.update(draft)
        self._last_position.update(positions)
        self._last_revision.update(runs.writes.committed())
        return outcomes

    def _write_one_by_one(self, conn: Connection, events: Sequence[Item]) -> list[Outcome]:
        draft: dict[str, int] = {}
        positions: dict[str, int] = {}
        # Its events bump revisions and append to chains one by one: expect nothing of them after.
        self._expected.forget()
        opening = Opening()
        with self._transaction(conn, events, draft, positions, opening, bump=False) as scoped_to:
            _lock_audit_chains(conn, events)
            runs = TenantRuns(conn, scoped=self._scoped, tenant_id=scoped_to)
            outcomes: list[Outcome] = []
            for item in events:
                # Outside the item's savepoint: rolling that back must not undo the setting.
                runs.enter(item.tenant_id)
                outcomes.append(self._write_isolated(conn, draft, positions, item))
        self._last_seq.update(draft)
        self._last_position.update(positions)
        return outcomes

    def _write_isolated(
        self, conn: Connection, draft: dict[str, int], positions: dict[str, int], item: Item
    ) -> Outcome:
        if isinstance(item, Mutation):
            return _apply_isolated(conn, item)
        if isinstance(item, EventGroup):
            return self._write_group_isolated(conn, draft, positions, item)
        session_id = session_of(item)
        try:
            with conn.begin_nested():
                seq, position = self._next_numbers(conn, draft, positions, session_id, item.tenant_id)
                writes = Writes(conn, written=self._written)
                record_event(writes, item)
                apply_event(writes, item)
                writes.defer(_INSERT_EVENT, event_row(item, seq, position))
                writes.flush()
        except (IntegrityError, MissingRowError) as exc:
            # KERNEL 2.2: a late write after its session or message was deleted is logged and ignored.
            log.warning("dropped %s %s for session %s: %s", item.type, item.id, session_id, _short(exc))
            return StoreWriteError(f"{item.type} {item.id} was dropped: {_short(exc)}")
        except Exception as exc:
            log.exception("dropped %s %s for session %s", item.type, item.id, session_id)
            return StoreWriteError(f"{item.type} {item.id} could not be written: {exc}")
        draft[session_id] = seq
        positions[item.tenant_id] = position
        return Committed(seq, position)

    def _write_group(
        self,
        writes: Writes,
        draft: dict[str, int],
        positions: dict[str, int],
        group: EventGroup,
        chain: ChainBuffer | None = None,
    ) -> Grouped:
        """Project a group's events with strict writes; raises GroupWriteError naming the one that
        failed. `draft` and `positions` are only updated when every event went through.

        With `chain`, in a whole batch's transaction (which fails whole and is written again item
        by item when anything in it fails, naming the event there), the group's rows are deferred
        with the batch's others; without, each event's are sent at once so that a failure names it."""
        named = chain is None
        if named:
            writes.flush()
        local = dict(draft)
        local_positions = dict(positions)
        committed: list[Committed] = []
        writes.strict, writes.at_once = True, named
        try:
            for event in group.events:
                try:
                    seq, position = self._next_numbers(
                        writes.conn, local, local_positions, session_of(event), event.tenant_id
                    )
                    record_event(writes, event, chain)
                    apply_event(writes, event)
                    if named:
                        writes.flush()
                except Exception as exc:
                    raise GroupWriteError(
                        f"{event.type} {event.id} was refused: {_short(exc)}", event
                    ) from exc
                local[session_of(event)] = seq
                local_positions[event.tenant_id] = position
                committed.append(Committed(seq, position))
            if group.queued is not None:
                _queue_prompt(writes, group, named)
        finally:
            writes.strict, writes.at_once = False, True
        draft.update(local)
        positions.update(local_positions)
        return Grouped(tuple(committed))

    def _write_group_isolated(
        self, conn: Connection, draft: dict[str, int], positions: dict[str, int], group: EventGroup
    ) -> Outcome:
        writes = Writes(conn, written=self._written)
        log_rows: list[dict[str, Any]] = []
        try:
            with conn.begin_nested():
                grouped = self._write_group(writes, draft, positions, group)
                for event, done in zip(group.events, grouped.committed, strict=True):
                    log_rows.append(event_row(event, done.seq, done.position))
                conn.execute(_INSERT_EVENT, log_rows)
        except GroupWriteError as exc:
            log.warning("dropped an event group for session %s: %s", session_of(group.events[0]), exc)
            return exc
        except Exception as exc:
            log.exception("dropped an event group for session %s", session_of(group.events[0]))
            return GroupWriteError(f"the event group could not be written: {_short(exc)}")
        return grouped

    @contextmanager
    def _transaction(
        self,
        conn: Connection,
        items: Sequence[Item],
        draft: dict[str, int],
        positions: dict[str, int],
        opening: Opening,
        *,
        bump: bool = True,
        hold: bool = False,
    ) -> Iterator[str | None]:
        """The batch's transaction; yields the tenant it is already scoped to (or None).

        Shared database: every written session, then each tenant's position counter, is held until
        commit (then, for a batch of one tenant that may append to its audit chain, the chain's
        lock), and the transaction is scoped to the first item's tenant.
        On a connection in AUTOCOMMIT mode (the store's writer) BEGIN goes with those in one
        simple-protocol message and the transaction is ended here; SQLAlchemy's transaction inside
        it only keeps track of savepoints. Under the locks, the last seq of each of that tenant's
        sessions and its last position go into `draft` and `positions`: read in one statement, or
        checked with the opening when this writer expects them (`last_numbers.py`); other tenants'
        rows are invisible there, theirs are read once the setting changes. With `bump`, the
        history revisions of that tenant's sessions whose rows the batch stamps are bumped, and its
        audit chain head checked, in the opening too when this writer expects them (`opening`)."""
        tenant_id = items[0].tenant_id if self._scoped else None
        if tenant_id is not None and not tenant_id:
            raise ValueError("a tenant id is required")  # as set_tenant: an empty one matches no row
        events = [event for item in items for event in events_of(item)]
        # A part checkpoint (a mutation, no event) bumps its session's history revision too.
        written = {item.session_id for item in items if isinstance(item, Mutation) and item.session_id}
        sessions = sorted({session_of(event) for event in events} | written) if self._shared else []
        tenants = sorted({event.tenant_id for event in events})
        audits = _audited(tenant_id, items, events) if sessions else []
        locks = {"tenant": tenant_id, "sessions": sessions, "tenants": tenants, "audits": audits}
        if conn.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
            with conn.begin():
                scoped_to = self._lock(conn, locks)
                opening.audit_locked = tuple(audits)
                if scoped_to is not None and events:
                    read_last_numbers(conn, scoped_to, own_sessions(events, scoped_to), draft, positions)
                yield scoped_to
            return
        opened = _opening(tenant_id, sessions, tenants, audits)
        own = own_sessions(events, tenant_id) if opened and sessions and tenant_id else []
        stamped = _stamped(tenant_id, events) if bump and own else []
        try:
            checked = self._open(
                conn, opened, tenant_id, own, stamped, bool(audits), hold=hold, numbered=bool(events)
            )
            with conn.begin():
                scoped_to = tenant_id if opened else self._lock(conn, locks)
                opening.audit_locked = tuple(audits)
                if checked is not None and tenant_id is not None:
                    draft.update(checked.seqs)
                    positions[tenant_id] = checked.position
                    opening.revisions = {(tenant_id, s): last + 1 for s, last in checked.revisions.items()}
                    opening.heads = {tenant_id: checked.head} if checked.head else {}
                elif scoped_to is not None and events:  # numbers only for events to number
                    read_last_numbers(conn, scoped_to, own_sessions(events, scoped_to), draft, positions)
                yield scoped_to
            held.commit(conn)  # with what is held: a failure there ends the transaction below
        except BaseException as exc:
            if _caused_by(exc, stale):
                self._expected.missed()
            elif not _caused_by(exc, _held_replace):  # its numbers were as expected, and stay so
                self._expected.forget()
            with suppress(Exception):  # a connection that fails here is discarded by the writer
                held.rollback(conn)
            raise
        self._expected.record(draft, positions, opening.left_revisions, opening.left_heads)

    def _open(
        self,
        conn: Connection,
        opening: str | None,
        tenant_id: str | None,
        own: list[str],
        stamped: list[str],
        audited: bool,
        *,
        hold: bool,
        numbered: bool,
    ) -> Checked | None:
        """BEGIN (with the locks when `opening`); with the numbers this writer expects for the
        sessions `own` and `tenant_id`, checked in the same message (last_numbers.py), which also
        bumps the expected revisions of the sessions `stamped` and checks the chain head when
        `audited`: what is checked, None when the batch must read them.

        With `hold`, the checked opening is held, and the batch's statements with it, for one
        message with its COMMIT (held.py): the batch is written with the numbers
        expected, and should the check fail there, nothing was written and the batch is written
        again (`write_batch`). Without, it is sent now, and after a failed check opened again. A
        batch with no events to number (mutations alone) has nothing to check: with `hold`, its
        opening is held all the same."""
        driver: Any = conn.connection.dbapi_connection  # SQLAlchemy's adapter of the asyncpg connection
        if hold and not numbered and opening and self._expected.settled:
            held.hold(conn, opening)  # no numbers to read: nothing needs an answer yet
            return None
        guess = self._expected.guess(tenant_id, own) if own and tenant_id else None
        if guess is None or not tenant_id or not opening:
            driver.run_async(lambda pg: pg.execute(opening or "BEGIN"))
            return None
        revisions = self._expected.revisions(stamped)
        head = self._expected.head(tenant_id) if audited else None
        checked = f"{opening}; {check(tenant_id, *guess, revisions, head)}"
        if hold and self._expected.settled:
            held.hold(conn, checked)
            return Checked(guess[0], guess[1], revisions, head)
        try:
            driver.run_async(lambda pg: pg.execute(checked))
        except Exception as exc:
            if not stale(exc):
                raise
            driver.run_async(lambda pg: pg.execute("ROLLBACK"))  # nothing was written yet
            self._expected.missed()
            driver.run_async(lambda pg: pg.execute(opening))
            return None
        return Checked(guess[0], guess[1], revisions, head)

    def _lock(self, conn: Connection, locks: dict[str, Any]) -> str | None:
        if not locks["sessions"]:
            return None
        conn.execute(_LOCK_SESSIONS, locks)
        tenant: str = locks["tenant"]
        return tenant

    def _next_numbers(
        self,
        conn: Connection,
        draft: dict[str, int],
        positions: dict[str, int],
        session_id: str,
        tenant_id: str,
    ) -> tuple[int, int]:
        """The next event's seq in its session and position in its tenant. What neither this batch
        nor the caches know is read, both in one statement when both are unknown."""
        last_seq = _known(draft, self._last_seq, session_id)
        last_position = _known(positions, self._last_position, tenant_id)
        if last_seq is None and last_position is None:
            found = {"session_id": session_id, "tenant_id": tenant_id}
            row = conn.execute(_MAX_SEQ_AND_POSITION, found).one()
            last_seq, last_position = row[0] or 0, row[1] or 0
        if last_seq is None:
            last_seq = conn.execute(_MAX_SEQ, {"session_id": session_id}).scalar() or 0
        if last_position is None:
            last_position = conn.execute(_MAX_POSITION, {"tenant_id": tenant_id}).scalar() or 0
        return last_seq + 1, last_position + 1


def _opening(tenant_id: str | None, sessions: list[str], tenants: list[str], audits: list[str]) -> str | None:
    """BEGIN, the tenant and the locks as one simple-protocol message (which takes no parameters:
    only when every id is plain enough to be written as a literal); None: the long way."""
    if tenant_id is None or not all(plain(value) for value in (tenant_id, *sessions, *tenants, *audits)):
        return None
    if not sessions:
        return f"BEGIN; {setting_of(tenant_id)}"
    return "BEGIN; " + _LOCKS.format(
        setting=TENANT_SETTING,
        tenant=f"'{tenant_id}'",
        sessions=_text_array(sessions),
        tenants=_text_array(tenants),
        audits=_AUDIT_LOCKS.format(audits=_text_array(audits)) if audits else "",
    )


def _audited(tenant_id: str | None, items: Sequence[Item], events: list[Event]) -> list[str]:
    """The tenant whose chain lock the opening takes: a batch of one tenant (a batch of several takes
    theirs in `_lock_audit_chains`) with an event that may append to its chain."""
    if tenant_id is None or any(item.tenant_id != tenant_id for item in items):
        return []
    return [tenant_id] if any(may_audit(event) for event in events) else []


def _stamped(tenant_id: str | None, events: list[Event]) -> list[str]:
    """The sessions of `tenant_id` whose history revision the batch bumps (`Writes.revision`)."""
    return sorted(
        {session_of(event) for event in events if event.tenant_id == tenant_id and stamps_history(event)}
    )


def _leaves(opening: Opening, items: Sequence[Item], runs: TenantRuns) -> None:
    """Into `opening`: the revisions and chain heads the batch leaves when it commits. A session the
    batch deleted or a mutation wrote, and a tenant a mutation wrote for, may have moved unseen."""
    unseen = {key[1]: None for key in runs.writes.forgotten}
    opening.left_revisions = {**unseen, **{key[1]: value for key, value in runs.writes.committed().items()}}
    mutated = {item.tenant_id: None for item in items if isinstance(item, Mutation) and item.may_audit}
    opening.left_heads = {**mutated, **runs.chain.heads()}


def _text_array(values: list[str]) -> str:
    """A text[] literal of plain values, each double-quoted: unquoted, an element spelt `null` (a
    valid tenant id) would be read as SQL NULL and lock nothing."""
    return "'{" + ",".join(f'"{value}"' for value in values) + "}'"


def _known(draft: dict[str, int], cache: SeqCache[str], key: str) -> int | None:
    last = draft.get(key)
    return cache.get(key) if last is None else last


def _lock_audit_chains(conn: Connection, items: Sequence[Item]) -> None:
    """A batch of one tenant takes its chain lock when it first appends; a batch of several takes
    them all first, in a fixed order, so writers in two processes cannot deadlock (audit.py)."""
    tenants = {item.tenant_id for item in items}
    if len(tenants) > 1:
        lock_chains(conn, tenants)


def _queue_prompt(writes: Writes, group: EventGroup, named: bool) -> None:
    """The group's queue entry; its failure fails the group naming no event (none of them was
    refused: an error of the store, not of the caller's ids)."""
    assert group.queued is not None
    try:
        prompt_queue.enqueue(writes, group.tenant_id, session_of(group.events[0]), group.queued)
        if named:
            writes.flush()
    except Exception as exc:
        raise GroupWriteError(f"queueing prompt {group.queued.message_id} failed: {_short(exc)}") from exc


def _apply_isolated(conn: Connection, item: Mutation) -> Outcome:
    try:
        with conn.begin_nested():
            return Applied(item.apply(conn))
    except Exception as exc:
        log.warning("mutation %s for tenant %s failed: %s", item.label, item.tenant_id, _short(exc))
        return StoreWriteError(f"{item.label} failed: {_short(exc)}")


def events_of(item: Item) -> tuple[Event, ...]:
    if isinstance(item, Event):
        return (item,)
    if isinstance(item, EventGroup):
        return item.events
    return ()


def session_of(item: Event) -> str:
    """The session a durable event belongs to (checked non-empty when it is submitted)."""
    return item.session_id or ""


def event_row(item: Event, seq: int, position: int) -> dict[str, Any]:
    return {
        "id": item.id,
        "tenant_id": item.tenant_id,
        "session_id": session_of(item),
        "seq": seq,
        "position": position,
        "type": item.type,
        "data": dumps(item.properties),
        "time_created": int(time.time() * 1000),
    }


def _caused_by(exc: BaseException, found: Callable[[BaseException], bool]) -> bool:
    """Whether `exc`, or what it was raised from, is `found`: the driver's error under
    SQLAlchemy's and its adapter's, a held message's under a group's failure naming its event."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return False
        if found(seen):
            return True
        seen = getattr(seen, "orig", None) or seen.__cause__
    return False


def _held_replace(exc: BaseException) -> bool:
    return isinstance(exc, held.HeldReplaceError)


def _short(exc: BaseException) -> str:
    # SQLAlchemy errors carry the statement and parameters: the first line is what a log reader needs.
    lines = str(getattr(exc, "orig", exc)).splitlines()
    return lines[0] if lines else type(exc).__name__
