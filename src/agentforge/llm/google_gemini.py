"""The Google Gemini adapter (`api: "google"`): our `ModelRequest` as `generateContent` contents in, our
stream events out.

Unlike the OpenAI adapters this one consumes the SDK's typed async stream: `google-genai` offers no raw
response for streaming calls (it refuses `should_return_http_response` there, and even its internal
streamed request re-encodes each line), so its per-chunk parse cost is paid here (see bench/adapters.py).
"""

from __future__ import annotations

import asyncio
import base64
import secrets
import weakref
from collections.abc import AsyncIterator
from typing import Any

import orjson
from google import genai
from google.genai import types

from agentforge import __version__
from agentforge.config import deep_merge
from agentforge.llm.errors import MissingApiKeyError
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
from agentforge.llm.messages import (
    AssistantModelMessage,
    FileContent,
    ModelRequest,
    SystemMessage,
    TextContent,
    ToolCallContent,
    ToolModelMessage,
    ToolResultContent,
    UserModelMessage,
)
from agentforge.llm.provider import ResolvedModel
from agentforge.llm.stall import idle_timeout

API_VERSION = "v1beta"
_FINISH_REASONS = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content-filter",
    "RECITATION": "content-filter",
    "BLOCKLIST": "content-filter",
    "PROHIBITED_CONTENT": "content-filter",
    "SPII": "content-filter",
    "IMAGE_SAFETY": "content-filter",
}
_TOOL_CHOICE = {"auto": "AUTO", "required": "ANY", "none": "NONE"}

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], genai.Client]] = (
    weakref.WeakKeyDictionary()
)


def client_for(model: ResolvedModel) -> genai.Client:
    if not model.api_key:
        raise MissingApiKeyError(model.provider_id, f"No API key configured for provider {model.provider_id}")
    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    key = (model.base_url, model.api_key)
    client = per_loop.get(key)
    if client is None:
        options = types.HttpOptions(
            base_url=model.base_url,
            api_version=API_VERSION,
            headers={"User-Agent": f"agentforge/{__version__}"},
        )
        client = genai.Client(api_key=model.api_key, http_options=options)
        per_loop[key] = client
    return client


async def close_clients() -> None:
    """Close the pooled clients of the running loop (at shutdown)."""
    for client in _clients.pop(asyncio.get_running_loop(), {}).values():
        await client.aio.aclose()


async def stream(model: ResolvedModel, request: ModelRequest) -> AsyncIterator[StreamEvent]:
    """Stream one `streamGenerateContent` call as our events. SDK errors (`google.genai.errors.APIError`)
    propagate unchanged; `to_named_error` maps them."""
    client = client_for(model)
    chunks = await client.aio.models.generate_content_stream(
        model=model.request_model,
        contents=contents(request),
        config=generation_config(model, request),
    )
    yield StreamStart()
    yield StepStart()
    decoder = GeminiDecoder()
    async for chunk in idle_timeout(chunks, model.chunk_timeout):
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.finish():
        yield event


def generation_config(model: ResolvedModel, request: ModelRequest) -> types.GenerateContentConfig:
    """System instruction, tools, sampling and output cap, then the model's and the request's options
    (in the SDK's field names, later wins)."""
    config: dict[str, Any] = {}
    if request.system:
        config["system_instruction"] = "\n\n".join(request.system)
    if request.tools:
        declarations = [
            {"name": spec.name, "description": spec.description, "parameters_json_schema": spec.parameters}
            for spec in request.tools
        ]
        config["tools"] = [{"function_declarations": declarations}]
        if request.tool_choice:
            config["tool_config"] = {"function_calling_config": {"mode": _TOOL_CHOICE[request.tool_choice]}}
    if request.max_output_tokens is not None:
        config["max_output_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.top_p is not None:
        config["top_p"] = request.top_p
    headers = {**model.headers, **request.headers}
    timeout = {"timeout": int(model.timeout * 1000)} if model.timeout is not None else {}
    if headers or timeout:
        config["http_options"] = {"headers": headers, **timeout}
    merged = deep_merge(deep_merge(config, model.options), request.options)
    return types.GenerateContentConfig.model_validate(merged)


class GeminiDecoder:
    """Turns `GenerateContentResponse` chunks into our events. Gemini streams whole parts; consecutive
    thought parts form one reasoning block and consecutive text parts one text block."""

    def __init__(self) -> None:
        self._blocks = 0
        self._text_id: str | None = None
        self._reasoning_id: str | None = None
        self._called = False
        self._finish_reason: str | None = None
        self._usage = Usage()

    def feed(self, chunk: types.GenerateContentResponse) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if chunk.usage_metadata is not None:
            self._usage = _usage(chunk.usage_metadata)
        for candidate in (chunk.candidates or [])[:1]:
            for part in (candidate.content.parts if candidate.content else None) or ():
                self._part(part, events)
            if candidate.finish_reason is not None:
                self._finish_reason = str(candidate.finish_reason.value)
        return events

    def finish(self) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        self._close_blocks(events)
        reason = _FINISH_REASONS.get(self._finish_reason or "", "other")
        if reason == "stop" and self._called:
            reason = "tool-calls"
        events.append(StepFinish(finish_reason=reason, usage=self._usage))
        events.append(StreamFinish())
        return events

    def _part(self, part: types.Part, events: list[StreamEvent]) -> None:
        if part.function_call is not None:
            self._close_blocks(events)
            call = part.function_call
            call_id = call.id or f"call_{secrets.token_hex(12)}"
            name = call.name or ""
            events.append(ToolInputStart(id=call_id, tool_name=name))
            events.append(
                ToolCall(call_id=call_id, tool_name=name, input_text=orjson.dumps(call.args or {}).decode())
            )
            self._called = True
        elif part.text and part.thought:
            if self._reasoning_id is None:
                self._close_text(events)
                self._reasoning_id = self._next_id("reasoning")
                events.append(ReasoningStart(id=self._reasoning_id))
            events.append(ReasoningDelta(id=self._reasoning_id, text=part.text))
        elif part.text:
            if self._text_id is None:
                self._close_reasoning(events)
                self._text_id = self._next_id("text")
                events.append(TextStart(id=self._text_id))
            events.append(TextDelta(id=self._text_id, text=part.text))

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

    def _next_id(self, kind: str) -> str:
        self._blocks += 1
        return f"{kind}-{self._blocks}"


def _usage(raw: types.GenerateContentResponseUsageMetadata) -> Usage:
    # Gemini counts thoughts apart from the candidates; ours counts reasoning inside the output.
    thoughts = raw.thoughts_token_count or 0
    return Usage(
        input_tokens=raw.prompt_token_count or 0,
        output_tokens=(raw.candidates_token_count or 0) + thoughts,
        reasoning_tokens=thoughts,
        cached_input_tokens=raw.cached_content_token_count or 0,
        total_tokens=raw.total_token_count,
    )


def contents(request: ModelRequest) -> list[dict[str, Any]]:
    """The conversation as Gemini contents: `user` and `model` turns; tool results are `user` turns of
    `functionResponse` parts. Mid-conversation system messages become user text (Gemini has one system
    instruction); reasoning is not sent back."""
    result: list[dict[str, Any]] = []
    for message in request.messages:
        match message:
            case SystemMessage(content=content):
                result.append({"role": "user", "parts": [{"text": content}]})
            case UserModelMessage(content=parts):
                result.append({"role": "user", "parts": [_part(part) for part in parts]})
            case AssistantModelMessage(content=parts):
                sendable = [part for part in parts if isinstance(part, TextContent | ToolCallContent)]
                model_parts = [_assistant_part(part) for part in sendable]
                if model_parts:
                    result.append({"role": "model", "parts": model_parts})
            case ToolModelMessage(content=results):
                result.append({"role": "user", "parts": _tool_result_parts(results)})
    return result


def _assistant_part(part: TextContent | ToolCallContent) -> dict[str, Any]:
    if isinstance(part, ToolCallContent):
        return {"function_call": {"id": part.call_id, "name": part.tool_name, "args": part.input}}
    return {"text": part.text}


def _part(part: TextContent | FileContent) -> dict[str, Any]:
    if isinstance(part, TextContent):
        return {"text": part.text}
    _, _, encoded = part.url.partition(",")
    return {"inline_data": {"mime_type": part.mime, "data": base64.b64decode(encoded)}}


def _tool_result_parts(results: list[ToolResultContent]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for result in results:
        response = {"error": result.output} if result.is_error else {"output": result.output}
        parts.append(
            {"function_response": {"id": result.call_id, "name": result.tool_name, "response": response}}
        )
    parts.extend(_part(file) for result in results for file in result.attachments)
    return parts
