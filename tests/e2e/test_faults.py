"""Every provider fault through HTTP ends in a transparent retry or a named error on the message, the
session back to idle and usable (issue 5, KERNEL 3.3 and 5.4)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import EventCollector, Frame, LiveServer, fake_provider_config, start_live_server
from tests.fakes import faults
from tests.fakes.openai_server import FakeOpenAI, Script, reply

RETRY_MS = 150
STALL_SECONDS = 0.3


def _texts(message: dict[str, Any]) -> list[str]:
    return [part["text"] for part in message["parts"] if part["type"] == "text"]


def _retry_frames(events: EventCollector) -> list[dict[str, Any]]:
    return [
        frame.properties["status"]
        for frame in events.of_type("session.status")
        if frame.properties["status"]["type"] == "retry"
    ]


async def _assert_idle_and_usable(live: LiveServer, sid: str) -> None:
    assert (await live.client.get("/session/status")).json() == {}
    live.fake.enqueue(Script().text("still here").usage(10, 5).finish())
    after = await live.prompt(sid, "are you there?")
    assert after.status_code == 200
    assert _texts(after.json()) == ["still here"]
    assert (await live.client.get("/session/status")).json() == {}


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (lambda: faults.rate_limited(retry_after_ms=RETRY_MS), "Rate limit reached for requests"),
        (lambda: faults.server_error(retry_after_ms=RETRY_MS), "The server had an error"),
        (lambda: faults.overloaded(retry_after_ms=RETRY_MS), "Provider is overloaded"),
    ],
    ids=["429", "500", "529-overloaded"],
)
async def test_retryable_fault_is_retried_after_the_requested_delay_into_the_same_message(
    live: LiveServer, fault: Callable[[], Script], message: str
) -> None:
    sid = (await live.create_session())["id"]
    live.fake.enqueue(fault(), reply("recovered"))
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    sent_at_ms = time.time() * 1000
    result = await live.prompt(sid, "hello")
    await events.stop()

    assert result.status_code == 200
    body = result.json()
    assert _texts(body) == ["recovered"] and "error" not in body["info"]
    retries = _retry_frames(events)
    assert len(retries) == 1
    assert retries[0]["attempt"] == 1 and retries[0]["message"].startswith(message)
    # `next` is the retry time the server asked for, counted from when the fault arrived.
    assert sent_at_ms + RETRY_MS <= retries[0]["next"] <= time.time() * 1000
    statuses = events.of_type("session.status")
    retry_index = next(i for i, f in enumerate(statuses) if f.properties["status"]["type"] == "retry")
    resumed = statuses[retry_index + 1]
    assert resumed.properties["status"]["type"] == "busy"
    assert resumed.received_at - statuses[retry_index].received_at >= (RETRY_MS - 30) / 1000
    assert len(live.fake.requests) == 2
    history = (await live.client.get(f"/session/{sid}/message")).json()
    assert [m["info"]["role"] for m in history] == ["user", "assistant"], "re-run into the same message"
    await _assert_idle_and_usable(live, sid)


async def test_abort_during_a_long_retry_wait_ends_the_turn_at_once(live: LiveServer) -> None:
    sid = (await live.create_session())["id"]
    live.fake.enqueue(faults.rate_limited(retry_after="30"))
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    prompt = asyncio.create_task(live.prompt(sid, "hello"))
    retry = await events.wait_for(
        lambda f: f.type == "session.status" and f.properties["status"]["type"] == "retry"
    )
    assert retry.properties["status"]["next"] - time.time() * 1000 > 25_000  # retry-after: 30 s
    aborted_at = asyncio.get_running_loop().time()
    assert (await live.client.post(f"/session/{sid}/abort")).json() is True
    result = (await asyncio.wait_for(prompt, 5)).json()
    assert asyncio.get_running_loop().time() - aborted_at < 1.0
    await events.stop()

    assert result["info"]["error"]["name"] == "MessageAbortedError"
    assert result["info"]["time"]["completed"] is not None
    assert len(live.fake.requests) == 1, "no second attempt after the abort"
    await _assert_idle_and_usable(live, sid)


def _config(fake: FakeOpenAI) -> dict[str, Any]:
    config = fake_provider_config(fake)
    config["compaction"] = {"auto": False}  # a context overflow is stored, not compacted
    config["provider"]["fake"]["options"]["chunkTimeout"] = STALL_SECONDS
    return config


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (lambda: faults.dropped_after("before the fault"), "Connection"),
        (lambda: faults.stalled_after("before the fault"), "Provider stream stalled"),
    ],
    ids=["dropped", "stalled"],
)
async def test_mid_stream_fault_is_retried_after_backoff_keeping_the_failed_attempts_parts(
    tmp_path: Path, fake_openai: FakeOpenAI, database_url: str, fault: Callable[[], Script], message: str
) -> None:
    async with start_live_server(
        tmp_path, fake_openai, _config(fake_openai), database_url=database_url
    ) as live:
        sid = (await live.create_session())["id"]
        live.fake.enqueue(fault(), reply("recovered"))
        events = EventCollector()
        await events.start(live.client, f"/event?sessionID={sid}")
        result = await live.prompt(sid, "hello")
        await events.stop()

        assert result.status_code == 200
        body = result.json()
        assert "error" not in body["info"]
        # Parts written by the failed attempt stay; the retry streams into the same message.
        assert _texts(body) == ["before the fault", "recovered"]
        assert all(p["time"].get("end") for p in body["parts"] if p["type"] == "text")
        [retry] = [f for f in events.of_type("session.status") if f.properties["status"]["type"] == "retry"]
        status = retry.properties["status"]
        assert status["attempt"] == 1 and status["message"].startswith(message)
        # No retry-after header: the first backoff is 2 s ± 10 % jitter.
        assert 1800 - 100 <= status["next"] - time.time() * 1000 + _since(retry) <= 2200
        assert len(live.fake.requests) == 2
        await _assert_idle_and_usable(live, sid)


def _since(frame: Frame) -> float:
    """Milliseconds since the frame arrived."""
    return (asyncio.get_running_loop().time() - frame.received_at) * 1000


@pytest.mark.parametrize(
    ("fault", "name", "message", "kept"),
    [
        (faults.invalid_api_key, "ProviderAuthError", "Incorrect API key provided", None),
        (faults.context_overflow, "ContextOverflowError", "maximum context length", None),
        (lambda: faults.malformed_after("before the junk"), "APIError", "Invalid JSON", "before the junk"),
    ],
    ids=["invalid-key", "context-overflow", "malformed"],
)
async def test_fault_ends_in_a_named_error_on_the_message_and_keeps_earlier_parts(
    tmp_path: Path,
    fake_openai: FakeOpenAI,
    database_url: str,
    fault: Callable[[], Script],
    name: str,
    message: str,
    kept: str | None,
) -> None:
    async with start_live_server(
        tmp_path, fake_openai, _config(fake_openai), database_url=database_url
    ) as live:
        sid = (await live.create_session())["id"]
        live.fake.enqueue(fault())
        events = EventCollector()
        await events.start(live.client, f"/event?sessionID={sid}")
        result = await live.prompt(sid, "hello")
        await events.wait_for(lambda f: f.type == "session.error")
        await events.stop()

        assert result.status_code == 200
        error = result.json()["info"]["error"]
        assert error["name"] == name and message in error["data"]["message"]
        assert len(live.fake.requests) == 1, "not retried"
        stored = (await live.client.get(f"/session/{sid}/message")).json()[-1]
        assert stored["info"]["error"]["name"] == name
        assert _texts(stored) == ([kept] if kept else [])
        assert all(p["time"].get("end") for p in stored["parts"] if p["type"] == "text")
        assert events.of_type("session.error")[0].properties["error"]["name"] == name
        assert not [f for f in events.of_type("session.status") if f.properties["status"]["type"] == "retry"]
        await _assert_idle_and_usable(live, sid)
