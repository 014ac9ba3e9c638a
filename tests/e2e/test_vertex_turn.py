"""A turn through HTTP against the fake Vertex AI endpoint (provider `api: "anthropic-vertex"`, a static
access token, project and region from the provider options): parts, token counts and cost stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from agentforge.llm import anthropic_messages
from tests.e2e.harness import LiveServer, start_live_server
from tests.fakes.anthropic_server import AnthropicScript
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.vertex_server import FakeVertex, VertexCall

MODEL_ID = "claude-sonnet-4-5@20250929"


def vertex_config(fake: FakeVertex) -> dict[str, Any]:
    return {
        "model": "vertex/claude",
        "provider": {
            "vertex": {
                "api": "anthropic-vertex",
                "options": {
                    "baseURL": fake.base_url,
                    "apiKey": fake.access_token,  # a Google OAuth access token
                    "region": "europe-west1",
                    "project": "forge-test",
                },
                "models": {
                    "claude": {
                        "id": MODEL_ID,
                        "limit": {"context": 200_000, "output": 8192},
                        "cost": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75},
                    }
                },
            }
        },
        "retry": {"max_attempts": 2},
        "title": False,
    }


@pytest_asyncio.fixture
async def fake_vertex() -> AsyncIterator[FakeVertex]:
    async with FakeVertex() as fake:
        yield fake


@pytest_asyncio.fixture
async def vertex_live(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_vertex: FakeVertex, database_url: str
) -> AsyncIterator[LiveServer]:
    config = vertex_config(fake_vertex)
    async with start_live_server(tmp_path, fake_openai, config, database_url=database_url) as server:
        yield server
    await anthropic_messages.close_clients()


def texts(message: dict[str, Any]) -> list[str]:
    return [p["text"] for p in message["parts"] if p["type"] == "text"]


async def test_turn_with_thinking_tool_call_and_usage(
    vertex_live: LiveServer, fake_vertex: FakeVertex
) -> None:
    fake_vertex.enqueue(
        AnthropicScript()
        .thinking("Plan the write.", signature="sig-vertex")
        .text("Writing it.")
        .tool_use("write", {"filePath": "notes.txt", "content": "hi\n"}, call_id="toolu_v")
        .usage(200, 80, cache_read=1000, cache_write=100),
        AnthropicScript().text("Done.").usage(50, 8, cache_read=1100),
    )
    session = await vertex_live.create_session()
    response = await vertex_live.prompt(session["id"], "Write notes.txt with hi.")
    assert response.status_code == 200, response.text
    assert (vertex_live.workspace / "notes.txt").read_text() == "hi\n"

    history = (await vertex_live.client.get(f"/session/{session['id']}/message")).json()
    assert [m["info"]["role"] for m in history] == ["user", "assistant", "assistant"]
    first, last = history[1], history[2]
    reasoning = [p for p in first["parts"] if p["type"] == "reasoning"]
    assert [p["text"] for p in reasoning] == ["Plan the write."]
    assert reasoning[0]["metadata"] == {"anthropic": {"signature": "sig-vertex"}}
    assert texts(first) == ["Writing it."]
    tool = next(p for p in first["parts"] if p["type"] == "tool")
    assert tool["tool"] == "write" and tool["callID"] == "toolu_v"
    assert tool["state"]["status"] == "completed"
    assert first["info"]["finish"] == "tool-calls"
    assert first["info"]["tokens"]["input"] == 200 and first["info"]["tokens"]["output"] == 80
    assert first["info"]["tokens"]["cache"] == {"read": 1000, "write": 100}
    # USD per 1M: 200*3 + 80*15 + 1000*0.3 + 100*3.75
    assert abs(first["info"]["cost"] - (600 + 1200 + 300 + 375) / 1_000_000) < 1e-12
    assert texts(last) == ["Done."]
    assert last["info"]["tokens"]["cache"] == {"read": 1100, "write": 0}

    call = VertexCall(project="forge-test", region="europe-west1", model=MODEL_ID)
    assert fake_vertex.calls == [call, call]
    assert all(
        h["authorization"] == f"Bearer {fake_vertex.access_token}" for h in fake_vertex.request_headers
    )
    assert fake_vertex.requests[1]["messages"][2]["content"][0]["tool_use_id"] == "toolu_v"
