"""The Google Gemini adapter (google-genai) against the wire-level Gemini fake."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest_asyncio

from agentforge.llm import events as ev
from agentforge.llm import google_gemini
from agentforge.llm.errors import to_named_error
from agentforge.llm.messages import (
    AssistantModelMessage,
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
from agentforge.model.errors import APIError, ContextOverflowError, ProviderAuthError
from tests.fakes.gemini_server import FakeGemini, GeminiScript
from tests.llm.streaming import collect, failure


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[FakeGemini]:
    async with FakeGemini() as server:
        yield server
        await google_gemini.close_clients()


def model_for(fake: FakeGemini, **fields: object) -> ResolvedModel:
    base: dict[str, object] = {
        "provider_id": "gemini",
        "model_id": "gemini-2.5-flash",
        "api": "google",
        "base_url": fake.base_url,
        "api_key": "g-key",
        "headers": {},
        "timeout": 10.0,
        "limit_context": 1_000_000,
        "limit_output": 65_536,
        "limit_input": None,
    }
    return ResolvedModel(**{**base, **fields})  # type: ignore[arg-type]


async def test_thoughts_text_function_call_and_usage(fake: FakeGemini) -> None:
    fake.enqueue(
        GeminiScript()
        .thought("Consider.")
        .text("Reading now.")
        .function_call("read", {"filePath": "a.txt"}, call_id="fc-1")
        .with_usage(300, 40, thoughts=20, cached=100)
    )
    events = await collect(model_for(fake))

    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "StreamStart",
        "StepStart",
        "ReasoningStart",
        *["ReasoningDelta"] * 3,
        "ReasoningEnd",
        "TextStart",
        *["TextDelta"] * 3,
        "TextEnd",
        "ToolInputStart",
        "ToolCall",
        "StepFinish",
        "StreamFinish",
    ]
    assert "".join(e.text for e in events if isinstance(e, ev.ReasoningDelta)) == "Consider."
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "Reading now."
    call = next(e for e in events if isinstance(e, ev.ToolCall))
    assert (call.call_id, call.tool_name, json.loads(call.input_text)) == (
        "fc-1",
        "read",
        {"filePath": "a.txt"},
    )
    finish = next(e for e in events if isinstance(e, ev.StepFinish))
    assert finish.finish_reason == "tool-calls"
    # Thoughts are counted inside our output, as the other providers count reasoning.
    assert finish.usage == ev.Usage(300, 60, reasoning_tokens=20, cached_input_tokens=100, total_tokens=360)
    assert fake.models == ["gemini-2.5-flash"]
    assert fake.request_headers[0]["x-goog-api-key"] == "g-key"


async def test_finish_reasons(fake: FakeGemini) -> None:
    fake.enqueue(GeminiScript().text("cut").finish("MAX_TOKENS"), GeminiScript().text("no").finish("SAFETY"))
    first = await collect(model_for(fake))
    second = await collect(model_for(fake))
    reasons = [next(e for e in run if isinstance(e, ev.StepFinish)).finish_reason for run in (first, second)]
    assert reasons == ["length", "content-filter"]


async def test_call_without_id_gets_one(fake: FakeGemini) -> None:
    fake.enqueue(GeminiScript().function_call("list", {}))
    call = next(e for e in await collect(model_for(fake)) if isinstance(e, ev.ToolCall))
    assert call.call_id.startswith("call_") and call.input_text == "{}"


async def test_request_contents_system_tools_and_options(fake: FakeGemini) -> None:
    fake.enqueue(GeminiScript().text("ok"))
    request = ModelRequest(
        system=["Be brief.", "Use tools."],
        messages=[
            UserModelMessage([TextContent("Read a.txt")]),
            AssistantModelMessage(
                [
                    ReasoningContent("hmm"),
                    TextContent("Sure."),
                    ToolCallContent("c1", "read", {"filePath": "a.txt"}),
                ]
            ),
            ToolModelMessage([ToolResultContent("c1", "read", "hello")]),
        ],
        tools=[
            ToolSpec(
                "read", "Read a file", {"type": "object", "properties": {"filePath": {"type": "string"}}}
            )
        ],
        tool_choice="required",
        max_output_tokens=500,
        temperature=0.5,
    )
    await collect(model_for(fake, options={"thinking_config": {"include_thoughts": True}}), request)

    body = fake.requests[0]
    assert body["systemInstruction"]["parts"] == [{"text": "Be brief.\n\nUse tools."}]
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Read a.txt"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Sure."},
                {"functionCall": {"id": "c1", "name": "read", "args": {"filePath": "a.txt"}}},
            ],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"id": "c1", "name": "read", "response": {"output": "hello"}}}],
        },
    ]
    declaration = body["tools"][0]["functionDeclarations"][0]
    # The SDK sends this field in its proto name; the API's JSON parser accepts both spellings.
    schema = declaration.get("parametersJsonSchema") or declaration.get("parameters_json_schema")
    assert declaration["name"] == "read" and schema == request.tools[0].parameters
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    config = body["generationConfig"]
    assert config["maxOutputTokens"] == 500 and config["temperature"] == 0.5
    assert config["thinkingConfig"] in ({"includeThoughts": True}, {"include_thoughts": True})


async def test_http_errors_are_named(fake: FakeGemini) -> None:
    fake.enqueue(
        GeminiScript().error(400, "API key not valid. Please pass a valid API key.", "INVALID_ARGUMENT"),
        GeminiScript().error(
            400, "The input token count (2000000) exceeds the maximum number of tokens", "INVALID_ARGUMENT"
        ),
        GeminiScript().error(429, "Resource has been exhausted", "RESOURCE_EXHAUSTED"),
    )
    auth, overflow, busy = [
        to_named_error(await failure(model_for(fake)), provider_id="gemini") for _ in range(3)
    ]
    assert isinstance(auth, ProviderAuthError)
    assert isinstance(overflow, ContextOverflowError)
    assert isinstance(busy, APIError) and busy.data.is_retryable and busy.data.status_code == 429


async def test_unreachable_endpoint_is_a_retryable_api_error(fake: FakeGemini) -> None:
    named = to_named_error(
        await failure(model_for(fake, base_url="http://127.0.0.1:9")), provider_id="gemini"
    )
    assert isinstance(named, APIError) and named.data.is_retryable
    assert named.data.message.startswith("Cannot connect to provider")
