"""The Anthropic Messages adapter against the fake Anthropic server: events, request, usage, errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from anthropic import AsyncAnthropic, AsyncAnthropicBedrock, AsyncAnthropicVertex

from agentforge.llm import anthropic_messages
from agentforge.llm import events as ev
from agentforge.llm.anthropic_messages import new_client
from agentforge.llm.errors import to_named_error
from agentforge.llm.messages import (
    AssistantModelMessage,
    FileContent,
    ModelRequest,
    ReasoningContent,
    TextContent,
    ToolCallContent,
    ToolModelMessage,
    ToolResultContent,
    ToolSpec,
    UserModelMessage,
)
from agentforge.llm.provider import ResolvedModel
from agentforge.llm.retry import retryable_message
from agentforge.llm.usage import step_usage
from agentforge.model.errors import APIError, ContextOverflowError, ProviderAuthError
from tests.fakes.anthropic_server import AnthropicScript, FakeAnthropic, error_body
from tests.llm.streaming import collect, failure, hello_request, model_for


@pytest_asyncio.fixture(autouse=True)
async def _close_anthropic_clients() -> AsyncIterator[None]:
    yield
    await anthropic_messages.close_clients()


def claude(fake: FakeAnthropic, **fields: Any) -> ResolvedModel:
    return model_for(fake, "claude-test", api="anthropic", **fields)  # type: ignore[arg-type]


def kinds(events: list[ev.StreamEvent]) -> list[str]:
    return [type(event).__name__ for event in events]


async def test_text_streams_in_order_and_finishes(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(AnthropicScript().text("Hello there", chunk_size=5))
    events = await collect(claude(fake_anthropic))
    assert kinds(events) == [
        "StreamStart",
        "StepStart",
        "TextStart",
        "TextDelta",
        "TextDelta",
        "TextDelta",
        "TextEnd",
        "StepFinish",
        "StreamFinish",
    ]
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "Hello there"
    finish = events[-2]
    assert isinstance(finish, ev.StepFinish) and finish.finish_reason == "stop"


async def test_thinking_becomes_reasoning_with_its_signature(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(AnthropicScript().thinking("Let me think.", signature="sig-123").text("Done"))
    events = await collect(claude(fake_anthropic))
    reasoning = [e for e in events if isinstance(e, ev.ReasoningDelta)]
    assert "".join(e.text for e in reasoning) == "Let me think."
    end = next(e for e in events if isinstance(e, ev.ReasoningEnd))
    assert end.metadata == {"anthropic": {"signature": "sig-123"}}
    assert kinds(events).index("ReasoningEnd") < kinds(events).index("TextStart")


async def test_redacted_thinking_keeps_its_data(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(AnthropicScript().redacted_thinking("opaque").text("ok"))
    events = await collect(claude(fake_anthropic))
    start = next(e for e in events if isinstance(e, ev.ReasoningStart))
    assert start.metadata == {"anthropic": {"redactedData": "opaque"}}


async def test_tool_use_input_is_accumulated_into_one_call(fake_anthropic: FakeAnthropic) -> None:
    arguments = {"filePath": "src/main.py", "offset": 10}
    fake_anthropic.enqueue(AnthropicScript().text("Reading.").tool_use("read", arguments, call_id="toolu_1"))
    events = await collect(claude(fake_anthropic))
    start = next(e for e in events if isinstance(e, ev.ToolInputStart))
    call = next(e for e in events if isinstance(e, ev.ToolCall))
    assert (start.id, start.tool_name) == ("toolu_1", "read")
    assert call.call_id == "toolu_1" and call.tool_name == "read"
    assert call.input_text == '{"filePath": "src/main.py", "offset": 10}'
    finish = next(e for e in events if isinstance(e, ev.StepFinish))
    assert finish.finish_reason == "tool-calls"


async def test_tool_without_input_gets_an_empty_object(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(AnthropicScript().tool_use("todoread", ""))
    events = await collect(claude(fake_anthropic))
    call = next(e for e in events if isinstance(e, ev.ToolCall))
    assert call.input_text == "{}"


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool-calls"),
        ("refusal", "content-filter"),
    ],
)
async def test_stop_reasons_map_to_finish_reasons(
    fake_anthropic: FakeAnthropic, stop_reason: str, finish: str
) -> None:
    fake_anthropic.enqueue(AnthropicScript().text("x").stop(stop_reason))
    events = await collect(claude(fake_anthropic))
    step = next(e for e in events if isinstance(e, ev.StepFinish))
    assert step.finish_reason == finish


async def test_usage_counts_cache_reads_and_writes_into_input(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(AnthropicScript().text("hi").usage(100, 40, cache_read=800, cache_write=50))
    events = await collect(claude(fake_anthropic))
    usage = next(e for e in events if isinstance(e, ev.StepFinish)).usage
    assert usage == ev.Usage(
        input_tokens=950, output_tokens=40, cached_input_tokens=800, cache_write_tokens=50, total_tokens=990
    )
    tokens, _ = step_usage(claude(fake_anthropic), usage)
    assert (tokens.input, tokens.output, tokens.cache.read, tokens.cache.write) == (100, 40, 800, 50)


async def test_request_carries_system_tools_and_max_tokens(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(AnthropicScript().text("ok"))
    tool = ToolSpec("read", "Read a file", {"type": "object", "properties": {"filePath": {"type": "string"}}})
    request = hello_request(tools=[tool], tool_choice="required", temperature=0.3)
    await collect(claude(fake_anthropic), request)
    body = fake_anthropic.requests[0]
    assert body["model"] == "claude-test" and body["stream"] is True
    assert body["max_tokens"] == 4096  # the model's output limit
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["tools"] == [{"name": "read", "description": "Read a file", "input_schema": tool.parameters}]
    assert body["tool_choice"] == {"type": "any"}
    assert body["temperature"] == 0.3
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}]}
    ]
    headers = fake_anthropic.request_headers[0]
    # The key travels as `x-api-key` or, in newer SDKs, as a bearer token.
    assert "sk-test" in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))
    assert "anthropic-version" in headers


async def test_thinking_budget_from_model_options_raises_max_tokens(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(AnthropicScript().text("ok"))
    thinking = {"type": "enabled", "budget_tokens": 8000}
    await collect(claude(fake_anthropic, options={"thinking": thinking}), hello_request(temperature=0.5))
    body = fake_anthropic.requests[0]
    assert body["thinking"] == thinking
    assert body["max_tokens"] > 8000
    assert "temperature" not in body  # rejected alongside extended thinking


async def test_history_converts_tool_results_images_and_signed_thinking(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.enqueue(AnthropicScript().text("ok"))
    image = FileContent(mime="image/png", url="data:image/png;base64,iVBORw0=", filename="a.png")
    request = ModelRequest(
        system=["sys"],
        messages=[
            UserModelMessage([TextContent("Look"), image]),
            AssistantModelMessage(
                [
                    ReasoningContent("thought", metadata={"anthropic": {"signature": "sig"}}),
                    ReasoningContent("unsigned thought from another model"),
                    TextContent("Reading"),
                    ToolCallContent("toolu_1", "read", {"filePath": "a.txt"}),
                ]
            ),
            ToolModelMessage([ToolResultContent("toolu_1", "read", "contents", is_error=True)]),
            UserModelMessage([TextContent("And now?")]),
        ],
    )
    await collect(claude(fake_anthropic), request)
    messages = fake_anthropic.requests[0]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0="},
    }
    assert messages[1]["content"][0] == {"type": "thinking", "thinking": "thought", "signature": "sig"}
    assert [b["type"] for b in messages[1]["content"]] == ["thinking", "text", "tool_use"]
    assert messages[1]["content"][2]["input"] == {"filePath": "a.txt"}
    tool_result, follow_up = messages[2]["content"]
    assert tool_result["type"] == "tool_result" and tool_result["tool_use_id"] == "toolu_1"
    assert tool_result["is_error"] is True
    assert tool_result["content"] == [{"type": "text", "text": "contents"}]
    assert follow_up["text"] == "And now?"


async def test_overloaded_status_is_retryable(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(
        AnthropicScript().error_status(529, error_body("Overloaded", type="overloaded_error"))
    )
    err = to_named_error(await failure(claude(fake_anthropic)), provider_id="fake")
    assert isinstance(err, APIError) and err.data.is_retryable and err.data.status_code == 529
    assert retryable_message(err) == "Provider is overloaded"


async def test_rate_limit_keeps_retry_after(fake_anthropic: FakeAnthropic) -> None:
    body = error_body("Rate limited", type="rate_limit_error")
    fake_anthropic.enqueue(AnthropicScript().error_status(429, body, {"retry-after": "3"}))
    err = to_named_error(await failure(claude(fake_anthropic)), provider_id="fake")
    assert isinstance(err, APIError) and err.data.is_retryable
    assert (err.data.response_headers or {}).get("retry-after") == "3"


async def test_invalid_key_is_an_auth_error(fake_anthropic: FakeAnthropic) -> None:
    body = error_body("invalid x-api-key", type="authentication_error")
    fake_anthropic.enqueue(AnthropicScript().error_status(401, body))
    err = to_named_error(await failure(claude(fake_anthropic)), provider_id="fake")
    assert isinstance(err, ProviderAuthError) and err.data.message == "invalid x-api-key"


async def test_prompt_too_long_is_context_overflow(fake_anthropic: FakeAnthropic) -> None:
    body = error_body("prompt is too long: 210000 tokens > 200000 maximum", type="invalid_request_error")
    fake_anthropic.enqueue(AnthropicScript().error_status(400, body))
    err = to_named_error(await failure(claude(fake_anthropic)), provider_id="fake")
    assert isinstance(err, ContextOverflowError)


async def test_streamed_error_event_raises_after_the_parts_before_it(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(AnthropicScript().text("partial").error_event("Overloaded"))
    seen: list[ev.StreamEvent] = []
    with pytest.raises(Exception) as caught:
        async for event in anthropic_messages.stream(claude(fake_anthropic), hello_request()):
            seen.append(event)
    assert "".join(e.text for e in seen if isinstance(e, ev.TextDelta)) == "partial"
    err = to_named_error(caught.value, provider_id="fake")
    assert isinstance(err, APIError) and err.data.is_retryable
    assert retryable_message(err) == "Provider is overloaded"


async def test_dropped_connection_is_a_retryable_error(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(AnthropicScript().text("cut here").drop())
    err = to_named_error(await failure(claude(fake_anthropic)), provider_id="fake")
    assert isinstance(err, APIError) and err.data.is_retryable


async def test_malformed_event_is_a_non_retryable_error(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(AnthropicScript().raw("{not json"))
    err = to_named_error(await failure(claude(fake_anthropic)), provider_id="fake")
    assert isinstance(err, APIError) and not err.data.is_retryable


async def test_leaving_early_closes_the_stream(fake_anthropic: FakeAnthropic) -> None:
    gate = asyncio.Event()
    fake_anthropic.enqueue(AnthropicScript().text("first").pause(gate).text("never"))
    events = anthropic_messages.stream(claude(fake_anthropic), hello_request())
    assert isinstance(events, AsyncGenerator)
    async for event in events:
        if isinstance(event, ev.TextDelta):
            break
    await events.aclose()
    for _ in range(100):
        if fake_anthropic.disconnects:
            break
        await asyncio.sleep(0.01)
    assert fake_anthropic.disconnects == 1


def test_clients_for_each_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.delenv("CLOUD_ML_REGION", raising=False)
    base: dict[str, Any] = {
        "provider_id": "p",
        "model_id": "claude",
        "api_key": "",
        "headers": {},
        "timeout": None,
        "limit_context": 200_000,
        "limit_output": 64_000,
        "limit_input": None,
    }
    direct = new_client(ResolvedModel(api="anthropic", base_url="https://api.anthropic.com/v1", **base))
    assert isinstance(direct, AsyncAnthropic) and str(direct.base_url) == "https://api.anthropic.com"
    bedrock_url = "https://bedrock-runtime.us-west-2.amazonaws.com"
    bedrock = new_client(ResolvedModel(api="anthropic-bedrock", base_url=bedrock_url, **base))
    assert isinstance(bedrock, AsyncAnthropicBedrock) and bedrock.aws_region == "us-west-2"
    assert bedrock.max_retries == 0
    vertex_url = "https://us-east5-aiplatform.googleapis.com/v1"
    vertex = new_client(
        ResolvedModel(api="anthropic-vertex", base_url=vertex_url, **{**base, "api_key": "ya29.token"})
    )
    assert isinstance(vertex, AsyncAnthropicVertex) and vertex.region == "us-east5"
    assert vertex.access_token == "ya29.token" and vertex.max_retries == 0


async def test_unicode_line_separators_inside_an_event_do_not_split_it(fake_anthropic: FakeAnthropic) -> None:
    # Raw, as some servers send them: U+2028 / U+2029 / U+0085 unescaped inside a JSON string. The
    # fake's raw events have no `event:` line: the type is read from the JSON.
    text = "one\u2028two\u2029three\x85four"
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
    stop = {"type": "content_block_stop", "index": 0}
    script = AnthropicScript()
    for event in (block, delta, stop):
        script.raw(json.dumps(event, ensure_ascii=False))
    fake_anthropic.enqueue(script)
    events = await collect(claude(fake_anthropic))
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == text
    assert kinds(events)[2:] == ["TextStart", "TextDelta", "TextEnd", "StepFinish", "StreamFinish"]
