"""Replicas hardened (runtime/cluster.py, store/cluster.py): status on every replica, notifications
nobody else can forge, a bounded inbox, and cluster connections that come back after Postgres ends
them. Two in-process servers on one Postgres schema (the same code as two processes, without
importing the app twice), driven over HTTP against the wire-level fake provider."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest

from agentforge.runtime.cluster import INBOX_LIMIT, MAX_PIECES, Cluster
from agentforge.store import parse_database_url
from agentforge.store.cluster import channel_name
from tests.databases import POSTGRES_URL_ENV, _postgres_schema
from tests.e2e.harness import EventCollector, LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script, reply

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    async with _postgres_schema(migrated=True) as url:
        yield url


@contextlib.asynccontextmanager
async def _pair(tmp_path: Path, url: str, fake: FakeOpenAI) -> AsyncIterator[tuple[LiveServer, LiveServer]]:
    config = fake_provider_config(fake)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    async with (
        start_live_server(tmp_path / "a", fake, config, database_url=url) as a,
        start_live_server(tmp_path / "b", fake, config, database_url=url, directory=a.workspace) as b,
    ):
        yield a, b


@contextlib.asynccontextmanager
async def _superuser() -> AsyncIterator[Any]:
    """A raw connection as the test server's superuser: another role than the replicas' own."""
    base = parse_database_url(os.environ[POSTGRES_URL_ENV]).url
    conn = await asyncpg.connect(base.set(drivername="postgresql").render_as_string(hide_password=False))
    try:
        yield conn
    finally:
        await conn.close()


def _cluster(server: LiveServer) -> Cluster:
    cluster = server.runtime.cluster
    assert cluster is not None
    return cluster


def _channel(url: str) -> str:
    return channel_name(parse_database_url(url).schema)


async def _until(predicate: Callable[[], Awaitable[bool]], what: str, timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.02)


async def _status(server: LiveServer) -> dict[str, Any]:
    response = await server.client.get("/session/status")
    response.raise_for_status()
    found: dict[str, Any] = response.json()
    return found


async def _start_gated_turn(
    a: LiveServer, fake: FakeOpenAI, gate: asyncio.Event
) -> tuple[str, asyncio.Task[Any]]:
    fake.enqueue(Script().text("half an answer").pause(gate).finish())
    calls = len(fake.requests)
    session_id: str = (await a.create_session())["id"]
    turn = asyncio.create_task(a.prompt(session_id, "take your time"))

    async def called() -> bool:
        return len(fake.requests) > calls

    await _until(called, "A's loop called the model")
    return session_id, turn


async def test_status_on_every_replica_lists_the_sessions_any_replica_runs(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b):
        gate = asyncio.Event()
        session_id, turn = await _start_gated_turn(a, fake_openai, gate)
        idle_id = (await b.create_session())["id"]

        assert await _status(a) == {session_id: {"type": "busy"}}
        assert await _status(b) == {session_id: {"type": "busy"}}  # from the lease, not B's memory
        assert idle_id not in await _status(b)
        gate.set()
        assert (await turn).status_code == 200

        async def idle_on_b() -> bool:
            return await _status(b) == {}

        await _until(idle_on_b, "B saw the run end")
        assert await _status(a) == {}


async def test_forged_and_replayed_notifications_have_no_effect(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    channel = _channel(postgres_url)
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b), _superuser() as raw:
        heard: list[str] = []
        await raw.add_listener(channel, lambda _c, _pid, _ch, payload: heard.append(payload))
        on_b = EventCollector()
        await on_b.start(b.client)
        gate = asyncio.Event()
        session_id, turn = await _start_gated_turn(a, fake_openai, gate)

        async def sealed_heard() -> bool:
            return bool(heard)

        await _until(sealed_heard, "the replicas' notifications reached an outsider")
        # What it heard means nothing to it: sealed, not JSON.
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(heard[0])
        forged_abort = orjson.dumps({"r": "forger", "k": "abort", "s": session_id}).decode()
        forged_delta = {
            "type": "message.part.delta",
            "properties": {"sessionID": session_id, "delta": "FORGED"},
            "session": session_id,
            "tenant": "default",
            "id": "evt_forged",
        }
        forged_events = orjson.dumps({"r": "forger", "k": "events", "items": [forged_delta]}).decode()
        refused_before = _cluster(a).link.refused + _cluster(b).link.refused
        for payload in (forged_abort, forged_events, heard[0]):  # the last: a sealed one, replayed
            await raw.execute("SELECT pg_notify($1, $2)", channel, payload)

        async def all_refused() -> bool:
            # Each refuses both forgeries; the replay is refused by the replica that did not seal
            # it (its sender drops it as its own).
            return _cluster(a).link.refused + _cluster(b).link.refused == refused_before + 5

        await _until(all_refused, "both replicas heard and refused the notifications")
        # The turn was not aborted: it still runs, and finishes with the model's answer.
        assert await _status(b) == {session_id: {"type": "busy"}}
        gate.set()
        answer = (await turn).json()
        assert "error" not in answer["info"]
        assert [p["text"] for p in answer["parts"] if p["type"] == "text"] == ["half an answer"]
        await on_b.wait_for(lambda f: f.type == "session.idle" and f.properties["sessionID"] == session_id)
        await on_b.stop()
        assert not [f for f in on_b.frames if f.id == "evt_forged" or "FORGED" in str(f.properties)]


async def test_a_replica_that_falls_behind_drops_the_oldest_events_and_its_subscribers_resync(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b):
        slow_id = (await a.create_session())["id"]
        other_id = (await a.create_session())["id"]
        slow, other = EventCollector(), EventCollector()
        await slow.start(b.client, f"/event?sessionID={slow_id}")
        await other.start(b.client, f"/event?sessionID={other_id}")
        cluster = _cluster(b)

        def delta(n: int) -> str:
            item = {
                "type": "message.part.delta",
                "properties": {"sessionID": slow_id, "delta": str(n)},
                "session": slow_id,
                "tenant": "default",
                "id": f"evt_{n:06d}",
            }
            return orjson.dumps({"r": "peer", "k": "events", "items": [item]}).decode()

        # A burst heard before this replica's receiving loop gets a turn (asyncpg hands each
        # notification of a read to the listener at once): more than the inbox holds.
        for n in range(INBOX_LIMIT + 10):
            cluster._heard(delta(n))
        assert cluster.dropped == 10

        lagged = await slow.wait_for(lambda f: f.type == "stream.lagged")
        # What it got before being cut off is in order and starts after the dropped ones.
        deltas = [f.properties["delta"] for f in slow.frames if f.type == "message.part.delta"]
        assert deltas == [str(n) for n in range(10, 10 + len(deltas))]
        assert lagged.type == "stream.lagged"
        # A subscriber of another session lost nothing and stays connected.
        assert not [f for f in other.frames if f.type == "stream.lagged"]
        fake_openai.enqueue(reply("still here"))
        assert (await a.prompt(other_id, "hello")).status_code == 200
        await other.wait_for(lambda f: f.type == "session.idle")
        await slow.stop()
        await other.stop()


async def _terminate(raw: Any, pids: list[int]) -> None:
    for pid in pids:
        assert await raw.fetchval("SELECT pg_terminate_backend($1)", pid)


async def test_terminated_cluster_connections_stop_the_runs_and_come_back(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b), _superuser() as raw:
        link = _cluster(a).link
        before = link.backend_pids()
        on_a = EventCollector()
        await on_a.start(a.client)
        gate = asyncio.Event()
        session_id, turn = await _start_gated_turn(a, fake_openai, gate)
        assert link.holds == {session_id}

        await _terminate(raw, list(before.values()))  # leases, notify, listen
        # The leases ended with their connection: A stops its run instead of writing on without it.
        answer = (await asyncio.wait_for(turn, 15)).json()
        assert answer["info"]["error"]["name"] == "MessageAbortedError"
        gate.set()

        async def reopened() -> bool:
            pids = link.backend_pids()
            return link.reconnects >= 2 and pids.get("leases") not in (None, before["leases"])

        await _until(reopened, "A opened its lease and listening connections again")
        assert link.holds == set()
        assert link.backend_pids()["listen"] != before["listen"]
        # Its subscribers were told they may have missed something while it was not listening.
        await on_a.wait_for(lambda f: f.type == "stream.lagged")
        await on_a.stop()

        # Listening again: a turn run by B reaches A's new subscribers, and A counts B as alive.
        assert await link.replica_count() == 2
        on_a = EventCollector()
        await on_a.start(a.client)
        fake_openai.enqueue(reply("from b"))
        b_session = (await b.create_session())["id"]
        assert (await b.prompt(b_session, "hello")).status_code == 200
        await on_a.wait_for(lambda f: f.type == "session.idle" and f.properties["sessionID"] == b_session)
        await on_a.stop()

        # Leasing and notifying again: A runs the session once more, and B's subscribers see it.
        on_b = EventCollector()
        await on_b.start(b.client, f"/event?sessionID={session_id}")
        fake_openai.enqueue(reply("after the restart"))
        again = await a.prompt(session_id, "again")
        assert again.status_code == 200
        assert [p["text"] for p in again.json()["parts"] if p["type"] == "text"] == ["after the restart"]
        await on_b.wait_for(lambda f: f.type == "message.part.delta")
        await on_b.wait_for(lambda f: f.type == "session.idle")
        await on_b.stop()
        assert link.backend_pids()["notify"] != before["notify"]

        async def idle_everywhere() -> bool:
            return await _status(a) == {} and await _status(b) == {}

        await _until(idle_everywhere, "the run's lease was given back")


async def test_a_payload_missing_a_piece_is_discarded_and_subscribers_resync(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b):
        session_id = (await a.create_session())["id"]
        cluster = _cluster(b)

        def piece(index: int, count: int) -> str:
            return orjson.dumps({"r": "peer", "k": "piece", "i": index, "n": count, "d": "x"}).decode()

        for pieces in (
            [piece(1, 3)],  # the second piece of a payload whose first one this replica never heard
            # More pieces than a payload may have: the first is refused, so the second misses it.
            [piece(0, MAX_PIECES + 1), piece(1, MAX_PIECES + 1)],
        ):
            stream = EventCollector()
            await stream.start(b.client, f"/event?sessionID={session_id}")
            for heard in pieces:
                cluster._heard(heard)
            await stream.wait_for(lambda f: f.type == "stream.lagged")
            await stream.stop()
            assert [f.type for f in stream.frames] == ["server.connected", "stream.lagged"]


def _local_backend(pid: int) -> bool:
    """Whether `pid` is a Postgres server process here (never signal another process)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        os.kill(pid, 0)
    except (OSError, PermissionError):
        return False
    return cmdline.startswith(b"postgres")


async def test_a_lease_connection_that_stops_answering_is_ended_and_its_runs_stopped(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, _b):
        link = _cluster(a).link
        link.ping_interval, link.ping_timeout = 0.05, 0.5
        gate = asyncio.Event()
        session_id, turn = await _start_gated_turn(a, fake_openai, gate)
        stuck = link.backend_pids()["leases"]
        # Its server process stops answering (as behind a network lost without a word): the
        # process of this test's own connection, when Postgres runs here and may be signalled.
        if not _local_backend(stuck):
            gate.set()
            pytest.skip("Postgres does not run on this machine as a user this test may signal")
        os.kill(stuck, signal.SIGSTOP)
        try:
            answer = (await asyncio.wait_for(turn, 15)).json()
            assert answer["info"]["error"]["name"] == "MessageAbortedError"
            assert link.holds == set()
        finally:
            os.kill(stuck, signal.SIGCONT)  # it finds its client gone and exits, freeing its locks
        gate.set()

        async def reopened() -> bool:
            return link.backend_pids().get("leases") not in (None, stuck)

        await _until(reopened, "A opened its lease connection again")
        fake_openai.enqueue(reply("answering again"))
        again = await a.prompt(session_id, "again")
        assert [p["text"] for p in again.json()["parts"] if p["type"] == "text"] == ["answering again"]
