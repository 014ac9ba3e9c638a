"""The Google Gemini adapter (SDK transport, raw stream decoding) against the wire-level Gemini fake."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from agentforge.llm import events as ev
from agentforge.llm import google_gemini
from agentforge.llm.adapter import stream
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
from agentforge.llm.pool import pooled_clients
from agentforge.llm.provider import ResolvedModel
from agentforge.model.errors import APIError, ContextOverflowError, ProviderAuthError
from tests.fakes.gemini_server import FakeGemini, GeminiScript
from tests.llm.streaming import collect, failure, hello_request


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


async def _until_failure(model: ResolvedModel) -> tuple[list[ev.StreamEvent], BaseException]:
    """The events streamed before the call failed, and the failure."""
    events: list[ev.StreamEvent] = []
    with pytest.raises(Exception) as caught:
        async for event in stream(model, hello_request()):
            events.append(event)
    return events, caught.value


async def test_error_chunk_mid_stream_is_a_named_retryable_error_after_the_parts_before_it(
    fake: FakeGemini,
) -> None:
    fake.enqueue(GeminiScript().text("partial").error_chunk(503, "The model is overloaded.", "UNAVAILABLE"))
    events, error = await _until_failure(model_for(fake))
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == "partial"
    named = to_named_error(error, provider_id="gemini")
    assert isinstance(named, APIError) and named.data.is_retryable
    assert named.data.status_code == 503 and named.data.message == "The model is overloaded."


async def test_malformed_chunk_is_a_named_error_that_is_not_retried(fake: FakeGemini) -> None:
    fake.enqueue(GeminiScript().text("partial").raw('{"candidates": [{"content": {"par'))
    events, error = await _until_failure(model_for(fake))
    assert any(isinstance(e, ev.TextDelta) for e in events)
    named = to_named_error(error, provider_id="gemini")
    assert isinstance(named, APIError) and not named.data.is_retryable
    assert named.data.message == "Invalid JSON in provider stream"
    assert named.data.response_body == '{"candidates": [{"content": {"par'


async def test_rate_limit_keeps_the_response_headers_for_the_retry_delay(fake: FakeGemini) -> None:
    fake.enqueue(
        GeminiScript().error(
            429, "Resource has been exhausted", "RESOURCE_EXHAUSTED", headers={"retry-after": "7"}
        )
    )
    named = to_named_error(await failure(model_for(fake)), provider_id="gemini")
    assert isinstance(named, APIError) and named.data.is_retryable
    assert (named.data.response_headers or {}).get("retry-after") == "7"


async def test_blocked_prompt_finishes_as_content_filter(fake: FakeGemini) -> None:
    fake.enqueue(GeminiScript().blocked("PROHIBITED_CONTENT"))
    events = await collect(model_for(fake))
    assert [type(e).__name__ for e in events] == ["StreamStart", "StepStart", "StepFinish", "StreamFinish"]
    assert next(e for e in events if isinstance(e, ev.StepFinish)).finish_reason == "content-filter"


async def test_unicode_line_separators_inside_a_chunk_do_not_split_it(fake: FakeGemini) -> None:
    # Raw, as Google may send it: U+2028 / U+2029 / U+0085 unescaped inside a JSON string.
    text = "one\u2028two\u2029three\x85four"
    part = json.dumps({"text": text}, ensure_ascii=False)
    chunk = f'{{"candidates": [{{"content": {{"role": "model", "parts": [{part}]}}, "index": 0}}]}}'
    assert "\u2028" in chunk, "sent unescaped"
    fake.enqueue(GeminiScript().raw(chunk))
    events = await collect(model_for(fake))
    assert "".join(e.text for e in events if isinstance(e, ev.TextDelta)) == text


async def test_files_go_as_inline_base64_data(fake: FakeGemini) -> None:
    fake.enqueue(GeminiScript().text("ok"))
    png = base64.b64encode(b"\x89PNG fake").decode()
    request = ModelRequest(
        system=[],
        messages=[
            UserModelMessage(
                [
                    TextContent("Look"),
                    FileContent("image/png", f"data:image/png;base64,{png}"),
                    FileContent("text/plain", "data:text/plain,hello%20there"),
                ]
            )
        ],
    )
    await collect(model_for(fake), request)
    assert fake.requests[0]["contents"][0]["parts"] == [
        {"text": "Look"},
        {"inlineData": {"mimeType": "image/png", "data": png}},
        {"inlineData": {"mimeType": "text/plain", "data": base64.b64encode(b"hello there").decode()}},
    ]


async def test_closing_the_pool_closes_the_sdk_clients_connections(fake: FakeGemini) -> None:
    fake.enqueue(GeminiScript().text("ok"), GeminiScript().text("again"))
    await collect(model_for(fake))
    await collect(model_for(fake))
    assert fake.connections == 1, "the SDK sends through the pooled httpx client, keeping the connection"
    [client] = pooled_clients()
    assert client.sdk.aio._api_client._async_httpx_client is client.http
    assert not client.http.is_closed
    await google_gemini.close_clients()
    assert client.http.is_closed and pooled_clients() == []


async def test_thought_signature_is_kept_on_the_call_it_came_with(fake: FakeGemini) -> None:
    # Parallel calls: Gemini 3 signs only the first call of the step.
    fake.enqueue(
        GeminiScript()
        .function_call("read", {"filePath": "a.txt"}, call_id="fc-1", thought_signature="c2lnLTE=")
        .function_call("read", {"filePath": "b.txt"}, call_id="fc-2")
    )
    calls = [e for e in await collect(model_for(fake)) if isinstance(e, ev.ToolCall)]
    assert [(call.call_id, call.metadata) for call in calls] == [
        ("fc-1", {"google": {"thoughtSignature": "c2lnLTE="}}),
        ("fc-2", None),
    ]


async def test_thought_signature_goes_back_on_its_function_call_part(fake: FakeGemini) -> None:
    fake.enqueue(GeminiScript().text("ok"))
    signed = {"google": {"thoughtSignature": "c2lnLTE="}}
    foreign = {"anthropic": {"signature": "not ours"}}
    request = ModelRequest(
        system=[],
        messages=[
            UserModelMessage([TextContent("Read a.txt and b.txt")]),
            AssistantModelMessage(
                [
                    ToolCallContent("fc-1", "read", {"filePath": "a.txt"}, metadata=signed),
                    ToolCallContent("fc-2", "read", {"filePath": "b.txt"}, metadata=foreign),
                ]
            ),
            ToolModelMessage([ToolResultContent(call, "read", "text") for call in ("fc-1", "fc-2")]),
        ],
    )
    await collect(model_for(fake), request)
    assert fake.requests[0]["contents"][1]["parts"] == [
        {
            "functionCall": {"id": "fc-1", "name": "read", "args": {"filePath": "a.txt"}},
            "thoughtSignature": "c2lnLTE=",
        },
        {"functionCall": {"id": "fc-2", "name": "read", "args": {"filePath": "b.txt"}}},
    ]
