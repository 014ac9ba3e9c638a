"""Webhooks end to end: a real server, the fake provider, a local receiver checking signatures."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from agentforge.testing import FakeClock
from tests.e2e.harness import LiveServer, fake_provider_config, start_live_server
from tests.fakes.http11 import Request
from tests.fakes.openai_server import FakeOpenAI, reply
from tests.fakes.resolver import resolve_as
from tests.fakes.webhook_receiver import WebhookReceiver

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    async with WebhookReceiver() as server:
        yield server


def _config(
    fake: FakeOpenAI, receiver: WebhookReceiver, *, allow: bool = True, **delivery: Any
) -> dict[str, Any]:
    policy = {"allow_private": ["127.0.0.1"] if allow else [], **delivery}
    return {
        **fake_provider_config(fake),
        "webhooks": [{"url": receiver.base_url, "secret": SECRET}],
        "webhook_delivery": policy,
    }


@contextlib.asynccontextmanager
async def _server(
    tmp_path: Path,
    fake: FakeOpenAI,
    config: dict[str, Any],
    clock: FakeClock | None = None,
    database_url: str | None = None,
) -> AsyncIterator[LiveServer]:
    # The clock reads the real time: the receiver's check rejects timestamps over 5 minutes off.
    clock = clock or FakeClock(now=time.time())
    async with start_live_server(tmp_path, fake, config, clock=clock, database_url=database_url) as live:
        yield live


def _verified(request: Request) -> dict[str, Any]:
    """The body, once the receiver's own Standard Webhooks check accepts its signature."""
    body: dict[str, Any] = Webhook(SECRET).verify(request.body, request.headers)
    return body


def _fanned_out(body: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(body["timestamp"]))


async def _log(live: LiveServer) -> list[dict[str, Any]]:
    response = await live.client.get("/webhook/delivery")
    assert response.status_code == 200, response.text
    deliveries: list[dict[str, Any]] = response.json()
    return deliveries


async def _until(live: LiveServer, check: Any, timeout: float = 15.0) -> list[dict[str, Any]]:
    """Poll the delivery log until `check(log)` holds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check(log := await _log(live)):
        assert asyncio.get_running_loop().time() < deadline, [
            (d["event"], d["status"], d["attempts"]) for d in log
        ]
        await asyncio.sleep(0.02)
    return log


async def test_a_turn_notifies_created_busy_and_idle_signed(
    tmp_path: Path, fake_openai: FakeOpenAI, receiver: WebhookReceiver, database_url: str
) -> None:
    config = _config(fake_openai, receiver)
    async with _server(tmp_path, fake_openai, config, database_url=database_url) as live:
        session = await live.create_session()
        fake_openai.enqueue(reply("Hello"))
        assert (await live.prompt(session["id"], "hi")).status_code == 200
        requests = await receiver.wait_for(3)
        # Each delivery is POSTed by a task of its own: they may arrive in any order, and their
        # `timestamp` (when the event was fanned out, microseconds) tells the receiver the order.
        bodies = sorted((_verified(r) for r in requests), key=_fanned_out)
        assert [body["type"] for body in bodies] == ["session.created", "session.busy", "session.idle"]
        assert all(body["data"]["sessionID"] == session["id"] for body in bodies)
        assert bodies[0]["data"]["info"]["id"] == session["id"]
        log = await _until(live, lambda log: len(log) == 3 and {d["status"] for d in log} == {"delivered"})
        # The log names each delivery by the webhook-id the receiver got.
        assert {d["id"] for d in log} == {r.headers["webhook-id"] for r in requests}
        assert all(len(d["attempts"]) == 1 and d["attempts"][0]["statusCode"] == 200 for d in log)


async def test_failed_attempts_are_retried_with_back_off_and_logged(
    tmp_path: Path, fake_openai: FakeOpenAI, receiver: WebhookReceiver
) -> None:
    clock = FakeClock(now=time.time())
    config = _config(fake_openai, receiver, initial_backoff=5)
    config["webhooks"][0]["events"] = ["session.created"]
    receiver.enqueue(500, 503)  # then 200
    async with _server(tmp_path, fake_openai, config, clock) as live:
        await live.create_session()
        await receiver.wait_for(1)
        [pending] = await _until(live, lambda log: len(log) == 1 and len(log[0]["attempts"]) == 1)
        assert pending["status"] == "pending"
        assert pending["attempts"][0]["statusCode"] == 500
        assert pending["nextAttempt"] == pending["attempts"][0]["time"] + 5000
        clock.advance(5)
        await receiver.wait_for(2)
        [pending] = await _until(live, lambda log: len(log[0]["attempts"]) == 2)
        assert pending["nextAttempt"] == pending["attempts"][1]["time"] + 20_000  # 4x the last wait
        clock.advance(20)
        requests = await receiver.wait_for(3)
        [done] = await _until(live, lambda log: log[0]["status"] == "delivered")
    assert [a["statusCode"] for a in done["attempts"]] == [500, 503, 200]
    # One webhook-id across the retries (the receiver deduplicates on it); each attempt signed anew.
    assert {r.headers["webhook-id"] for r in requests} == {done["id"]}
    assert all(_verified(r)["type"] == "session.created" for r in requests)


async def test_a_delivery_fails_after_its_last_attempt(
    tmp_path: Path, fake_openai: FakeOpenAI, receiver: WebhookReceiver
) -> None:
    config = _config(fake_openai, receiver, max_attempts=2, initial_backoff=1)
    config["webhooks"][0]["events"] = ["session.created"]
    receiver.enqueue(500, 500)
    clock = FakeClock(now=time.time(), autojump=True)
    async with _server(tmp_path, fake_openai, config, clock) as live:
        await live.create_session()
        [failed] = await _until(live, lambda log: bool(log) and log[0]["status"] == "failed")
    assert [a["error"] for a in failed["attempts"]] == ["HTTP 500", "HTTP 500"]
    assert "nextAttempt" not in failed


async def test_a_loopback_url_is_refused_without_an_explicit_allow(
    tmp_path: Path, fake_openai: FakeOpenAI, receiver: WebhookReceiver
) -> None:
    config = _config(fake_openai, receiver, allow=False)
    config["webhooks"][0]["events"] = ["session.created"]
    async with _server(tmp_path, fake_openai, config) as live:
        await live.create_session()
        [refused] = await _until(live, lambda log: bool(log) and log[0]["status"] == "refused")
    assert "127.0.0.1" in refused["attempts"][0]["error"]
    assert "webhook_delivery.allow_private" in refused["attempts"][0]["error"]
    assert receiver.received == []


async def test_a_hanging_receiver_never_holds_up_a_turn(
    tmp_path: Path, fake_openai: FakeOpenAI, receiver: WebhookReceiver
) -> None:
    receiver.hold = asyncio.Event()  # answers nothing until the end of the test
    async with _server(tmp_path, fake_openai, _config(fake_openai, receiver, timeout=60)) as live:
        session = await live.create_session()
        fake_openai.enqueue(reply("Hello"), reply("Again"))
        for text in ("one", "two"):
            response = await asyncio.wait_for(live.prompt(session["id"], text), 15)
            assert response.status_code == 200
        await receiver.wait_for(1)
        assert {d["status"] for d in await _log(live)} == {"pending"}
        receiver.hold.set()


async def test_the_delivery_log_is_per_tenant_and_names_a_missing_delivery(
    tmp_path: Path, fake_openai: FakeOpenAI, receiver: WebhookReceiver
) -> None:
    async with _server(tmp_path, fake_openai, _config(fake_openai, receiver)) as live:
        missing = await live.client.get("/webhook/delivery/whd_nope")
        assert missing.status_code == 404
        assert "whd_nope" in missing.json()["data"]["message"]
        bad = await live.client.get("/webhook/delivery", params={"status": "lost"})
        assert bad.status_code == 400 and "status" in bad.json()["data"]["message"]


async def test_a_pending_delivery_resumes_after_a_restart(
    tmp_path: Path, fake_openai: FakeOpenAI, receiver: WebhookReceiver
) -> None:
    config = _config(fake_openai, receiver, initial_backoff=5)
    config["webhooks"][0]["events"] = ["session.created"]
    receiver.enqueue(500)  # then 200
    clock = FakeClock(now=time.time())
    async with _server(tmp_path, fake_openai, config, clock) as live:
        await live.create_session()
        [pending] = await _until(live, lambda log: bool(log) and len(log[0]["attempts"]) == 1)
    clock.advance(5)  # the retry falls due while the server is down
    async with _server(tmp_path, fake_openai, config, clock) as live:
        [done] = await _until(live, lambda log: log[0]["status"] == "delivered")
    assert done["id"] == pending["id"]
    assert [a["statusCode"] for a in done["attempts"]] == [500, 200]


async def test_a_name_rebound_to_loopback_after_the_check_is_not_called(
    tmp_path: Path, fake_openai: FakeOpenAI, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DNS rebinding: the first answer is public (the check), every later one loopback (the connection).
    answers: list[str] = []

    def rebinding(host: str) -> list[str]:
        if host != "rebind.test":
            return []
        answers.append("93.184.216.34" if not answers else "127.0.0.1")
        return [answers[-1]]

    resolve_as(monkeypatch, rebinding)
    config = _config(fake_openai, receiver, allow=False)
    port = receiver.origin.rsplit(":", 1)[1]
    config["webhooks"] = [
        {"url": f"http://rebind.test:{port}/", "secret": SECRET, "events": ["session.created"]}
    ]
    async with _server(tmp_path, fake_openai, config) as live:
        await live.create_session()
        [refused] = await _until(live, lambda log: bool(log) and log[0]["status"] == "refused")
    assert answers == ["93.184.216.34", "127.0.0.1"]
    assert "rebind.test resolves to 127.0.0.1" in refused["attempts"][0]["error"]
    assert receiver.received == []


async def test_a_delivery_names_its_host_while_connecting_to_the_checked_address(
    tmp_path: Path, fake_openai: FakeOpenAI, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolve_as(monkeypatch, lambda host: ["127.0.0.1"] if host == "hooks.test" else [])
    config = _config(fake_openai, receiver)
    port = receiver.origin.rsplit(":", 1)[1]
    config["webhooks"] = [
        {"url": f"http://hooks.test:{port}/", "secret": SECRET, "events": ["session.created"]}
    ]
    async with _server(tmp_path, fake_openai, config) as live:
        await live.create_session()
        [request] = await receiver.wait_for(1)
        await _until(live, lambda log: bool(log) and log[0]["status"] == "delivered")
    assert request.headers["host"] == f"hooks.test:{port}"
    assert _verified(request)["type"] == "session.created"
