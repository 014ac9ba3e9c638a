"""The loop's history read merges only what changed since the session's last read (store/
history_cache.py), and gives exactly what a full read gives, whatever was written in between.

The cache under test reads through readers of its own on the store's database: every write comes
from the store's writer, as from another process, so nothing tells the cache what changed but the
database itself.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentforge.model import ids
from agentforge.model.message import AssistantMessage, AssistantTime, UserMessage, WithParts
from agentforge.model.part import CompactionPart, TextPart
from agentforge.store import Store, parse_database_url, queries
from agentforge.store.engine import postgres_engine, sqlite_engine
from agentforge.store.history_cache import HistoryCache
from agentforge.store.migrate import alembic_config, current_revision, run_with_connection
from agentforge.store.readers import PoolReaders, Readers, ThreadReaders
from tests.databases import owner_url_for
from tests.store.builders import (
    assistant_message,
    message_removed,
    message_updated,
    new_session,
    now_ms,
    part_removed,
    part_updated,
    session_created,
    session_deleted,
    text_part,
    user_message,
)

TENANT = "default"


@pytest.fixture
async def readers(database_url: str) -> AsyncIterator[Readers]:
    """Readers of the store's database that are not the store's: a second process's view."""
    target = parse_database_url(database_url)
    if target.dialect == "sqlite":
        engine = sqlite_engine(target, pool_size=1, begin="BEGIN")
        threads = ThreadReaders(engine, threads=1)
        yield threads
        await threads.close()
        engine.dispose()
    else:
        # As the store's: a kept connection for `Readers.rows`, another for `Readers.run`.
        async_engine = postgres_engine(target, pool_size=2)
        pool = PoolReaders(async_engine, kept=1)
        yield pool
        await pool.close()
        await async_engine.dispose()


def _dump(messages: list[WithParts]) -> list[dict[str, Any]]:
    return [m.model_dump() for m in messages]


@dataclass
class _Session:
    """What the example has written, so operations can pick a message or part to change."""

    store: Store
    session_id: str
    messages: list[UserMessage | AssistantMessage] = field(default_factory=list)
    parts: list[TextPart] = field(default_factory=list)

    async def add_user(self, client_id: bool) -> None:
        info = user_message(self.session_id)
        if client_id:  # a client's choice, older than every id the server made
            info.id = f"msg_0{uuid.uuid4().hex}"
        await self._add(info)

    async def add_assistant(self) -> None:
        parent = self.messages[-1].id if self.messages else ids.ascending("msg")
        await self._add(assistant_message(self.session_id, parent))

    async def _add(self, info: UserMessage | AssistantMessage) -> None:
        part = text_part(info, "first")
        await self.store.write(message_updated(info))
        await self.store.write(part_updated(part))
        self.messages.append(info)
        self.parts.append(part)

    async def add_part(self, pick: int) -> None:
        if self.messages:
            part = text_part(self.messages[pick % len(self.messages)], "more")
            await self.store.write(part_updated(part))
            self.parts.append(part)

    async def edit_part(self, pick: int, text: str, checkpoint: bool) -> None:
        if not self.parts:
            return
        part = self.parts[pick % len(self.parts)]
        part.text = text
        if checkpoint:  # the streaming path: no event, the row overwritten in place
            await self.store.submit_checkpoint(TENANT, part.wire())
        else:
            await self.store.write(part_updated(part))

    async def finish_message(self, pick: int) -> None:
        if self.messages:
            info = self.messages[pick % len(self.messages)]
            if isinstance(info, AssistantMessage):
                info.time = AssistantTime(created=info.time.created, completed=now_ms())
            else:
                info.agent = "plan"
            await self.store.write(message_updated(info))

    async def remove_part(self, pick: int) -> None:
        if self.parts:
            part = self.parts.pop(pick % len(self.parts))
            await self.store.write(part_removed(part))

    async def remove_message(self, pick: int) -> None:
        if self.messages:
            info = self.messages.pop(pick % len(self.messages))
            self.parts = [p for p in self.parts if p.message_id != info.id]
            await self.store.write(message_removed(info))

    async def compact(self, tail: int | None) -> None:
        """A completed compaction: a request (keeping a tail from an earlier message, maybe) and its
        finished summary. The history read then starts there."""
        request = user_message(self.session_id)
        tail_start = (
            None if tail is None or not self.messages else self.messages[tail % len(self.messages)].id
        )
        marker = CompactionPart(
            id=ids.ascending("prt"),
            session_id=self.session_id,
            message_id=request.id,
            auto=True,
            tail_start_id=tail_start,
        )
        summary = assistant_message(self.session_id, request.id)
        summary.summary, summary.finish = True, "stop"
        summary.time = AssistantTime(created=now_ms(), completed=now_ms())
        for event in [message_updated(request), part_updated(marker), message_updated(summary)]:
            await self.store.write(event)
        self.messages += [request, summary]
        await self.store.write(part_updated(text_part(summary, "the summary")))


_picks = st.integers(min_value=0, max_value=50)
_operations = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.booleans()),
        st.tuples(st.just("assistant")),
        st.tuples(st.just("part"), _picks),
        st.tuples(st.just("edit"), _picks, st.text(max_size=8), st.booleans()),
        st.tuples(st.just("finish"), _picks),
        st.tuples(st.just("remove part"), _picks),
        st.tuples(st.just("remove message"), _picks),
        st.tuples(st.just("compact"), st.none() | _picks),
    ),
    max_size=24,
)


async def _apply(written: _Session, operation: tuple[Any, ...]) -> None:
    match operation:
        case ("user", client_id):
            await written.add_user(client_id)
        case ("assistant",):
            await written.add_assistant()
        case ("part", pick):
            await written.add_part(pick)
        case ("edit", pick, text, checkpoint):
            await written.edit_part(pick, text, checkpoint)
        case ("finish", pick):
            await written.finish_message(pick)
        case ("remove part", pick):
            await written.remove_part(pick)
        case ("remove message", pick):
            await written.remove_message(pick)
        case ("compact", tail):
            await written.compact(tail)


async def _read_both(readers: Readers, cache: HistoryCache, session_id: str) -> None:
    """The incremental read (as the store reads: mostly one statement through `Readers.rows`)
    against a full one."""
    incremental = await cache.fetch(readers, TENANT, session_id)
    full = await readers.run(queries.history_since_compaction, TENANT, session_id)
    assert _dump(incremental) == _dump(full)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    operations=_operations,
    reads=st.lists(st.booleans(), min_size=24, max_size=24),
    delete_at_end=st.booleans(),
)
async def test_property_incremental_reads_equal_full_reads(
    store: Store,
    readers: Readers,
    operations: list[tuple[Any, ...]],
    reads: list[bool],
    delete_at_end: bool,
) -> None:
    """`reads[i]`: read after the i-th operation (else its changes add to the next read's)."""
    session = new_session()
    await store.write(session_created(session))
    written = _Session(store, session.id)
    cache = HistoryCache()
    await _read_both(readers, cache, session.id)
    for operation, read in zip(operations, reads, strict=False):
        await _apply(written, operation)
        if read:
            await _read_both(readers, cache, session.id)
    await _read_both(readers, cache, session.id)
    if delete_at_end:
        await store.write(session_deleted(session))
        assert await cache.fetch(readers, TENANT, session.id) == []
        assert len(cache) == 0


async def test_an_unchanged_session_is_answered_from_the_entry(store: Store, readers: Readers) -> None:
    session = new_session()
    user = user_message(session.id)
    for event in [session_created(session), message_updated(user), part_updated(text_part(user, "hi"))]:
        await store.write(event)
    cache = HistoryCache()
    first = await cache.fetch(readers, TENANT, session.id)
    again = await cache.fetch(readers, TENANT, session.id)
    assert again == first and again is not first  # a list of its own, the same shared objects
    assert again[0] is first[0]

    reply = assistant_message(session.id, user.id)
    await store.write(message_updated(reply))
    grown = await cache.fetch(readers, TENANT, session.id)
    # The message that did not change keeps its object; the new one is read.
    assert grown[0] is first[0] and [m.info.id for m in grown] == [user.id, reply.id]


async def test_the_cache_is_bounded_by_sessions_and_rows(store: Store, readers: Readers) -> None:
    sessions = [new_session() for _ in range(2)]
    for session in sessions:
        user = user_message(session.id)
        for event in [session_created(session), message_updated(user), part_updated(text_part(user, "a"))]:
            await store.write(event)
    by_sessions = HistoryCache(max_sessions=1)
    for session in sessions:
        await by_sessions.fetch(readers, TENANT, session.id)
    assert len(by_sessions) == 1
    by_rows = HistoryCache(max_rows=1)  # each session has two rows: none is kept, each read is whole
    read = await by_rows.fetch(readers, TENANT, sessions[0].id)
    assert len(by_rows) == 0
    assert _dump(read) == _dump(await readers.run(queries.history_since_compaction, TENANT, sessions[0].id))


async def test_the_cache_is_bounded_by_characters_of_row_json(store: Store, readers: Readers) -> None:
    # A session of large parts (file contents, tool output) must not pin unbounded memory.
    small, large = new_session(), new_session()
    for session, text in ((small, "a"), (large, "x" * 20_000)):
        user = user_message(session.id)
        for event in [session_created(session), message_updated(user), part_updated(text_part(user, text))]:
            await store.write(event)
    cache = HistoryCache(max_chars=10_000)
    await cache.fetch(readers, TENANT, small.id)
    assert len(cache) == 1
    read = await cache.fetch(readers, TENANT, large.id)  # too large to keep: read whole, not kept
    assert len(cache) == 1
    assert _dump(read) == _dump(await readers.run(queries.history_since_compaction, TENANT, large.id))
    crowded = HistoryCache(max_chars=30_000)
    await crowded.fetch(readers, TENANT, small.id)
    await crowded.fetch(readers, TENANT, large.id)
    assert len(crowded) == 2
    other = new_session()
    user = user_message(other.id)
    for event in [session_created(other), message_updated(user), part_updated(text_part(user, "y" * 15_000))]:
        await store.write(event)
    await crowded.fetch(readers, TENANT, other.id)  # the least recently read go until it fits
    assert len(crowded) == 1


async def test_rows_from_before_0012_are_read_and_later_writes_merge_in(database_url: str) -> None:
    owner_url = owner_url_for(database_url)
    session = new_session()
    user = user_message(session.id)
    store = await Store.open(database_url, owner_url=owner_url)
    try:
        for event in [session_created(session), message_updated(user), part_updated(text_part(user, "old"))]:
            await store.write(event)
    finally:
        await store.close()

    def downgrade(conn: sa.Connection) -> tuple[str | None, set[str], int]:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, "0011_cluster_state")
        columns = {c["name"] for c in sa.inspect(conn).get_columns("part")}
        return (
            current_revision(conn),
            columns,
            conn.execute(sa.text("SELECT count(*) FROM part")).scalar_one(),
        )

    found: list[tuple[str | None, set[str], int]] = []
    owner = parse_database_url(owner_url or database_url)
    await asyncio.to_thread(run_with_connection, owner, lambda conn: found.append(downgrade(conn)))
    revision, columns, parts = found[0]
    assert revision == "0011_cluster_state" and "revision" not in columns and parts == 1

    store = await Store.open(database_url, owner_url=owner_url)  # back to head: the rows at revision 0
    try:
        first = await store.history_since_compaction(TENANT, session.id)
        kept = first[0].parts[0]
        assert [m.info.id for m in first] == [user.id] and isinstance(kept, TextPart) and kept.text == "old"
        reply = assistant_message(session.id, user.id)
        await store.write(message_updated(reply))
        await store.write(part_updated(text_part(reply, "new")))
        after = await store.history_since_compaction(TENANT, session.id)
        assert _dump(after) == _dump(await store.history(TENANT, session.id))
        assert [m.info.id for m in after] == [user.id, reply.id]
    finally:
        await store.close()


async def test_a_revision_moved_behind_the_writer_is_read_again(store: Store, database_url: str) -> None:
    """On SQLite the writer bumps the revisions it knows without reading them; one moved by anything
    else (here: another connection) fails that bump, and the write lands stamped after the move."""
    session = new_session()
    user = user_message(session.id)
    for event in [session_created(session), message_updated(user), part_updated(text_part(user, "a"))]:
        await store.write(event)
    owner = parse_database_url(owner_url_for(database_url) or database_url)

    def move(conn: sa.Connection) -> None:
        conn.execute(
            sa.text("UPDATE session SET history_revision = history_revision + 5 WHERE id = :id"),
            {"id": session.id},
        )

    await asyncio.to_thread(run_with_connection, owner, move)
    moved = await store.history_since_compaction(TENANT, session.id)
    reply = assistant_message(session.id, user.id)
    await store.write(message_updated(reply))
    await store.write(part_updated(text_part(reply, "b")))

    found: list[tuple[int, int]] = []

    def stamps(conn: sa.Connection) -> None:
        revision = conn.execute(
            sa.text("SELECT history_revision FROM session WHERE id = :id"), {"id": session.id}
        )
        stamped = conn.execute(
            sa.text("SELECT max(revision) FROM part WHERE session_id = :id"), {"id": session.id}
        )
        found.append((revision.scalar_one(), stamped.scalar_one()))

    await asyncio.to_thread(run_with_connection, owner, stamps)
    [(revision, stamped)] = found
    assert revision == stamped and revision > 5
    after = await store.history_since_compaction(TENANT, session.id)
    assert [m.info.id for m in moved] == [user.id] and [m.info.id for m in after] == [user.id, reply.id]
    assert _dump(after) == _dump(await store.history(TENANT, session.id))
