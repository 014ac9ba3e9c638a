"""The OpenAI Chat Completions adapter against the wire-level fake provider."""

from __future__ import annotations

import asyncio
import gzip
import json

import httpx2
import pytest
from openai import AsyncOpenAI

from agentforge.llm import events as ev
from agentforge.llm import openai_chat
from agentforge.llm.adapter import UnsupportedApiError, stream
from agentforge.llm.errors import MissingApiKeyError, ProviderStreamError, to_named_error
from agentforge.llm.messages import (
    AssistantModelMessage,
    FileContent,
    ModelMessage,
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
from agentforge.llm.retry import retry_delay_ms, retryable_message
from agentforge.model.errors import APIError, ContextOverflowError, ProviderAuthError
from tests.fakes.openai_server import FakeOpenAI, Script, call, reply
from tests.llm.streaming import collect, failure, hello_request, model_for

PNG = "data:image/png;base64,iVBORw0KGgo="


def kinds(events: list[ev.StreamEvent]) -> list[str]:
    return [type(event).__name__ for event in events]


def text_of(events: list[ev.StreamEvent], kind: type[ev.TextDelta] | type[ev.ReasoningDelta]) -> str:
    return "".join(e.text for e in events if isinstance(e, kind))


def step_finish(events: list[ev.StreamEvent]) -> ev.StepFinish:
    finishes = [e for e in events if isinstance(e, ev.StepFinish)]
    assert len(finishes) == 1
    return finishes[0]


async def test_text_only_stream(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(reply("Hello, world!"))
    events = await collect(model_for(fake_openai))

    assert kinds(events) == [
        "StreamStart",
        "StepStart",
        "TextStart",
        *["TextDelta"] * 4,
        "TextEnd",
        "StepFinish",
        "StreamFinish",
    ]
    assert text_of(events, ev.TextDelta) == "Hello, world!"
    start, end = events[2], events[7]
    assert isinstance(start, ev.TextStart) and isinstance(end, ev.TextEnd) and start.id == end.id
    assert step_finish(events).finish_reason == "stop"
    body = fake_openai.requests[0]
    assert body["model"] == "test-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hi"},
    ]
    assert "tools" not in body


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_then_text(fake_openai: FakeOpenAI, field: str) -> None:
    fake_openai.enqueue(Script().reasoning("Let me think.", field=field).text("Answer").usage(10, 5))
    events = await collect(model_for(fake_openai))

    assert kinds(events)[:3] == ["StreamStart", "StepStart", "ReasoningStart"]
    assert text_of(events, ev.ReasoningDelta) == "Let me think."
    assert text_of(events, ev.TextDelta) == "Answer"
    reasoning_end = kinds(events).index("ReasoningEnd")
    assert reasoning_end < kinds(events).index("TextStart")
    ids = {e.id for e in events if isinstance(e, ev.ReasoningStart | ev.TextStart)}
    assert len(ids) == 2


async def test_one_tool_call(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Script().tool_call("read", {"path": "src/app.py", "limit": 20}, call_id="call_1"))
    events = await collect(model_for(fake_openai))

    assert kinds(events) == [
        "StreamStart",
        "StepStart",
        "ToolInputStart",
        "ToolCall",
        "StepFinish",
        "StreamFinish",
    ]
    start, tool_call = events[2], events[3]
    assert start == ev.ToolInputStart(id="call_1", tool_name="read")
    assert isinstance(tool_call, ev.ToolCall)
    assert (tool_call.call_id, tool_call.tool_name) == ("call_1", "read")
    assert json.loads(tool_call.input_text) == {"path": "src/app.py", "limit": 20}
    assert step_finish(events).finish_reason == "tool-calls"


async def test_text_then_two_parallel_tool_calls(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(
        Script()
        .text("Reading both.")
        .tool_call("read", {"path": "a.txt"}, call_id="call_a")
        .tool_call("glob", {"pattern": "**/*.py"}, call_id="call_b")
        .usage(50, 30)
    )
    events = await collect(model_for(fake_openai))

    names = kinds(events)
    assert names.index("TextEnd") < names.index("ToolInputStart")
    starts = [e for e in events if isinstance(e, ev.ToolInputStart)]
    calls = [e for e in events if isinstance(e, ev.ToolCall)]
    assert [(s.id, s.tool_name) for s in starts] == [("call_a", "read"), ("call_b", "glob")]
    assert [(c.call_id, c.tool_name) for c in calls] == [("call_a", "read"), ("call_b", "glob")]
    assert [json.loads(c.input_text) for c in calls] == [{"path": "a.txt"}, {"pattern": "**/*.py"}]
    # Calls complete at the end, after both inputs started, in index order.
    assert names.index("ToolCall") > max(i for i, n in enumerate(names) if n == "ToolInputStart")
    assert step_finish(events).finish_reason == "tool-calls"


async def test_tool_call_without_arguments_gets_an_empty_object(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Script().tool_call("todoread", "", call_id="call_x"))
    events = await collect(model_for(fake_openai))
    tool_call = next(e for e in events if isinstance(e, ev.ToolCall))
    assert tool_call.input_text == "{}"


async def test_usage_is_read_from_the_final_chunk(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Script().text("ok").usage(1200, 300, reasoning=120, cached=1000))
    usage = step_finish(await collect(model_for(fake_openai))).usage
    assert usage == ev.Usage(
        input_tokens=1200,
        output_tokens=300,
        reasoning_tokens=120,
        cached_input_tokens=1000,
        cache_write_tokens=0,
        total_tokens=1500,
    )


async def test_usage_defaults_to_zero_when_the_provider_sends_none(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Script().text("ok"))
    assert step_finish(await collect(model_for(fake_openai))).usage == ev.Usage()


@pytest.mark.parametrize(
    ("provider_reason", "ours"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool-calls"),
        ("function_call", "tool-calls"),
        ("content_filter", "content-filter"),
        ("something_new", "other"),
    ],
)
async def test_finish_reason_mapping(fake_openai: FakeOpenAI, provider_reason: str, ours: str) -> None:
    fake_openai.enqueue(Script().text("x").finish(provider_reason))
    assert step_finish(await collect(model_for(fake_openai))).finish_reason == ours


async def test_tool_calls_with_stop_keep_stop(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Script().tool_call("read", {"path": "a"}).finish("stop"))
    events = await collect(model_for(fake_openai))
    assert any(isinstance(e, ev.ToolCall) for e in events)
    assert step_finish(events).finish_reason == "stop"


async def test_request_carries_history_tools_and_options(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(reply("done"))
    request = ModelRequest(
        system=["Base prompt.", "Project rules."],
        messages=[
            UserModelMessage([TextContent("Look at this"), FileContent(mime="image/png", url=PNG)]),
            AssistantModelMessage(
                [
                    ReasoningContent("hidden thoughts"),
                    TextContent("Reading it."),
                    ToolCallContent(call_id="call_1", tool_name="read", input={"path": "a.png"}),
                ]
            ),
            ToolModelMessage(
                [
                    ToolResultContent(
                        call_id="call_1",
                        tool_name="read",
                        output="Image read",
                        attachments=[FileContent(mime="image/png", url=PNG)],
                    )
                ]
            ),
        ],
        tools=[
            ToolSpec("read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
        ],
        tool_choice="auto",
        temperature=0.3,
        top_p=0.9,
        max_output_tokens=2048,
        options={"seed": 7, "metadata": {"b": "2"}},
        headers={"X-Request": "r1"},
    )
    model = model_for(fake_openai, options={"metadata": {"a": "1"}}, headers={"X-Model": "m1"})
    await collect(model, request)

    body = fake_openai.requests[0]
    assert body["messages"] == [
        {"role": "system", "content": "Base prompt."},
        {"role": "system", "content": "Project rules."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look at this"},
                {"type": "image_url", "image_url": {"url": PNG}},
            ],
        },
        {
            "role": "assistant",
            "content": "Reading it.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path":"a.png"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Image read"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Attached image(s) from tool result:"},
                {"type": "image_url", "image_url": {"url": PNG}},
            ],
        },
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ]
    assert body["tool_choice"] == "auto"
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.3, 0.9, 2048)
    assert body["seed"] == 7
    assert body["metadata"] == {"a": "1", "b": "2"}
    headers = fake_openai.request_headers[0]
    assert (headers["x-model"], headers["x-request"]) == ("m1", "r1")
    assert headers["authorization"] == "Bearer sk-test"


def test_each_model_message_is_turned_into_chat_messages_once_while_it_lives() -> None:
    history: list[ModelMessage] = [
        UserModelMessage([TextContent("Hi")]),
        AssistantModelMessage([ToolCallContent(call_id="call_1", tool_name="read", input={"path": "a"})]),
        ToolModelMessage([ToolResultContent(call_id="call_1", tool_name="read", output="A")]),
    ]
    first = openai_chat.chat_messages(ModelRequest(system=["s"], messages=history))
    again = openai_chat.chat_messages(ModelRequest(system=["t"], messages=[*history, UserModelMessage([])]))
    assert again[1:4] == first[1:] and all(k is m for k, m in zip(again[1:4], first[1:], strict=True))
    assert again[0] == {"role": "system", "content": "t"}
    assert again[4] == {"role": "user", "content": []}


@pytest.mark.parametrize("model_id", ["o3", "o4-mini", "gpt-5-mini"])
async def test_reasoning_models_get_max_completion_tokens(fake_openai: FakeOpenAI, model_id: str) -> None:
    fake_openai.enqueue(reply("ok"))
    await collect(model_for(fake_openai, model_id), hello_request(max_output_tokens=1000))
    body = fake_openai.requests[0]
    assert body["max_completion_tokens"] == 1000
    assert "max_tokens" not in body


async def test_provider_model_id_is_sent_when_configured(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(reply("ok"))
    await collect(model_for(fake_openai, "qwen", api_model_id="qwen2.5-coder:7b"))
    assert fake_openai.requests[0]["model"] == "qwen2.5-coder:7b"


async def test_client_is_reused_across_calls(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(reply("one"), reply("two"))
    model = model_for(fake_openai)
    await collect(model)
    await collect(model)
    assert len(fake_openai.requests) == 2
    assert fake_openai.connections == 1  # the pooled keep-alive connection served both


async def test_http_401_is_a_provider_auth_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(
        Script().error_status(
            401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}
        )
    )
    error = to_named_error(await failure(model_for(fake_openai)), provider_id="fake")
    assert isinstance(error, ProviderAuthError)
    assert error.data.provider_id == "fake"
    assert error.data.message == "Incorrect API key provided"
    assert retryable_message(error) is None


async def test_missing_key_for_a_key_requiring_provider(fake_openai: FakeOpenAI) -> None:
    exc = await failure(model_for(fake_openai, api_key="", requires_key=True))
    assert isinstance(exc, MissingApiKeyError)
    assert isinstance(to_named_error(exc, provider_id="fake"), ProviderAuthError)
    assert fake_openai.requests == []


async def test_keyless_provider_still_works(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(reply("local"))
    events = await collect(model_for(fake_openai, api_key=""))
    assert text_of(events, ev.TextDelta) == "local"


async def test_http_429_with_retry_after_is_retryable(fake_openai: FakeOpenAI) -> None:
    body = {
        "error": {
            "message": "Rate limit reached for requests",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }
    fake_openai.enqueue(
        Script().error_status(429, body, {"retry-after": "3", "x-ratelimit-remaining-requests": "0"})
    )
    error = to_named_error(await failure(model_for(fake_openai)), provider_id="fake")

    assert isinstance(error, APIError)
    assert error.data.status_code == 429
    assert error.data.is_retryable is True
    assert error.data.message == "Rate limit reached for requests"
    assert error.data.response_headers is not None
    assert error.data.response_headers["retry-after"] == "3"
    assert json.loads(error.data.response_body or "") == body
    assert retryable_message(error) == "Rate limit reached for requests"
    assert retry_delay_ms(1, error) == 3000


async def test_http_400_context_overflow(fake_openai: FakeOpenAI) -> None:
    message = (
        "This model's maximum context length is 128000 tokens. "
        "However, your messages resulted in 130000 tokens."
    )
    body = {"error": {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}}
    fake_openai.enqueue(Script().error_status(400, body))
    error = to_named_error(await failure(model_for(fake_openai)), provider_id="fake")

    assert isinstance(error, ContextOverflowError)
    assert error.data.message == message
    assert "context_length_exceeded" in (error.data.response_body or "")
    assert retryable_message(error) is None


async def test_http_400_other_is_not_retryable(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Script().error_status(400, {"error": {"message": "Invalid tool schema"}}))
    error = to_named_error(await failure(model_for(fake_openai)), provider_id="fake")
    assert isinstance(error, APIError)
    assert (error.data.status_code, error.data.is_retryable) == (400, False)


async def test_http_500_is_retryable(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Script().error_status(500, {"error": {"message": "The server had an error"}}))
    error = to_named_error(await failure(model_for(fake_openai)), provider_id="fake")
    assert isinstance(error, APIError)
    assert (error.data.status_code, error.data.is_retryable) == (500, True)


async def test_error_responses_are_made_by_one_sdk_client_per_pooled_client(fake_openai: FakeOpenAI) -> None:
    model = model_for(fake_openai)
    made = []
    for status in (500, 429):
        fake_openai.enqueue(Script().error_status(status, {"error": {"message": "no"}}))
        error = to_named_error(await failure(model), provider_id="fake")
        assert isinstance(error, APIError) and error.data.status_code == status
        made.append(openai_chat.client_for(model).errors)
    assert made[0] is not None and made[0] is made[1]


async def test_dropped_connection_is_a_retryable_api_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Script().text("partial answer").drop())
    seen: list[ev.StreamEvent] = []
    with pytest.raises(Exception) as caught:
        async for event in stream(model_for(fake_openai), hello_request()):
            seen.append(event)

    assert text_of(seen, ev.TextDelta) == "partial answer"  # what arrived before the drop was streamed
    error = to_named_error(caught.value, provider_id="fake")
    assert isinstance(error, APIError)
    assert error.data.is_retryable is True
    assert error.data.message == "Connection reset by server"


async def test_unreachable_provider_is_a_retryable_api_error(fake_openai: FakeOpenAI) -> None:
    model = model_for(fake_openai)
    await fake_openai.stop()
    error = to_named_error(await failure(model), provider_id="fake")
    assert isinstance(error, APIError)
    assert error.data.is_retryable is True
    assert error.data.message.startswith("Cannot connect to provider")


async def test_streamed_error_object_raises(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Script().text("Hel").error_event("Upstream overloaded", type="server_error"))
    exc = await failure(model_for(fake_openai))

    assert isinstance(exc, ProviderStreamError)
    assert exc.body == {"error": {"message": "Upstream overloaded", "type": "server_error", "code": None}}
    error = to_named_error(exc, provider_id="fake")
    assert isinstance(error, APIError)
    assert error.data.message == "Upstream overloaded"
    assert error.data.is_retryable is True


async def test_streamed_context_overflow_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(
        Script().error_event("prompt is too long: 210000 tokens > 200000 maximum", type="invalid")
    )
    error = to_named_error(await failure(model_for(fake_openai)), provider_id="fake")
    assert isinstance(error, ContextOverflowError)


async def test_malformed_chunk_raises_a_non_retryable_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Script().text("ok").raw("{not json"))
    exc = await failure(model_for(fake_openai))
    assert isinstance(exc, ProviderStreamError)
    assert exc.body == "{not json"
    error = to_named_error(exc, provider_id="fake")
    assert isinstance(error, APIError) and error.data.is_retryable is False


async def test_cancellation_closes_the_response_promptly(fake_openai: FakeOpenAI) -> None:
    gate = asyncio.Event()
    fake_openai.enqueue(Script().text("before").pause(gate).text("after"))
    first_delta = asyncio.Event()
    received: list[ev.StreamEvent] = []

    async def consume() -> None:
        async for event in stream(model_for(fake_openai), hello_request()):
            received.append(event)
            if isinstance(event, ev.TextDelta):
                first_delta.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_delta.wait(), 5)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=1.0)
    assert task in done and task.cancelled()

    # The fake sees the client hang up while it is still paused mid-stream.
    for _ in range(100):
        if fake_openai.disconnects:
            break
        await asyncio.sleep(0.01)
    assert fake_openai.disconnects == 1
    assert text_of(received, ev.TextDelta) == "before"
    error = to_named_error(asyncio.CancelledError(), provider_id="fake")
    assert error.name == "MessageAbortedError"


async def test_unsupported_api_is_a_clear_error(fake_openai: FakeOpenAI) -> None:
    with pytest.raises(UnsupportedApiError, match="uses api 'gemini'"):
        await collect(model_for(fake_openai, api="gemini"))


async def test_tool_call_helper_script(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(call("bash", {"command": "ls"}))
    events = await collect(model_for(fake_openai))
    tool_call = next(e for e in events if isinstance(e, ev.ToolCall))
    assert tool_call.tool_name == "bash"
    assert json.loads(tool_call.input_text) == {"command": "ls"}
    assert step_finish(events).usage.input_tokens == 10


async def test_unicode_line_separators_inside_a_chunk_do_not_split_it(fake_openai: FakeOpenAI) -> None:
    # Raw, as some servers send them: U+2028 / U+2029 / U+0085 unescaped inside a JSON string.
    text = "one\u2028two\u2029three\x85four"
    chunk = json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}, ensure_ascii=False)
    assert "\u2028" in chunk, "sent unescaped"
    fake_openai.enqueue(Script().raw(chunk).usage(10, 5).finish())
    events = await collect(model_for(fake_openai))
    assert text_of(events, ev.TextDelta) == text
    assert step_finish(events).finish_reason == "stop"


async def test_the_organisation_and_project_of_the_environment_are_sent(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK reads them when its client is made; the direct POST must send them as the SDK would.
    monkeypatch.setenv("OPENAI_ORG_ID", "org-forge")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-forge")
    fake_openai.enqueue(reply("hi"))
    await collect(model_for(fake_openai), hello_request())
    headers = fake_openai.request_headers[0]
    assert (headers["openai-organization"], headers["openai-project"]) == ("org-forge", "proj-forge")


async def test_a_compressed_stream_is_decoded() -> None:
    """SSE bodies come uncoded and are read raw; one a proxy compressed is still decoded."""
    chunks = [{"choices": [{"index": 0, "delta": {"content": text}}]} for text in ("Hel", "lo")]
    events = [b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks]
    body = b"".join(events) + b"data: [DONE]\n\n"
    headers = {"content-type": "text/event-stream", "content-encoding": "gzip"}

    def compressed(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers=headers, content=gzip.compress(body))

    model = ResolvedModel(
        provider_id="proxied",
        model_id="m",
        api="openai",
        base_url="http://compressing.proxy/v1",
        api_key="sk-test",
        headers={},
        timeout=10.0,
        limit_context=32_000,
        limit_output=4096,
        limit_input=None,
    )
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(compressed))
    client = openai_chat.ChatClient(httpx2.URL(model.base_url + "/"), http, None, None)
    assert openai_chat._clients.get((model.base_url, model.api_key), lambda: client) is client  # pooled
    streamed = await collect(model)
    assert "".join(e.text for e in streamed if isinstance(e, ev.TextDelta)) == "Hello"


async def test_the_pooled_client_is_configured_as_the_sdks_own(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The request goes out without the SDK: its pool, base URL and the organisation and project it
    reads from the environment are what the SDK's client would have."""
    monkeypatch.setenv("OPENAI_ORG_ID", "org-1")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-1")
    model = model_for(fake_openai, base_url=fake_openai.base_url.rstrip("/"))
    ours = openai_chat.client_for(model)
    sdk = AsyncOpenAI(base_url=model.base_url, api_key="sk-test", max_retries=0)
    try:
        assert (ours.base_url, ours.organization, ours.project) == (sdk.base_url, "org-1", "proj-1")
        assert (sdk.organization, sdk.project) == ("org-1", "proj-1")
        assert openai_chat.SDK_TIMEOUT == sdk.timeout == sdk._client.timeout == ours.http.timeout
        assert ours.http.follow_redirects is sdk._client.follow_redirects is True
        pools = [client._transport._pool for client in (ours.http, sdk._client)]  # type: ignore[attr-defined]
        assert len({(p._max_connections, p._max_keepalive_connections) for p in pools}) == 1
        assert ours.http.headers == sdk._client.headers
    finally:
        await sdk.close()
