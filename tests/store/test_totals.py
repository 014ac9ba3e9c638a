"""The session's running totals follow its step-finish parts (KERNEL 2.2)."""

from __future__ import annotations

from agentforge.model.session import Session
from agentforge.store import Store
from tests.store.builders import (
    assistant_message,
    message_removed,
    message_updated,
    new_session,
    part_removed,
    part_updated,
    session_created,
    step_finish,
    text_part,
    user_message,
)

TENANT = "default"


async def _totals(store: Store, session: Session) -> tuple[float, int, int, int, int, int]:
    stored = await store.get_session(TENANT, session.id)
    assert stored is not None
    tokens = stored.tokens
    return (
        stored.cost,
        tokens.input,
        tokens.output,
        tokens.reasoning,
        tokens.cache.read,
        tokens.cache.write,
    )


async def test_totals_add_replace_and_subtract_step_finish_usage(store: Store) -> None:
    session = new_session()
    await store.write(session_created(session))
    user = user_message(session.id)
    first, second = assistant_message(session.id, user.id), assistant_message(session.id, user.id)
    for message in (user, first, second):
        await store.write(message_updated(message))
    assert await _totals(store, session) == (0.0, 0, 0, 0, 0, 0)

    step = step_finish(first, cost=0.5, input=100, output=20, reasoning=5, cache_read=10, cache_write=3)
    await store.write(part_updated(step))
    assert await _totals(store, session) == (0.5, 100, 20, 5, 10, 3)

    # Updating the same part counts the difference, not the sum.
    revised = step_finish(
        first, cost=0.75, input=150, output=30, reasoning=6, cache_read=12, cache_write=4, part_id=step.id
    )
    await store.write(part_updated(revised))
    await store.write(part_updated(revised))
    assert await _totals(store, session) == (0.75, 150, 30, 6, 12, 4)

    other = step_finish(second, cost=0.25, input=1, output=2, reasoning=3, cache_read=4, cache_write=5)
    await store.write(part_updated(other))
    await store.write(part_updated(text_part(second, "no usage in text parts")))
    assert await _totals(store, session) == (1.0, 151, 32, 9, 16, 9)

    await store.write(part_removed(revised))
    assert await _totals(store, session) == (0.25, 1, 2, 3, 4, 5)

    await store.write(message_removed(second))
    assert await _totals(store, session) == (0.0, 0, 0, 0, 0, 0)


async def test_totals_are_per_session(store: Store) -> None:
    one, two = new_session(), new_session()
    for session in (one, two):
        await store.write(session_created(session))
    message_one, message_two = user_message(one.id), user_message(two.id)
    for message in (message_one, message_two):
        await store.write(message_updated(message))

    await store.write(part_updated(step_finish(message_one, cost=2.0, input=7)))

    assert await _totals(store, one) == (2.0, 7, 0, 0, 0, 0)
    assert await _totals(store, two) == (0.0, 0, 0, 0, 0, 0)
    listed = {s.id: s.cost for s in await store.list_sessions(TENANT)}
    assert listed == {one.id: 2.0, two.id: 0.0}


async def test_removing_a_message_without_step_finish_parts_leaves_totals(store: Store) -> None:
    session = new_session()
    await store.write(session_created(session))
    counted, plain = user_message(session.id), user_message(session.id)
    for message in (counted, plain):
        await store.write(message_updated(message))
    await store.write(part_updated(step_finish(counted, cost=0.5, output=9)))
    # A text part quoting the step-finish JSON must not be mistaken for one.
    await store.write(part_updated(text_part(plain, '{"type":"step-finish","cost":100}')))

    await store.write(message_removed(plain))

    assert await _totals(store, session) == (0.5, 0, 9, 0, 0, 0)
