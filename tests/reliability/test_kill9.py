"""The kill -9 loop: a served process is killed at a random point of a streaming turn, restarted on
the same data, and checked: no session is left busy, every turn is closed, and everything a client
saw (each durable event is published only after it commits) is in the store.

Each kill hits several turns, started at staggered random moments, so one kill catches them in
different states (waiting for the model, streaming, just finished). Bounded: `ROUNDS` kills, so
ROUNDS + 1 server starts (a start is most of a round's time). Seeded from AGENTFORGE_KILL9_SEED
(printed on failure) so a failing sequence can be replayed.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import EventCollector
from tests.e2e.process import ServerFiles, ServerProcess, served
from tests.fakes.openai_server import FakeOpenAI, Script

ROUNDS = 3
TURNS_PER_ROUND = 4
WORDS = 16  # a reply streams this many words, 40 ms apart: a turn lasts about 0.7 s
pytestmark = pytest.mark.timeout(300)  # about 40 s of CPU; generous for a loaded machine


def _slow_reply(round_no: int) -> Script:
    script = Script()
    for word in range(WORDS):
        script.text(f"r{round_no}w{word} ", chunk_size=64).sleep(0.04)
    return script


@dataclass
class Seen:
    """What the client saw before the kill: the last durable frame's id (the tenant stream's ids are
    tenant positions) by session, and finished replies."""

    max_position: dict[str, int] = field(default_factory=dict)
    parts: dict[str, set[str]] = field(default_factory=dict)  # session -> part ids
    replies: dict[str, dict[str, Any]] = field(default_factory=dict)  # session -> 200 reply

    def note(self, events: EventCollector) -> None:
        for frame in events.frames:
            session = frame.properties.get("sessionID") or frame.properties.get("part", {}).get("sessionID")
            if frame.id is None or session is None:
                continue
            self.max_position[session] = max(self.max_position.get(session, 0), int(frame.id))
            if frame.type == "message.part.updated":
                self.parts.setdefault(session, set()).add(frame.properties["part"]["id"])


async def _one_round(
    server: ServerProcess, fake: FakeOpenAI, rng: random.Random, round_no: int, seen: Seen
) -> None:
    events = EventCollector()
    await events.start(server.client)
    turns: dict[str, asyncio.Task[Any]] = {}
    for _ in range(TURNS_PER_ROUND):
        session = (await server.client.post("/session")).json()["id"]
        fake.enqueue(_slow_reply(round_no))
        turns[session] = asyncio.create_task(_turn_after(server, session, rng.uniform(0.0, 0.8)))
    # Somewhere between "before the model answered" and "after the first turns ended".
    await asyncio.sleep(rng.uniform(0.1, 1.4))  # the moment of the kill, not a wait for a result
    server.signal(signal.SIGKILL)
    await server.exited()
    for session, turn in turns.items():
        if turn.done() and not turn.cancelled() and turn.exception() is None:
            response = turn.result()
            if response is not None and response.status_code == 200:
                seen.replies[session] = response.json()
        turn.cancel()
    await asyncio.gather(*turns.values(), return_exceptions=True)
    await events.stop()
    seen.note(events)


async def _turn_after(server: ServerProcess, session: str, delay: float) -> Any:
    await asyncio.sleep(delay)  # staggers the turns (the kill's random point), not a wait
    body = {"parts": [{"type": "text", "text": "go"}]}
    return await server.client.post(f"/session/{session}/message", json=body)


async def _check(server: ServerProcess, seen: Seen) -> None:
    assert (await server.client.get("/session/status")).json() == {}, "a session is still busy"
    for session in seen.max_position.keys() | seen.replies.keys():
        messages = (await server.client.get(f"/session/{session}/message")).json()
        for message in messages:
            if message["info"]["role"] == "assistant":
                assert message["info"]["time"].get("completed") is not None, message["info"]
        stored_parts = {part["id"] for message in messages for part in message["parts"]}
        assert seen.parts.get(session, set()) <= stored_parts, "a part the client saw was lost"
        if session in seen.replies:
            reply = seen.replies[session]
            [stored] = [m for m in messages if m["info"]["id"] == reply["info"]["id"]]
            assert stored["parts"] == reply["parts"], "a finished reply changed after the restart"
        if session in seen.max_position:
            await _assert_replays_up_to(server, seen.max_position[session])


async def _assert_replays_up_to(server: ServerProcess, position: int) -> None:
    """The store's event log holds the last event the client saw: a resume of the tenant stream just
    before it gets it."""
    events = EventCollector()
    await events.start(server.client, f"/event?after={position - 1}")
    frame = await events.wait_for(lambda f: f.id is not None, timeout=10)
    await events.stop()
    assert int(frame.id or 0) == position


async def test_kill_nine_at_random_points_loses_nothing_a_client_saw(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    seed = int(os.environ.get("AGENTFORGE_KILL9_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    files = ServerFiles(tmp_path)
    files.write_config(fake_openai)
    seen = Seen()
    try:
        for round_no in range(ROUNDS):
            async with served(files) as server:
                if round_no:
                    await _check(server, seen)
                await _one_round(server, fake_openai, rng, round_no, seen)
        async with served(files) as server:
            await _check(server, seen)
    except AssertionError as exc:
        raise AssertionError(f"{exc} (replay with AGENTFORGE_KILL9_SEED={seed})") from exc
    assert seen.max_position, "no round got as far as a durable event: the loop proved nothing"
