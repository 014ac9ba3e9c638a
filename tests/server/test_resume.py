"""Resuming `GET /event` (server/resume.py): complete replay, `stream.reset`, 400s, the tenant-wide
stream, and a subscriber cut off for lagging. Through HTTP, on SQLite and Postgres."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, delete

from agentforge.model.events import (
    DEFAULT_TENANT,
    PART_DELTA,
    PART_UPDATED,
    SESSION_IDLE,
    SESSION_UPDATED,
    Event,
)
from agentforge.store.schema import event as event_table
from tests.e2e.harness import EventCollector, Frame, LiveServer
from tests.fakes.openai_server import Script


async def _rename(live: LiveServer, session_id: str, count: int, *, concurrency: int = 16) -> None:
    """`count` PATCHes: one durable `session.updated` event each."""

    async def one(i: int) -> None:
        response = await live.client.patch(f"/session/{session_id}", json={"title": f"t{i}"})
        response.raise_for_status()

    for start in range(0, count, concurrency):
        await asyncio.gather(*(one(i) for i in range(start, min(count, start + concurrency))))


async def _stored(live: LiveServer, session_id: str | None) -> list[tuple[int, str, dict[str, Any]]]:
    """The log as the store holds it: (id on this stream, type, properties), all pages."""
    found: list[tuple[int, str, dict[str, Any]]] = []
    after = 0
    while page := await live.runtime.store.events_after(DEFAULT_TENANT, session_id, after, 1000):
        for e in page:
            key = e.seq if session_id is not None else e.position
            assert key is not None
            found.append((key, e.type, e.properties))
        after = found[-1][0]
    return found


def _durable(frames: list[Frame]) -> list[tuple[int, str, dict[str, Any]]]:
    return [(int(f.id), f.type, f.properties) for f in frames if f.id is not None]


async def _collect_until(live: LiveServer, path: str, last_id: int, **headers: str) -> EventCollector:
    collector = EventCollector()
    await collector.start(live.client, path, **headers)
    await collector.wait_for(lambda f: f.id is not None and int(f.id) >= last_id, timeout=60)
    await collector.stop()
    return collector


async def test_a_resume_replays_more_than_a_page_then_live_with_no_gap_and_no_duplicate(
    live: LiveServer,
) -> None:
    session = await live.create_session()
    await _rename(live, session["id"], 1100)
    collector = EventCollector()
    await collector.start(live.client, f"/event?sessionID={session['id']}", **{"Last-Event-ID": "5"})
    # Written while the replay runs: the hand-over to live events must neither drop nor repeat them.
    await _rename(live, session["id"], 60)
    stored = await _stored(live, session["id"])
    await collector.wait_for(lambda f: f.id is not None and int(f.id) == stored[-1][0], timeout=60)
    await collector.stop()

    assert len(stored) > 1100
    assert _durable(collector.frames) == stored[5:]


async def test_the_tenant_wide_stream_resumes_by_position(live: LiveServer) -> None:
    one, two = await live.create_session(), await live.create_session()
    await _rename(live, one["id"], 30)
    await _rename(live, two["id"], 30)
    stored = await _stored(live, None)
    assert [key for key, _, _ in stored] == list(range(1, len(stored) + 1))

    resumed = await _collect_until(live, "/event?after=7", stored[-1][0])

    assert _durable(resumed.frames) == stored[7:]
    assert {f.properties["info"]["id"] for f in resumed.frames if f.id is not None} == {one["id"], two["id"]}


async def test_a_point_ahead_of_the_log_gets_a_reset_with_the_current_position(live: LiveServer) -> None:
    session = await live.create_session()
    await _rename(live, session["id"], 3)
    collector = EventCollector()
    await collector.start(live.client, f"/event?sessionID={session['id']}", **{"Last-Event-ID": "999"})
    reset = await collector.wait_for(lambda f: f.type == "stream.reset")
    await _rename(live, session["id"], 1)
    await collector.wait_for(lambda f: f.id == "5")
    await collector.stop()

    assert reset.properties == {"position": 4, "reason": "ahead", "sessionID": session["id"]}
    assert reset.id == "4"
    assert [f.id for f in collector.frames if f.id is not None] == ["4", "5"]


async def test_a_point_the_log_no_longer_holds_gets_a_reset(live: LiveServer) -> None:
    session = await live.create_session()
    await _rename(live, session["id"], 5)

    def prune(conn: Connection) -> None:  # what a retention job would do
        conn.execute(
            delete(event_table).where(event_table.c.session_id == session["id"], event_table.c.seq <= 3)
        )

    await live.runtime.store.mutate(DEFAULT_TENANT, "prune", prune)
    path = f"/event?sessionID={session['id']}"

    pruned = await _collect_until(live, path + "&after=1", 6)
    held = await _collect_until(live, path + "&after=3", 6)

    assert [(f.type, f.properties.get("reason")) for f in pruned.frames[1:2]] == [("stream.reset", "pruned")]
    assert [f.id for f in held.frames if f.id is not None] == ["4", "5", "6"]


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "+1", "1 2", "١٢", "1_000", str(2**63), "9" * 40])
@pytest.mark.parametrize("where", ["after", "Last-Event-ID"])
async def test_a_bad_resume_point_answers_400_naming_the_field(
    live: LiveServer, where: str, value: str
) -> None:
    session = await live.create_session()
    path = f"/event?sessionID={session['id']}"
    if where == "after":
        response = await live.client.get(path, params={"after": value})
    else:
        response = await live.client.get(path, headers={b"Last-Event-ID": value.encode()})

    assert response.status_code == 400
    assert where in response.json()["data"]["message"]


async def test_the_largest_resume_point_is_accepted(live: LiveServer) -> None:
    session = await live.create_session()
    collector = EventCollector()
    await collector.start(live.client, f"/event?sessionID={session['id']}&after={2**63 - 1}")
    reset = await collector.wait_for(lambda f: f.type == "stream.reset")
    await collector.stop()
    assert reset.properties["reason"] == "ahead"


async def test_a_subscriber_cut_off_for_lagging_resumes_and_misses_nothing(live: LiveServer) -> None:
    live.app.state.sse_buffer = 20
    session = await live.create_session()
    collector = EventCollector()
    await collector.start(live.client, f"/event?sessionID={session['id']}")
    # Submitted in one go: the writer publishes them in batches far larger than the buffer.
    futures = [
        live.runtime.store.submit(
            Event(
                type=SESSION_UPDATED,
                properties={"sessionID": session["id"], "info": {**session, "title": f"t{i}"}},
                session_id=session["id"],
            )
        )
        for i in range(400)
    ]
    await asyncio.gather(*futures)
    await collector.wait_for(lambda f: f.type == "stream.lagged")
    await collector.stop()
    received = _durable(collector.frames)
    stored = await _stored(live, session["id"])

    live.app.state.sse_buffer = 10_000
    resumed = await _collect_until(
        live, f"/event?sessionID={session['id']}", stored[-1][0], **{"Last-Event-ID": str(received[-1][0])}
    )

    assert received + _durable(resumed.frames) == stored[1:]


async def test_resume_errors_come_before_the_stream(live: LiveServer) -> None:
    """A 400 is a plain JSON answer, not a stream that breaks later."""
    async with live.client.stream("GET", "/event", headers={"Last-Event-ID": str(2**63)}) as response:
        assert response.status_code == 400
        assert response.headers["content-type"].startswith("application/json")
        await response.aread()


# --- property: random disconnect points -------------------------------------------------------------

_steps = st.lists(st.tuples(st.integers(1, 40), st.integers(0, 6)), min_size=1, max_size=4)


async def _read_with_disconnects(
    live: LiveServer, session_id: str | None, steps: list[tuple[int, int]]
) -> list[tuple[int, str, dict[str, Any]]]:
    """From the log's start: read `cut` events, write `writes` events meanwhile, drop, resume; then read
    to the end. Returns every durable event received, in order."""
    path = "/event" if session_id is None else f"/event?sessionID={session_id}"
    target = session_id or (await live.create_session())["id"]
    received: list[tuple[int, str, dict[str, Any]]] = []
    for cut, writes in [*steps, (10**9, 0)]:
        cursor = received[-1][0] if received else 0
        collector = EventCollector()
        await collector.start(live.client, path, **{"Last-Event-ID": str(cursor)})
        await _rename(live, target, writes, concurrency=3)  # racing the replay and the hand-over
        end = (await _stored(live, session_id))[-1][0]
        if end > cursor:
            await collector.wait_for(_reached(collector, end, cut), timeout=30)
        await collector.stop()
        received.extend(_durable(collector.frames))
    return received


def _reached(collector: EventCollector, end: int, cut: int) -> Callable[[Frame], bool]:
    def reached(frame: Frame) -> bool:
        return frame.id is not None and (int(frame.id) >= end or len(_durable(collector.frames)) >= cut)

    return reached


async def test_random_disconnects_then_resumes_receive_exactly_the_stored_log(live: LiveServer) -> None:
    session = await live.create_session()
    await _rename(live, session["id"], 30)
    loop = asyncio.get_running_loop()

    # No shrinking: each example is a few HTTP streams, and a failing one is readable as it is.
    @settings(
        max_examples=6,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(tenant_wide=st.booleans(), steps=_steps)
    def resumes_lose_nothing(tenant_wide: bool, steps: list[tuple[int, int]]) -> None:
        async def check() -> None:
            session_id = None if tenant_wide else session["id"]
            received = await _read_with_disconnects(live, session_id, steps)
            assert received == await _stored(live, session_id)

        asyncio.run_coroutine_threadsafe(check(), loop).result(120)

    # Hypothesis drives the examples from a thread; each runs on the server's loop.
    await asyncio.to_thread(resumes_lose_nothing)


async def test_a_users_part_claiming_a_start_time_is_not_streamed_to_new_subscribers(
    live: LiveServer,
) -> None:
    sid = (await live.create_session())["id"]
    part = {"type": "text", "text": "u" * 1000, "time": {"start": 1}}
    sent = await live.client.post(f"/session/{sid}/message", json={"noReply": True, "parts": [part]})
    assert sent.status_code == 200, sent.text
    (message,) = (await live.client.get(f"/session/{sid}/message")).json()
    assert "time" not in message["parts"][0]

    collector = EventCollector()
    await collector.start(live.client, f"/event?sessionID={sid}")
    await live.client.patch(f"/session/{sid}", json={"title": "marker"})
    await collector.wait_for(lambda f: f.type == SESSION_UPDATED, timeout=30)
    await collector.stop()

    assert collector.of_type(PART_UPDATED) == []


async def test_a_client_connecting_mid_part_gets_the_text_so_far_then_the_rest(live: LiveServer) -> None:
    """The in-flight view (bus/inflight.py) is fed by every event this process publishes, from the
    bus's creation on: a turn of this process is always seen from its assistant message's first
    update, however late a client subscribes (docs/events.md, "Snapshots")."""
    sid = (await live.create_session())["id"]
    gate = asyncio.Event()
    live.fake.enqueue(Script().text("hello there ").pause(gate).text("and the rest").finish("stop"))
    early = EventCollector()
    await early.start(live.client, f"/event?sessionID={sid}")
    turn = asyncio.create_task(live.prompt(sid, "stream something"))

    def streamed(frames: list[Frame]) -> str:
        return "".join(f.properties["delta"] for f in frames if f.type == PART_DELTA)

    await early.wait_for(lambda _f: streamed(early.frames) == "hello there ")
    late = EventCollector()
    await late.start(live.client, f"/event?sessionID={sid}")
    gate.set()
    assert (await turn).status_code == 200
    await late.wait_for(lambda f: f.type == SESSION_IDLE)
    await early.stop()
    await late.stop()

    (snapshot,) = [f for f in late.frames if f.type == PART_UPDATED and f.id is None]
    assert snapshot.properties["part"]["text"] == "hello there "
    text = ""
    for frame in late.frames[late.frames.index(snapshot) :]:
        if frame.type == PART_UPDATED and frame.properties["part"]["id"] == snapshot.properties["part"]["id"]:
            text = frame.properties["part"]["text"]
        elif frame.type == PART_DELTA:
            text += frame.properties["delta"]
    assert text == "hello there and the rest"
