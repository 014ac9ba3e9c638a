"""Azure OpenAI: Chat Completions through `AsyncAzureOpenAI`, against the OpenAI fake's Azure route."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from agentforge.config import ConfigError
from agentforge.llm import azure_openai, openai_chat
from agentforge.llm import events as ev
from agentforge.llm.errors import MissingApiKeyError
from agentforge.llm.pool import shared_ssl_context
from tests.fakes.openai_server import FakeOpenAI, Script
from tests.llm.streaming import collect, failure, model_for


@pytest_asyncio.fixture(autouse=True)
async def _close_azure_clients() -> AsyncIterator[None]:
    yield
    await azure_openai.close_clients()


async def test_text_reasoning_tool_call_and_usage_over_the_azure_route(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(
        Script()
        .reasoning("Think.")
        .text("Reading.")
        .tool_call("read", {"filePath": "a.txt"}, call_id="call_1")
        .usage(100, 40, reasoning=10, cached=30)
        .finish()
    )
    events = await collect(
        model_for(
            fake_openai, "gpt-4o-deploy", api="azure", base_url=fake_openai.origin, api_version="2024-10-21"
        )
    )

    assert "".join(e.text for e in events if isinstance(e, ev.ReasoningDelta)) == "Think."
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "Reading."
    calls = [e for e in events if isinstance(e, ev.ToolCall)]
    assert [(c.call_id, c.tool_name, c.input_text) for c in calls] == [
        ("call_1", "read", '{"filePath": "a.txt"}')
    ]
    finish = next(e for e in events if isinstance(e, ev.StepFinish))
    assert finish.finish_reason == "tool-calls"
    assert finish.usage == ev.Usage(100, 40, reasoning_tokens=10, cached_input_tokens=30, total_tokens=140)

    assert fake_openai.request_paths == ["/openai/deployments/gpt-4o-deploy/chat/completions"]
    assert fake_openai.request_queries == ["api-version=2024-10-21"]
    headers = fake_openai.request_headers[0]
    assert headers["api-key"] == "sk-test" and "authorization" not in headers
    assert fake_openai.requests[0]["messages"][0] == {"role": "system", "content": "You are terse."}


async def test_missing_key_and_missing_api_version_are_clear_errors(fake_openai: FakeOpenAI) -> None:
    common = {"api": "azure", "base_url": fake_openai.origin}
    no_key = await failure(model_for(fake_openai, api_key="", api_version="2024-10-21", **common))
    assert isinstance(no_key, MissingApiKeyError)
    no_version = await failure(model_for(fake_openai, **common))
    assert isinstance(no_version, ConfigError) and "apiVersion" in str(no_version)
    assert fake_openai.requests == []


async def test_the_sdk_client_sends_on_a_pool_configured_as_the_others(fake_openai: FakeOpenAI) -> None:
    """One SSL context per process (llm/pool.py), not one built per Azure client."""
    model = model_for(fake_openai, api="azure", base_url=fake_openai.origin, api_version="2024-10-21")
    http = azure_openai.client_for(model)._client
    assert http._transport._pool._ssl_context is shared_ssl_context()  # type: ignore[attr-defined]
    assert http.timeout == openai_chat.SDK_TIMEOUT and http.follow_redirects
