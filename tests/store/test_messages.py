"""Messages and parts: upsert, ordering, removal, pagination cursors, history."""

from __future__ import annotations

import base64

import pytest

from agentforge.model import ids
from agentforge.model.message import UserMessage
from agentforge.model.session import Session
from agentforge.store import Store, decode_cursor, encode_cursor
from tests.store.builders import (
    assistant_message,
    message_removed,
    message_updated,
    new_session,
    part_removed,
    part_updated,
    session_created,
    text_part,
    user_message,
)

TENANT = "default"


async def _session(store: Store) -> Session:
    session = new_session()
    await store.write(session_created(session))
    return session


async def _messages(store: Store, session: Session, times: list[int]) -> list[UserMessage]:
    """One message per creation time, each with one text part naming its index."""
    written = []
    for index, created in enumerate(times):
        message = user_message(session.id, created=created)
        await store.write(message_updated(message))
        await store.write(part_updated(text_part(message, f"m{index}")))
        written.append(message)
    return written


async def test_message_upsert_keeps_one_row_with_the_latest_info(store: Store) -> None:
    session = await _session(store)
    user = user_message(session.id)
    reply = assistant_message(session.id, user.id)
    await store.write(message_updated(user))
    await store.write(message_updated(reply))
    finished = reply.model_copy(update={"finish": "stop", "cost": 0.25})
    await store.write(message_updated(finished))

    got = await store.get_message(TENANT, session.id, reply.id)
    assert got is not None
    assert got.info == finished
    assert [m.info.id for m in await store.history(TENANT, session.id)] == [user.id, reply.id]


async def test_parts_come_back_ordered_by_id_whatever_the_write_order(store: Store) -> None:
    session = await _session(store)
    message = user_message(session.id)
    await store.write(message_updated(message))
    first, second, third = (text_part(message, text) for text in ("a", "b", "c"))
    for part in (third, first, second):
        await store.write(part_updated(part))

    got = await store.get_message(TENANT, session.id, message.id)
    assert got is not None
    assert [p.id for p in got.parts] == [first.id, second.id, third.id]


async def test_part_upsert_replaces_the_part(store: Store) -> None:
    session = await _session(store)
    message = user_message(session.id)
    await store.write(message_updated(message))
    part = text_part(message, "draft")
    await store.write(part_updated(part))
    final = part.model_copy(update={"text": "final text"})
    await store.write(part_updated(final))

    assert await store.get_part(TENANT, session.id, message.id, part.id) == final
    got = await store.get_message(TENANT, session.id, message.id)
    assert got is not None and got.parts == [final]


async def test_get_part_and_message_are_scoped_to_their_parents_and_tenant(store: Store) -> None:
    session = await _session(store)
    message = user_message(session.id)
    await store.write(message_updated(message))
    part = text_part(message, "x")
    await store.write(part_updated(part))

    assert await store.get_part(TENANT, session.id, "msg_other", part.id) is None
    assert await store.get_part(TENANT, "ses_other", message.id, part.id) is None
    assert await store.get_part("other-tenant", session.id, message.id, part.id) is None
    assert await store.get_message(TENANT, "ses_other", message.id) is None
    assert await store.get_message("other-tenant", session.id, message.id) is None


async def test_removing_parts_and_messages(store: Store) -> None:
    session = await _session(store)
    message = user_message(session.id)
    await store.write(message_updated(message))
    kept, dropped = text_part(message, "kept"), text_part(message, "dropped")
    await store.write(part_updated(kept))
    await store.write(part_updated(dropped))

    await store.write(part_removed(dropped))
    got = await store.get_message(TENANT, session.id, message.id)
    assert got is not None and got.parts == [kept]

    await store.write(message_removed(message))
    assert await store.get_message(TENANT, session.id, message.id) is None
    assert await store.get_part(TENANT, session.id, message.id, kept.id) is None


async def test_list_messages_without_limit_is_everything_oldest_first(store: Store) -> None:
    session = await _session(store)
    written = await _messages(store, session, [30, 10, 20])

    page, cursor = await store.list_messages(TENANT, session.id)

    assert [m.info.id for m in page] == [written[1].id, written[2].id, written[0].id]
    assert cursor is None


async def test_pagination_walks_back_three_pages(store: Store) -> None:
    session = await _session(store)
    written = await _messages(store, session, [100 + i for i in range(7)])
    expected_ids = [m.id for m in written]

    first, cursor1 = await store.list_messages(TENANT, session.id, limit=3)
    assert [m.info.id for m in first] == expected_ids[4:7]
    assert [[p.text for p in m.parts] for m in first] == [["m4"], ["m5"], ["m6"]]  # type: ignore[union-attr]
    assert cursor1 is not None and decode_cursor(cursor1) == (written[4].id, 104)

    second, cursor2 = await store.list_messages(TENANT, session.id, limit=3, before=cursor1)
    assert [m.info.id for m in second] == expected_ids[1:4]
    assert cursor2 is not None

    third, cursor3 = await store.list_messages(TENANT, session.id, limit=3, before=cursor2)
    assert [m.info.id for m in third] == expected_ids[0:1]
    assert cursor3 is None


async def test_pagination_breaks_time_ties_by_id_and_ends_on_an_exact_multiple(store: Store) -> None:
    session = await _session(store)
    written = await _messages(store, session, [500] * 4)  # same millisecond: ids decide

    first, cursor = await store.list_messages(TENANT, session.id, limit=2)
    assert [m.info.id for m in first] == [written[2].id, written[3].id]
    assert cursor is not None
    second, last_cursor = await store.list_messages(TENANT, session.id, limit=2, before=cursor)
    assert [m.info.id for m in second] == [written[0].id, written[1].id]
    assert last_cursor is None


async def test_limit_zero_is_an_empty_page(store: Store) -> None:
    session = await _session(store)
    await _messages(store, session, [1, 2])

    assert await store.list_messages(TENANT, session.id, limit=0) == ([], None)
    with pytest.raises(ValueError, match="limit"):
        await store.list_messages(TENANT, session.id, limit=-1)


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64!",
        base64.urlsafe_b64encode(b"not json").decode(),
        base64.urlsafe_b64encode(b'["a", 1]').decode(),
        base64.urlsafe_b64encode(b'{"id": "msg_x"}').decode(),
        base64.urlsafe_b64encode(b'{"id": 5, "time": 1}').decode(),
        base64.urlsafe_b64encode(b'{"id": "msg_x", "time": "1"}').decode(),
    ],
)
async def test_invalid_cursor_is_rejected(store: Store, cursor: str) -> None:
    session = await _session(store)
    with pytest.raises(ValueError, match="Invalid cursor"):
        await store.list_messages(TENANT, session.id, limit=2, before=cursor)


def test_cursor_is_unpadded_base64url_json_and_round_trips() -> None:
    message_id = ids.ascending("msg")
    cursor = encode_cursor(message_id, 1_700_000_000_123)

    assert "=" not in cursor
    padded = cursor + "=" * (-len(cursor) % 4)
    assert base64.urlsafe_b64decode(padded) == f'{{"id":"{message_id}","time":1700000000123}}'.encode()
    assert decode_cursor(cursor) == (message_id, 1_700_000_000_123)


async def test_history_since_a_message_is_inclusive_and_oldest_first(store: Store) -> None:
    session = await _session(store)
    written = await _messages(store, session, [1, 2, 3, 4])
    other = await _session(store)
    await _messages(store, other, [5])

    everything = await store.history(TENANT, session.id)
    assert [m.info.id for m in everything] == [m.id for m in written]
    assert [[p.text for p in m.parts] for m in everything] == [["m0"], ["m1"], ["m2"], ["m3"]]  # type: ignore[union-attr]

    tail = await store.history(TENANT, session.id, since_message_id=written[2].id)
    assert [m.info.id for m in tail] == [written[2].id, written[3].id]
    assert [len(m.parts) for m in tail] == [1, 1]
    assert await store.history("other-tenant", session.id) == []
