"""`AgentForge` (sync) against the real app, in-process through `BlockingASGITransport`.

The fake provider serves from the test's event loop, so each scenario runs in a worker thread; the
app itself runs on the transport's own loop thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from fastapi import FastAPI

from agentforge.client import AgentForge, AgentForgeError, BlockingASGITransport, ServerEvent
from agentforge.model.message import AssistantMessage
from agentforge.model.part import TextPart
from tests.client.conftest import BASE_URL
from tests.fakes.openai_server import FakeOpenAI, reply

T = TypeVar("T")


async def in_thread(app: FastAPI, scenario: Callable[[AgentForge], T]) -> T:
    def run() -> T:
        with AgentForge(BASE_URL, transport=BlockingASGITransport(app)) as client:
            return scenario(client)

    return await asyncio.wait_for(asyncio.to_thread(run), 20)


def read_until(events: Iterator[ServerEvent], kind: str) -> list[ServerEvent]:
    seen = []
    for event in events:
        seen.append(event)
        if event.type == kind:
            return seen
    raise AssertionError(f"stream ended before {kind}: {[e.type for e in seen]}")


async def test_sessions_crud_and_not_found(app: FastAPI) -> None:
    def scenario(forge: AgentForge) -> None:
        assert forge.health()["healthy"] is True
        session = forge.create_session(title="sync")
        assert forge.get_session(session.id).title == "sync"
        assert [s.id for s in forge.list_sessions()] == [session.id]
        assert forge.update_session(session.id, title="renamed").title == "renamed"
        assert forge.delete_session(session.id) is True
        with pytest.raises(AgentForgeError) as caught:
            forge.get_session(session.id)
        assert (caught.value.status, caught.value.name) == (404, "NotFoundError")

    await in_thread(app, scenario)


async def test_event_stream_delivers_session_events(app: FastAPI) -> None:
    def scenario(forge: AgentForge) -> None:
        with forge.events() as stream:
            events = iter(stream)
            assert next(events).type == "server.connected"
            session = forge.create_session(title="seen")
            created = read_until(events, "session.created")[-1]
            assert created.session_id == session.id
            forge.update_session(session.id, title="seen again")
            updated = read_until(events, "session.updated")[-1]
            assert updated.properties["info"]["title"] == "seen again"
            assert stream.last_event_id == str(updated.seq)

    await in_thread(app, scenario)


async def test_closing_the_sync_stream_ends_the_server_subscription(app: FastAPI) -> None:
    def scenario(forge: AgentForge) -> tuple[int, int]:
        with forge.events() as stream:
            read_until(iter(stream), "server.connected")
            bus = app.state.runtime.bus  # the lifespan started with the first request
            during = bus.subscriber_count
        return during, bus.subscriber_count

    during, after = await in_thread(app, scenario)
    assert (during, after) == (1, 0)


async def test_prompt_and_read_the_turn_from_the_stream(app: FastAPI, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(reply("sync hello"))

    def scenario(forge: AgentForge) -> None:
        session = forge.create_session()
        with forge.events(session.id) as stream:
            events = iter(stream)
            read_until(events, "server.connected")
            answer = forge.prompt(session.id, "hi")
            # The turn's events waited in the stream while the prompt ran.
            seen = read_until(events, "session.idle")
        assert isinstance(answer.info, AssistantMessage)
        assert [p.text for p in answer.parts if isinstance(p, TextPart)] == ["sync hello"]
        assert "".join(e.properties["delta"] for e in seen if e.type == "message.part.delta") == "sync hello"
        pages = list(forge.message_pages(session.id, page_size=1))
        assert [page.items[0].info.role for page in pages] == ["assistant", "user"]

    await in_thread(app, scenario)


async def test_closing_from_another_thread_ends_the_reader(app: FastAPI) -> None:
    def scenario(forge: AgentForge) -> list[str]:
        received: list[str] = []
        stream = forge.events().open()

        failures: list[BaseException] = []
        first = threading.Event()

        def read_all() -> None:
            try:
                for event in stream:
                    received.append(event.type)
                    first.set()
            except BaseException as exc:
                failures.append(exc)

        reader = threading.Thread(target=read_all)
        reader.start()
        assert first.wait(2)  # the reader now blocks waiting for the next event
        stream.close()
        reader.join(2)
        assert not reader.is_alive()
        assert failures == []
        return received

    assert await in_thread(app, scenario) == ["server.connected"]
