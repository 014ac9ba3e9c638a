"""The loop's history read starts at the newest completed compaction (an indexed lookup), and what it
returns filters to exactly what the whole session filters to."""

from __future__ import annotations

from agentforge.model import ids
from agentforge.model.message import WithParts
from agentforge.model.part import CompactionPart
from agentforge.session.context.history import filter_compacted
from agentforge.store import Store
from tests.session.builders import Conversation, compaction
from tests.session.stored import store_conversation
from tests.store.builders import new_session

TENANT = "default"


def _ids(messages: list[WithParts]) -> list[str]:
    return [m.info.id for m in messages]


async def _check(store: Store, chat: Conversation) -> list[str]:
    """Store the conversation; return the ids the boundary read gives, after checking the filter."""
    session = new_session()
    session.id = chat.session_id
    await store_conversation(store, session, chat.messages)
    since = await store.history_since_compaction(TENANT, session.id)
    full = await store.history(TENANT, session.id)
    assert _ids(filter_compacted(since)) == _ids(filter_compacted(full))
    return _ids(since)


async def test_without_a_compaction_the_whole_session_is_read(store: Store) -> None:
    chat = Conversation()
    chat.user("a")
    chat.assistant("b")
    assert await _check(store, chat) == _ids(chat.messages)


async def test_read_starts_at_the_newest_completed_compaction(store: Store) -> None:
    chat = Conversation()
    chat.user("a")
    chat.assistant("b")
    first = chat.user(compaction(auto=True))
    chat.assistant("summary 1", parent=first, summary=True)
    chat.user("c")
    chat.assistant("d")
    second = chat.user(compaction(auto=True))
    chat.assistant("summary 2", parent=second, summary=True)
    chat.user("e")
    failed = chat.user(compaction(auto=True))  # a newer one whose summary failed hides nothing
    chat.assistant(parent=failed, summary=True, finish=None)
    start = chat.messages.index(second)
    assert await _check(store, chat) == _ids(chat.messages[start:])


async def test_read_includes_the_preserved_tail(store: Store) -> None:
    chat = Conversation()
    chat.user("a")
    chat.assistant("b")
    tail = chat.user("c")
    chat.assistant("d")
    part = CompactionPart(
        id=ids.ascending("prt"), session_id="", message_id="", auto=True, tail_start_id=tail.info.id
    )
    request = chat.user(part)
    chat.assistant("summary", parent=request, summary=True)
    chat.user("e")
    start = chat.messages.index(tail)
    assert await _check(store, chat) == _ids(chat.messages[start:])
