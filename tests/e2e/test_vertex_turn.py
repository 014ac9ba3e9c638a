"""A turn through HTTP against the fake Vertex AI endpoint (provider `api: "anthropic-vertex"`, a static
access token, project and region from the provider options): parts, token counts and cost stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from agentforge.llm import anthropic_messages
from tests.e2e.anthropic_turn import WriteTurn, cloud_provider
from tests.e2e.harness import LiveServer, start_live_server
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.vertex_server import FakeVertex, VertexCall

MODEL_ID = "claude-sonnet-4-5@20250929"


def vertex_config(fake: FakeVertex) -> dict[str, Any]:
    options = {
        "baseURL": fake.base_url,
        "apiKey": fake.access_token,  # a Google OAuth access token
        "region": "europe-west1",
        "project": "forge-test",
    }
    return cloud_provider("vertex", "anthropic-vertex", options, MODEL_ID)


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


async def test_turn_with_thinking_tool_call_and_usage(
    vertex_live: LiveServer, fake_vertex: FakeVertex
) -> None:
    turn = WriteTurn("sig-vertex", "toolu_v", (200, 80, 1000, 100), (50, 8, 1100, 0))
    fake_vertex.enqueue(*turn.scripts())
    await turn.run_and_check(vertex_live)

    call = VertexCall(project="forge-test", region="europe-west1", model=MODEL_ID)
    assert fake_vertex.calls == [call, call]
    assert all(
        h["authorization"] == f"Bearer {fake_vertex.access_token}" for h in fake_vertex.request_headers
    )
    assert fake_vertex.requests[1]["messages"][2]["content"][0]["tool_use_id"] == "toolu_v"
