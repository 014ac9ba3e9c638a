"""The OpenAI Chat Completions adapter: our `ModelRequest` in, our stream events out.

The request is posted straight on a pooled httpx2 client configured as the SDK configures its own
(`ChatClient`, `_post_direct`: the SDK's per-call machinery cost ~2 ms before the first byte, and
importing the SDK ~0.4 s of a first turn), and failures are raised as the SDK's own errors (the SDK is
imported then, for them); clients that build requests their own way (Azure) go through the SDK. The
streamed body is read as raw bytes, split into SSE `data:` payloads (llm/sse.py) and each decoded with
orjson, because the SDK's parsed stream costs ~8x more per chunk and per-chunk cost decides how many
live sessions one replica carries (ARCHITECTURE, "Dependencies").
The same wire protocol serves OpenAI, Anthropic's compatible endpoint, Ollama, vLLM, OpenRouter, etc.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import secrets
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeVar

import httpx2
import orjson

from agentforge.config import deep_merge
from agentforge.llm.coalesce import coalesce_writes
from agentforge.llm.errors import MissingApiKeyError, ProviderStreamError
from agentforge.llm.events import (
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    StepFinish,
    StepStart,
    StreamEvent,
    StreamFinish,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolInputStart,
    Usage,
)
from agentforge.llm.kept import Kept
from agentforge.llm.messages import (
    AssistantModelMessage,
    FileContent,
    ModelMessage,
    ModelRequest,
    ReasoningContent,
    SystemMessage,
    TextContent,
    ToolCallContent,
    ToolModelMessage,
    ToolResultContent,
    UserModelMessage,
)
from agentforge.llm.pool import ClientPool, shared_ssl_context
from agentforge.llm.provider import ResolvedModel
from agentforge.llm.sdk_import import import_off_loop
from agentforge.llm.sse import sse_data
from agentforge.llm.stall import idle_timeout
from agentforge.version import __version__

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai._response import AsyncAPIResponse
    from openai.types.chat import (
        ChatCompletionContentPartParam,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionMessageParam,
    )

# Keyless endpoints (Ollama, vLLM...) still get a bearer value: the SDK refuses to send none.
NO_KEY_PLACEHOLDER = "agentforge-no-key"
# Reasoning models take `max_completion_tokens`; `max_tokens` is rejected.
_COMPLETION_TOKENS_MODELS = re.compile(r"^(o\d|gpt-5)")
_FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
}
TOOL_RESULT_ATTACHMENTS_TEXT = "Attached image(s) from tool result:"
DRAIN_TIMEOUT = 0.1  # seconds; after `[DONE]` only the end of the body is left

# What the SDK's own client is built with (openai/_constants.py; tests/llm/test_openai_chat.py
# compares them).
SDK_TIMEOUT: Final = httpx2.Timeout(timeout=600, connect=5.0)
SDK_LIMITS: Final = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)


@dataclass(slots=True, eq=False)
class ChatClient:
    """One endpoint's pooled connections, and what a request to it carries besides the key: the
    organisation and project the SDK takes from OPENAI_ORG_ID / OPENAI_PROJECT_ID."""

    base_url: httpx2.URL  # with a trailing slash, as the SDK keeps it
    http: httpx2.AsyncClient
    organization: str | None
    project: str | None
    # The SDK's client over `http`, made on the first error response: only to make the SDK's errors.
    errors: AsyncOpenAI | None = field(default=None, init=False, repr=False)

    def is_closed(self) -> bool:
        return self.http.is_closed

    async def close(self) -> None:
        await self.http.aclose()


_C = TypeVar("_C")

# One client per (base URL, key) so connections are pooled (per event loop: see pool.py).
_clients: ClientPool[ChatClient] = ClientPool(lambda client: client.close())


def client_for(model: ResolvedModel) -> ChatClient:
    return pooled_client(_clients, model, _new_client)


def pooled_client(clients: ClientPool[_C], model: ResolvedModel, create: Callable[[ResolvedModel], _C]) -> _C:
    """The running loop's client of `model`'s endpoint (base URL and key) in `clients`, created on
    first use; `MissingApiKeyError` when the endpoint needs a key and the model has none."""
    if model.requires_key and not model.api_key:
        raise MissingApiKeyError(model.provider_id, f"No API key configured for provider {model.provider_id}")
    return clients.get((model.base_url, model.api_key), lambda: create(model))


def _new_client(model: ResolvedModel) -> ChatClient:
    return ChatClient(
        base_url=_with_trailing_slash(httpx2.URL(model.base_url)),
        http=new_http_client(),
        organization=os.environ.get("OPENAI_ORG_ID"),
        project=os.environ.get("OPENAI_PROJECT_ID"),
    )


def new_http_client() -> httpx2.AsyncClient:
    """A connection pool configured as the SDK configures its own."""
    http = httpx2.AsyncClient(
        timeout=SDK_TIMEOUT, limits=SDK_LIMITS, follow_redirects=True, verify=shared_ssl_context()
    )
    coalesce_writes(http)  # a request's head and body in one socket write
    return http


def _with_trailing_slash(url: httpx2.URL) -> httpx2.URL:
    # As the SDK normalises a base URL: "chat/completions" is joined under it, not beside it.
    path, separator, query = url.raw_path.partition(b"?")
    return url if path.endswith(b"/") else url.copy_with(raw_path=path + b"/" + separator + query)


async def close_clients() -> None:
    """Close the pooled clients of the running loop."""
    await _clients.close()


ClientFactory = Callable[[ResolvedModel], "AsyncOpenAI"]


async def stream(
    model: ResolvedModel, request: ModelRequest, *, client_factory: ClientFactory | None = None
) -> AsyncIterator[StreamEvent]:
    """Stream one completion as our events. Transport and SDK errors propagate unchanged (map them with
    `to_named_error`); a streamed error object raises `ProviderStreamError`. `client_factory` gives an
    SDK client to send through instead (Azure OpenAI speaks the same protocol through
    `AsyncAzureOpenAI`)."""
    body = {"messages": chat_messages(request), **request_options(model, request)}
    if client_factory is None:
        opened = _post_direct(client_for(model), model, request, body)
    else:
        opened = _post_through_sdk(client_factory(model), model, request, body)
    async with opened as response:
        yield StreamStart()
        yield StepStart()
        decoder = ChunkDecoder()
        events = sse_data(idle_timeout(response.aiter_bytes(), model.chunk_timeout))
        async for data in events:
            if data == b"[DONE]":
                break
            for event in decoder.feed(_decode_chunk(data)):
                yield event
        await _drain(events)
        for event in decoder.finish():
            yield event


class _Body(Protocol):
    def aiter_bytes(self) -> AsyncIterator[bytes]: ...


@contextlib.asynccontextmanager
async def _post_direct(
    client: ChatClient, model: ResolvedModel, request: ModelRequest, body: dict[str, Any]
) -> AsyncIterator[_Body]:
    """POST the request on the client's pool, without the SDK's per-call request machinery (option
    copies, the per-field body transform, auth and retry wrappers: ~2 ms a call, before the first
    byte). Failures are raised as the SDK raises them, so errors map the same way."""
    payload = {
        "model": model.request_model,
        "stream": True,
        "stream_options": {"include_usage": True},
        **body,
    }
    headers = {**_direct_headers(client, model), **model.headers, **request.headers}
    sent = client.http.build_request(
        "POST",
        _chat_url(client.base_url),
        content=orjson.dumps(payload),
        headers=headers,
        timeout=model.timeout if model.timeout is not None else SDK_TIMEOUT,
    )
    try:
        response = await client.http.send(sent, stream=True)
    except httpx2.TimeoutException as exc:
        raise (await _sdk()).APITimeoutError(request=sent) from exc
    except (httpx2.RequestError, ssl.SSLError) as exc:
        raise (await _sdk()).APIConnectionError(request=sent) from exc
    try:
        if response.status_code >= 400:
            await response.aread()
            raise (await _status_error(client, model, response)) from None
        yield _DirectBody(response)
    finally:
        await response.aclose()


async def _sdk() -> Any:
    """The openai package, for its error types (imported off the loop, on a first failure)."""
    return await import_off_loop("openai")


async def _status_error(client: ChatClient, model: ResolvedModel, response: httpx2.Response) -> Exception:
    """The SDK's error for an error response, made as its own client makes it."""
    if client.errors is None:
        openai = await _sdk()
        client.errors = openai.AsyncOpenAI(
            base_url=client.base_url,
            api_key=model.api_key or NO_KEY_PLACEHOLDER,  # the pool's key: the same for every model
            max_retries=0,
            http_client=client.http,  # not used to send: only so the SDK builds no pool of its own
        )
    error: Exception = client.errors._make_status_error_from_response(response)
    return error


@dataclass(slots=True)
class _DirectBody:
    response: httpx2.Response

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        # A body sent without a content coding (what SSE streams are) is read raw: decoding it is
        # the identity, and skipping that layer saves a generator step per chunk.
        if "content-encoding" in self.response.headers:
            return self.response.aiter_bytes()
        return self.response.aiter_raw()


@functools.lru_cache(maxsize=64)
def _chat_url(base_url: httpx2.URL) -> httpx2.URL:
    # Joining parses the URL again (~45 us a call); a client's base URL is the same every call.
    return base_url.join("chat/completions")


def _direct_headers(client: ChatClient, model: ResolvedModel) -> dict[str, str]:
    # What the SDK's client sends by default (no per-platform telemetry headers), with the
    # organisation and project it takes from OPENAI_ORG_ID / OPENAI_PROJECT_ID.
    headers = {
        "Accept": "application/json",
        "Content-Type": "application/json",
        "User-Agent": f"agentforge/{__version__}",
        "Authorization": f"Bearer {model.api_key or NO_KEY_PLACEHOLDER}",
    }
    if client.organization:
        headers["OpenAI-Organization"] = client.organization
    if client.project:
        headers["OpenAI-Project"] = client.project
    return headers


@contextlib.asynccontextmanager
async def _post_through_sdk(
    client: AsyncOpenAI, model: ResolvedModel, request: ModelRequest, body: dict[str, Any]
) -> AsyncIterator[_Body]:
    """Through the SDK's request path, for clients that build requests their own way (Azure)."""
    # The conversation goes in `extra_body`, which the SDK sends as is: its per-field request
    # transform walks every message and costs tens of milliseconds on a long history.
    from openai import not_given  # the SDK client passed in has imported it already

    async with client.chat.completions.with_streaming_response.create(
        model=model.request_model,
        messages=[],
        stream=True,
        stream_options={"include_usage": True},
        extra_body=body,
        extra_headers={**model.headers, **request.headers},
        timeout=model.timeout if model.timeout is not None else not_given,
    ) as response:
        yield _SdkBody(response)


@dataclass(slots=True)
class _SdkBody:
    response: AsyncAPIResponse[Any]

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        return self.response.iter_bytes()


async def _drain(events: AsyncIterator[bytes]) -> None:
    """Read the body to its end so the connection goes back to the pool instead of being closed."""
    with contextlib.suppress(TimeoutError, httpx2.HTTPError):
        async with asyncio.timeout(DRAIN_TIMEOUT):
            async for _ in events:
                pass


def request_options(model: ResolvedModel, request: ModelRequest) -> dict[str, Any]:
    """The optional body fields: tools, sampling, output cap, then the model's and the request's own
    options (provider-specific keys, later wins)."""
    body: dict[str, Any] = {}
    if request.tools:
        body["tools"] = [_tool(spec.name, spec.description, spec.parameters) for spec in request.tools]
        if request.tool_choice:
            body["tool_choice"] = request.tool_choice
    if request.max_output_tokens is not None:
        uses_completion_tokens = _COMPLETION_TOKENS_MODELS.match(model.request_model) is not None
        body["max_completion_tokens" if uses_completion_tokens else "max_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    return deep_merge(deep_merge(body, model.options), request.options)


def _decode_chunk(data: bytes) -> dict[str, Any]:
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        shown = data.decode(errors="replace")
        raise ProviderStreamError("Invalid JSON in provider stream", body=shown) from None
    if not isinstance(chunk, dict):
        raise ProviderStreamError("Invalid chunk in provider stream", body=data.decode(errors="replace"))
    error = chunk.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else str(error)
        raise ProviderStreamError(str(message or "Provider stream error"), body=chunk)
    return chunk


@dataclass(slots=True)
class _PendingToolCall:
    id: str
    name: str
    arguments: list[str] = field(default_factory=list)
    started: bool = False


class ChunkDecoder:
    """Turns decoded `chat.completion.chunk` objects into our events, tracking open text / reasoning
    blocks and tool calls (by `index`) across chunks."""

    def __init__(self) -> None:
        self._blocks = 0
        self._text_id: str | None = None
        self._reasoning_id: str | None = None
        self._tool_calls: dict[int, _PendingToolCall] = {}
        self._finish_reason: str | None = None
        self._usage: Usage | None = None

    def feed(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = _usage(usage)
        events: list[StreamEvent] = []
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning and isinstance(reasoning, str):
                self._reasoning(reasoning, events)
            content = delta.get("content")
            if content and isinstance(content, str):
                self._text(content, events)
            for call in delta.get("tool_calls") or ():
                self._tool_call_delta(call, events)
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])
        return events

    def finish(self) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        self._close_blocks(events)
        for index in sorted(self._tool_calls):
            call = self._tool_calls[index]
            if not call.started:
                events.append(ToolInputStart(id=call.id, tool_name=call.name))
            arguments = "".join(call.arguments).strip() or "{}"  # a call without parameters
            events.append(ToolCall(call_id=call.id, tool_name=call.name, input_text=arguments))
        reason = _FINISH_REASONS.get(self._finish_reason or "", "other")
        events.append(StepFinish(finish_reason=reason, usage=self._usage or Usage()))
        events.append(StreamFinish())
        return events

    def _text(self, text: str, events: list[StreamEvent]) -> None:
        if self._text_id is None:
            self._close_reasoning(events)
            self._text_id = self._next_id("text")
            events.append(TextStart(id=self._text_id))
        events.append(TextDelta(id=self._text_id, text=text))

    def _reasoning(self, text: str, events: list[StreamEvent]) -> None:
        if self._reasoning_id is None:
            self._close_text(events)
            self._reasoning_id = self._next_id("reasoning")
            events.append(ReasoningStart(id=self._reasoning_id))
        events.append(ReasoningDelta(id=self._reasoning_id, text=text))

    def _tool_call_delta(self, delta: dict[str, Any], events: list[StreamEvent]) -> None:
        self._close_blocks(events)
        function = delta.get("function") or {}
        call = self._tool_calls.get(self._tool_index(delta))
        if call is None:
            call = _PendingToolCall(id=delta.get("id") or f"call_{secrets.token_hex(12)}", name="")
            self._tool_calls[self._tool_index(delta)] = call
        if not call.name and function.get("name"):
            call.name = str(function["name"])
        if not call.started and call.name:
            call.started = True
            events.append(ToolInputStart(id=call.id, tool_name=call.name))
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call.arguments.append(arguments)
        elif isinstance(arguments, dict):  # some servers send the object itself
            call.arguments.append(orjson.dumps(arguments).decode())

    def _tool_index(self, delta: dict[str, Any]) -> int:
        index = delta.get("index")
        if isinstance(index, int):
            return index
        # No index (some OpenAI-compatible servers): match by id, else it is a new call.
        for known, call in self._tool_calls.items():
            if delta.get("id") in (None, call.id):
                return known
        return len(self._tool_calls)

    def _close_blocks(self, events: list[StreamEvent]) -> None:
        self._close_text(events)
        self._close_reasoning(events)

    def _close_text(self, events: list[StreamEvent]) -> None:
        if self._text_id is not None:
            events.append(TextEnd(id=self._text_id))
            self._text_id = None

    def _close_reasoning(self, events: list[StreamEvent]) -> None:
        if self._reasoning_id is not None:
            events.append(ReasoningEnd(id=self._reasoning_id))
            self._reasoning_id = None

    def _next_id(self, kind: Literal["text", "reasoning"]) -> str:
        self._blocks += 1
        return f"{kind}-{self._blocks}"


def _usage(raw: dict[str, Any]) -> Usage:
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    cached = prompt_details.get("cached_tokens")
    if cached is None:
        cached = raw.get("prompt_cache_hit_tokens")  # DeepSeek
    total = raw.get("total_tokens")
    return Usage(
        input_tokens=_int(raw.get("prompt_tokens")),
        output_tokens=_int(raw.get("completion_tokens")),
        reasoning_tokens=_int(completion_details.get("reasoning_tokens")),
        cached_input_tokens=_int(cached),
        total_tokens=_int(total) if total is not None else None,
    )


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def chat_messages(request: ModelRequest) -> list[ChatCompletionMessageParam]:
    """System prompt pieces first (one system message each), then the conversation."""
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": text} for text in request.system
    ]
    converted = _chat_converted.getter(None)
    for message in request.messages:
        messages.extend(converted(message))
    return messages


def _chat_message(message: ModelMessage) -> tuple[ChatCompletionMessageParam, ...]:
    match message:
        case SystemMessage(content=content):
            return ({"role": "system", "content": content},)
        case UserModelMessage(content=parts):
            return ({"role": "user", "content": _user_content(parts)},)
        case AssistantModelMessage(content=parts):
            assistant = _assistant_message(parts)
            return () if assistant is None else (assistant,)
        case ToolModelMessage(content=results):
            return tuple(_tool_messages(results))
    return ()


# Each live model message's chat form: a long session's messages are the same objects call after
# call (llm/kept.py). The dicts are shared between request bodies, which are only serialised.
_chat_converted: Kept[ModelMessage, None, tuple[ChatCompletionMessageParam, ...]] = Kept(
    lambda message, _: _chat_message(message)
)


def _user_content(parts: list[TextContent | FileContent]) -> str | list[ChatCompletionContentPartParam]:
    if len(parts) == 1 and isinstance(parts[0], TextContent):
        return parts[0].text  # a plain string is what every OpenAI-compatible server accepts
    return [_content_part(part) for part in parts]


def _content_part(part: TextContent | FileContent) -> ChatCompletionContentPartParam:
    if isinstance(part, TextContent):
        return {"type": "text", "text": part.text}
    if part.mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": part.url}}
    return {"type": "file", "file": {"file_data": part.url, "filename": part.filename or "file"}}


def _assistant_message(
    parts: list[TextContent | ReasoningContent | ToolCallContent],
) -> ChatCompletionMessageParam | None:
    # Reasoning is not sent back: chat-completions providers do not accept it in requests.
    text = "".join(part.text for part in parts if isinstance(part, TextContent))
    calls: list[ChatCompletionMessageFunctionToolCallParam] = [
        {
            "id": part.call_id,
            "type": "function",
            "function": {"name": part.tool_name, "arguments": orjson.dumps(part.input).decode()},
        }
        for part in parts
        if isinstance(part, ToolCallContent)
    ]
    if not text and not calls:
        return None
    if calls:
        return {"role": "assistant", "content": text or None, "tool_calls": calls}
    return {"role": "assistant", "content": text}


def _tool_messages(results: list[ToolResultContent]) -> list[ChatCompletionMessageParam]:
    """One `tool` message per result. Tool messages carry text only, so images a tool returned follow
    in one user message."""
    messages: list[ChatCompletionMessageParam] = [
        {"role": "tool", "tool_call_id": result.call_id, "content": result.output} for result in results
    ]
    attachments = [file for result in results for file in result.attachments]
    if attachments:
        text: list[TextContent | FileContent] = [TextContent(TOOL_RESULT_ATTACHMENTS_TEXT)]
        messages.append({"role": "user", "content": [_content_part(p) for p in [*text, *attachments]]})
    return messages


def _tool(name: str, description: str, parameters: dict[str, Any]) -> ChatCompletionFunctionToolParam:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }
