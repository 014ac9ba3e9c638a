"""Store.mutate: changes that are not session events run in the writer's transactions, in order with
the events, and a failing one is dropped alone."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Connection, select, text

from agentforge.model.events import Event
from agentforge.store import Store, StoreWriteError
from agentforge.store.schema import api_key
from tests.store.builders import new_session, session_created


def _insert_key(key_id: str) -> Callable[[Connection], str]:
    def apply(conn: Connection) -> str:
        conn.execute(
            api_key.insert().values(
                id=key_id,
                tenant_id="default",
                name=key_id,
                roles="[]",
                secret_hash="0" * 64,
                created_by="test",
                time_created=1,
            )
        )
        return key_id

    return apply


def _key_ids(conn: Connection) -> list[str]:
    return list(conn.execute(select(api_key.c.id).order_by(api_key.c.id)).scalars())


async def test_mutation_returns_its_result_once_committed(store: Store) -> None:
    assert await store.mutate("default", "insert key", _insert_key("k1")) == "k1"
    assert await store.mutate("default", "read keys", _key_ids) == ["k1"]


async def test_mutations_and_events_keep_submission_order_in_one_batch(
    store: Store, published: list[Event]
) -> None:
    session = new_session()
    created = session_created(session)
    writes: list[asyncio.Future[Any]] = [
        store.submit(created),
        asyncio.ensure_future(store.mutate("default", "insert key", _insert_key("k1"))),
        asyncio.ensure_future(store.mutate("default", "read keys", _key_ids)),
    ]
    results = await asyncio.gather(*writes)
    assert results[1:] == ["k1", ["k1"]]
    assert created.seq == 1
    assert [e.id for e in published] == [created.id]  # mutations are not published


async def test_a_failing_mutation_is_dropped_alone(store: Store) -> None:
    def broken(conn: Connection) -> None:
        conn.execute(text("SELECT * FROM no_such_table"))

    session = new_session()
    created = store.submit(session_created(session))
    bad = asyncio.ensure_future(store.mutate("default", "broken", broken))
    good = asyncio.ensure_future(store.mutate("default", "insert key", _insert_key("k2")))
    with pytest.raises(StoreWriteError, match="broken failed"):
        await bad
    assert await good == "k2"
    assert (await created).seq == 1
    assert await store.get_session("default", session.id) is not None
