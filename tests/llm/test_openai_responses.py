"""The OpenAI Responses adapter against the wire-level Responses fake."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest_asyncio

from agentforge.llm import events as ev
from agentforge.llm.errors import ProviderStreamError, to_named_error
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
from agentforge.model.errors import APIError, ContextOverflowError
from tests.fakes.responses_server import FakeResponses, ResponsesScript
from tests.llm.streaming import collect, failure

PNG = "data:image/png;base64,iVBORw0KGgo="


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[FakeResponses]:
    async with FakeResponses() as server:
        yield server


def model_for(fake: FakeResponses, **fields: object) -> ResolvedModel:
    base: dict[str, object] = {
        "provider_id": "fake",
        "model_id": "gpt-5",
        "api": "openai-responses",
        "base_url": fake.base_url,
        "api_key": "sk-test",
        "headers": {},
        "timeout": 10.0,
        "limit_context": 400_000,
        "limit_output": 128_000,
        "limit_input": None,
    }
    return ResolvedModel(**{**base, **fields})  # type: ignore[arg-type]


def kinds(events: list[ev.StreamEvent]) -> list[str]:
    return [type(event).__name__ for event in events]


async def test_reasoning_text_tool_call_and_usage(fake: FakeResponses) -> None:
    fake.enqueue(
        ResponsesScript()
        .reasoning("Plan it.")
        .text("Let me read.")
        .tool_call("read", {"filePath": "a.txt"}, call_id="call_7")
        .with_usage(200, 60, reasoning=25, cached=120)
    )
    events = await collect(model_for(fake))

    assert kinds(events) == [
        "StreamStart",
        "StepStart",
        "ReasoningStart",
        "ReasoningDelta",
        "ReasoningDelta",
        "ReasoningEnd",
        "TextStart",
        *["TextDelta"] * 3,
        "TextEnd",
        "ToolInputStart",
        "ToolCall",
        "StepFinish",
        "StreamFinish",
    ]
    assert "".join(e.text for e in events if isinstance(e, ev.ReasoningDelta)) == "Plan it."
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "Let me read."
    start = next(e for e in events if isinstance(e, ev.ReasoningStart))
    assert start.metadata == {"openai": {"itemId": start.id}} and start.id.startswith("rs_")
    call = next(e for e in events if isinstance(e, ev.ToolCall))
    assert (call.call_id, call.tool_name, call.input_text) == ("call_7", "read", '{"filePath": "a.txt"}')
    finish = next(e for e in events if isinstance(e, ev.StepFinish))
    assert finish.finish_reason == "tool-calls"
    assert finish.usage == ev.Usage(200, 60, reasoning_tokens=25, cached_input_tokens=120, total_tokens=260)


async def test_text_only_finishes_with_stop(fake: FakeResponses) -> None:
    fake.enqueue(ResponsesScript().text("Hi there").with_usage(5, 2))
    events = await collect(model_for(fake))
    finish = next(e for e in events if isinstance(e, ev.StepFinish))
    assert finish.finish_reason == "stop"
    assert kinds(events)[-2:] == ["StepFinish", "StreamFinish"]


async def test_incomplete_response_maps_its_reason(fake: FakeResponses) -> None:
    fake.enqueue(ResponsesScript().text("cut").incomplete("max_output_tokens"))
    events = await collect(model_for(fake))
    assert next(e for e in events if isinstance(e, ev.StepFinish)).finish_reason == "length"


async def test_request_carries_input_items_tools_and_options(fake: FakeResponses) -> None:
    fake.enqueue(ResponsesScript().text("ok"))
    request = ModelRequest(
        system=["Be brief."],
        messages=[
            UserModelMessage([TextContent("Look"), FileContent("image/png", PNG, "a.png")]),
            AssistantModelMessage(
                [
                    ReasoningContent("hidden"),
                    TextContent("Reading."),
                    ToolCallContent("call_1", "read", {"filePath": "a.txt"}),
                ]
            ),
            ToolModelMessage(
                [ToolResultContent("call_1", "read", "contents", attachments=[FileContent("image/png", PNG)])]
            ),
        ],
        tools=[ToolSpec("read", "Read a file", {"type": "object", "properties": {}})],
        tool_choice="auto",
        max_output_tokens=1000,
        temperature=0.2,
        options={"reasoning": {"effort": "low"}},
    )
    await collect(model_for(fake, options={"store": False}), request)

    body = fake.requests[0]
    assert body["model"] == "gpt-5" and body["stream"] is True
    assert body["input"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Look"},
                {"type": "input_image", "image_url": PNG, "detail": "auto"},
            ],
        },
        {"role": "assistant", "content": "Reading."},
        {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": '{"filePath":"a.txt"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "contents"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Attached image(s) from tool result:"},
                {"type": "input_image", "image_url": PNG, "detail": "auto"},
            ],
        },
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "read",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
        }
    ]
    assert body["tool_choice"] == "auto" and body["max_output_tokens"] == 1000 and body["temperature"] == 0.2
    assert body["reasoning"] == {"effort": "low"} and body["store"] is False


async def test_response_failed_is_a_named_error(fake: FakeResponses) -> None:
    fake.enqueue(ResponsesScript().text("partial").failed("The server had an error", code="server_error"))
    error = await failure(model_for(fake))
    assert isinstance(error, ProviderStreamError)
    named = to_named_error(error, provider_id="fake")
    assert isinstance(named, APIError) and named.data.is_retryable


async def test_error_event_context_overflow(fake: FakeResponses) -> None:
    fake.enqueue(
        ResponsesScript().error_event(
            "Your input exceeds the context window of this model.", code="context_length_exceeded"
        )
    )
    named = to_named_error(await failure(model_for(fake)), provider_id="fake")
    assert isinstance(named, ContextOverflowError)


async def test_error_event_rate_limit_is_retryable(fake: FakeResponses) -> None:
    fake.enqueue(ResponsesScript().error_event("Slow down", code="rate_limit_exceeded"))
    named = to_named_error(await failure(model_for(fake)), provider_id="fake")
    assert isinstance(named, APIError) and named.data.is_retryable and named.data.message == "Slow down"


async def test_unicode_line_separators_inside_an_event_do_not_split_it(fake: FakeResponses) -> None:
    # Raw, as some servers send them: U+2028 / U+2029 / U+0085 unescaped inside a JSON string.
    text = "one\u2028two\u2029three\x85four"
    delta = {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "delta": text}
    event = json.dumps(delta, ensure_ascii=False)
    assert "\u2028" in event, "sent unescaped"
    fake.enqueue(ResponsesScript().raw(event))
    events = await collect(model_for(fake))
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == text
    assert kinds(events)[-3:] == ["TextEnd", "StepFinish", "StreamFinish"]
