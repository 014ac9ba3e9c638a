"""An accepted `prompt_async`'s queue entry (store/prompt_queue.py) commits with its user message,
in one piece: on both databases, alone and in a batch with other writes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentforge.store import Store
from agentforge.store.batch import GroupWriteError
from tests.store.builders import (
    message_updated,
    new_session,
    part_updated,
    session_created,
    session_updated,
    text_part,
    user_message,
)

EVER = 2**62  # queued before this (ms): every entry


async def test_a_queued_prompt_commits_with_its_message_and_leaves_when_finished(store: Store) -> None:
    session = new_session()
    await store.write(session_created(session))
    message = user_message(session.id)
    group = [message_updated(message), part_updated(text_part(message, "hi"))]
    await store.submit_group(group, queue_prompt=message.id)

    assert await store.queued_prompts(EVER) == [("default", session.id, message.id)]
    assert [item.info.id for item in await store.history("default", session.id)] == [message.id]
    await store.finish_prompts("default", session.id, message.id)
    assert await store.queued_prompts(EVER) == []


async def test_a_refused_message_leaves_no_queue_entry(store: Store) -> None:
    session = new_session()
    await store.write(session_created(session))
    first = user_message(session.id)
    taken = text_part(first, "first")
    await store.submit_group([message_updated(first), part_updated(taken)])

    second = user_message(session.id)
    reused = text_part(second, "second", part_id=taken.id)  # a part id another message holds
    with pytest.raises(GroupWriteError):
        await store.submit_group([message_updated(second), part_updated(reused)], queue_prompt=second.id)

    assert await store.queued_prompts(EVER) == []
    assert [item.info.id for item in await store.history("default", session.id)] == [first.id]


async def test_queued_prompts_in_one_batch_with_other_writes(store: Store) -> None:
    """Submitted without waiting in between, so the writer may take them in one batch (Postgres:
    one statement): the queue rows are written either way."""
    session, other = new_session(), new_session()
    await store.write(session_created(session))
    await store.write(session_created(other))
    one, two = user_message(session.id), user_message(other.id)
    written: list[asyncio.Future[Any]] = [
        store.submit(session_updated(session)),
        store.submit_group([message_updated(one), part_updated(text_part(one, "a"))], queue_prompt=one.id),
        store.submit_group([message_updated(two), part_updated(text_part(two, "b"))], queue_prompt=two.id),
        store.submit(session_updated(other)),
    ]
    await asyncio.gather(*written)

    queued = sorted(await store.queued_prompts(EVER))
    assert queued == sorted([("default", session.id, one.id), ("default", other.id, two.id)])
