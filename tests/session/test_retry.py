"""Provider failures through a real server (KERNEL 5.4): retried with status events, capped, or fatal."""

from __future__ import annotations

import time
from typing import Any

from tests.e2e.harness import EventCollector, LiveServer
from tests.fakes.openai_server import Script, reply

# The live fixture configures retry.max_attempts = 2.
MAX_RETRIES = 2


def _retry_statuses(events: EventCollector) -> list[dict[str, Any]]:
    return [
        f.properties["status"]
        for f in events.of_type("session.status")
        if f.properties["status"]["type"] == "retry"
    ]


def _status_types(events: EventCollector) -> list[str]:
    return [f.properties["status"]["type"] for f in events.of_type("session.status")]


async def _watch(live: LiveServer, session_id: str) -> EventCollector:
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={session_id}")
    return events


def _server_error(message: str = "upstream is down") -> Script:
    body = {"error": {"message": message, "type": "server_error"}}
    return Script().error_status(500, body, headers={"retry-after-ms": "10"})


async def test_rate_limit_is_retried_after_the_requested_delay(live: LiveServer) -> None:
    session = await live.create_session()
    sid = session["id"]
    events = await _watch(live, sid)
    live.fake.enqueue(
        Script().error_status(
            429, {"error": {"message": "slow down", "type": "rate_limit"}}, headers={"retry-after-ms": "50"}
        ),
        reply("made it"),
    )
    before = int(time.time() * 1000)
    response = await live.prompt(sid, "hello")
    after = int(time.time() * 1000)
    assert response.status_code == 200, response.text
    result = response.json()
    assert "error" not in result["info"]
    assert [p["text"] for p in result["parts"] if p["type"] == "text"] == ["made it"]
    assert len(live.fake.requests) == 2

    await events.wait_for(lambda f: f.type == "session.idle")
    await events.stop()
    retries = _retry_statuses(events)
    assert len(retries) == 1
    retry = retries[0]
    assert (retry["attempt"], retry["message"]) == (1, "slow down")
    assert before + 50 <= retry["next"] <= after + 50
    types = _status_types(events)
    assert types[types.index("retry") + 1] == "busy", "busy again once the retry starts"
    assert types[-1] == "idle"
    assert events.of_type("session.error") == []

    # The retry streamed into the same assistant message.
    history = (await live.client.get(f"/session/{sid}/message")).json()
    assert [m["info"]["role"] for m in history] == ["user", "assistant"]


async def test_too_many_server_errors_store_an_api_error_and_free_the_session(live: LiveServer) -> None:
    session = await live.create_session()
    sid = session["id"]
    events = await _watch(live, sid)
    live.fake.enqueue(*(_server_error() for _ in range(MAX_RETRIES + 1)))
    response = await live.prompt(sid, "hello")
    assert response.status_code == 200, response.text

    error = response.json()["info"]["error"]
    assert error["name"] == "APIError"
    assert error["data"]["statusCode"] == 500 and error["data"]["isRetryable"] is True
    assert error["data"]["message"] == "upstream is down"
    assert len(live.fake.requests) == MAX_RETRIES + 1, "the first call plus max_attempts retries, no more"

    await events.wait_for(lambda f: f.type == "session.idle")
    reported = await events.wait_for(lambda f: f.type == "session.error")
    assert reported.properties["sessionID"] == sid
    assert reported.properties["error"]["name"] == "APIError"
    assert [r["attempt"] for r in _retry_statuses(events)] == [1, 2]
    assert _status_types(events)[-1] == "idle"
    assert (await live.client.get("/session/status")).json() == {}

    stored = (await live.client.get(f"/session/{sid}/message")).json()
    assert stored[-1]["info"]["error"] == error
    assert stored[-1]["info"]["time"]["completed"] is not None

    # The session is usable again.
    live.fake.enqueue(reply("back to normal"))
    again = await live.prompt(sid, "try again")
    await events.stop()
    assert again.status_code == 200
    assert "error" not in again.json()["info"]
    assert [p["text"] for p in again.json()["parts"] if p["type"] == "text"] == ["back to normal"]


async def test_unauthorized_is_a_provider_auth_error_without_retry(live: LiveServer) -> None:
    session = await live.create_session()
    sid = session["id"]
    events = await _watch(live, sid)
    live.fake.enqueue(
        Script().error_status(
            401,
            {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}},
            headers={"retry-after-ms": "10"},
        ),
        reply("should never be requested"),
    )
    response = await live.prompt(sid, "hello")
    assert response.status_code == 200, response.text
    error = response.json()["info"]["error"]
    assert error == {
        "name": "ProviderAuthError",
        "data": {"providerID": "fake", "message": "Incorrect API key provided"},
    }
    assert len(live.fake.requests) == 1 and live.fake.pending() == 1

    await events.wait_for(lambda f: f.type == "session.idle")
    reported = await events.wait_for(lambda f: f.type == "session.error")
    await events.stop()
    assert reported.properties["error"] == error
    assert _retry_statuses(events) == []
    assert (await live.client.get("/session/status")).json() == {}
