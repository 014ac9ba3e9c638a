"""Turns through HTTP against the fake Bedrock runtime (provider `api: "anthropic-bedrock"`): the
event-stream body stored as parts with token counts and cost, a throttling exception retried, and a
non-retryable failure stored as a named error with the session left idle."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agentforge.llm import anthropic_messages
from agentforge.testing import FakeClock
from tests.e2e.anthropic_turn import WriteTurn, cloud_provider, texts
from tests.e2e.harness import EventCollector, LiveServer, start_live_server
from tests.fakes.anthropic_server import AnthropicScript
from tests.fakes.bedrock_server import FakeBedrock, http_error, throttled
from tests.fakes.openai_server import FakeOpenAI

MODEL_ID = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


def bedrock_config(fake: FakeBedrock) -> dict[str, Any]:
    options = {
        "baseURL": fake.base_url,
        "region": "us-east-2",
        "accessKeyId": "AKIDFAKE",
        "secretAccessKey": "fake-secret",
    }
    config = cloud_provider("bedrock", "anthropic-bedrock", options, MODEL_ID)
    config["compaction"] = {"auto": False}  # a context overflow is stored, not compacted
    return config


@pytest_asyncio.fixture
async def fake_bedrock() -> AsyncIterator[FakeBedrock]:
    async with FakeBedrock() as fake:
        fake.frame_split = 64  # frames straddle HTTP chunks, as they may on the network
        yield fake


@pytest_asyncio.fixture
async def bedrock_live(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_bedrock: FakeBedrock, database_url: str
) -> AsyncIterator[LiveServer]:
    config = bedrock_config(fake_bedrock)
    clock = FakeClock(autojump=True)  # a back-off is recorded, not waited for
    async with start_live_server(
        tmp_path, fake_openai, config, database_url=database_url, clock=clock
    ) as server:
        yield server
    await anthropic_messages.close_clients()


async def test_turn_with_thinking_tool_call_and_usage(
    bedrock_live: LiveServer, fake_bedrock: FakeBedrock
) -> None:
    turn = WriteTurn(
        "sig-bedrock", "toolu_w", (120, 60, 2000, 300), (40, 10, 2300, 0), thinking="The user wants a file."
    )
    fake_bedrock.enqueue(*turn.scripts())
    await turn.run_and_check(bedrock_live)

    # Both calls went to the configured model id, SigV4-signed for the configured region and key.
    assert fake_bedrock.model_ids == [MODEL_ID, MODEL_ID]
    signed = fake_bedrock.signature(1)
    assert (signed.access_key_id, signed.region, signed.service) == ("AKIDFAKE", "us-east-2", "bedrock")
    second = fake_bedrock.requests[1]["messages"]
    assert second[1]["content"][0] == {
        "type": "thinking",
        "thinking": "The user wants a file.",
        "signature": "sig-bedrock",
    }
    assert second[2]["content"][0]["tool_use_id"] == "toolu_w"


async def test_throttling_exception_is_retried_into_the_same_message(
    bedrock_live: LiveServer, fake_bedrock: FakeBedrock
) -> None:
    fake_bedrock.enqueue(throttled(), AnthropicScript().text("Recovered.").usage(30, 5))
    sid = (await bedrock_live.create_session())["id"]
    events = EventCollector()
    await events.start(bedrock_live.client, f"/event?sessionID={sid}")
    response = await bedrock_live.prompt(sid, "hello")
    await events.stop()

    assert response.status_code == 200
    body = response.json()
    assert "error" not in body["info"]
    assert texts(body) == ["Recovered."]
    assert body["info"]["tokens"]["input"] == 30 and body["info"]["tokens"]["output"] == 5
    [retry] = [f for f in events.of_type("session.status") if f.properties["status"]["type"] == "retry"]
    assert retry.properties["status"]["message"] == "Too many requests, please wait before trying again."
    assert isinstance(bedrock_live.clock, FakeClock) and len(bedrock_live.clock.slept) == 1  # one back-off
    assert len(fake_bedrock.requests) == 2
    assert (await bedrock_live.client.get("/session/status")).json() == {}


@pytest.mark.parametrize(
    ("script", "name", "message", "kept"),
    [
        (
            lambda: (
                AnthropicScript()
                .text("Starting")
                .error_event("You don't have access to the model.", type="accessDeniedException")
            ),
            "ProviderAuthError",
            "You don't have access to the model.",
            ["Starting"],
        ),
        (
            lambda: http_error(400, "ValidationException", "Input is too long for requested model."),
            "ContextOverflowError",
            "Input is too long",
            [],
        ),
    ],
    ids=["access-denied-exception", "input-too-long"],
)
async def test_non_retryable_failure_is_stored_and_the_session_goes_idle(
    bedrock_live: LiveServer,
    fake_bedrock: FakeBedrock,
    script: Any,
    name: str,
    message: str,
    kept: list[str],
) -> None:
    fake_bedrock.enqueue(script())
    sid = (await bedrock_live.create_session())["id"]
    events = EventCollector()
    await events.start(bedrock_live.client, f"/event?sessionID={sid}")
    response = await bedrock_live.prompt(sid, "hello")
    await events.wait_for(lambda f: f.type == "session.idle")
    await events.stop()

    assert response.status_code == 200
    error = response.json()["info"]["error"]
    assert error["name"] == name and message in error["data"]["message"]
    stored = (await bedrock_live.client.get(f"/session/{sid}/message")).json()[-1]
    assert stored["info"]["error"]["name"] == name
    assert texts(stored) == kept
    assert events.of_type("session.error")[0].properties["error"]["name"] == name
    assert len(fake_bedrock.requests) == 1, "not retried"
    assert (await bedrock_live.client.get("/session/status")).json() == {}

    fake_bedrock.enqueue(AnthropicScript().text("Still here."))
    again = await bedrock_live.prompt(sid, "are you there?")
    assert again.status_code == 200 and texts(again.json()) == ["Still here."]
