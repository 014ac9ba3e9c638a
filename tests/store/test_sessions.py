"""Sessions: create, read, list with filters, update, children, delete with cascade."""

from __future__ import annotations

import pytest

from agentforge.model.events import Event
from agentforge.model.session import SessionTime
from agentforge.store import Store, StoreWriteError
from tests.store.builders import (
    message_updated,
    new_session,
    part_updated,
    session_created,
    session_deleted,
    session_updated,
    step_finish,
    text_part,
    user_message,
)

TENANT = "default"


async def test_created_session_reads_back_as_written(store: Store) -> None:
    session = new_session(title="Fix the parser")
    await store.write(session_created(session))

    assert await store.get_session(TENANT, session.id) == session


async def test_missing_session_and_other_tenant_read_as_none(store: Store) -> None:
    session = new_session()
    await store.write(session_created(session))

    assert await store.get_session(TENANT, "ses_missing") is None
    assert await store.get_session("other-tenant", session.id) is None


async def test_list_is_newest_updated_first(store: Store) -> None:
    old, mid, new = (new_session(updated=stamp) for stamp in (1_000, 2_000, 3_000))
    for session in (mid, new, old):
        await store.write(session_created(session))

    listed = await store.list_sessions(TENANT)

    assert [s.id for s in listed] == [new.id, mid.id, old.id]
    assert [s.id for s in await store.list_sessions(TENANT, limit=2)] == [new.id, mid.id]


async def test_list_filters_by_directory_roots_start_and_title(store: Store) -> None:
    parent = new_session(directory="/a", title="Refactor THE Store", updated=1_000)
    child = new_session(directory="/a", title="child", parent_id=parent.id, updated=2_000)
    elsewhere = new_session(directory="/b", title="100% done", updated=3_000)
    for session in (parent, child, elsewhere):
        await store.write(session_created(session))

    async def ids(**filters: object) -> set[str]:
        return {s.id for s in await store.list_sessions(TENANT, **filters)}  # type: ignore[arg-type]

    assert await ids(directory="/a") == {parent.id, child.id}
    assert await ids(roots=True) == {parent.id, elsewhere.id}
    assert await ids(start=2_000) == {child.id, elsewhere.id}
    assert await ids(search="the store") == {parent.id}
    # LIKE wildcards in the search are literal characters.
    assert await ids(search="0%") == {elsewhere.id}
    assert await ids(search="_") == set()
    assert await store.list_sessions("other-tenant") == []


async def test_update_replaces_the_row_and_keeps_the_running_totals(store: Store) -> None:
    session = new_session(title="before")
    await store.write(session_created(session))
    message = user_message(session.id)
    await store.write(message_updated(message))
    await store.write(part_updated(step_finish(message, cost=0.5, input=10)))

    later = SessionTime(created=session.time.created, updated=session.time.updated + 5)
    changed = session.model_copy(update={"title": "after", "cost": 99.0, "time": later})
    await store.write(session_updated(changed))

    stored = await store.get_session(TENANT, session.id)
    assert stored is not None
    assert stored.title == "after"
    assert stored.time.updated == changed.time.updated
    assert stored.cost == 0.5  # the projector's total, not the 99.0 in `info`
    assert stored.tokens.input == 10
    assert [s.title for s in await store.list_sessions(TENANT, search="after")] == ["after"]


async def test_updating_a_missing_session_is_dropped(store: Store) -> None:
    with pytest.raises(StoreWriteError):
        await store.write(session_updated(new_session()))


async def test_children_are_the_sessions_with_that_parent(store: Store) -> None:
    parent = new_session()
    first = new_session(parent_id=parent.id, updated=1_000)
    second = new_session(parent_id=parent.id, updated=2_000)
    unrelated = new_session()
    for session in (parent, first, second, unrelated):
        await store.write(session_created(session))

    assert [s.id for s in await store.children(TENANT, parent.id)] == [second.id, first.id]
    assert await store.children(TENANT, unrelated.id) == []
    assert await store.children("other-tenant", parent.id) == []


async def test_delete_cascades_to_messages_and_parts_but_keeps_the_log(
    store: Store, published: list[Event]
) -> None:
    session = new_session()
    await store.write(session_created(session))
    message = user_message(session.id)
    part = text_part(message, "hello")
    await store.write(message_updated(message))
    await store.write(part_updated(part))

    await store.write(session_deleted(session))

    assert await store.get_session(TENANT, session.id) is None
    assert await store.get_message(TENANT, session.id, message.id) is None
    assert await store.get_part(TENANT, session.id, message.id, part.id) is None
    assert await store.history(TENANT, session.id) == []
    logged = await store.events_after(TENANT, session.id, 0)
    assert [e.type for e in logged] == [
        "session.created",
        "message.updated",
        "message.part.updated",
        "session.deleted",
    ]
    assert [e.seq for e in logged] == [1, 2, 3, 4]
    # Deleting again is harmless and still logged.
    again = await store.write(session_deleted(session))
    assert again.seq == 5
    assert published[-1] is again
