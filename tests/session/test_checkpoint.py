"""Streaming text survives (session/checkpoint.py, bus/inflight.py): the stored part grows while the
model streams, and a client connecting mid-part gets the part's text so far, then the deltas after it.
Through HTTP against the wire-level OpenAI fake, on SQLite and Postgres."""

from __future__ import annotations

import asyncio
from typing import Any

from agentforge.session.checkpoint import CHECKPOINT_CHARS
from tests.e2e.harness import EventCollector, Frame, LiveServer
from tests.fakes.openai_server import Script

HEAD = "".join(f"{i:05d} " for i in range(1500))  # 9000 characters before the model pauses
TAIL = "and that is all."
CHUNK = 100


async def _assistant_text(live: LiveServer, session_id: str) -> tuple[str, dict[str, Any] | None]:
    response = await live.client.get(f"/session/{session_id}/message")
    response.raise_for_status()
    for message in response.json():
        if message["info"]["role"] == "assistant":
            for part in message["parts"]:
                if part["type"] == "text":
                    return part["text"], part.get("time")
    return "", None


def _render(frames: list[Frame], part_id: str) -> str:
    """What a client shows for the part: a full update replaces the text, a delta appends."""
    text = ""
    for frame in frames:
        if frame.type == "message.part.updated" and frame.properties["part"]["id"] == part_id:
            text = frame.properties["part"]["text"]
        elif frame.type == "message.part.delta" and frame.properties["partID"] == part_id:
            text += frame.properties["delta"]
    return text


def _streamed(frames: list[Frame]) -> str:
    return "".join(f.properties["delta"] for f in frames if f.type == "message.part.delta")


async def _until(predicate: Any, timeout: float = 20.0) -> None:
    """Poll `predicate` (async) until it holds or the deadline passes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def test_a_streaming_part_is_stored_as_it_grows_and_reconnecting_clients_render_it_exactly(
    live: LiveServer,
) -> None:
    gate = asyncio.Event()
    live.fake.enqueue(Script().text(HEAD, chunk_size=CHUNK).pause(gate).text(TAIL, chunk_size=3))
    session = await live.create_session()
    path = f"/event?sessionID={session['id']}"
    early = EventCollector()
    await early.start(live.client, path)
    response = await live.client.post(
        f"/session/{session['id']}/prompt_async", json={"parts": [{"type": "text", "text": "go"}]}
    )
    assert response.status_code == 204
    await early.wait_for(lambda _: _streamed(early.frames) == HEAD, timeout=30)

    # While the model is paused mid-part: what GET shows is a prefix, at most one interval behind.
    async def checkpointed() -> bool:
        stored, _ = await _assistant_text(live, session["id"])
        return len(stored) >= len(HEAD) - CHECKPOINT_CHARS - CHUNK

    await _until(checkpointed)
    stored, time = await _assistant_text(live, session["id"])
    assert stored and HEAD.startswith(stored)
    assert time is not None and time.get("end") is None

    # Clients connecting now: one fresh, one resuming from the user message.
    late, resumed = EventCollector(), EventCollector()
    await late.start(live.client, path)
    await resumed.start(live.client, path, **{"Last-Event-ID": "2"})
    snapshot = late.frames[1]
    assert snapshot.type == "message.part.updated" and snapshot.id is None
    assert snapshot.properties["part"]["text"] == HEAD
    part_id = snapshot.properties["part"]["id"]

    gate.set()
    for collector in (early, late, resumed):
        await collector.wait_for(
            lambda f: f.type == "session.status" and f.properties["status"]["type"] == "idle", timeout=30
        )
        await collector.stop()
    final, time = await _assistant_text(live, session["id"])

    assert final == HEAD + TAIL and time is not None and time.get("end") is not None
    for collector in (early, late, resumed):
        assert _render(collector.frames, part_id) == final


async def test_checkpoints_are_coalesced_not_one_write_per_delta(live: LiveServer) -> None:
    text = "x" * 3000
    live.fake.enqueue(Script().text(text, chunk_size=1))
    session = await live.create_session()
    before = live.runtime.store.committed_batches

    response = await live.prompt(session["id"], "go")

    assert response.status_code == 200
    assert (await _assistant_text(live, session["id"]))[0] == text
    # 3000 deltas; a few hundred milliseconds of streaming: a handful of checkpoints, not thousands.
    assert live.runtime.store.committed_batches - before < 100
