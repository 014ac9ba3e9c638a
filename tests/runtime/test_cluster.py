"""Replicas hardened (runtime/cluster.py, store/cluster.py): status on every replica, notifications
nobody else can forge, a bounded inbox, and cluster connections that come back after Postgres ends
them. Two in-process servers on one Postgres schema (the same code as two processes, without
importing the app twice), driven over HTTP against the wire-level fake provider."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx2
import orjson
import pytest

from agentforge.identity.apikeys import mint_api_key
from agentforge.identity.model import MEMBER
from agentforge.model.events import PART_DELTA, Event
from agentforge.runtime.cluster import DELTA_MERGE_CHARS, INBOX_LIMIT, MAX_PIECES, Cluster, _items
from agentforge.store import parse_database_url
from agentforge.store.cluster import NOTIFY_LIMIT, channel_name
from tests.cli.test_run_humans import QUESTION
from tests.databases import POSTGRES_URL_ENV, _postgres_schema
from tests.e2e.harness import EventCollector, LiveServer, fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def postgres_url() -> AsyncIterator[str]:
    async with _postgres_schema(migrated=True) as url:
        yield url


@contextlib.asynccontextmanager
async def _pair(
    tmp_path: Path, url: str, fake: FakeOpenAI, **config_extra: Any
) -> AsyncIterator[tuple[LiveServer, LiveServer]]:
    config = {**fake_provider_config(fake), **config_extra}
    async with (
        _replica(tmp_path, "a", url, fake, config=config) as a,
        _replica(tmp_path, "b", url, fake, directory=a.workspace, config=config) as b,
    ):
        yield a, b


@contextlib.asynccontextmanager
async def _replica(
    tmp_path: Path,
    name: str,
    url: str,
    fake: FakeOpenAI,
    directory: Path | None = None,
    config: dict[str, Any] | None = None,
) -> AsyncIterator[LiveServer]:
    (tmp_path / name).mkdir()
    async with start_live_server(
        tmp_path / name, fake, config or fake_provider_config(fake), database_url=url, directory=directory
    ) as server:
        yield server


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


async def _asking(a: LiveServer, fake_openai: FakeOpenAI) -> tuple[asyncio.Task[Any], dict[str, Any]]:
    """A turn on A whose tool call asks QUESTION, and the question once A lists it."""
    session_id = (await a.create_session())["id"]
    fake_openai.enqueue(call("question", QUESTION), reply("Postgres then."))
    turn = asyncio.create_task(a.prompt(session_id, "pick a database"))

    async def asked() -> bool:
        return bool((await a.client.get("/question")).json())

    await _until(asked, "the tool call asked its question")
    [request] = (await a.client.get("/question")).json()
    return turn, request


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


async def _until_counted(cluster: Cluster, *, alone: bool) -> None:
    """Until the replica has counted itself alone (or not)."""

    async def counted() -> bool:
        return cluster.alone == alone

    await _until(counted, f"the replica counted itself {'alone' if alone else 'among others'}")


@contextlib.asynccontextmanager
async def _writes_held(raw: Any, url: str, session_id: str) -> AsyncIterator[None]:
    """While inside, the session's writes wait: this holds the lock each writer's transaction takes
    first for the session (store/batch.py)."""
    schema = parse_database_url(url).schema
    await raw.execute("BEGIN")
    try:
        await raw.execute(
            "SELECT pg_advisory_xact_lock(hashtext('agentforge.seq'), hashtext($1 || ':' || $2))",
            schema,
            session_id,
        )
        yield
    finally:
        await raw.execute("ROLLBACK")


async def _leased_ahead(server: LiveServer, session_id: str) -> None:
    """Until the replica holds the session's lease (taken while its prompt's message waits)."""
    link = _cluster(server).link

    async def leased() -> bool:
        return link.holds == {session_id}

    await _until(leased, "the replica took the session's lease")


async def _turn_heard(a: LiveServer, b: LiveServer, fake: FakeOpenAI) -> None:
    """A turn run on A in a new session reaches a subscriber of that session on B."""
    session_id = (await a.create_session())["id"]
    on_b = EventCollector()
    await on_b.start(b.client, f"/event?sessionID={session_id}")
    fake.enqueue(reply("heard on b"))
    assert (await a.prompt(session_id, "hello")).status_code == 200
    await on_b.wait_for(lambda f: f.type == "session.idle")
    await on_b.stop()


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


def _delta(tenant_id: str, session_id: str, text: str) -> Event:
    properties = {
        "sessionID": session_id,
        "messageID": "msg_x",
        "partID": "prt_x",
        "field": "text",
        "delta": text,
    }
    return Event(type=PART_DELTA, properties=properties, session_id=session_id, tenant_id=tenant_id)


def _pieces_of(sender: Cluster, event: Event) -> list[str]:
    """What `sender` says on the channel for `event`: a large one goes in pieces, each under the limit."""
    pieces = sender._payloads([event])
    assert len(pieces) > 1
    assert all(len(piece.encode()) <= NOTIFY_LIMIT for piece in pieces)
    return pieces


async def test_consecutive_deltas_of_one_part_are_announced_joined_in_order(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, _b):
        session_id = (await a.create_session())["id"]
        first = [_delta("default", session_id, "ab"[i % 2]) for i in range(3000)]
        other = {**first[0].properties, "partID": "prt_y", "delta": "y"}
        between = Event(type="session.status", properties={"sessionID": session_id}, session_id=session_id)
        events = [
            *first,
            *(Event(type=PART_DELTA, properties=dict(other), session_id=session_id) for _ in range(5)),
            between,
            *(_delta("default", session_id, "c") for _ in range(3)),
        ]
        payloads = [orjson.loads(payload) for payload in _cluster(a)._payloads(events)]

        items = [item for payload in payloads for item in payload["items"]]
        said = [
            (item["type"], item["properties"].get("partID"), item["properties"].get("delta"))
            for item in items
        ]
        text = "ab" * 1500
        assert said == [
            (PART_DELTA, "prt_x", text[:DELTA_MERGE_CHARS]),
            (PART_DELTA, "prt_x", text[DELTA_MERGE_CHARS:]),
            (PART_DELTA, "prt_y", "yyyyy"),
            ("session.status", None, None),
            (PART_DELTA, "prt_x", "ccc"),
        ]
        ids = [item["id"] for item in items][:3]
        assert ids == [first[0].id, first[DELTA_MERGE_CHARS].id, events[3000].id]
        assert first[0].properties["delta"] == "a"  # what local subscribers got is left as it was


async def test_a_payload_missing_a_piece_is_discarded_and_only_its_subscribers_resync(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b):
        session_id = (await a.create_session())["id"]
        bystander_id = (await a.create_session())["id"]
        cluster = _cluster(b)
        # Control characters take 6 bytes each once escaped: the pieces still fit a notification.
        pieces = _pieces_of(_cluster(a), _delta("default", session_id, "\x01" * 9000))

        def piece(index: int, count: int) -> str:  # as a replica before pieces said whom they concern
            return orjson.dumps({"r": "peer", "k": "piece", "i": index, "n": count, "d": "x"}).decode()

        bystander = EventCollector()
        await bystander.start(b.client, f"/event?sessionID={bystander_id}")
        for heard, everyone in (
            ([pieces[0], *pieces[2:]], False),  # a piece in the middle was lost
            (pieces[1:], False),  # the first piece was lost (before this replica listened)
            ([pieces[0], pieces[1], pieces[0]], False),  # the end of the last payload never came
            # Whom the payload concerns is unknown: everyone resyncs (fail closed).
            ([piece(1, 3)], True),
            # More pieces than a payload may have: the first is refused, so the second misses it.
            ([piece(0, MAX_PIECES + 1), piece(1, MAX_PIECES + 1)], True),
        ):
            stream = EventCollector()
            await stream.start(b.client, f"/event?sessionID={session_id}")
            for notification in heard:
                cluster._heard(notification)
            await stream.wait_for(lambda f: f.type == "stream.lagged")
            await stream.stop()
            assert [f.type for f in stream.frames] == ["server.connected", "stream.lagged"]
            if everyone:
                await bystander.wait_for(lambda f: f.type == "stream.lagged")
                await bystander.stop()
                bystander = EventCollector()
                await bystander.start(b.client, f"/event?sessionID={bystander_id}")
            else:  # what is heard next reaches the other session's subscriber: it was never cut off
                cluster._heard(_events_from("peer", _delta("default", bystander_id, "still here")))
                await bystander.wait_for(
                    lambda f: f.type == PART_DELTA and f.properties["delta"] == "still here"
                )
                assert not bystander.of_type("stream.lagged")
        await bystander.stop()


def _events_from(sender: str, event: Event) -> str:
    """What a replica named `sender` says on the channel for `event` (in one notification)."""
    return orjson.dumps({"r": sender, "k": "events", "items": _items([event])}).decode()


@dataclass
class _Tenant:
    name: str
    on_a: httpx2.AsyncClient
    on_b: httpx2.AsyncClient

    async def create_session(self) -> str:
        response = await self.on_a.post("/session")
        response.raise_for_status()
        session_id: str = response.json()["id"]
        return session_id

    async def prompt(self, session_id: str, text: str) -> None:
        body = {"parts": [{"type": "text", "text": text}]}
        response = await self.on_a.post(f"/session/{session_id}/message", json=body)
        assert response.status_code == 200, response.text


@contextlib.asynccontextmanager
async def _tenants(a: LiveServer, b: LiveServer, *names: str) -> AsyncIterator[list[_Tenant]]:
    """A member's API key per tenant, and a client with it on each replica."""
    async with contextlib.AsyncExitStack() as stack:
        tenants = []
        for name in names:
            minted = mint_api_key(name, "cluster-test", frozenset({MEMBER}), "test")
            await a.runtime.store.create_api_key(minted.stored)
            headers = {"Authorization": f"Bearer {minted.token}"}
            on_a, on_b = [
                await stack.enter_async_context(
                    httpx2.AsyncClient(base_url=s.url, headers=headers, timeout=30)
                )
                for s in (a, b)
            ]
            tenants.append(_Tenant(name, on_a, on_b))
        yield tenants


async def test_a_tenant_flooding_the_inbox_with_pieces_cuts_off_only_its_own_streams(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    """One tenant's large deltas overflow a replica's inbox: the pieces dropped are its own, so only
    the streams that would have had them lag (and resume from the log); another tenant's streams,
    and even that tenant's other sessions, go on uninterrupted."""
    async with (
        _pair(tmp_path, postgres_url, fake_openai, auth={"required": True}) as (a, b),
        _tenants(a, b, "acme", "globex") as (acme, globex),
    ):
        flooded, quiet, other = (
            await acme.create_session(),
            await acme.create_session(),
            await globex.create_session(),
        )
        streams = {
            "flooded": (acme.on_b, f"/event?sessionID={flooded}"),
            "acme": (acme.on_b, "/event"),  # tenant-wide: it would have had the flooded session's
            "quiet": (acme.on_b, f"/event?sessionID={quiet}"),
            "other": (globex.on_b, f"/event?sessionID={other}"),
            "globex": (globex.on_b, "/event"),
        }
        on_b = {name: EventCollector() for name in streams}
        for name, (client, path) in streams.items():
            await on_b[name].start(client, path)

        # A real large delta crosses the sealed channel in pieces and arrives whole.
        fake_openai.enqueue(Script().text("y" * 8000, chunk_size=8000).finish())
        await acme.prompt(flooded, "a long answer")
        await on_b["flooded"].wait_for(lambda f: f.type == PART_DELTA and f.properties["delta"] == "y" * 8000)
        await on_b["flooded"].wait_for(lambda f: f.type == "session.idle")
        last_seen = [f.id for f in on_b["flooded"].frames if f.id is not None][-1]

        # The oldest notification in B's inbox is globex's; then a burst of acme's pieces, more than
        # the inbox holds, heard before B's receiving loop gets a turn.
        cluster = _cluster(b)
        # What B still holds from the turn (the receiving loop may not have had its turn yet) and what
        # it dropped before: the burst's drops are counted on top of them.
        held, dropped_before = len(cluster._inbox), cluster.dropped
        cluster._heard(_events_from("peer", _delta("globex", other, "oldest")))
        pieces = _pieces_of(_cluster(a), _delta("acme", flooded, "z" * 8000))
        burst = pieces * (INBOX_LIMIT // len(pieces) + 2)
        for piece in burst:
            cluster._heard(piece)
        assert cluster.dropped - dropped_before == held + 1 + len(burst) - INBOX_LIMIT

        for name in ("flooded", "acme"):
            await on_b[name].wait_for(lambda f: f.type == "stream.lagged")
            await on_b[name].stop()
        # Globex's oldest event was kept; its streams and acme's other session stay live.
        await on_b["other"].wait_for(lambda f: f.type == PART_DELTA and f.properties["delta"] == "oldest")
        fake_openai.enqueue(reply("globex carries on"))
        await globex.prompt(other, "hello")
        fake_openai.enqueue(reply("acme's other session too"))
        await acme.prompt(quiet, "hello")
        for name, session_id in (("other", other), ("globex", other), ("quiet", quiet)):
            await on_b[name].wait_for(
                lambda f, s=session_id: f.type == "session.idle" and f.properties["sessionID"] == s
            )
            assert not on_b[name].of_type("stream.lagged"), name
            await on_b[name].stop()

        # The cut-off stream resumes from the log: what happened while it was away comes back.
        fake_openai.enqueue(reply("while it was away"))
        await acme.prompt(flooded, "again")
        resumed = EventCollector()
        await resumed.start(acme.on_b, f"/event?sessionID={flooded}", **{"Last-Event-ID": last_seen})
        await resumed.wait_for(
            lambda f: f.type == "message.part.updated" and "while it was away" in str(f.properties)
        )
        await resumed.stop()
        assert all(int(f.id) > int(last_seen) for f in resumed.frames if f.id is not None)


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


async def test_a_notification_that_failed_to_go_out_resyncs_the_other_replicas_subscribers(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b):
        session_id = (await a.create_session())["id"]
        on_b = EventCollector()
        await on_b.start(b.client, f"/event?sessionID={session_id}")
        # A seals a notification and Postgres refuses it (too long): nobody hears it.
        with pytest.raises(asyncpg.PostgresError):
            await _cluster(a).link.notify(["x" * 8000])
        fake_openai.enqueue(reply("after the loss"))
        assert (await a.prompt(session_id, "hello")).status_code == 200
        # A's next notification shows B the counter it skipped: B's subscribers resync.
        await on_b.wait_for(lambda f: f.type == "stream.lagged")
        await on_b.stop()
        assert _cluster(b).link.gaps == 1


async def test_reopening_a_connection_goes_on_after_an_unexpected_failure(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b), _superuser() as raw:
        link = _cluster(a).link
        before = link.backend_pids()["listen"]
        on_a = EventCollector()
        await on_a.start(a.client)
        real_connect = asyncpg.connect
        injected: list[str] = []

        async def connect(*args: Any, **kwargs: Any) -> Any:
            # The driver fails in a way nobody planned for, once, for a cluster connection.
            if not injected and "tcp_keepalives_idle" in kwargs.get("server_settings", {}):
                injected.append("once")
                raise RuntimeError("injected")
            return await real_connect(*args, **kwargs)

        monkeypatch.setattr(asyncpg, "connect", connect)
        await _terminate(raw, [before])

        async def reopened() -> bool:
            return link.backend_pids().get("listen") not in (None, before)

        await _until(reopened, "A opened its listen connection again after the failure")
        assert injected
        await on_a.wait_for(lambda f: f.type == "stream.lagged")
        await on_a.stop()
        # Listening again: B's turn reaches A's subscribers.
        on_a = EventCollector()
        await on_a.start(a.client)
        fake_openai.enqueue(reply("from b"))
        b_session = (await b.create_session())["id"]
        assert (await b.prompt(b_session, "hello")).status_code == 200
        await on_a.wait_for(lambda f: f.type == "session.idle" and f.properties["sessionID"] == b_session)
        await on_a.stop()


async def test_the_watch_goes_on_pinging_after_an_unexpected_failure(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, _b):
        link = _cluster(a).link
        link.ping_interval = 0.05
        listener = link._listener
        real_fetchval = asyncpg.connection.Connection.fetchval
        pings: list[str] = []

        async def fetchval(conn: Any, query: str, *args: Any, **kwargs: Any) -> Any:
            if conn is listener and query == "SELECT 1":
                pings.append(query)
                if len(pings) == 1:
                    raise RuntimeError("injected")  # the driver fails unexpectedly, once
            return await real_fetchval(conn, query, *args, **kwargs)

        monkeypatch.setattr(asyncpg.connection.Connection, "fetchval", fetchval)

        async def pinged_again() -> bool:
            return len(pings) >= 3

        await _until(pinged_again, "the watch pinged the listen connection again after the failure")
        assert link.backend_pids()["listen"] == listener.get_server_pid()  # nothing was ended for it


async def test_an_abort_is_delivered_when_the_inbox_is_full_of_commands(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (_a, b):
        gate = asyncio.Event()
        session_id, turn = await _start_gated_turn(b, fake_openai, gate)
        cluster = _cluster(b)
        # Another replica forwards an abort, then more commands than the inbox holds, all heard
        # before B's receiving loop gets a turn: the abort is the oldest of them.
        cluster._heard(orjson.dumps({"r": "peer", "k": "abort", "s": session_id}).decode())
        for n in range(INBOX_LIMIT + 10):
            ended = {"r": "peer", "k": "ended", "s": f"ses_elsewhere{n}"}
            cluster._heard(orjson.dumps(ended).decode())
        assert cluster.dropped == 11
        # The run stops as aborted: the abort was kept, and handed out first.
        answer = (await asyncio.wait_for(turn, 15)).json()
        gate.set()
        assert answer["info"]["error"]["name"] == "MessageAbortedError"


async def test_run_lease_rows_of_replicas_that_no_longer_hold_them_are_removed(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    table = f'"{parse_database_url(postgres_url).schema}".run_lease'
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b), _superuser() as raw:
        for server in (a, b):
            _cluster(server).sweep_interval, _cluster(server).lease_expiry_ms = 0.0, 0

        async def rows() -> dict[str, str]:
            found = await raw.fetch(f"SELECT session_id, replica FROM {table}")
            return {row["session_id"]: row["replica"] for row in found}

        gate = asyncio.Event()
        session_id, turn = await _start_gated_turn(a, fake_openai, gate)
        # A replica that died long ago left a row behind.
        await raw.execute(
            f"INSERT INTO {table} (tenant_id, session_id, replica, time_acquired) VALUES ($1, $2, $3, 0)",
            "default",
            "ses_of_a_dead_replica",
            "deadreplica0",
        )

        async def dead_row_gone() -> bool:
            return "ses_of_a_dead_replica" not in await rows()

        await _until(dead_row_gone, "a replica removed the dead replica's row")
        # The live row stays, however old: its replica holds the lease.
        assert await rows() == {session_id: _cluster(a).replica}
        assert await _status(b) == {session_id: {"type": "busy"}}

        # A loses its lease connection (and the lease with it) but lives on: its row is stale too.
        await _terminate(raw, [_cluster(a).link.backend_pids()["leases"]])
        answer = (await asyncio.wait_for(turn, 15)).json()
        assert answer["info"]["error"]["name"] == "MessageAbortedError"
        gate.set()

        async def no_rows() -> bool:
            return await rows() == {}

        await _until(no_rows, "the row of the lease A lost was removed")
        assert _cluster(a).purged + _cluster(b).purged == 2
        assert await _status(a) == {} and await _status(b) == {}


@contextlib.contextmanager
def _stopped(pid: int) -> Iterator[None]:
    """The server process `pid` stops answering (as behind a network lost without a word), when
    Postgres runs here and may be signalled; it goes on afterwards, finds its client gone and exits."""
    if not _local_backend(pid):
        pytest.skip("Postgres does not run on this machine as a user this test may signal")
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


async def test_a_notify_connection_that_stops_answering_is_ended_and_opened_again(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b):
        link = _cluster(a).link
        link.ping_interval, link.ping_timeout = 0.05, 0.5
        stuck = link.backend_pids()["notify"]
        with _stopped(stuck):

            async def ended() -> bool:
                return link.backend_pids().get("notify") != stuck

            await _until(ended, "A's watch ended its silent notify connection")
        # The next notification opens it again: B's subscribers hear A's turn.
        await _turn_heard(a, b, fake_openai)
        assert link.backend_pids()["notify"] != stuck


async def test_events_beyond_a_full_outbox_are_a_gap_the_other_replicas_resync(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b):
        cluster = _cluster(a)
        cluster.outbox_limit = 1
        cluster.link.notify_timeout = 1.0
        session_id = (await a.create_session())["id"]
        on_b = EventCollector()
        await on_b.start(b.client, f"/event?sessionID={session_id}")
        with _stopped(cluster.link.backend_pids()["notify"]):
            # The first announcement of the turn hangs until it times out: the turn's other
            # events pile up in the outbox meanwhile, beyond its limit.
            fake_openai.enqueue(reply("too much at once"))
            assert (await a.prompt(session_id, "hello")).status_code == 200
        assert cluster.unsent > 0
        # Announced again on a new connection, with a gap in A's counter: B's subscriber resyncs.
        await on_b.wait_for(lambda f: f.type == "stream.lagged")
        await on_b.stop()
        assert _cluster(b).link.gaps >= 1


async def test_a_ping_waiting_for_a_slow_lease_call_does_not_end_the_connection(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    table = f'"{parse_database_url(postgres_url).schema}".run_lease'
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, _b), _superuser() as raw:
        link = _cluster(a).link
        # A ping limit well under the lease call's wait below (1 s), with room for a loaded machine.
        link.ping_interval, link.ping_timeout = 0.05, 0.5
        leases, listen = link.backend_pids()["leases"], link.backend_pids()["listen"]

        async def pinging() -> bool:  # the watch's first ping is done: the next follow at once
            query = "SELECT query FROM pg_stat_activity WHERE pid = $1"
            return bool(await raw.fetchval(query, listen) == "SELECT 1")

        await _until(pinging, "A's watch pings")
        session_id = (await a.create_session())["id"]
        fake_openai.enqueue(reply("after the wait"))
        # Another transaction holds the session's `run_lease` row: recording A's lease waits for it,
        # on the lease connection, longer than a ping may take (never as long as a lease call may).
        async with raw.transaction():
            await raw.execute(
                f"INSERT INTO {table} (tenant_id, session_id, replica, time_acquired) VALUES ($1, $2, $3, 0)",
                "default",
                session_id,
                "someone",
            )
            turn = asyncio.create_task(a.prompt(session_id, "hello"))

            async def waited() -> bool:
                await raw.execute("SELECT pg_stat_clear_snapshot()")  # fresh within the transaction
                return bool(
                    await raw.fetchval(
                        "SELECT wait_event_type = 'Lock'"
                        " AND clock_timestamp() - query_start > interval '1 second'"
                        " FROM pg_stat_activity WHERE pid = $1",
                        leases,
                    )
                )

            await _until(waited, "A's lease call waited a second for the row, its connection kept")
            await raw.execute(f"DELETE FROM {table} WHERE session_id = $1", session_id)
        answer = (await turn).json()
        assert [p["text"] for p in answer["parts"] if p["type"] == "text"] == ["after the wait"]
        assert link.backend_pids()["leases"] == leases
        assert link.reconnects == 0


async def test_an_event_in_more_pieces_than_receivers_take_is_not_sent_and_they_resync(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    channel = _channel(postgres_url)
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b), _superuser() as raw:
        heard: list[str] = []
        await raw.add_listener(channel, lambda _c, _pid, _ch, payload: heard.append(payload))
        session_id = (await a.create_session())["id"]
        on_b = EventCollector()
        await on_b.start(b.client, f"/event?sessionID={session_id}")
        # One delta of 600,000 characters: more pieces than a receiver accepts (MAX_PIECES).
        huge = "y" * 600_000
        fake_openai.enqueue(Script().text(huge, chunk_size=len(huge)).finish())
        answer = (await a.prompt(session_id, "a very long answer")).json()
        assert [p["text"] for p in answer["parts"] if p["type"] == "text"] == [huge]
        # B's subscriber is told it missed something, and resumes from the log, which has it all.
        await on_b.wait_for(lambda f: f.type == "stream.lagged")
        await on_b.stop()
        assert _cluster(b).link.gaps >= 1
        messages = (await b.client.get(f"/session/{session_id}/message")).json()
        assert huge in [p.get("text") for m in messages for p in m["parts"]]
        # The pieces never went out: the channel carried the turn's few notifications only.
        assert len(heard) < MAX_PIECES


async def test_question_answers_too_long_to_hand_over_are_refused_naming_the_field(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b):
        turn, request = await _asking(a, fake_openai)
        too_long = await b.client.post(
            f"/question/{request['id']}/reply", json={"answers": [["x" * 600_000]]}
        )
        assert too_long.status_code == 400
        assert "answers" in too_long.json()["data"]["message"]
        # The question still waits: a reply that fits goes through.
        answered = await b.client.post(f"/question/{request['id']}/reply", json={"answers": [["Postgres"]]})
        assert answered.status_code == 200 and answered.json() is True
        result = (await asyncio.wait_for(turn, 15)).json()
        assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["Postgres then."]


async def test_a_question_reply_taken_after_the_wait_is_reported_unknown_not_failed(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b):
        turn, request = await _asking(a, fake_openai)
        # B stops waiting before A can answer (as when A's inbox is far behind): A takes it later.
        _cluster(b).question_timeout = 0.0
        late = await b.client.post(f"/question/{request['id']}/reply", json={"answers": [["Postgres"]]})
        # Not "unknown question" (404): B cannot tell yet, and says so.
        assert late.status_code == 503, late.text
        assert late.json()["name"] == "ClusterUnavailableError"
        assert "GET /question" in late.json()["data"]["message"]
        # It was applied: the turn goes on with the answer, and the question waits nowhere.
        result = (await asyncio.wait_for(turn, 15)).json()
        assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["Postgres then."]
        assert (await b.client.get("/question")).json() == []
        # With time to hear everyone, an id nobody holds is unknown (every replica said so).
        _cluster(b).question_timeout = 60.0
        unknown = await b.client.post("/question/que_unknown/reply", json={"answers": [["x"]]})
        assert unknown.status_code == 404


async def _end_and_hold_down(raw: Any, cluster: Cluster, role: str) -> asyncio.Event:
    """End the replica's `role` connection; it is opened again once the returned gate is set."""
    link = cluster.link
    reopen, gate = link._open_again, asyncio.Event()

    async def held_down(reopening: str) -> None:
        if reopening == role:
            await gate.wait()
        await reopen(reopening)

    link._open_again = held_down  # type: ignore[method-assign,assignment]
    pid = link.backend_pids()[role]
    await _terminate(raw, [pid])

    async def exited() -> bool:  # its locks end with it, not with the signal
        return not await raw.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid)

    await _until(exited, f"the {role} connection's backend exited")
    return gate


async def test_a_replica_alone_announces_nothing_until_another_joins_and_again_once_it_left(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    channel = _channel(postgres_url)
    async with _replica(tmp_path, "a", postgres_url, fake_openai) as a, _superuser() as raw:
        heard: list[str] = []
        await raw.add_listener(channel, lambda _c, _pid, _ch, payload: heard.append(payload))
        cluster = _cluster(a)
        cluster.roster_interval = 0.05
        assert cluster.alone
        session_id = (await a.create_session())["id"]
        fake_openai.enqueue(reply("nobody else is here"))
        assert (await a.prompt(session_id, "hello")).status_code == 200
        assert cluster.quiet > 0  # the turn's events were not announced
        assert not cluster.link.sealing_loaded  # nor was cryptography loaded to seal them

        async with _replica(tmp_path, "b", postgres_url, fake_openai, directory=a.workspace) as b:
            # B said hello and A answered before B served: A announces from then on.
            assert not cluster.alone and not _cluster(b).alone
            assert cluster.link.sealing_loaded

            async def greeted() -> bool:
                return len(heard) >= 2

            await _until(greeted, "the outsider heard B's hello and A's welcome")
            # Delivered in commit order: nothing of A's turn came before them.
            assert len(heard) == 2
            on_b = EventCollector()
            await on_b.start(b.client, f"/event?sessionID={session_id}")
            quiet = cluster.quiet
            fake_openai.enqueue(reply("now B hears it"))
            assert (await a.prompt(session_id, "again")).status_code == 200
            idle = await on_b.wait_for(lambda f: f.type == "session.idle")
            assert idle.properties["sessionID"] == session_id
            assert not [f for f in on_b.frames if f.type == "stream.lagged"]
            await on_b.stop()
            assert cluster.quiet == quiet

        await _until_counted(cluster, alone=True)


async def test_a_replica_that_lost_its_lease_connection_still_hears_the_others_live(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b), _superuser() as raw:
        gate = await _end_and_hold_down(raw, _cluster(b), "leases")
        try:
            await _cluster(a).count_roster()  # B still listens: A goes on announcing to it
            assert not _cluster(a).alone
            await _turn_heard(a, b, fake_openai)
        finally:
            gate.set()


async def test_a_replica_listening_again_resyncs_and_is_announced_to_again(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _pair(tmp_path, postgres_url, fake_openai) as (a, b), _superuser() as raw:
        _cluster(a).roster_interval = 0.05
        session_id = (await a.create_session())["id"]
        on_b = EventCollector()
        await on_b.start(b.client, f"/event?sessionID={session_id}")
        gate = await _end_and_hold_down(raw, _cluster(b), "listen")

        await _until_counted(_cluster(a), alone=True)  # nobody else listens now: A stops announcing
        fake_openai.enqueue(reply("said while B did not listen"))
        assert (await a.prompt(session_id, "hello")).status_code == 200
        gate.set()
        # Listening again, B cuts its subscribers off (they resume from the log, which has the
        # turn) and says hello; A announces to it again.
        await on_b.wait_for(lambda f: f.type == "stream.lagged")
        await on_b.stop()
        messages = (await b.client.get(f"/session/{session_id}/message")).json()
        assert "said while B did not listen" in [p.get("text") for m in messages for p in m["parts"]]

        await _until_counted(_cluster(a), alone=False)
        await _turn_heard(a, b, fake_openai)


async def test_a_replica_not_listening_finds_a_newcomer_by_counting(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _replica(tmp_path, "a", postgres_url, fake_openai) as a, _superuser() as raw:
        cluster = _cluster(a)
        cluster.roster_interval = 0.05
        assert cluster.alone
        gate = await _end_and_hold_down(raw, cluster, "listen")
        try:
            # A, not listening, is not greeted by B (nor announced to); A counts B, which listens,
            # within its roster interval and announces to it.
            async with _replica(tmp_path, "b", postgres_url, fake_openai, directory=a.workspace) as b:
                await _until_counted(cluster, alone=False)
                await _turn_heard(a, b, fake_openai)
        finally:
            gate.set()


async def test_a_prompt_takes_its_run_lease_while_its_message_is_written(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _replica(tmp_path, "a", postgres_url, fake_openai) as a, _superuser() as raw:
        session_id = (await a.create_session())["id"]
        fake_openai.enqueue(reply("written once the lock was free"))
        async with _writes_held(raw, postgres_url, session_id):
            turn = asyncio.create_task(a.prompt(session_id, "hello"))
            await _leased_ahead(a, session_id)
            assert (await a.client.get(f"/session/{session_id}/message")).json() == []
        answer = (await turn).json()
        assert [p["text"] for p in answer["parts"] if p["type"] == "text"] == [
            "written once the lock was free"
        ]


async def test_a_refused_prompt_gives_back_the_lease_it_took_ahead(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _replica(tmp_path, "a", postgres_url, fake_openai) as a:
        link = _cluster(a).link
        session_id = (await a.create_session())["id"]
        body = {"agent": "no-such-agent", "parts": [{"type": "text", "text": "hello"}]}
        for route in ("message", "prompt_async"):
            refused = await a.client.post(f"/session/{session_id}/{route}", json=body)
            assert refused.status_code == 400, refused.text
        # A turn after them: its lease is taken behind theirs (one connection, in order).
        fake_openai.enqueue(reply("still runs"))
        assert (await a.prompt(session_id, "hello")).status_code == 200

        async def given_back() -> bool:
            return link.holds == set() and await _status(a) == {}

        await _until(given_back, "A gave every hold back")
        assert await a.runtime.store.leased_sessions("default") == {}


async def test_a_lease_taken_ahead_that_ended_with_its_connection_is_taken_again_for_the_run(
    tmp_path: Path, postgres_url: str, fake_openai: FakeOpenAI
) -> None:
    async with _replica(tmp_path, "a", postgres_url, fake_openai) as a, _superuser() as raw:
        link = _cluster(a).link
        session_id = (await a.create_session())["id"]
        gate = asyncio.Event()
        fake_openai.enqueue(Script().text("under a lease").pause(gate).finish())
        calls = len(fake_openai.requests)
        async with _writes_held(raw, postgres_url, session_id):
            turn = asyncio.create_task(a.prompt(session_id, "hello"))
            await _leased_ahead(a, session_id)
            await _terminate(raw, [link.backend_pids()["leases"]])

            async def hold_ended() -> bool:  # noticed before the write goes on
                return link.holds == set()

            await _until(hold_ended, "A's hold ended with its connection")

        async def called() -> bool:
            return len(fake_openai.requests) > calls

        await _until(called, "A's loop called the model")
        assert link.holds == {session_id}  # the run holds the lease, taken again
        gate.set()
        answer = (await turn).json()
        assert [p["text"] for p in answer["parts"] if p["type"] == "text"] == ["under a lease"]
