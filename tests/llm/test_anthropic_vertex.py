"""The Anthropic adapter through Google Vertex AI, against the fake Vertex endpoint: the request route,
the static access token, the streamed SSE events and the auth error."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from agentforge.llm import anthropic_messages
from agentforge.llm import events as ev
from agentforge.llm.anthropic_messages import new_client
from agentforge.llm.errors import to_named_error
from agentforge.llm.provider import CloudOptions, ResolvedModel
from agentforge.model.errors import ProviderAuthError
from tests.fakes.anthropic_server import AnthropicScript
from tests.fakes.vertex_server import FakeVertex, VertexCall
from tests.llm.streaming import collect, failure

MODEL_ID = "claude-sonnet-4-5@20250929"
CLOUD = CloudOptions(region="us-east5", project="forge-test")


@pytest_asyncio.fixture
async def fake_vertex() -> AsyncIterator[FakeVertex]:
    async with FakeVertex() as fake:
        yield fake
    await anthropic_messages.close_clients()


def vertex(fake: FakeVertex, **fields: Any) -> ResolvedModel:
    base: dict[str, Any] = {
        "provider_id": "vertex",
        "model_id": MODEL_ID,
        "api": "anthropic-vertex",
        "base_url": fake.base_url,
        "api_key": fake.access_token,
        "headers": {},
        "timeout": 10.0,
        "limit_context": 200_000,
        "limit_output": 4096,
        "limit_input": None,
        "cloud": CLOUD,
    }
    return ResolvedModel(**{**base, **fields})


async def test_stream_raw_predict_streams_the_anthropic_events(fake_vertex: FakeVertex) -> None:
    fake_vertex.enqueue(
        AnthropicScript()
        .thinking("Think.", signature="sig-v")
        .text("Hello")
        .tool_use("read", {"filePath": "a"}, call_id="toolu_v")
        .usage(50, 20, cache_read=10)
    )
    events = await collect(vertex(fake_vertex))
    assert "".join(e.text for e in events if isinstance(e, ev.ReasoningDelta)) == "Think."
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "Hello"
    call = next(e for e in events if isinstance(e, ev.ToolCall))
    assert call.call_id == "toolu_v" and call.input_text == '{"filePath": "a"}'
    finish = next(e for e in events if isinstance(e, ev.StepFinish))
    assert finish.finish_reason == "tool-calls"
    assert (finish.usage.input_tokens, finish.usage.output_tokens, finish.usage.cached_input_tokens) == (
        60,
        20,
        10,
    )

    assert fake_vertex.calls == [VertexCall(project="forge-test", region="us-east5", model=MODEL_ID)]
    assert fake_vertex.request_headers[0]["authorization"] == f"Bearer {fake_vertex.access_token}"
    body = fake_vertex.requests[0]
    assert "model" not in body and body["anthropic_version"] and body["stream"] is True


async def test_rejected_token_is_an_auth_error(fake_vertex: FakeVertex) -> None:
    fake_vertex.enqueue(AnthropicScript().text("never"))
    err = to_named_error(await failure(vertex(fake_vertex, api_key="ya29.expired")), provider_id="vertex")
    assert isinstance(err, ProviderAuthError)
    assert err.data.message == "Request had invalid authentication credentials."


def test_region_and_project_from_options_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLOUD_ML_REGION", "europe-west1")
    monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "env-project")
    model = ResolvedModel(
        provider_id="vertex",
        model_id=MODEL_ID,
        api="anthropic-vertex",
        base_url="",
        api_key="ya29.token",
        headers={},
        timeout=None,
        limit_context=200_000,
        limit_output=4096,
        limit_input=None,
        cloud=CLOUD,
    )
    client = new_client(model)
    assert client.region == "us-east5" and client.project_id == "forge-test"  # type: ignore[union-attr]
    assert str(client.base_url) == "https://us-east5-aiplatform.googleapis.com/v1/"
    from_env = new_client(dataclasses.replace(model, cloud=CloudOptions()))
    assert from_env.region == "europe-west1" and from_env.project_id == "env-project"  # type: ignore[union-attr]
