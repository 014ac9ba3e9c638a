"""`AsyncAgentForge` against the real app, in-process through the streaming transport."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from fastapi import FastAPI

from agentforge.client import AgentForgeConnectionError, AgentForgeError, AsyncAgentForge, ServerEvent
from agentforge.model.message import AssistantMessage, UserMessage
from agentforge.model.part import TextPart
from tests.fakes.openai_server import FakeOpenAI, Script, reply

READ_TIMEOUT_SECONDS = 5.0


async def read_until(
    events: AsyncIterator[ServerEvent], done: Callable[[ServerEvent], bool]
) -> list[ServerEvent]:
    """Every event up to and including the first one `done` accepts (within a few seconds)."""
    seen: list[ServerEvent] = []

    async def read() -> None:
        async for event in events:
            seen.append(event)
            if done(event):
                return
        raise AssertionError(f"stream ended early: {[e.type for e in seen]}")

    await asyncio.wait_for(read(), READ_TIMEOUT_SECONDS)
    return seen


def of_type(kind: str) -> Callable[[ServerEvent], bool]:
    return lambda event: event.type == kind


async def test_health(forge: AsyncAgentForge) -> None:
    health = await forge.health()
    assert health["healthy"] is True
    assert health["version"]


async def test_session_create_get_list_update_delete(forge: AsyncAgentForge) -> None:
    first = await forge.create_session(title="first")
    second = await forge.create_session()
    assert first.title == "first"
    assert first.id.startswith("ses_")

    fetched = await forge.get_session(first.id)
    assert fetched.id == first.id and fetched.title == "first"

    listed = await forge.list_sessions()
    assert [s.id for s in listed] == [second.id, first.id]  # newest first
    assert [s.id for s in await forge.list_sessions(search="FIRST")] == [first.id]
    assert len(await forge.list_sessions(limit=1)) == 1

    renamed = await forge.update_session(first.id, title="renamed")
    assert renamed.title == "renamed"
    assert (await forge.get_session(first.id)).title == "renamed"

    assert await forge.delete_session(first.id) is True
    assert [s.id for s in await forge.list_sessions()] == [second.id]


async def test_unknown_session_maps_to_not_found_error(forge: AsyncAgentForge) -> None:
    with pytest.raises(AgentForgeError) as caught:
        await forge.get_session("ses_missing")
    assert caught.value.status == 404
    assert caught.value.name == "NotFoundError"
    assert "ses_missing" in caught.value.message


async def test_invalid_query_maps_to_validation_error(forge: AsyncAgentForge) -> None:
    session = await forge.create_session()
    with pytest.raises(AgentForgeError) as caught:
        await forge.messages(session.id, limit=-1)
    assert caught.value.status in (400, 422)
    assert caught.value.name == "ValidationError"
    assert "limit" in caught.value.message


async def test_unreachable_server_raises_connection_error() -> None:
    async with AsyncAgentForge("http://127.0.0.1:9", timeout=2) as client:
        with pytest.raises(AgentForgeConnectionError):
            await client.health()


async def test_events_start_connected_then_carry_session_changes(forge: AsyncAgentForge) -> None:
    async with forge.events() as stream:
        events = aiter(stream)
        first = await anext(events)
        assert first.type == "server.connected"
        assert first.seq is None

        session = await forge.create_session(title="watched")
        created = await read_until(events, of_type("session.created"))
        assert created[-1].session_id == session.id
        assert created[-1].properties["info"]["title"] == "watched"

        await forge.update_session(session.id, title="changed")
        updated = await read_until(events, of_type("session.updated"))
        assert updated[-1].properties["info"]["title"] == "changed"
        # Durable events carry the session's seq as their SSE id, increasing.
        assert created[-1].seq is not None and updated[-1].seq is not None
        assert updated[-1].seq > created[-1].seq
        assert stream.last_event_id == str(updated[-1].seq)


async def test_events_filtered_to_one_session(forge: AsyncAgentForge) -> None:
    watched = await forge.create_session()
    async with forge.events(watched.id) as stream:
        events = aiter(stream)
        await read_until(events, of_type("server.connected"))
        other = await forge.create_session()
        await forge.update_session(other.id, title="not for us")
        await forge.update_session(watched.id, title="for us")
        seen = await read_until(events, of_type("session.updated"))
    assert {event.session_id for event in seen if event.session_id} == {watched.id}
    assert seen[-1].properties["info"]["title"] == "for us"


async def test_resume_with_last_event_id_replays_missed_events(forge: AsyncAgentForge) -> None:
    session = await forge.create_session()
    async with forge.events(session.id) as stream:
        events = aiter(stream)
        await read_until(events, of_type("server.connected"))
        await forge.update_session(session.id, title="seen")
        await read_until(events, of_type("session.updated"))
        resume_from = stream.last_event_id
    await forge.update_session(session.id, title="missed")

    async with forge.events(session.id, last_event_id=resume_from) as stream:
        replayed = await read_until(aiter(stream), of_type("session.updated"))
    assert replayed[-1].properties["info"]["title"] == "missed"
    assert replayed[-1].seq == int(resume_from or 0) + 1


async def test_closing_the_event_stream_ends_the_server_subscription(
    forge: AsyncAgentForge, app: FastAPI
) -> None:
    bus = app.state.runtime.bus
    before = bus.subscriber_count
    async with forge.events() as stream:
        await read_until(aiter(stream), of_type("server.connected"))
        assert bus.subscriber_count == before + 1
    assert bus.subscriber_count == before


async def test_prompt_returns_the_answer_while_events_stream_the_text(
    forge: AsyncAgentForge, fake_openai: FakeOpenAI
) -> None:
    fake_openai.enqueue(reply("Hello from the fake model"))
    session = await forge.create_session()
    async with forge.events(session.id) as stream:
        events = aiter(stream)
        await read_until(events, of_type("server.connected"))
        answer = await forge.prompt(session.id, "Say hello")
        seen = await read_until(events, of_type("session.idle"))

    assert isinstance(answer.info, AssistantMessage)
    assert answer.info.error is None
    texts = [part.text for part in answer.parts if isinstance(part, TextPart)]
    assert texts == ["Hello from the fake model"]
    streamed = "".join(e.properties["delta"] for e in seen if e.type == "message.part.delta")
    assert streamed == "Hello from the fake model"
    assert fake_openai.requests[-1]["messages"][-1] == {"role": "user", "content": "Say hello"}


async def test_messages_pages_and_single_message(forge: AsyncAgentForge, fake_openai: FakeOpenAI) -> None:
    session = await forge.create_session()
    for text in ("one", "two"):
        fake_openai.enqueue(reply(f"answer {text}"))
        await forge.prompt(session.id, text)

    everything = await forge.messages(session.id)
    assert [m.info.role for m in everything.items] == ["user", "assistant", "user", "assistant"]
    assert everything.next_cursor is None

    newest = await forge.messages(session.id, limit=3)
    assert [m.info.id for m in newest.items] == [m.info.id for m in everything.items[1:]]
    assert newest.next_cursor is not None

    pages = [page async for page in forge.message_pages(session.id, page_size=3)]
    assert [len(page.items) for page in pages] == [3, 1]
    assert pages[-1].items[0].info.id == everything.items[0].info.id

    user = everything.items[0]
    assert isinstance(user.info, UserMessage)
    single = await forge.message(session.id, user.info.id)
    assert single.info.id == user.info.id
    assert [p.text for p in single.parts if isinstance(p, TextPart)] == ["one"]


async def test_no_reply_stores_the_user_message_only(forge: AsyncAgentForge, fake_openai: FakeOpenAI) -> None:
    session = await forge.create_session()
    stored = await forge.prompt(session.id, "just remember this", no_reply=True)
    assert isinstance(stored.info, UserMessage)
    assert fake_openai.requests == []


async def test_prompt_async_then_abort(forge: AsyncAgentForge, fake_openai: FakeOpenAI) -> None:
    gate = asyncio.Event()
    fake_openai.enqueue(Script().text("partial ").pause(gate).text("never sent").finish())
    session = await forge.create_session()
    try:
        async with forge.events(session.id) as stream:
            events = aiter(stream)
            await read_until(events, of_type("server.connected"))
            await forge.prompt_async(session.id, "start something long")
            await read_until(events, of_type("message.part.delta"))
            assert (await forge.status())[session.id].type == "busy"

            assert await forge.abort(session.id) is True
            await read_until(events, of_type("session.idle"))
    finally:
        gate.set()
    assert session.id not in await forge.status()
    last = (await forge.messages(session.id)).items[-1]
    assert isinstance(last.info, AssistantMessage)
    assert last.info.error is not None and last.info.error.name == "MessageAbortedError"


async def test_prompt_on_unknown_session_is_not_found(forge: AsyncAgentForge) -> None:
    with pytest.raises(AgentForgeError) as caught:
        await forge.prompt("ses_missing", "hello")
    assert caught.value.status == 404


async def test_closing_the_stream_ends_a_waiting_reader_cleanly(forge: AsyncAgentForge) -> None:
    stream = await forge.events().open()
    received: list[str] = []
    first = asyncio.Event()

    async def read_all() -> None:
        async for event in stream:
            received.append(event.type)
            first.set()

    reader = asyncio.create_task(read_all())
    await asyncio.wait_for(first.wait(), 2)  # the reader now waits for an event that will not come
    await stream.aclose()
    await asyncio.wait_for(reader, 2)  # ended without an error
    assert received == ["server.connected"]
