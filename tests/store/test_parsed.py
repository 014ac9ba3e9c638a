"""History reads share what they parsed: an unchanged row is not parsed again, a changed one is, and
the memory it takes is bounded (store/parsed.py)."""

from __future__ import annotations

import orjson

from agentforge.model.part import TextPart
from agentforge.store import Store
from agentforge.store.parsed import SharedRows
from tests.store.builders import (
    assistant_message,
    message_updated,
    new_session,
    part_updated,
    session_created,
    text_part,
    user_message,
)

TENANT = "default"


async def test_unchanged_rows_are_shared_and_changed_rows_read_anew(store: Store) -> None:
    session = new_session()
    user = user_message(session.id)
    reply = assistant_message(session.id, user.id)
    question, answer = text_part(user, "hi"), text_part(reply, "hel")
    for event in [session_created(session), message_updated(user), part_updated(question)]:
        await store.write(event)
    await store.write(message_updated(reply))
    await store.write(part_updated(answer))

    first = await store.history_since_compaction(TENANT, session.id)
    answer.text = "hello"
    await store.write(part_updated(answer))
    second = await store.history_since_compaction(TENANT, session.id)

    assert second[0].info is first[0].info and second[0].parts[0] is first[0].parts[0]
    assert second[1].info is first[1].info
    changed = second[1].parts[0]
    assert isinstance(changed, TextPart) and changed.text == "hello"
    assert changed is not first[1].parts[0]
    # What a plain history read returns is the same content, in objects of its own.
    plain = await store.history(TENANT, session.id)
    assert [m.model_dump() for m in plain] == [m.model_dump() for m in second]
    assert plain[1].parts[0] is not changed


def test_past_its_bounds_everything_is_forgotten() -> None:
    session = new_session()
    user = user_message(session.id)
    parts = [text_part(user, str(n)) for n in range(3)]
    rows = SharedRows(max_rows=2)
    data = [orjson.dumps(part.wire()).decode() for part in parts]
    first = rows.part(TENANT, parts[0].id, data[0])
    assert rows.part(TENANT, parts[0].id, data[0]) is first
    rows.part(TENANT, parts[1].id, data[1])
    rows.part(TENANT, parts[2].id, data[2])  # the third row: the first two are dropped
    assert len(rows) == 1
    assert rows.part(TENANT, parts[0].id, data[0]) is not first
    small = SharedRows(max_chars=len(data[0]) + len(data[1]) - 1)
    small.part(TENANT, parts[0].id, data[0])
    small.part(TENANT, parts[1].id, data[1])
    assert len(small) == 1
    # Another tenant's row of the same id is not this one.
    assert rows.part("other", parts[2].id, data[2]) is not rows.part(TENANT, parts[2].id, data[2])
