"""Several writers on one database (replicas): every event of one session is stored once, with
gap-free seqs, however their batches interleave; nothing is dropped and nobody deadlocks."""

from __future__ import annotations

import asyncio

from agentforge.model import events as ev
from agentforge.model.events import Event
from agentforge.store import Store
from tests.databases import owner_url_for
from tests.store.builders import (
    message_updated,
    new_session,
    part_updated,
    session_created,
    text_part,
    user_message,
)

TENANT = "default"
WRITES_PER_WRITER = 60


async def test_two_stores_writing_one_session_lose_nothing(store: Store, database_url: str) -> None:
    session = new_session()
    messages = [user_message(session.id), user_message(session.id)]
    await store.write(session_created(session))
    for message in messages:
        await store.write(message_updated(message))
    other = await Store.open(database_url, owner_url=owner_url_for(database_url))
    try:

        async def writer(target: Store, index: int) -> list[Event]:
            # Small batches (three at a time) so that the two writers' transactions interleave.
            parts = [text_part(messages[index], f"{index}:{n}") for n in range(WRITES_PER_WRITER)]
            written: list[Event] = []
            for start in range(0, len(parts), 3):
                futures = [target.submit(part_updated(part)) for part in parts[start : start + 3]]
                written.extend(await asyncio.gather(*futures))
            return written

        first, second = await asyncio.gather(writer(store, 0), writer(other, 1))
    finally:
        await other.close()

    logged = await store.events_after(TENANT, session.id, 0)
    assert [e.seq for e in logged] == list(range(1, len(logged) + 1))
    stored_ids = [e.id for e in logged if e.type == ev.PART_UPDATED]
    assert sorted(stored_ids) == sorted(e.id for e in first + second)
    history = await store.history(TENANT, session.id)
    assert [len(item.parts) for item in history] == [WRITES_PER_WRITER, WRITES_PER_WRITER]
