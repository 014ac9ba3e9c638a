"""Every provider fault through HTTP, on every wire protocol, ends in a transparent retry or a named error
on the message, the session back to idle and usable (issue 5, KERNEL 3.3 and 5.4).

The server runs on a fake clock that jumps to the end of every wait: a back-off is checked by what
the server waited for (`clock.slept`) and announced (`next`), not by waiting for it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agentforge.llm.retry import RETRY_INITIAL_DELAY, RETRY_JITTER
from agentforge.testing import FakeClock
from tests.e2e.harness import EventCollector, Frame, LiveServer, start_live_server
from tests.fakes import faults
from tests.fakes.faults import KITS, FaultKit
from tests.fakes.gemini_server import GeminiScript
from tests.fakes.openai_server import FakeOpenAI, Script

RETRY_MS = 150
STALL_SECONDS = 0.3

# A fault's storage side does not depend on the protocol: every protocol runs on SQLite, and the
# OpenAI one on Postgres too.
PROTOCOLS = pytest.mark.parametrize(
    ("protocol", "database_url"),
    [
        pytest.param("openai", "sqlite", id="openai-sqlite"),
        pytest.param("openai", "postgres", id="openai-postgres"),
        pytest.param("anthropic", "sqlite", id="anthropic"),
        pytest.param("openai-responses", "sqlite", id="responses"),
        pytest.param("google", "sqlite", id="gemini"),
    ],
    indirect=["database_url"],
)


@dataclass
class Served:
    live: LiveServer
    kit: FaultKit
    provider: Any  # the protocol's fake server
    clock: FakeClock  # the server's: it jumps over every wait and records it

    def enqueue(self, *scripts: Any) -> None:
        self.provider.enqueue(*scripts)

    @property
    def request_count(self) -> int:
        return len(self.provider.requests)


def _config(kit: FaultKit, base_url: str) -> dict[str, Any]:
    return {
        "model": "fake/test-model",
        "provider": {
            "fake": {
                "api": kit.api,
                "options": {"baseURL": base_url, "apiKey": "sk-test", "chunkTimeout": STALL_SECONDS},
                "models": {"test-model": {"limit": {"context": 128_000, "output": 4096}}},
            }
        },
        "retry": {"max_attempts": 2},
        "title": False,
        "compaction": {"auto": False},  # a context overflow is stored, not compacted
    }


@pytest_asyncio.fixture
async def served(
    tmp_path: Path, fake_openai: FakeOpenAI, protocol: str, database_url: str
) -> AsyncIterator[Served]:
    kit = KITS[protocol]
    clock = FakeClock(autojump=True)
    async with kit.fake() as provider:
        config = _config(kit, provider.base_url)
        async with start_live_server(
            tmp_path, fake_openai, config, database_url=database_url, clock=clock
        ) as live:
            yield Served(live, kit, provider, clock)


def _texts(message: dict[str, Any]) -> list[str]:
    return [part["text"] for part in message["parts"] if part["type"] == "text"]


def _retry_frames(events: EventCollector) -> list[Frame]:
    return [f for f in events.of_type("session.status") if f.properties["status"]["type"] == "retry"]


async def _assert_idle_and_usable(served: Served, sid: str) -> None:
    client = served.live.client
    assert (await client.get("/session/status")).json() == {}
    served.enqueue(served.kit.reply("still here"))
    after = await served.live.prompt(sid, "are you there?")
    assert after.status_code == 200
    assert _texts(after.json()) == ["still here"]
    assert "error" not in after.json()["info"]
    assert (await client.get("/session/status")).json() == {}


@PROTOCOLS
@pytest.mark.parametrize("fault", ["429", "500", "overloaded"])
async def test_retryable_fault_is_retried_after_the_requested_delay_into_the_same_message(
    served: Served, fault: str
) -> None:
    kit = served.kit
    scripts: dict[str, Callable[[int], Any]] = {
        "429": kit.rate_limited,
        "500": kit.server_error,
        "overloaded": kit.overloaded,
    }
    live = served.live
    sid = (await live.create_session())["id"]
    served.enqueue(scripts[fault](RETRY_MS), kit.reply("recovered"))
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    fault_at_ms = served.clock.time() * 1000  # the server's clock stands still until it waits
    result = await live.prompt(sid, "hello")
    await events.stop()

    assert result.status_code == 200
    body = result.json()
    assert _texts(body) == ["recovered"] and "error" not in body["info"]
    [retry] = _retry_frames(events)
    status = retry.properties["status"]
    assert status["attempt"] == 1 and status["message"].startswith(kit.messages[fault])
    # The requested delay, not the 2 s back-off: announced as `next`, then waited for.
    assert served.clock.slept == [RETRY_MS / 1000]
    assert status["next"] == fault_at_ms + RETRY_MS
    statuses = events.of_type("session.status")
    resumed = statuses[statuses.index(retry) + 1]
    assert resumed.properties["status"]["type"] == "busy"
    assert served.request_count == 2
    history = (await live.client.get(f"/session/{sid}/message")).json()
    assert [m["info"]["role"] for m in history] == ["user", "assistant"], "re-run into the same message"
    await _assert_idle_and_usable(served, sid)


@pytest.mark.parametrize(("protocol", "database_url"), [("google", "sqlite")], indirect=["database_url"])
async def test_gemini_rate_limit_waits_for_the_retry_info_delay_in_the_error_body(served: Served) -> None:
    """Google sends no retry header; its 429 body carries a `google.rpc.RetryInfo` detail instead."""
    retry_info = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{RETRY_MS / 1000}s"}
    quota = GeminiScript().error(429, "Quota exceeded", "RESOURCE_EXHAUSTED", details=[retry_info])
    served.enqueue(quota, served.kit.reply("recovered"))
    live = served.live
    sid = (await live.create_session())["id"]
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    fault_at_ms = served.clock.time() * 1000
    result = await live.prompt(sid, "hello")
    await events.stop()

    assert _texts(result.json()) == ["recovered"]
    [retry] = _retry_frames(events)
    assert served.clock.slept == [RETRY_MS / 1000]
    assert retry.properties["status"]["next"] == fault_at_ms + RETRY_MS
    assert served.request_count == 2


@PROTOCOLS
@pytest.mark.parametrize(
    ("fault", "message"),
    [("dropped", "Connection"), ("stalled", "Provider stream stalled"), ("error-event", None)],
    ids=["dropped", "stalled", "error-event"],
)
async def test_mid_stream_fault_is_retried_after_backoff_removing_the_failed_attempts_parts(
    served: Served, fault: str, message: str | None
) -> None:
    kit = served.kit
    scripts: dict[str, Callable[[str], Any]] = {
        "dropped": kit.dropped_after,
        "stalled": kit.stalled_after,
        "error-event": kit.error_event_after,
    }
    live = served.live
    sid = (await live.create_session())["id"]
    served.enqueue(scripts[fault]("before the fault"), kit.reply("recovered"))
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    fault_at_ms = served.clock.time() * 1000
    result = await live.prompt(sid, "hello")
    await events.stop()

    assert result.status_code == 200
    body = result.json()
    assert "error" not in body["info"]
    # What the failed attempt streamed is removed (and announced so); the retry streams into the
    # same message, which holds only the retry's text, as stored.
    assert _texts(body) == ["recovered"]
    assert all(p["time"].get("end") for p in body["parts"] if p["type"] == "text")
    streamed = {f.properties["partID"] for f in events.of_type("message.part.delta")}
    removed = {f.properties["partID"] for f in events.of_type("message.part.removed")}
    [failed_text] = streamed - {p["id"] for p in body["parts"]}
    assert failed_text in removed
    [stored] = [
        m
        for m in (await live.client.get(f"/session/{sid}/message")).json()
        if m["info"]["role"] == "assistant"
    ]
    assert _texts(stored) == ["recovered"]
    assert failed_text not in {p["id"] for p in stored["parts"]}
    [retry] = _retry_frames(events)
    status = retry.properties["status"]
    assert status["attempt"] == 1 and status["message"].startswith(message or kit.messages[fault])
    # No retry-after header: the first back-off is 2 s ± 10 % jitter, announced, then waited for.
    [waited] = served.clock.slept
    assert abs(waited * 1000 - RETRY_INITIAL_DELAY) <= RETRY_INITIAL_DELAY * RETRY_JITTER
    assert status["next"] == fault_at_ms + round(waited * 1000)
    assert served.request_count == 2
    await _assert_idle_and_usable(served, sid)
    # The next turn's history holds the reply, never the failed attempt's fragment.
    assert "before the fault" not in json.dumps(served.provider.requests[-1])


@pytest.mark.parametrize(("protocol", "database_url"), [("openai", "sqlite")], indirect=["database_url"])
async def test_a_stream_dropped_before_any_content_leaves_no_step_to_remove(served: Served) -> None:
    """A step's start is written with its first content: an attempt that streamed nothing wrote
    nothing, so the retry removes nothing and the reply holds one step."""
    live = served.live
    sid = (await live.create_session())["id"]
    served.enqueue(Script().drop(), served.kit.reply("recovered"))
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    result = await live.prompt(sid, "hello")
    await events.stop()

    assert result.status_code == 200, result.text
    body = result.json()
    assert "error" not in body["info"] and served.request_count == 2
    assert [p["type"] for p in body["parts"]] == ["step-start", "text", "step-finish"]
    assert events.of_type("message.part.removed") == []
    assert len(_retry_frames(events)) == 1


@PROTOCOLS
@pytest.mark.parametrize(
    ("fault", "name"),
    [
        ("invalid-key", "ProviderAuthError"),
        ("context-overflow", "ContextOverflowError"),
        ("malformed", "APIError"),
    ],
    ids=["invalid-key", "context-overflow", "malformed"],
)
async def test_fault_ends_in_a_named_error_on_the_message_and_keeps_earlier_parts(
    served: Served, fault: str, name: str
) -> None:
    kit = served.kit
    live = served.live
    sid = (await live.create_session())["id"]
    if fault == "malformed":
        served.enqueue(kit.malformed_after("before the junk"))
        message, kept = "Invalid JSON", ["before the junk"]
    else:
        served.enqueue(kit.invalid_api_key() if fault == "invalid-key" else kit.context_overflow())
        message, kept = kit.messages[fault], []
    events = EventCollector()
    await events.start(live.client, f"/event?sessionID={sid}")
    result = await live.prompt(sid, "hello")
    await events.wait_for(lambda f: f.type == "session.error")
    await events.stop()

    assert result.status_code == 200
    error = result.json()["info"]["error"]
    assert error["name"] == name and message in error["data"]["message"]
    assert served.request_count == 1, "not retried"
    stored = (await live.client.get(f"/session/{sid}/message")).json()[-1]
    assert stored["info"]["error"]["name"] == name
    assert stored["info"]["time"]["completed"] is not None
    assert _texts(stored) == kept
    assert all(p["time"].get("end") for p in stored["parts"] if p["type"] == "text")
    assert events.of_type("session.error")[0].properties["error"]["name"] == name
    assert not _retry_frames(events)
    await _assert_idle_and_usable(served, sid)


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
    live.fake.enqueue(Script().text("still here").usage(10, 5).finish())
    after = await live.prompt(sid, "are you there?")
    assert _texts(after.json()) == ["still here"]
    assert (await live.client.get("/session/status")).json() == {}
