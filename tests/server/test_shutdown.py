"""SIGTERM on a served process: new turns get 503, running ones finish within `shutdown_grace` or are
closed as interrupted, and every event stream ends with `server.shutdown`."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import httpx2
import pytest

from agentforge.model.message import AssistantMessage
from agentforge.model.part import Part, TextPart
from agentforge.store.store import Store
from tests.e2e.harness import EventCollector
from tests.e2e.process import ServerFiles, ServerProcess, served
from tests.fakes.openai_server import FakeOpenAI, Script

pytestmark = pytest.mark.timeout(120)
# uvicorn re-raises the signal it handled once it has shut down cleanly.
CLEAN_EXIT = (0, -signal.SIGTERM)


async def _start_paused_turn(
    server: ServerProcess, events: EventCollector, gate: asyncio.Event, fake: FakeOpenAI
) -> tuple[str, asyncio.Task[httpx2.Response]]:
    """A turn whose reply streams "Hello " and then waits on `gate`; returns once "Hello " streamed."""
    fake.enqueue(Script().text("Hello ").pause(gate).text("world"))
    session = (await server.client.post("/session")).json()["id"]
    body = {"parts": [{"type": "text", "text": "hi"}]}
    turn = asyncio.create_task(server.client.post(f"/session/{session}/message", json=body))
    await events.wait_for(lambda f: f.type == "message.part.delta", timeout=30)
    return session, turn


async def _stored_reply(store: Store, session_id: str) -> tuple[AssistantMessage, list[Part]]:
    [_, reply] = (await store.list_messages("default", session_id))[0]
    assert isinstance(reply.info, AssistantMessage)
    return reply.info, reply.parts


async def test_sigterm_lets_a_running_turn_finish_and_refuses_new_ones(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    files = ServerFiles(tmp_path)
    files.write_config(fake_openai, server={"shutdown_grace": 60})
    gate = asyncio.Event()
    async with served(files) as server:
        events = EventCollector()
        await events.start(server.client)
        session, turn = await _start_paused_turn(server, events, gate, fake_openai)
        other = (await server.client.post("/session")).json()["id"]

        server.signal(signal.SIGTERM)
        # Draining: readiness fails at once, a new prompt is refused before anything is stored.
        deadline = asyncio.get_running_loop().time() + 10
        while (ready := await server.client.get("/global/ready")).status_code == 200:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        assert ready.status_code == 503 and "lifecycle" in ready.json()["failed"]
        refused = await server.client.post(
            f"/session/{other}/message", json={"parts": [{"type": "text", "text": "late"}]}
        )
        assert refused.status_code == 503
        assert refused.json()["name"] == "ShuttingDownError"
        assert refused.headers["retry-after"] == "1"
        assert (await server.client.get(f"/session/{other}/message")).json() == []

        gate.set()  # the running turn finishes within the grace
        reply = (await turn).json()
        assert reply["info"]["finish"] == "stop"
        assert [p["text"] for p in reply["parts"] if p["type"] == "text"] == ["Hello world"]
        last = await events.wait_for(lambda f: f.type == "server.shutdown", timeout=30)
        assert last is events.frames[-1]
        assert await server.exited() in CLEAN_EXIT
        await events.stop()
    store = await Store.open(f"sqlite:///{files.database}")
    try:
        info, parts = await _stored_reply(store, session)
        assert info.error is None and info.time.completed is not None
        assert [p.text for p in parts if isinstance(p, TextPart)] == ["Hello world"]
    finally:
        await store.close()


async def test_sigterm_closes_a_turn_still_running_after_the_grace_as_interrupted(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    files = ServerFiles(tmp_path)
    files.write_config(fake_openai, server={"shutdown_grace": 0.5})
    gate = asyncio.Event()  # never set: the model hangs past the grace
    async with served(files) as server:
        events = EventCollector()
        await events.start(server.client)
        session, turn = await _start_paused_turn(server, events, gate, fake_openai)
        server.signal(signal.SIGTERM)
        reply = (await turn).json()
        assert reply["info"]["error"]["name"] == "MessageAbortedError"
        await events.wait_for(lambda f: f.type == "server.shutdown", timeout=30)
        assert await server.exited() in CLEAN_EXIT
        await events.stop()
    # What the client saw is what was stored: the turn is closed, its text kept, nothing left open.
    store = await Store.open(f"sqlite:///{files.database}")
    try:
        info, parts = await _stored_reply(store, session)
        assert info.error is not None and info.error.name == "MessageAbortedError"
        assert info.time.completed is not None
        assert [p.text for p in parts if isinstance(p, TextPart)] == ["Hello "]
        assert await store.open_assistant_messages() == []
    finally:
        await store.close()
