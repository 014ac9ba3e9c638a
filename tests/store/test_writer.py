"""The ordered writer: seq allocation, publish after commit in submission order, group commit,
late writes dropped alone, concurrency, draining on close."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Sequence
from typing import Any

import asyncpg
import pytest
from sqlalchemy import Connection, func, select

from agentforge.model import events as ev
from agentforge.model.events import Event
from agentforge.store import Store, StoreWriteError, parse_database_url
from agentforge.store.batch import BatchApplier, Committed, Outcome, SeqCache, _opening
from agentforge.store.engine import sqlite_engine
from agentforge.store.migrate import run_with_connection, upgrade_to_head
from agentforge.store.projector import Writes, apply_event
from agentforge.store.schema import part as part_table
from agentforge.store.schema import session as session_table
from agentforge.store.tenancy import set_tenant
from agentforge.store.writer import ThreadWriter
from tests.store.builders import (
    message_updated,
    new_session,
    part_updated,
    session_created,
    session_deleted,
    text_part,
    user_message,
)

TENANT = "default"


async def test_seq_increases_per_session_and_sessions_are_independent(
    store: Store, published: list[Event]
) -> None:
    one, two = new_session(), new_session()
    message_one, message_two = user_message(one.id), user_message(two.id)
    events = [
        session_created(one),
        session_created(two),
        message_updated(message_one),
        part_updated(text_part(message_one, "a")),
        message_updated(message_two),
        part_updated(text_part(message_one, "b")),
    ]
    for event in events:
        await store.write(event)

    assert [e.seq for e in events] == [1, 1, 2, 3, 2, 4]
    assert [e.seq for e in await store.events_after(TENANT, one.id, 0)] == [1, 2, 3, 4]
    assert [e.seq for e in await store.events_after(TENANT, two.id, 0)] == [1, 2]
    assert [e.id for e in await store.events_after(TENANT, one.id, 2)] == [events[3].id, events[5].id]
    assert [e.seq for e in await store.events_after(TENANT, one.id, 0, limit=2)] == [1, 2]
    assert await store.last_seq(TENANT, one.id) == 4
    assert await store.last_seq(TENANT, two.id) == 2
    assert await store.last_seq(TENANT, "ses_none") == 0
    assert await store.events_after("other-tenant", one.id, 0) == []


async def test_logged_event_keeps_type_properties_and_id(store: Store) -> None:
    session = new_session()
    created = await store.write(session_created(session))

    (logged,) = await store.events_after(TENANT, session.id, 0)

    assert (logged.id, logged.type, logged.seq) == (created.id, ev.SESSION_CREATED, 1)
    assert logged.properties == created.properties
    assert (logged.session_id, logged.tenant_id) == (session.id, TENANT)


async def test_published_in_submission_order_with_seq_and_before_write_returns(
    store: Store, published: list[Event]
) -> None:
    sessions = [new_session() for _ in range(3)]
    events = [session_created(s) for s in sessions]
    messages = [user_message(s.id) for s in sessions]
    events += [message_updated(m) for m in messages]
    events += [part_updated(text_part(m, str(i))) for i in range(20) for m in messages]

    futures = [store.submit(e) for e in events]
    await asyncio.gather(*futures)

    assert published == events  # same objects, same order
    assert all(e.seq is not None for e in published)
    for session in sessions:
        seqs = [e.seq for e in published if e.session_id == session.id]
        assert seqs == list(range(1, len(seqs) + 1))

    last = part_updated(text_part(messages[0], "last"))
    returned = await store.write(last)
    assert returned is last and published[-1] is last


async def test_an_event_is_published_only_after_it_committed(database_url: str) -> None:
    target = parse_database_url(database_url)
    if target.dialect != "sqlite":
        pytest.skip("checked through a second, independent SQLite connection")
    seen_committed: list[bool] = []

    def publish(batch: list[Event]) -> None:
        # A separate connection only sees committed rows.
        with sqlite3.connect(target.sqlite_path) as other:
            for event in batch:
                row = other.execute("SELECT seq FROM event WHERE id = ?", (event.id,)).fetchone()
                seen_committed.append(row is not None and row[0] == event.seq)

    store = await Store.open(database_url, publish=publish)
    try:
        session = new_session()
        message = user_message(session.id)
        events = [session_created(session), message_updated(message)]
        events += [part_updated(text_part(message, str(i))) for i in range(50)]
        await asyncio.gather(*(store.submit(e) for e in events))
    finally:
        await store.close()
    assert seen_committed == [True] * len(events)


async def test_group_commit_puts_many_queued_events_in_few_transactions(store: Store) -> None:
    session = new_session()
    message = user_message(session.id)
    await store.write(session_created(session))
    await store.write(message_updated(message))
    before = store.committed_batches

    events = [part_updated(text_part(message, str(i))) for i in range(500)]
    await asyncio.gather(*(store.submit(e) for e in events))

    batches = store.committed_batches - before
    assert 2 <= batches <= 10  # the cap (256) splits 500 in at least two
    assert [e.seq for e in events] == list(range(3, 503))
    history = await store.history(TENANT, session.id)
    assert len(history[0].parts) == 500


async def test_a_write_after_delete_is_dropped_and_not_logged(store: Store) -> None:
    session = new_session()
    message = user_message(session.id)
    await store.write(session_created(session))
    await store.write(message_updated(message))
    await store.write(session_deleted(session))

    with pytest.raises(StoreWriteError, match="dropped"):
        await store.write(message_updated(user_message(session.id)))
    with pytest.raises(StoreWriteError, match="dropped"):
        await store.write(part_updated(text_part(message, "late")))

    logged = await store.events_after(TENANT, session.id, 0)
    assert [e.type for e in logged] == [ev.SESSION_CREATED, ev.MESSAGE_UPDATED, ev.SESSION_DELETED]
    assert (await store.write(session_deleted(session))).seq == 4  # no seq was used up


def _applier(database_url: str, **options: int) -> BatchApplier:
    """A batch applier as the store's writer for this dialect builds it (Postgres: tenant-scoped)."""
    scoped = parse_database_url(database_url).dialect == "postgresql"
    return BatchApplier(scoped_by_tenant=scoped, **options)


def _seq(outcome: Outcome) -> int | Outcome:
    return outcome.seq if isinstance(outcome, Committed) else outcome


def _write_one_batch(database_url: str, events: Sequence[Event]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    run_with_connection(
        parse_database_url(database_url),
        lambda conn: outcomes.extend(_applier(database_url).write_batch(conn, events)),
    )
    return outcomes


async def test_a_late_write_fails_alone_within_one_batch(store: Store, database_url: str) -> None:
    gone, live = new_session(), new_session()
    gone_message, live_message = user_message(gone.id), user_message(live.id)
    for event in (
        session_created(gone),
        session_created(live),
        message_updated(gone_message),
        message_updated(live_message),
    ):
        await store.write(event)

    batch = [
        session_deleted(gone),
        message_updated(user_message(gone.id)),
        part_updated(text_part(gone_message, "late")),
        part_updated(text_part(live_message, "on time")),
    ]
    # One transaction, written beside the store's own writer (as another process would).
    outcomes = await asyncio.to_thread(_write_one_batch, database_url, batch)

    assert _seq(outcomes[0]) == 3 and _seq(outcomes[3]) == 3
    assert isinstance(outcomes[1], StoreWriteError) and isinstance(outcomes[2], StoreWriteError)
    live_history = await store.history(TENANT, live.id)
    assert [p.text for p in live_history[0].parts] == ["on time"]  # type: ignore[union-attr]
    # The store's cached seq for `live` is now stale; its next write still gets the right one.
    assert (await store.write(part_updated(text_part(live_message, "next")))).seq == 4


async def test_seq_continues_across_store_instances(store: Store, database_url: str) -> None:
    session = new_session()
    message = user_message(session.id)
    await store.write(session_created(session))
    await store.write(message_updated(message))

    second = await Store.open(database_url)  # the runtime role alone: the schema is at head
    try:
        assert (await second.write(part_updated(text_part(message, "from second")))).seq == 3
    finally:
        await second.close()
    assert (await store.write(part_updated(text_part(message, "from first")))).seq == 4


async def test_many_sessions_writing_at_once(store: Store, published: list[Event]) -> None:
    async def converse(index: int) -> str:
        session = new_session(title=f"s{index}")
        message = user_message(session.id)
        await store.write(session_created(session))
        await store.write(message_updated(message))
        for turn in range(24):
            await store.write(part_updated(text_part(message, f"{index}:{turn}")))
        return session.id

    session_ids = await asyncio.gather(*(converse(i) for i in range(20)))

    for session_id in session_ids:
        logged = await store.events_after(TENANT, session_id, 0)
        assert [e.seq for e in logged] == list(range(1, 27))
        assert [e.seq for e in published if e.session_id == session_id] == list(range(1, 27))
        (conversation,) = await store.history(TENANT, session_id)
        assert len(conversation.parts) == 24
    assert store.committed_batches < len(published)  # concurrent writers shared transactions
    sessions = await asyncio.gather(*(store.get_session(TENANT, sid) for sid in session_ids))
    assert [s.title for s in sessions if s is not None] == [f"s{i}" for i in range(20)]


async def test_close_writes_everything_submitted_then_refuses(store: Store) -> None:
    session = new_session()
    message = user_message(session.id)
    futures = [store.submit(session_created(session)), store.submit(message_updated(message))]
    futures += [store.submit(part_updated(text_part(message, str(i)))) for i in range(300)]

    await store.close()

    assert all(f.done() and not f.cancelled() and f.exception() is None for f in futures)
    assert [f.result().seq for f in futures] == list(range(1, 303))
    with pytest.raises(StoreWriteError, match="closed"):
        store.submit(part_updated(text_part(message, "too late")))


async def test_a_cancelled_writer_does_not_unsubmit_its_event(store: Store) -> None:
    session = new_session()
    await store.write(session_created(session))
    message = user_message(session.id)
    waiting = asyncio.create_task(store.write(message_updated(message)))
    await asyncio.sleep(0)  # let it submit
    waiting.cancel()

    await store.write(part_updated(text_part(message, "after")))

    assert [e.type for e in await store.events_after(TENANT, session.id, 0)] == [
        ev.SESSION_CREATED,
        ev.MESSAGE_UPDATED,
        ev.PART_UPDATED,
    ]


async def test_a_failing_publish_callback_does_not_fail_the_write(database_url: str) -> None:
    def publish(_batch: list[Event]) -> None:
        raise RuntimeError("subscriber bug")

    store = await Store.open(database_url, publish=publish)
    try:
        session = new_session()
        written = await store.write(session_created(session))
        assert written.seq == 1
        assert await store.get_session(TENANT, session.id) == session
    finally:
        await store.close()


async def test_submit_checks_the_event(store: Store) -> None:
    with pytest.raises(ValueError, match="not a durable event type"):
        store.submit(Event(ev.PART_DELTA, {"sessionID": "ses_x"}, session_id="ses_x"))
    with pytest.raises(ValueError, match="no session id"):
        store.submit(Event(ev.MESSAGE_REMOVED, {"messageID": "msg_x"}))
    with pytest.raises(ValueError, match="no tenant id"):
        store.submit(session_created(new_session(), tenant_id=""))
    with pytest.raises(ValueError, match="no tenant id"):
        await store.mutate("", "nothing", lambda _conn: None)

    session = new_session()
    created = session_created(session)
    created.session_id = None  # taken from properties.sessionID
    assert (await store.write(created)).session_id == session.id


def _parts_seen_mid_transaction(conn: Connection, events: Sequence[Event]) -> int:
    with conn.begin() as transaction:
        if conn.dialect.name == "postgresql":
            set_tenant(conn, TENANT)
        writes = Writes(conn)
        for event in events:
            apply_event(writes, event)
        seen: int = writes.run(select(func.count()).select_from(part_table), {}).scalar_one()
        transaction.rollback()
    return seen


async def test_deferred_writes_keep_their_order_and_reads_see_them(database_url: str) -> None:
    await asyncio.to_thread(upgrade_to_head, database_url)
    session = new_session()
    message = user_message(session.id)
    # The message needs the session and the parts need the message: out of order, the FKs would fail.
    events = [session_created(session), message_updated(message)]
    events += [part_updated(text_part(message, str(i))) for i in range(5)]
    seen: list[int] = []

    await asyncio.to_thread(
        run_with_connection,
        parse_database_url(database_url),
        lambda conn: seen.append(_parts_seen_mid_transaction(conn, events)),
    )

    assert seen == [5]


def test_seq_cache_forgets_the_least_recently_used_sessions() -> None:
    cache = SeqCache[str](capacity=2)
    cache.update({"ses_a": 1, "ses_b": 1})
    assert cache.get("ses_a") == 1  # now b is the least recently used
    cache.update({"ses_c": 4})

    assert len(cache) == 2
    assert (cache.get("ses_a"), cache.get("ses_b"), cache.get("ses_c")) == (1, None, 4)


def _write_batches(database_url: str, batches: Sequence[Sequence[Event]], cache_size: int) -> list[Outcome]:
    applier = _applier(database_url, seq_cache_size=cache_size)
    outcomes: list[Outcome] = []

    def write_all(conn: Connection) -> None:
        for batch in batches:
            outcomes.extend(applier.write_batch(conn, batch))

    run_with_connection(parse_database_url(database_url), write_all)
    return outcomes


async def test_seq_is_reloaded_for_sessions_the_cache_forgot(database_url: str) -> None:
    await asyncio.to_thread(upgrade_to_head, database_url)
    sessions = [new_session() for _ in range(3)]
    batches = [[session_created(s), message_updated(user_message(s.id))] for s in sessions]
    batches.append([message_updated(user_message(sessions[0].id))])  # evicted by now

    outcomes = await asyncio.to_thread(_write_batches, database_url, batches, 1)

    assert [_seq(o) for o in outcomes] == [1, 2, 1, 2, 1, 2, 3]
    # One tenant: its positions number every event in commit order, whichever session.
    assert [o.position for o in outcomes if isinstance(o, Committed)] == list(range(1, 8))


def _delta(session_id: str, text: str) -> Event:
    return Event(type=ev.PART_DELTA, properties={"delta": text}, session_id=session_id)


async def test_broadcast_events_are_published_right_behind_the_writes_submitted_before_them(
    store: Store, published: list[Event]
) -> None:
    session = new_session()
    await store.write(session_created(session))
    published.clear()
    message = user_message(session.id)
    first, second = message_updated(message), part_updated(text_part(message, "x"))
    first_delta, second_delta = _delta(session.id, "a"), _delta(session.id, "b")
    # Nothing awaited in between: both writes will usually commit in one batch, yet each delta
    # must come out after the write submitted before it and before the one submitted after it.
    store.submit(first)
    store.publish_after_writes(first_delta)
    store.submit(second)
    store.publish_after_writes(second_delta)
    assert published == []
    await store.write(part_updated(text_part(message, "y")))
    assert [e.id for e in published[:4]] == [first.id, first_delta.id, second.id, second_delta.id]


async def test_broadcast_event_with_nothing_pending_is_published_at_once(
    store: Store, published: list[Event]
) -> None:
    session = new_session()
    await store.write(session_created(session))
    published.clear()
    delta = _delta(session.id, "now")
    store.publish_after_writes(delta)
    assert published == [delta]


# --- several tenants in one batch (Postgres: each run of items under its own tenant setting) --------


def _tenant_events(tenant_id: str, count: int) -> tuple[list[Event], str]:
    session = new_session()
    message = user_message(session.id)
    events = [session_created(session, tenant_id), message_updated(message, tenant_id)]
    events += [part_updated(text_part(message, f"{tenant_id} {i}"), tenant_id) for i in range(count)]
    return events, session.id


async def test_one_batch_of_interleaved_tenants_lands_each_row_with_its_tenant(store: Store) -> None:
    first, first_id = _tenant_events("tenant-a", 6)
    second, second_id = _tenant_events("tenant-b", 6)
    interleaved = [event for pair in zip(first, second, strict=True) for event in pair]
    before = store.committed_batches

    await asyncio.gather(*(store.submit(event) for event in interleaved))

    assert store.committed_batches - before <= 2  # grouped, not one transaction per tenant switch
    for tenant, session_id, other in (("tenant-a", first_id, second_id), ("tenant-b", second_id, first_id)):
        texts = [p.text for p in (await store.history(tenant, session_id))[0].parts]  # type: ignore[union-attr]
        assert texts == [f"{tenant} {i}" for i in range(6)]
        assert [e.seq for e in await store.events_after(tenant, session_id, 0)] == list(range(1, 9))
        assert await store.get_session(tenant, other) is None
        assert await store.events_after(tenant, other, 0) == []


async def test_a_dropped_item_among_several_tenants_leaves_the_others_written(
    store: Store, database_url: str
) -> None:
    gone = new_session()
    await store.write(session_created(gone, "tenant-a"))
    kept, kept_id = _tenant_events("tenant-b", 2)
    late = message_updated(user_message(gone.id), "tenant-a")
    batch = [session_deleted(gone, "tenant-a"), *kept[:2], late, kept[2]]

    # One transaction beside the store's writer: the late write forces the one-by-one retry.
    outcomes = await asyncio.to_thread(_write_one_batch, database_url, batch)

    assert [_seq(o) for o in outcomes[:3]] == [2, 1, 2] and _seq(outcomes[4]) == 3
    assert isinstance(outcomes[3], StoreWriteError)
    texts = [p.text for p in (await store.history("tenant-b", kept_id))[0].parts]  # type: ignore[union-attr]
    assert texts == ["tenant-b 0"]


async def test_a_mutation_runs_under_its_own_tenant(store: Store) -> None:
    events, session_id = _tenant_events("tenant-a", 0)
    submitted = [store.submit(event) for event in events]
    # Queued right behind tenant-a's events, so usually in the same transaction.
    counted = await store.mutate("tenant-b", "count sessions", _count_sessions)

    await asyncio.gather(*submitted)
    assert await store.get_session("tenant-a", session_id) is not None
    # Postgres: row-level security shows tenant-b none of tenant-a's rows. SQLite has no such
    # guard: there a mutation must filter by its tenant itself (as the projector and queries do).
    assert counted == (0 if store.dialect == "postgresql" else 1)


def _count_sessions(conn: Connection) -> int:
    count: int = conn.execute(select(func.count()).select_from(session_table)).scalar_one()
    return count


async def test_a_barrier_waits_for_everything_submitted_before_it_without_a_transaction(store: Store) -> None:
    session = new_session()
    message = user_message(session.id)
    await store.write(session_created(session))
    written = [store.submit(message_updated(message))]
    written += [store.submit(part_updated(text_part(message, str(i)))) for i in range(20)]

    await store.barrier()

    assert all(future.done() for future in written)
    assert [future.result().seq for future in written] == list(range(2, 23))
    before = store.committed_batches
    await store.barrier()  # nothing queued: no transaction at all
    assert store.committed_batches == before


async def test_ids_that_need_quoting_are_written_like_any_other(store: Store) -> None:
    # The Postgres writer opens a batch with its tenant and locks written as literals only for
    # plain ids; these take the parameterized way, with the same result.
    tenant = "o'brien\\"
    session = new_session().model_copy(update={"id": "ses_it's {a,b}"})
    message = user_message(session.id)
    written = [
        await store.write(session_created(session, tenant)),
        await store.write(message_updated(message, tenant)),
    ]
    assert [event.seq for event in written] == [1, 2]
    assert [e.type for e in await store.events_after(tenant, session.id, 0)] == [
        ev.SESSION_CREATED,
        ev.MESSAGE_UPDATED,
    ]
    assert await store.events_after(TENANT, session.id, 0) == []


async def test_a_writer_batch_for_a_tenant_spelt_null_takes_every_lock(database_url: str) -> None:
    # The one-message opening writes its ids into text[] literals: unquoted, an element spelt `null`
    # (a valid tenant id) is SQL NULL there, and pg_advisory_xact_lock(NULL) locks nothing at all.
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer and no advisory locks")
    opening = _opening("null", ["null", "ses_a"], ["null"], ["null"])
    assert opening is not None
    url = parse_database_url(database_url).url.set(drivername="postgresql")
    conn = await asyncpg.connect(url.render_as_string(hide_password=False))
    try:
        await conn.execute(opening)
        held = await conn.fetchval(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
        )
        assert held == 4  # two sessions' seq locks, the tenant's position and audit chain locks
        assert await conn.fetchval("SELECT current_setting('app.tenant_id')") == "null"
        await conn.execute("ROLLBACK")
    finally:
        await conn.close()


async def test_history_after_writes_includes_what_was_submitted_before_it(store: Store) -> None:
    # The SQLite writer reads it right after committing those writes; on Postgres the readers read
    # it once they committed.
    session = new_session()
    message = user_message(session.id)
    await store.write(session_created(session))
    first = await store.history_since_compaction(TENANT, session.id)  # an entry to bring up to date
    written = [store.submit(message_updated(message))]
    written += [store.submit(part_updated(text_part(message, str(i)))) for i in range(3)]

    history = await store.history_after_writes(TENANT, session.id)

    assert first == []
    assert all(future.done() for future in written)
    assert [m.info.id for m in history] == [message.id]
    assert [p.text for p in history[0].parts if p.type == "text"] == ["0", "1", "2"]
    assert history == await store.history_since_compaction(TENANT, session.id)


@contextlib.asynccontextmanager
async def _sqlite_writer(database_url: str) -> AsyncIterator[ThreadWriter]:
    """The SQLite store's writer on its own (only it reads: Postgres's would keep its writes waiting)."""
    target = parse_database_url(database_url)
    if target.dialect != "sqlite":
        pytest.skip("only the SQLite writer reads")
    await asyncio.to_thread(upgrade_to_head, database_url)
    engine = sqlite_engine(target, pool_size=1, begin="BEGIN IMMEDIATE")
    writer = ThreadWriter(engine, lambda _events: None)
    try:
        yield writer
    finally:
        await writer.close()
        await asyncio.to_thread(engine.dispose)


def _count_parts(conn: Connection) -> int:
    count: int = conn.execute(select(func.count()).select_from(part_table)).scalar_one()
    return count


async def test_a_read_runs_once_the_writes_before_it_committed(database_url: str) -> None:
    async with _sqlite_writer(database_url) as writer:
        session = new_session()
        message = user_message(session.id)
        await writer.submit(session_created(session))
        written = [writer.submit(message_updated(message))]
        written += [writer.submit(part_updated(text_part(message, str(i)))) for i in range(3)]

        counted = await writer.submit_read(_count_parts)

        assert all(future.done() for future in written)
        assert counted == 3


async def test_a_failing_read_fails_alone(database_url: str) -> None:
    async with _sqlite_writer(database_url) as writer:
        session = new_session()

        def broken(conn: Connection) -> None:
            conn.exec_driver_sql("SELECT * FROM no_such_table")

        created = writer.submit(session_created(session))
        failed = writer.submit_read(broken)
        after = writer.submit(message_updated(user_message(session.id)))

        with pytest.raises(StoreWriteError, match="read"):
            await failed
        assert (await created).seq == 1
        assert (await after).seq == 2
        assert await writer.submit_read(_count_parts) == 0  # the writer reads on after a failure


async def test_who_waited_on_a_commit_goes_on_before_the_subscribers_hear_of_it(database_url: str) -> None:
    # Both are woken by the same delivery; the writer's futures first, so a prompt or a loop waiting
    # on its write goes on while the event streams write the events out.
    woken: list[str] = []
    heard: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def publish(_events: list[Event]) -> None:
        if not heard.done():
            heard.set_result(None)

    store = await Store.open(database_url, publish=publish)
    try:

        async def subscriber() -> None:
            await heard
            woken.append("subscriber")

        async def writer() -> None:
            await store.submit(session_created(new_session()))
            woken.append("writer")

        await asyncio.gather(subscriber(), writer())
    finally:
        await store.close()
    assert woken == ["writer", "subscriber"]


_LINGERS_ON_POSTGRES = "only the Postgres writer lingers (writer.py TaskWriter.lingers)"


async def test_a_lingering_event_waits_for_the_next_write_and_commits_with_it(store: Store) -> None:
    if store.dialect != "postgresql":
        pytest.skip(_LINGERS_ON_POSTGRES)
    session = new_session()
    message = user_message(session.id)
    await store.write(session_created(session))
    before = store.committed_batches

    lingering = store.submit(message_updated(message), linger=60.0)
    await _taken_off_the_queue(store)
    assert not lingering.done()
    part = part_updated(text_part(message, "company"))
    await store.submit(part)

    assert (await lingering).seq == 2 and part.seq == 3
    assert store.committed_batches == before + 1


async def test_a_lingering_event_alone_commits_once_its_linger_is_over(store: Store) -> None:
    if store.dialect != "postgresql":
        pytest.skip(_LINGERS_ON_POSTGRES)
    session = new_session()
    await store.write(session_created(session))
    event = await store.submit(message_updated(user_message(session.id)), linger=0.01)
    assert event.seq == 2
    assert [e.seq for e in await store.events_after(TENANT, session.id, 0)] == [1, 2]


async def test_a_broadcast_event_behind_a_lingering_write_ends_its_wait(
    store: Store, published: list[Event]
) -> None:
    if store.dialect != "postgresql":
        pytest.skip(_LINGERS_ON_POSTGRES)
    session = new_session()
    await store.write(session_created(session))
    published.clear()
    lingering = store.submit(message_updated(user_message(session.id)), linger=60.0)
    await _taken_off_the_queue(store)
    delta = _delta(session.id, "from another stream")
    store.publish_after_writes(delta)  # waits for the write before it, which no longer waits
    await asyncio.wait_for(lingering, 30)
    assert [e.id for e in published] == [lingering.result().id, delta.id]


async def test_sqlite_commits_an_event_asked_to_linger_at_once(store: Store) -> None:
    if store.dialect == "postgresql":
        pytest.skip("Postgres' writer lingers")
    session = new_session()
    await store.write(session_created(session))
    event = await asyncio.wait_for(store.submit(message_updated(user_message(session.id)), linger=60.0), 30)
    assert event.seq == 2


async def test_close_writes_a_lingering_event_at_once(store: Store) -> None:
    session = new_session()
    await store.write(session_created(session))
    lingering = store.submit(message_updated(user_message(session.id)), linger=60.0)
    await _taken_off_the_queue(store)
    await asyncio.wait_for(store.close(), 30)
    assert lingering.done() and lingering.result().seq == 2


async def _taken_off_the_queue(store: Store) -> None:
    """Until the writer has taken what was queued (its thread or task runs meanwhile)."""
    writer: Any = store._writer
    # SQLite's writer takes it in a thread of its own: there is no event to await.
    while not writer._queue.empty():  # noqa: ASYNC110
        await asyncio.sleep(0)
