"""Several servers on one Postgres database (docs/replicas.md): any request on any replica, one loop
per session, events across replicas, abort from anywhere, failover after kill -9. Driven over HTTP
against the wire-level fake provider, on a fresh schema: the module shares one pair of in-process
servers (each with its own runtime, cluster connections and port: two replicas in all but the
process); the tests where a replica dies (kill -9) start real `agentforge serve` subprocesses."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import httpx2
import pytest
import pytest_asyncio

from agentforge.model.events import Event
from agentforge.store import Store, parse_database_url
from agentforge.store.audit import AUTH_FAILED
from agentforge.store.cluster import ClusterLink
from tests.cli.test_run_humans import QUESTION
from tests.databases import _postgres_schema, owner_url_for
from tests.e2e.harness import fake_provider_config, start_live_server
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply
from tests.runtime.replicas import Stream, replicas

TENANT = "default"
LONG_TEXT = "Replicas share one Postgres database and nothing else. " * 4


class Replica(Protocol):
    """An in-process server or a subprocess: what the tests use of either."""

    client: httpx2.AsyncClient

    async def prompt(self, session_id: str, text: str) -> httpx2.Response: ...


# Starting a server process imports the whole app: seconds when idle, a minute on a loaded machine.
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]
shared = pytest_asyncio.fixture(scope="module", loop_scope="module")


@shared
async def postgres_url() -> AsyncIterator[str]:
    async with _postgres_schema(migrated=True) as url:
        yield url


@shared
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as started:
        yield started


@shared
async def pair(
    tmp_path_factory: pytest.TempPathFactory, postgres_url: str, fake: FakeOpenAI
) -> AsyncIterator[tuple[Replica, Replica]]:
    directory = tmp_path_factory.mktemp("pair")
    config = {**fake_provider_config(fake), "permission": {"bash": "ask"}}
    for name in ("a", "b"):
        (directory / name).mkdir()
    async with start_live_server(directory / "a", fake, config, database_url=postgres_url) as a:
        shared_workspace = a.workspace  # one workspace, as replicas behind a load balancer have
        async with start_live_server(
            directory / "b", fake, config, database_url=postgres_url, directory=shared_workspace
        ) as b:
            yield a, b


@shared
async def log_store(postgres_url: str) -> AsyncIterator[Store]:
    """The stored truth, read beside the replicas."""
    store = await Store.open(postgres_url, owner_url=owner_url_for(postgres_url))
    try:
        yield store
    finally:
        await store.close()


async def _session(replica: Replica) -> str:
    response = await replica.client.post("/session", json={})
    response.raise_for_status()
    session_id: str = response.json()["id"]
    return session_id


async def _until(predicate: Any, timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.05)


def _assert_log_whole(logged: list[Event]) -> None:
    assert [e.seq for e in logged] == list(range(1, len(logged) + 1))
    assert len({e.id for e in logged}) == len(logged)


async def _messages(replica: Replica, session_id: str) -> list[dict[str, Any]]:
    response = await replica.client.get(f"/session/{session_id}/message")
    response.raise_for_status()
    messages: list[dict[str, Any]] = response.json()
    return messages


def _assistants(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m["info"]["role"] == "assistant"]


async def test_prompts_to_one_session_via_both_replicas_share_one_loop(
    pair: tuple[Replica, Replica], fake: FakeOpenAI, log_store: Store
) -> None:
    gate = asyncio.Event()
    first = Script().text("first answer").pause(gate).usage(5, 5).finish()
    fake.enqueue(first, reply("second answer"))
    calls = len(fake.requests)
    a, b = pair
    session_id = await _session(a)
    on_a = asyncio.create_task(a.prompt(session_id, "via a"))
    await _until(lambda: _true(len(fake.requests) == calls + 1), 15, "A's loop called the model")
    on_b = asyncio.create_task(b.prompt(session_id, "via b"))

    async def b_stored() -> bool:
        users = [m for m in await _messages(a, session_id) if m["info"]["role"] == "user"]
        return len(users) == 2

    await _until(b_stored, 15, "B stored its user message")
    gate.set()
    answer_a, answer_b = await asyncio.gather(on_a, on_b)

    assert answer_a.status_code == 200 and answer_b.status_code == 200
    # One loop ran: the second model call is its next step, answering B's message in the same run.
    assert len(fake.requests) == calls + 2
    texts = [p.get("text") for p in answer_b.json()["parts"] if p["type"] == "text"]
    assert texts == ["second answer"]
    assistants = _assistants(await _messages(b, session_id))
    assert len(assistants) == 2
    assert all(m["info"]["time"].get("completed") and m["parts"] for m in assistants)
    _assert_log_whole(await log_store.events_after(TENANT, session_id, 0))


async def _true(value: bool) -> bool:
    return value


async def test_sse_on_b_for_a_turn_on_a_equals_the_stored_log(
    pair: tuple[Replica, Replica], fake: FakeOpenAI, log_store: Store
) -> None:
    fake.enqueue(reply(LONG_TEXT))
    a, b = pair
    session_id = await _session(a)
    on_a, on_b = await Stream.open(a.client, session_id), await Stream.open(b.client, session_id)
    try:
        answer = await a.prompt(session_id, "stream this")
        assert answer.status_code == 200

        def after_creation(stream: Stream) -> tuple[list[str], str]:
            # The session was created on A just before the streams opened: B, which hears of it
            # over the channel, may still have been told after its stream opened. Deltas reach B
            # joined (a few per announcement): the same text, in fewer events.
            events = [e for e in stream.of_session() if e.type != "session.created"]
            deltas = "".join(e.properties["delta"] for e in events if e.type == "message.part.delta")
            return [e.id for e in events if e.type != "message.part.delta"], deltas

        async def same_events() -> bool:
            return after_creation(on_b) == after_creation(on_a)

        await _until(same_events, 10, "B's stream caught up with A's")
        seen_on_b = on_b.of_session()
    finally:
        await on_a.close()
        await on_b.close()

    deltas = [e for e in seen_on_b if e.type == "message.part.delta"]
    assert "".join(e.properties["delta"] for e in deltas).strip() == LONG_TEXT.strip()
    durable = [(e.seq, e.id, e.type) for e in seen_on_b if e.seq is not None]
    logged = await log_store.events_after(TENANT, session_id, 0)
    _assert_log_whole(logged)
    first = durable[0][0]
    assert first is not None and first <= 2  # only session.created came before the stream opened
    assert durable == [(e.seq, e.id, e.type) for e in logged[first - 1 :]]


async def test_abort_via_b_stops_the_turn_on_a(pair: tuple[Replica, Replica], fake: FakeOpenAI) -> None:
    gate = asyncio.Event()
    fake.enqueue(Script().text("thinking").pause(gate).finish())
    calls = len(fake.requests)
    a, b = pair
    session_id = await _session(a)
    on_a = asyncio.create_task(a.prompt(session_id, "long task"))
    await _until(lambda: _true(len(fake.requests) == calls + 1), 15, "A's loop called the model")

    aborted = await b.client.post(f"/session/{session_id}/abort")
    assert aborted.status_code == 200 and aborted.json() is True
    answer = await asyncio.wait_for(on_a, 10)  # A's turn ended without the gate opening
    assert answer.status_code == 200
    assert answer.json()["info"]["error"]["name"] == "MessageAbortedError"
    gate.set()
    # Nothing runs any more: a busy route answers on either replica.
    assert (await b.client.post(f"/session/{session_id}/abort")).json() is True


async def test_a_permission_reply_via_b_releases_the_call_waiting_on_a(
    pair: tuple[Replica, Replica], fake: FakeOpenAI
) -> None:
    a, b = pair
    session_id = await _session(a)
    fake.enqueue(call("bash", {"command": "echo approved-run", "description": "Run"}), reply("It ran."))
    on_a = asyncio.create_task(a.prompt(session_id, "run it"))

    async def asked() -> bool:
        return bool((await a.client.get("/permission")).json())

    await _until(asked, 15, "A's tool call asked for permission")
    [request] = (await a.client.get("/permission")).json()
    # B lists it from the store, as A does from its waiters.
    assert (await b.client.get("/permission")).json() == [request]
    answered = await b.client.post(f"/permission/{request['id']}/reply", json={"reply": "once"})
    assert answered.status_code == 200 and answered.json() is True
    result = (await asyncio.wait_for(on_a, 15)).json()
    assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["It ran."]
    parts = [p for m in _assistants(await _messages(b, session_id)) for p in m["parts"]]
    [tool] = [p for p in parts if p["type"] == "tool"]
    assert tool["state"]["status"] == "completed" and "approved-run" in tool["state"]["output"]
    assert (await b.client.get("/permission")).json() == []
    unknown = await b.client.post("/permission/per_unknown/reply", json={"reply": "once"})
    assert unknown.status_code == 404


async def _asked_on(replica: Replica) -> dict[str, Any]:
    async def asked() -> bool:
        return bool((await replica.client.get("/question")).json())

    await _until(asked, 15, "the tool call asked its question")
    [request] = (await replica.client.get("/question")).json()
    assert isinstance(request, dict)
    return request


async def _tool_parts(replica: Replica, session_id: str) -> list[dict[str, Any]]:
    return [
        p
        for m in _assistants(await _messages(replica, session_id))
        for p in m["parts"]
        if p["type"] == "tool"
    ]


async def test_question_replies_and_rejects_via_b_reach_the_call_waiting_on_a(
    pair: tuple[Replica, Replica], fake: FakeOpenAI
) -> None:
    a, b = pair
    session_id = await _session(a)
    fake.enqueue(call("question", QUESTION), reply("Postgres then."))
    on_a = asyncio.create_task(a.prompt(session_id, "pick a database"))
    request = await _asked_on(a)
    # B asks the other replicas for theirs: the same list on both.
    assert (await b.client.get("/question")).json() == [request]
    # Typed text longer than one notification: the answers go in pieces.
    typed = "Postgres, " + "because " * 1200
    answered = await b.client.post(f"/question/{request['id']}/reply", json={"answers": [[typed]]})
    assert answered.status_code == 200 and answered.json() is True
    result = (await asyncio.wait_for(on_a, 15)).json()
    assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["Postgres then."]
    [tool] = await _tool_parts(b, session_id)
    assert tool["state"]["status"] == "completed" and typed in tool["state"]["output"]
    # Answered once: the question is gone from every replica.
    again = await b.client.post(f"/question/{request['id']}/reply", json={"answers": [["SQLite"]]})
    assert again.status_code == 404

    fake.enqueue(call("question", QUESTION))  # a dismissed question stops the turn: no next step
    on_a = asyncio.create_task(a.prompt(session_id, "pick again"))
    second = await _asked_on(a)
    dismissed = await b.client.post(f"/question/{second['id']}/reject")
    assert dismissed.status_code == 200 and dismissed.json() is True
    assert (await asyncio.wait_for(on_a, 15)).status_code == 200
    assert (await _tool_parts(b, session_id))[-1]["state"]["status"] == "error"
    assert not (await a.client.get("/question")).json()
    assert not (await b.client.get("/question")).json()
    unknown = await b.client.post("/question/que_unknown/reject")
    assert unknown.status_code == 404


async def test_refusals_on_both_replicas_share_one_audit_row_a_window(
    pair: tuple[Replica, Replica], log_store: Store
) -> None:
    # Gateway headers on a server without a gateway: refused, audited in the tenant they claim.
    tenant = f"refused{uuid.uuid4().hex[:8]}"
    for replica in (a := pair[0], b := pair[1], a, b, a, b):
        refused = await replica.client.get("/session", headers={"X-Forge-Tenant": tenant})
        assert refused.status_code == 401
    entries, _next = await log_store.audit_entries(tenant, limit=100)
    rows = [e for e in entries if e.action == AUTH_FAILED]
    # Each replica alone would have written one: the window is shared in the database.
    assert len(rows) == 1 and rows[0].data["suppressed"] == 0


async def test_kill_9_of_a_mid_turn_and_b_closes_it_then_serves_the_session(
    tmp_path: Path, postgres_url: str, fake: FakeOpenAI, log_store: Store
) -> None:
    gate = asyncio.Event()
    fake.enqueue(Script().text("half an answer").pause(gate).finish(), reply("after failover"))
    calls = len(fake.requests)
    async with replicas(tmp_path, postgres_url, fake, "doomed", "survivor") as (a, b):
        session_id = await _session(a)
        on_a = asyncio.create_task(a.prompt(session_id, "doomed"))
        await _until(lambda: _true(len(fake.requests) == calls + 1), 15, "A's loop called the model")

        async def text_stored() -> bool:
            parts = [p for m in _assistants(await _messages(b, session_id)) for p in m["parts"]]
            return any(p["type"] == "text" for p in parts)

        await _until(text_stored, 10, "A stored part of its answer")
        a.kill()
        killed_at = asyncio.get_running_loop().time()
        with pytest.raises(Exception):  # noqa: B017 - the connection dies with the process
            await on_a

        async def closed_by_b() -> bool:
            [turn] = _assistants(await _messages(b, session_id))
            return bool(turn["info"]["time"].get("completed"))

        await _until(closed_by_b, 10, "B closed the dead replica's turn")
        assert asyncio.get_running_loop().time() - killed_at < 10
        [turn] = _assistants(await _messages(b, session_id))
        assert turn["info"]["error"]["name"] == "MessageAbortedError"
        gate.set()

        answer = await b.prompt(session_id, "again")
        assert answer.status_code == 200
        assert [p["text"] for p in answer.json()["parts"] if p["type"] == "text"] == ["after failover"]
        _assert_log_whole(await log_store.events_after(TENANT, session_id, 0))


async def test_fifty_sessions_over_both_replicas_lose_nothing(
    pair: tuple[Replica, Replica], fake: FakeOpenAI, log_store: Store
) -> None:
    count = 50
    fake.enqueue(*(reply(f"answer {n}") for n in range(count)))
    calls = len(fake.requests)
    sessions = [await _session(pair[n % 2]) for n in range(count)]
    answers = await asyncio.gather(
        *(pair[(n + 1) % 2].prompt(session_id, f"question {n}") for n, session_id in enumerate(sessions))
    )
    assert [r.status_code for r in answers] == [200] * count
    assert len(fake.requests) == calls + count
    for n, session_id in enumerate(sessions):
        messages = await _messages(pair[n % 2], session_id)
        assert [m["info"]["role"] for m in messages] == ["user", "assistant"]
        assert messages[1]["info"]["time"].get("completed")
        assert any(p["type"] == "text" for p in messages[1]["parts"])
        _assert_log_whole(await log_store.events_after(TENANT, session_id, 0))


async def test_an_accepted_prompt_async_runs_after_its_replica_dies(
    tmp_path: Path, postgres_url: str, fake: FakeOpenAI
) -> None:
    fake.enqueue(reply("ran anyway"))
    calls = len(fake.requests)
    # Holding the session's run lease from here keeps the accepting replica from starting the turn
    # before it dies: exactly "answered 204, then died".
    holder = await ClusterLink.open(parse_database_url(postgres_url), lambda _payload: None)
    try:
        async with replicas(tmp_path, postgres_url, fake, "accepting", "other") as (a, b):
            session_id = await _session(a)
            assert await holder.try_lease(session_id)
            body = {"parts": [{"type": "text", "text": "run me"}]}
            accepted = await a.client.post(f"/session/{session_id}/prompt_async", json=body)
            assert accepted.status_code == 204
            a.kill()
            await a.process.wait()
            assert len(fake.requests) == calls
            await holder.release(session_id)

            async def answered() -> bool:
                assistants = _assistants(await _messages(b, session_id))
                return bool(assistants) and bool(assistants[-1]["info"]["time"].get("completed"))

            await _until(answered, 15, "another replica ran the accepted prompt")
            [turn] = _assistants(await _messages(b, session_id))
            assert [p["text"] for p in turn["parts"] if p["type"] == "text"] == ["ran anyway"]
            assert len(fake.requests) == calls + 1
    finally:
        await holder.close()
