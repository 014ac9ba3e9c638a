"""The ordered writer: one per database, applies durable events in submission order with group commit.

`submit()` enqueues without blocking and returns a future. The writer takes everything queued (up to
`batch_cap`) into one transaction (see `batch.py`), commits, and then, on the event loop and in order,
sets each event's `seq`, resolves the futures and calls `publish(events)`. So an event is published
only after it is durable, and published events keep submission order. On Postgres an event submitted
with a `linger` that finds nothing else queued waits up to that long for the next submission, to
commit with it in one transaction (a step's new assistant message and its first part).

SQLite: a dedicated thread owning one pysqlite connection; ARCHITECTURE ("The main chain") measured
this an order of magnitude cheaper per commit than an async SQLite driver, and bench/store_write.py
measures our writer. Postgres: an asyncio task over one asyncpg connection, running the same sync
batch code through `run_sync`.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol

from sqlalchemy import Connection, Engine

from agentforge.model.events import Event
from agentforge.store.batch import (
    Applied,
    BatchApplier,
    Committed,
    EventGroup,
    Grouped,
    Item,
    Mutation,
    Outcome,
    StoreWriteError,
)
from agentforge.store.prompt_queue import QueuedPrompt

if TYPE_CHECKING:
    # SQLAlchemy's asyncio layer brings its ORM (~7 MB): only Postgres uses it (engine.py).
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

log = logging.getLogger(__name__)

DEFAULT_BATCH_CAP: Final = 256

Publish = Callable[[list[Event]], None]


class WriterObserver(Protocol):
    """What telemetry learns of the writer: each batch once delivered, and the submitter's trace
    context (`capture`, called on the loop at submit) so a batch's span joins the request it serves."""

    def capture(self) -> object: ...

    def batch(self, size: int, started_ns: int, ended_ns: int, committed: bool, origin: object) -> None: ...


class _Barrier:
    """Queued by `submit_barrier`: resolved in order with the items around it, without a transaction."""


_BARRIER: Final = _Barrier()


@dataclass(frozen=True, slots=True)
class _Read:
    """Queued by `submit_read`: run on the writer's connection once the writes before it committed."""

    query: Callable[[Connection], Any]


@dataclass(slots=True)
class _Pending:
    event: Item | _Barrier | _Read
    future: asyncio.Future[Any]
    origin: object = None
    linger_until: float = 0.0  # time.monotonic() until which it may wait for company; 0: none


# Marks the end of the queue: everything submitted before close() is written, then the writer stops.
_STOP: Final = None

_Item = _Pending | None


class OrderedWriter(ABC):
    """What both writers share: validation, futures, delivery on the loop, the batch counter."""

    # Whether each transaction must set its tenant (Postgres row-level security; see tenancy.py).
    scoped_by_tenant: ClassVar[bool]
    # Whether `submit_read` may be used: a read there costs no more than a reader's (SQLite's thread).
    reads_in_order: ClassVar[bool]
    # Whether it commits in a thread of its own, which shares the interpreter with the event loop:
    # it runs while the loop waits, so a submitter that waits for a commit lets it (SQLite's).
    commits_off_loop: ClassVar[bool]
    # Whether `submit(linger=)` is heeded: a transaction saved is worth the wait (Postgres's).
    lingers: ClassVar[bool]

    def __init__(self, publish: Publish, *, batch_cap: int = DEFAULT_BATCH_CAP) -> None:
        if batch_cap < 1:
            raise ValueError("batch_cap must be at least 1")
        self._loop = asyncio.get_running_loop()
        self._publish = publish
        self._batch_cap = batch_cap
        self._applier = BatchApplier(scoped_by_tenant=self.scoped_by_tenant)
        self._closing = False
        self._stopped: asyncio.Future[None] = self._loop.create_future()
        self.committed_batches = 0
        self.reads_done = 0  # `submit_read`s run
        # Submission and delivery counters, and broadcast-only events waiting for earlier writes.
        self._submitted = 0
        self._delivered = 0
        self._trailing: deque[tuple[int, Event]] = deque()
        self._lingering = False  # a batch waits for company (`submit(linger=)`)
        self.observer: WriterObserver | None = None

    @property
    def queue_depth(self) -> int:
        """Items submitted and not yet delivered."""
        return self._submitted - self._delivered

    def submit(self, event: Event, *, linger: float = 0.0) -> asyncio.Future[Event]:
        """Queue a durable event; the future resolves with it (seq set) once it has committed.
        `linger` (seconds; where the writer `lingers`): when nothing else is queued, wait that long
        at most for the next submission, which then commits in the same transaction."""
        if self._closing:
            raise StoreWriteError("the store is closed")
        _check_durable(event)
        lingering = linger > 0 and self.lingers
        return self._queue_item(event, time.monotonic() + linger if lingering else 0.0)

    def submit_group(
        self, events: Sequence[Event], queued: QueuedPrompt | None = None
    ) -> asyncio.Future[list[Event]]:
        """Queue events of one tenant to commit in one piece: all of them, or none (GroupWriteError
        naming the event that failed), with `queued` after them. The future resolves with the
        events, seqs set."""
        if self._closing:
            raise StoreWriteError("the store is closed")
        if not events or len({event.tenant_id for event in events}) != 1:
            raise ValueError("an event group needs events of exactly one tenant")
        for event in events:
            _check_durable(event)
        return self._queue_item(EventGroup(events[0].tenant_id, tuple(events), queued))

    def submit_mutation(self, mutation: Mutation) -> asyncio.Future[Any]:
        """Queue a mutation; the future resolves with what its `apply` returned once committed."""
        if self._closing:
            raise StoreWriteError("the store is closed")
        if not mutation.tenant_id:
            raise ValueError(f"mutation {mutation.label!r} has no tenant id")
        return self._queue_item(mutation)

    def submit_barrier(self) -> asyncio.Future[None]:
        """Resolves once everything submitted before it has been written (or dropped). Touches no
        table: a batch of nothing but barriers opens no transaction."""
        if self._closing:
            raise StoreWriteError("the store is closed")
        return self._queue_item(_BARRIER)

    def submit_read(self, query: Callable[[Connection], Any]) -> asyncio.Future[Any]:
        """Resolves with `query(conn)`, run in a transaction of its own on the writer's connection
        right after everything submitted before it has committed: what they wrote is read without
        waiting for their commit first and then handing the read to a reader thread. A failed read,
        or a batch before it that failed as a whole, fails the future (StoreWriteError). The query
        must only read."""
        if self._closing:
            raise StoreWriteError("the store is closed")
        if not self.reads_in_order:
            raise NotImplementedError("this writer does not read")
        return self._queue_item(_Read(query))

    def _queue_item(self, item: Item | _Barrier | _Read, linger_until: float = 0.0) -> asyncio.Future[Any]:
        origin = None if self.observer is None else self.observer.capture()
        pending = _Pending(item, self._loop.create_future(), origin, linger_until)
        self._submitted += 1
        self._enqueue(pending)
        return pending.future

    @property
    def alive(self) -> bool:
        """Whether the writer still takes writes (not closed, its thread or task not ended)."""
        return not self._closing and not self._stopped.done()

    def publish_after_writes(self, event: Event) -> None:
        """Publish a broadcast-only event after every durable event submitted before it.

        Lets a producer stream deltas right after submitting a part's first full update without
        waiting for its commit: the delta still reaches subscribers after that update.
        """
        if self._delivered == self._submitted and not self._trailing:
            self._publish([event])
            return
        self._trailing.append((self._submitted, event))
        if self._lingering:  # a write waiting for company would hold this up: write it now
            self._queue_item(_BARRIER)

    async def close(self) -> None:
        """Write everything already submitted, then stop."""
        if not self._closing:
            self._closing = True
            self._enqueue(_STOP)
        await asyncio.shield(self._stopped)

    @abstractmethod
    def _enqueue(self, item: _Item) -> None: ...

    def _take_batch(
        self, first: _Item, next_item: Callable[[], _Item], cap: int | None = None
    ) -> tuple[list[_Pending], bool]:
        """The first item plus whatever else is already queued (up to the cap); True when told to stop."""
        batch: list[_Pending] = []
        item = first
        while item is not _STOP:
            batch.append(item)
            if len(batch) >= (cap or self._batch_cap):
                return batch, False
            try:
                item = next_item()
            except (queue.Empty, asyncio.QueueEmpty):
                return batch, False
        return batch, True

    def _linger_left(self, batch: Sequence[_Pending], stop: bool) -> float | None:
        """How long the batch may still wait for company (seconds), when all of it lingers and no
        broadcast event waits behind it."""
        if stop or self._trailing or len(batch) >= self._batch_cap:
            return None
        if not all(pending.linger_until for pending in batch):
            return None
        left = min(pending.linger_until for pending in batch) - time.monotonic()
        return left if left > 0 else None

    def _write(self, conn: Connection, batch: Sequence[_Pending]) -> list[Outcome]:
        items = [pending.event for pending in batch if not isinstance(pending.event, _Barrier | _Read)]
        written = iter(self._applier.write_batch(conn, items) if items else [])
        return [_outcome(conn, pending.event, written) for pending in batch]

    def _deliver(
        self, batch: Sequence[_Pending], outcomes: Sequence[Outcome], committed: bool, timing: tuple[int, int]
    ) -> None:
        """On the loop: set seqs, resolve the futures, publish what committed (in order)."""
        if committed and any(not isinstance(pending.event, _Barrier | _Read) for pending in batch):
            self.committed_batches += 1
        self.reads_done += sum(isinstance(pending.event, _Read) for pending in batch)
        if self.observer is not None:
            self.observer.batch(len(batch), *timing, committed, batch[0].origin)
        # Committed events in order, each followed by the broadcast events queued right behind it.
        ordered: list[Event] = []
        for pending, outcome in zip(batch, outcomes, strict=True):
            self._delivered += 1
            if isinstance(outcome, Committed) and isinstance(pending.event, Event):
                pending.event.seq = outcome.seq
                pending.event.position = outcome.position
                ordered.append(pending.event)
            elif isinstance(outcome, Grouped) and isinstance(pending.event, EventGroup):
                for event, done in zip(pending.event.events, outcome.committed, strict=True):
                    event.seq = done.seq
                    event.position = done.position
                    ordered.append(event)
            while self._trailing and self._trailing[0][0] <= self._delivered:
                ordered.append(self._trailing.popleft()[1])
        # The writers' futures first, then the subscribers: whoever waited for a commit (a prompt for
        # its user message, a loop for its step's last writes) goes on before the SSE streams write
        # these events out, so that work overlaps what it waits for next (the model's first byte)
        # instead of delaying it. Both only run once this callback returns: the order of their
        # wake-ups is all that changes; the events are durable and published in order either way.
        self._resolve(batch, outcomes)
        if ordered:
            try:
                self._publish(ordered)
            except Exception:
                # The events are durable whatever a subscriber does; their writers still succeed.
                log.exception("publish callback failed for %d events", len(ordered))

    @staticmethod
    def _resolve(batch: Sequence[_Pending], outcomes: Sequence[Outcome]) -> None:
        for pending, outcome in zip(batch, outcomes, strict=True):
            if pending.future.done():
                continue
            if isinstance(outcome, Applied):
                pending.future.set_result(outcome.value)
            elif isinstance(outcome, Grouped) and isinstance(pending.event, EventGroup):
                pending.future.set_result(list(pending.event.events))
            elif isinstance(outcome, Committed):
                pending.future.set_result(pending.event)
            elif isinstance(outcome, StoreWriteError):
                pending.future.set_exception(outcome)
                # Already logged by the writer: fire-and-forget submitters need not retrieve it.
                pending.future.exception()

    def _mark_stopped(self) -> None:
        if not self._stopped.done():
            self._stopped.set_result(None)


def _outcome(conn: Connection, item: Item | _Barrier | _Read, written: Iterator[Outcome]) -> Outcome:
    """A batch item's outcome once the batch's writes committed: theirs, a barrier's, a read's."""
    if isinstance(item, _Barrier):
        return Applied(None)
    if not isinstance(item, _Read):
        return next(written)
    try:
        with conn.begin():
            return Applied(item.query(conn))
    except Exception as exc:
        log.exception("store writer: a read after the batch failed")
        return StoreWriteError(f"the read could not be done: {exc}")


def _check_durable(event: Event) -> None:
    if not event.durable:
        raise ValueError(f"{event.type!r} is not a durable event type")
    if not event.tenant_id:
        # Checked here, not in the batch: on Postgres it could not even set its transaction's tenant.
        raise ValueError(f"durable event {event.type!r} has no tenant id")
    if not event.session_id:
        session_id = event.properties.get("sessionID")
        if not isinstance(session_id, str) or not session_id:
            raise ValueError(f"durable event {event.type!r} has no session id")
        event.session_id = session_id


def _failed_batch(batch: Sequence[_Pending], exc: BaseException) -> list[Outcome]:
    error = StoreWriteError(f"the batch could not be committed: {exc}")
    return [error] * len(batch)


class ThreadWriter(OrderedWriter):
    """SQLite: a dedicated thread that owns the one write connection."""

    scoped_by_tenant = False
    reads_in_order = True
    commits_off_loop = True
    # A commit here is cheap and runs while the loop waits for the model: lingering would move a
    # step's message onto its first part's commit, which the first delta waits for (+0.2 ms).
    lingers = False

    def __init__(self, engine: Engine, publish: Publish, *, batch_cap: int = DEFAULT_BATCH_CAP) -> None:
        super().__init__(publish, batch_cap=batch_cap)
        self._engine = engine
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="agentforge-store-writer", daemon=True)
        self._thread.start()

    def _enqueue(self, item: _Item) -> None:
        self._queue.put(item)

    def _run(self) -> None:
        conn: Connection | None = None
        stop = False
        while not stop:
            batch, stop = self._take_batch(self._queue.get(), self._queue.get_nowait)
            if not batch:
                continue
            started = time.time_ns()
            conn, outcomes, committed = self._write_on(conn, batch)
            timing = (started, time.time_ns())
            if not self._call_on_loop(self._deliver, batch, outcomes, committed, timing):
                break
        if conn is not None:
            conn.close()
        self._call_on_loop(self._mark_stopped)

    def _write_on(
        self, conn: Connection | None, batch: Sequence[_Pending]
    ) -> tuple[Connection | None, list[Outcome], bool]:
        try:
            if conn is None:
                conn = self._engine.connect()
            return conn, self._write(conn, batch), True
        except Exception as exc:
            log.exception("store writer: batch of %d failed", len(batch))
            if conn is not None:
                _discard(conn)  # the next batch starts on a fresh connection
            return None, _failed_batch(batch, exc), False

    def _call_on_loop(self, callback: Callable[..., None], *args: object) -> bool:
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:
            log.warning("store writer: the event loop closed before the store did")
            return False
        return True


def _discard(conn: Connection) -> None:
    try:
        conn.invalidate()
        conn.close()
    except Exception:
        log.debug("store writer: closing a failed connection also failed", exc_info=True)


class TaskWriter(OrderedWriter):
    """Postgres: an asyncio task that owns one connection and runs the sync batch code via run_sync."""

    scoped_by_tenant = True
    reads_in_order = False  # a read there is round trips the writes behind it would wait for
    commits_off_loop = False  # a task on the loop: it runs at the loop's next turn anyway
    lingers = True  # a transaction is ~1 ms of Postgres' time (bench/README.md, eleventh round)

    def __init__(self, engine: AsyncEngine, publish: Publish, *, batch_cap: int = DEFAULT_BATCH_CAP) -> None:
        super().__init__(publish, batch_cap=batch_cap)
        self._engine = engine
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._task = asyncio.create_task(self._run(), name="agentforge-store-writer")

    def _enqueue(self, item: _Item) -> None:
        self._queue.put_nowait(item)

    async def _run(self) -> None:
        conn: AsyncConnection | None = None
        try:
            stop = False
            while not stop:
                batch, stop = self._take_batch(await self._queue.get(), self._queue.get_nowait)
                while (left := self._linger_left(batch, stop)) is not None:
                    self._lingering = True
                    try:
                        async with asyncio.timeout(left):
                            first = await self._queue.get()
                    except TimeoutError:
                        break
                    finally:
                        self._lingering = False
                    room = self._batch_cap - len(batch)
                    more, stop = self._take_batch(first, self._queue.get_nowait, room)
                    batch += more
                if batch:
                    started = time.time_ns()
                    conn, outcomes, committed = await self._write_on(conn, batch)
                    self._deliver(batch, outcomes, committed, (started, time.time_ns()))
        finally:
            if conn is not None:
                await conn.close()
            self._mark_stopped()

    async def _write_on(
        self, conn: AsyncConnection | None, batch: Sequence[_Pending]
    ) -> tuple[AsyncConnection | None, list[Outcome], bool]:
        try:
            if conn is None:
                conn = await self._engine.connect()
                # The batch opens and ends its transaction itself (BEGIN with its locks, batch.py).
                await conn.execution_options(isolation_level="AUTOCOMMIT")
            return conn, await conn.run_sync(self._write, batch), True
        except Exception as exc:
            log.exception("store writer: batch of %d failed", len(batch))
            if conn is not None:
                await _discard_async(conn)  # the next batch starts on a fresh connection
            return None, _failed_batch(batch, exc), False


async def _discard_async(conn: AsyncConnection) -> None:
    try:
        await conn.invalidate()
        await conn.close()
    except Exception:
        log.debug("store writer: closing a failed connection also failed", exc_info=True)
