"""The Anthropic Messages adapter (`api: "anthropic"`, also through Bedrock and Vertex).

As in the Chat Completions adapter, the official SDK does transport, auth (API key, AWS SigV4, Google
tokens) and error types while the streamed body is decoded here with orjson: the SDK's parsed stream
costs several times more per event. Anthropic and Vertex stream SSE (`event:` + `data:` lines, split on
bytes by llm/sse.py; the event name is repeated as the JSON's `type`, which is what we read); Bedrock
streams AWS event-stream frames whose `chunk` events carry the same event JSON, base64-encoded. Both feed
one `EventDecoder`. Request conversion lives in `anthropic_request.py`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import orjson
from anthropic import AsyncAnthropic, AsyncAnthropicBedrock, AsyncAnthropicVertex, not_given

from agentforge.config import ConfigError
from agentforge.llm import aws_eventstream
from agentforge.llm.anthropic_request import request_body
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
from agentforge.llm.messages import ModelRequest
from agentforge.llm.pool import ClientPool
from agentforge.llm.provider import ResolvedModel
from agentforge.llm.sse import sse_data
from agentforge.llm.stall import idle_timeout
from agentforge.version import __version__

ANTHROPIC_APIS = ("anthropic", "anthropic-bedrock", "anthropic-vertex")
_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool-calls",
    "refusal": "content-filter",
}
DRAIN_TIMEOUT = 0.1  # seconds; after `message_stop` only the end of the body is left
_VERSION_SUFFIX = re.compile(r"/v1/?$")  # the SDK appends `/v1/messages` itself
_VERTEX_HOST_REGION = re.compile(r"^https?://([a-z0-9-]+)-aiplatform\.googleapis\.com")
VERTEX_DEFAULT_REGION = "global"
_BEDROCK_HOST_REGION = re.compile(r"^https?://bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com")

AnthropicClient = AsyncAnthropic | AsyncAnthropicBedrock | AsyncAnthropicVertex

# One client per (api, base URL, key, cloud options) so connections are pooled (per event loop: see
# pool.py).
_clients: ClientPool[AnthropicClient] = ClientPool(lambda client: client.close())


def client_for(model: ResolvedModel) -> AnthropicClient:
    if model.requires_key and not model.api_key:
        raise MissingApiKeyError(model.provider_id, f"No API key configured for provider {model.provider_id}")
    return _clients.get((model.api, model.base_url, model.api_key, model.cloud), lambda: new_client(model))


def new_client(model: ResolvedModel) -> AnthropicClient:
    """The SDK client for the model's API. Bedrock and Vertex take region and credentials from the
    provider options, else the SDK's usual way (AWS / Google environment and config files)."""
    headers = {"User-Agent": f"agentforge/{__version__}"}
    # The processor retries, with its own policy and status events.
    if model.api == "anthropic-bedrock":
        return _bedrock_client(model, headers)
    if model.api == "anthropic-vertex":
        return AsyncAnthropicVertex(
            region=model.cloud.region or vertex_region(model.base_url),
            project_id=model.cloud.project or not_given,  # else ANTHROPIC_VERTEX_PROJECT_ID / credentials
            base_url=model.base_url or None,
            access_token=model.api_key or None,  # else Google application-default credentials
            max_retries=0,
            default_headers=headers,
        )
    return AsyncAnthropic(
        base_url=_VERSION_SUFFIX.sub("", model.base_url) or None,
        api_key=model.api_key or None,
        max_retries=0,
        default_headers=headers,
    )


def _bedrock_client(model: ResolvedModel, headers: dict[str, str]) -> AsyncAnthropicBedrock:
    cloud = model.cloud
    if model.api_key and cloud.has_aws_credentials:
        raise ConfigError(
            f"provider {model.provider_id!r}: set either apiKey (a Bedrock API key) or AWS credentials "
            "(accessKeyId, secretAccessKey, sessionToken, profile), not both"
        )
    region = cloud.region or bedrock_region(model.base_url)
    if region is None and not cloud.profile:
        raise ConfigError(
            f"provider {model.provider_id!r}: no AWS region; set options.region, AWS_REGION, or a "
            "baseURL like https://bedrock-runtime.<region>.amazonaws.com"
        )
    return AsyncAnthropicBedrock(
        aws_region=region,  # None: the profile's region
        aws_access_key=cloud.access_key_id,
        aws_secret_key=cloud.secret_access_key,
        aws_session_token=cloud.session_token,
        aws_profile=cloud.profile,
        base_url=model.base_url or None,
        api_key=model.api_key or None,  # a Bedrock API key; else SigV4 with AWS credentials
        max_retries=0,
        default_headers=headers,
    )


def bedrock_region(base_url: str) -> str | None:
    """The region of a regional endpoint (`https://bedrock-runtime.us-east-1.amazonaws.com`), else
    `AWS_REGION` / `AWS_DEFAULT_REGION`."""
    match = _BEDROCK_HOST_REGION.match(base_url)
    if match:
        return match.group(1)
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None


def vertex_region(base_url: str) -> str:
    """`CLOUD_ML_REGION`, else the region in a regional endpoint (`https://us-east5-aiplatform...`)."""
    region = os.environ.get("CLOUD_ML_REGION")
    if region:
        return region
    match = _VERTEX_HOST_REGION.match(base_url)
    return match.group(1) if match else VERTEX_DEFAULT_REGION


async def close_clients() -> None:
    """Close the pooled clients of the running loop."""
    await _clients.close()


async def stream(model: ResolvedModel, request: ModelRequest) -> AsyncIterator[StreamEvent]:
    """Stream one message as our events. Transport and SDK errors propagate unchanged (map them with
    `to_named_error`); a streamed `error` event raises `ProviderStreamError`."""
    client = client_for(model)
    body = request_body(model, request)
    # Everything goes in `extra_body`, sent as is: the SDK's per-field transform costs tens of
    # milliseconds on a long history.
    async with client.messages.with_streaming_response.create(
        model=model.request_model,
        max_tokens=body.pop("max_tokens"),
        messages=[],
        stream=True,
        extra_body=body,
        extra_headers={**model.headers, **request.headers},
        timeout=model.timeout if model.timeout is not None else not_given,
    ) as response:
        yield StreamStart()
        yield StepStart()
        decoder = EventDecoder()
        if model.api == "anthropic-bedrock":
            events = bedrock_events(idle_timeout(response.iter_bytes(), model.chunk_timeout))
        else:
            events = sse_data(idle_timeout(response.iter_bytes(), model.chunk_timeout))
        async for data in events:
            for event in decoder.feed(_decode_event(data)):
                yield event
            if decoder.stopped:
                break
        await _drain(events)
        for event in decoder.finish():
            yield event


async def _drain(events: AsyncIterator[bytes]) -> None:
    """Read the body to its end so the connection goes back to the pool instead of being closed."""
    with contextlib.suppress(TimeoutError, httpx2.HTTPError):
        async with asyncio.timeout(DRAIN_TIMEOUT):
            async for _ in events:
                pass


async def bedrock_events(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The event JSON of each `chunk` event of a Bedrock event-stream body (its `bytes` field,
    base64-decoded); an exception message raises `AwsStreamException`."""
    async for message in aws_eventstream.messages(chunks):
        aws_eventstream.raise_for_exception(message)
        if message.event_type == "chunk":
            yield _chunk_bytes(message.payload)


def _chunk_bytes(payload: bytes) -> bytes:
    try:
        chunk = orjson.loads(payload)
        return base64.b64decode(chunk["bytes"], validate=True)
    except (orjson.JSONDecodeError, TypeError, KeyError, binascii.Error):
        text = payload.decode("utf-8", "replace")
        raise ProviderStreamError("Invalid chunk in Bedrock stream", body=text) from None


def _decode_event(data: bytes) -> dict[str, Any]:
    try:
        event = orjson.loads(data)
    except orjson.JSONDecodeError:
        shown = data.decode(errors="replace")
        raise ProviderStreamError("Invalid JSON in provider stream", body=shown) from None
    if not isinstance(event, dict):
        raise ProviderStreamError("Invalid event in provider stream", body=data.decode(errors="replace"))
    kind = str(event.get("type") or "")
    if kind == "error":
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        raise ProviderStreamError(str(message or "Provider stream error"), body=event)
    event["type"] = kind
    return event


@dataclass(slots=True)
class _Block:
    """An open content block, by the stream's `index`."""

    kind: str  # "text" | "reasoning" | "redacted" | "tool"
    id: str
    name: str = ""
    pieces: list[str] = field(default_factory=list)  # tool input JSON, or the thinking signature


class EventDecoder:
    """Turns decoded Messages stream events into our events, tracking open content blocks."""

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, int] = {}
        self._stop_reason: str | None = None
        self.stopped = False

    def feed(self, event: dict[str, Any]) -> list[StreamEvent]:
        match event["type"]:
            case "message_start":
                self._add_usage((event.get("message") or {}).get("usage"))
            case "content_block_start":
                return self._start(_index(event), event.get("content_block") or {})
            case "content_block_delta":
                return self._delta(_index(event), event.get("delta") or {})
            case "content_block_stop":
                return self._stop(_index(event))
            case "message_delta":
                self._add_usage(event.get("usage"))
                reason = (event.get("delta") or {}).get("stop_reason")
                if reason:
                    self._stop_reason = str(reason)
            case "message_stop":
                self.stopped = True
        return []  # ping, and event types newer than this adapter

    def finish(self) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for index in sorted(self._blocks):  # a stream cut short leaves blocks open
            events.extend(self._stop(index))
        reason = _FINISH_REASONS.get(self._stop_reason or "", "other")
        events.append(StepFinish(finish_reason=reason, usage=self.usage()))
        events.append(StreamFinish())
        return events

    def usage(self) -> Usage:
        """Anthropic's `input_tokens` excludes cache reads and writes; ours includes both (usage.py
        takes them out again), so the three are added up here."""
        cache_read = self._usage.get("cache_read_input_tokens", 0)
        cache_write = self._usage.get("cache_creation_input_tokens", 0)
        input_tokens = self._usage.get("input_tokens", 0) + cache_read + cache_write
        output_tokens = self._usage.get("output_tokens", 0)
        return Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_input_tokens=cache_read,
            cache_write_tokens=cache_write,
            total_tokens=input_tokens + output_tokens,
        )

    def _add_usage(self, raw: object) -> None:
        # `message_delta` repeats the counts cumulatively; the later value wins.
        if not isinstance(raw, dict):
            return
        for name, value in raw.items():
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                self._usage[name] = value

    def _start(self, index: int, block: dict[str, Any]) -> list[StreamEvent]:
        kind = block.get("type")
        block_id = f"{kind}-{index}"
        if kind == "text":
            self._blocks[index] = _Block("text", block_id)
            events: list[StreamEvent] = [TextStart(id=block_id)]
            if block.get("text"):
                events.append(TextDelta(id=block_id, text=str(block["text"])))
            return events
        if kind == "thinking":
            self._blocks[index] = _Block("reasoning", block_id)
            return [ReasoningStart(id=block_id)]
        if kind == "redacted_thinking":
            # Encrypted reasoning: nothing to show, but it must go back to the model as it came.
            self._blocks[index] = _Block("redacted", block_id)
            metadata = {"anthropic": {"redactedData": str(block.get("data") or "")}}
            return [ReasoningStart(id=block_id, metadata=metadata)]
        if kind == "tool_use":
            call = _Block("tool", str(block.get("id") or block_id), name=str(block.get("name") or ""))
            self._blocks[index] = call
            return [ToolInputStart(id=call.id, tool_name=call.name)]
        return []  # server tool results and other block kinds we do not store

    def _delta(self, index: int, delta: dict[str, Any]) -> list[StreamEvent]:
        block = self._blocks.get(index)
        if block is None:
            return []
        kind = delta.get("type")
        if kind == "text_delta" and block.kind == "text" and delta.get("text"):
            return [TextDelta(id=block.id, text=str(delta["text"]))]
        if kind == "thinking_delta" and block.kind == "reasoning" and delta.get("thinking"):
            return [ReasoningDelta(id=block.id, text=str(delta["thinking"]))]
        if kind == "signature_delta" and block.kind == "reasoning":
            block.pieces.append(str(delta.get("signature") or ""))
        elif kind == "input_json_delta" and block.kind == "tool":
            block.pieces.append(str(delta.get("partial_json") or ""))
        return []

    def _stop(self, index: int) -> list[StreamEvent]:
        block = self._blocks.pop(index, None)
        if block is None:
            return []
        if block.kind == "text":
            return [TextEnd(id=block.id)]
        if block.kind == "tool":
            arguments = "".join(block.pieces).strip() or "{}"  # a call without parameters
            return [ToolCall(call_id=block.id, tool_name=block.name, input_text=arguments)]
        signature = "".join(block.pieces)
        # The signature comes last; the model needs it back with the thinking text on the next call.
        metadata = {"anthropic": {"signature": signature}} if signature else None
        return [ReasoningEnd(id=block.id, metadata=metadata)]


def _index(event: dict[str, Any]) -> int:
    index = event.get("index")
    return index if isinstance(index, int) else 0
