"""The OpenAI Responses API adapter: our `ModelRequest` as input items in, our stream events out.

As in `openai_chat`, the SDK does transport, auth and errors while the body is read as raw bytes, split
into SSE `data:` payloads (llm/sse.py) and each decoded with orjson; the event name is also in the JSON
(`type`), so `event:` lines are not read. Responses streams typed events (`response.output_text.delta`,
`response.function_call_arguments.delta`, ...) keyed by output item, and ends after
`response.completed` (no `[DONE]`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from openai import AsyncOpenAI, not_given

from agentforge.config import deep_merge
from agentforge.llm.errors import ProviderStreamError
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
    ReasoningContent,
    SystemMessage,
    TextContent,
    ToolCallContent,
    ToolModelMessage,
    ToolResultContent,
    UserModelMessage,
)
from agentforge.llm.openai_chat import (
    NO_KEY_PLACEHOLDER,
    TOOL_RESULT_ATTACHMENTS_TEXT,
    _drain,
    new_http_client,
    pooled_client,
)
from agentforge.llm.pool import ClientPool
from agentforge.llm.provider import ResolvedModel
from agentforge.llm.sse import sse_data
from agentforge.llm.stall import idle_timeout
from agentforge.version import __version__

_INCOMPLETE_REASONS = {"max_output_tokens": "length", "content_filter": "content-filter"}

# One SDK client per (base URL, key), pooled per event loop (see pool.py), on a pool configured as
# `openai_chat`'s.
_clients: ClientPool[AsyncOpenAI] = ClientPool(lambda client: client.close())


def client_for(model: ResolvedModel) -> AsyncOpenAI:
    return pooled_client(_clients, model, _new_client)


def _new_client(model: ResolvedModel) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=model.base_url,
        api_key=model.api_key or NO_KEY_PLACEHOLDER,
        max_retries=0,  # the processor retries, with its own policy and status events
        default_headers={"User-Agent": f"agentforge/{__version__}"},
        http_client=new_http_client(),
    )


async def stream(model: ResolvedModel, request: ModelRequest) -> AsyncIterator[StreamEvent]:
    """Stream one response as our events. Transport and SDK errors propagate unchanged; a streamed
    `error` or `response.failed` event raises `ProviderStreamError`."""
    client = client_for(model)
    # Input items go in `extra_body`, sent as is (the SDK's request transform is slow on long input).
    body = {"input": input_items(request), **request_options(model, request)}
    async with client.responses.with_streaming_response.create(
        model=model.request_model,
        input=[],
        stream=True,
        extra_body=body,
        extra_headers={**model.headers, **request.headers},
        timeout=model.timeout if model.timeout is not None else not_given,
    ) as response:
        yield StreamStart()
        yield StepStart()
        decoder = ResponsesDecoder()
        events = sse_data(idle_timeout(response.iter_bytes(), model.chunk_timeout))
        async for data in events:
            for event in decoder.feed(_decode_event(data)):
                yield event
            if decoder.done:
                break
        await _drain(events)
        for event in decoder.finish():
            yield event


def request_options(model: ResolvedModel, request: ModelRequest) -> dict[str, Any]:
    """Tools, sampling and output cap, then the model's and the request's own options (later wins)."""
    body: dict[str, Any] = {}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
                "strict": False,  # strict mode rewrites schemas; our tools' schemas are used as written
            }
            for spec in request.tools
        ]
        if request.tool_choice:
            body["tool_choice"] = request.tool_choice
    if request.max_output_tokens is not None:
        body["max_output_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    return deep_merge(deep_merge(body, model.options), request.options)


def _decode_event(data: bytes) -> dict[str, Any]:
    try:
        event = orjson.loads(data)
    except orjson.JSONDecodeError:
        shown = data.decode(errors="replace")
        raise ProviderStreamError("Invalid JSON in provider stream", body=shown) from None
    if not isinstance(event, dict):
        raise ProviderStreamError("Invalid event in provider stream", body=data.decode(errors="replace"))
    kind = event.get("type")
    if kind == "error":
        error = {key: event.get(key) for key in ("message", "type", "code", "param")}
        error["type"] = event.get("code") or "error"
        raise ProviderStreamError(str(event.get("message") or "Provider stream error"), body={"error": error})
    if kind == "response.failed":
        raw = (event.get("response") or {}).get("error") or {}
        error = {"message": raw.get("message"), "type": raw.get("code"), "code": raw.get("code")}
        raise ProviderStreamError(str(raw.get("message") or "Response failed"), body={"error": error})
    return event


@dataclass(slots=True)
class _PendingCall:
    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)


class ResponsesDecoder:
    """Turns decoded Responses stream events into ours. Text and reasoning blocks are named after the
    output item that carries them; function calls are tracked by item id until their item is done."""

    def __init__(self) -> None:
        self.done = False
        self._text_id: str | None = None
        self._reasoning_id: str | None = None
        self._calls: dict[str, _PendingCall] = {}
        self._called = False
        self._finish_reason = "unknown"
        self._usage = Usage()

    def feed(self, event: dict[str, Any]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        match event.get("type"):
            case "response.output_item.added":
                self._item_added(event.get("item") or {}, events)
            case "response.output_text.delta":
                self._text(str(event.get("item_id") or "text"), str(event.get("delta") or ""), events)
            case "response.reasoning_summary_text.delta":
                self._reasoning(
                    str(event.get("item_id") or "reasoning"), str(event.get("delta") or ""), events
                )
            case "response.function_call_arguments.delta":
                call = self._calls.get(str(event.get("item_id")))
                if call is not None:
                    call.arguments.append(str(event.get("delta") or ""))
            case "response.function_call_arguments.done":
                call = self._calls.get(str(event.get("item_id")))
                if call is not None and isinstance(event.get("arguments"), str):
                    call.arguments = [event["arguments"]]
            case "response.output_item.done":
                self._item_done(event.get("item") or {}, events)
            case "response.completed" | "response.incomplete":
                self._completed(event.get("response") or {})
        return events

    def finish(self) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        self._close_blocks(events)
        for item_id in list(self._calls):  # calls whose item never finished: arguments as streamed
            self._emit_call(item_id, events)
        events.append(StepFinish(finish_reason=self._finish_reason, usage=self._usage))
        events.append(StreamFinish())
        return events

    def _item_added(self, item: dict[str, Any], events: list[StreamEvent]) -> None:
        if item.get("type") != "function_call":
            return
        self._close_blocks(events)
        call = _PendingCall(
            call_id=str(item.get("call_id") or item.get("id")), name=str(item.get("name") or "")
        )
        self._calls[str(item.get("id"))] = call
        events.append(ToolInputStart(id=call.call_id, tool_name=call.name))

    def _item_done(self, item: dict[str, Any], events: list[StreamEvent]) -> None:
        kind = item.get("type")
        if kind == "message" and self._text_id == item.get("id"):
            self._close_text(events)
        elif kind == "reasoning" and self._reasoning_id == item.get("id"):
            self._close_reasoning(events)
        elif kind == "function_call":
            call = self._calls.get(str(item.get("id")))
            if call is not None and isinstance(item.get("arguments"), str):
                call.arguments = [item["arguments"]]
            self._emit_call(str(item.get("id")), events)

    def _emit_call(self, item_id: str, events: list[StreamEvent]) -> None:
        call = self._calls.pop(item_id, None)
        if call is None:
            return
        self._called = True
        arguments = "".join(call.arguments).strip() or "{}"  # a call without parameters
        events.append(ToolCall(call_id=call.call_id, tool_name=call.name, input_text=arguments))

    def _text(self, item_id: str, delta: str, events: list[StreamEvent]) -> None:
        if self._text_id != item_id:
            self._close_blocks(events)
            self._text_id = item_id
            events.append(TextStart(id=item_id))
        if delta:
            events.append(TextDelta(id=item_id, text=delta))

    def _reasoning(self, item_id: str, delta: str, events: list[StreamEvent]) -> None:
        if self._reasoning_id != item_id:
            self._close_blocks(events)
            self._reasoning_id = item_id
            events.append(ReasoningStart(id=item_id, metadata={"openai": {"itemId": item_id}}))
        if delta:
            events.append(ReasoningDelta(id=item_id, text=delta))

    def _completed(self, response: dict[str, Any]) -> None:
        self.done = True
        usage = response.get("usage")
        if isinstance(usage, dict):
            self._usage = _usage(usage)
        reason = ((response.get("incomplete_details") or {}).get("reason")) or ""
        if response.get("status") == "incomplete":
            self._finish_reason = _INCOMPLETE_REASONS.get(str(reason), "other")
        else:
            self._finish_reason = "tool-calls" if self._called or self._calls else "stop"

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


def _usage(raw: dict[str, Any]) -> Usage:
    input_details = raw.get("input_tokens_details") or {}
    output_details = raw.get("output_tokens_details") or {}
    total = raw.get("total_tokens")
    return Usage(
        input_tokens=_int(raw.get("input_tokens")),
        output_tokens=_int(raw.get("output_tokens")),
        reasoning_tokens=_int(output_details.get("reasoning_tokens")),
        cached_input_tokens=_int(input_details.get("cached_tokens")),
        total_tokens=_int(total) if total is not None else None,
    )


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def input_items(request: ModelRequest) -> list[dict[str, Any]]:
    """System prompt pieces first, then the conversation as Responses input items. Reasoning is not sent
    back: without stored items or encrypted content the API cannot use it."""
    items: list[dict[str, Any]] = [{"role": "system", "content": text} for text in request.system]
    for message in request.messages:
        match message:
            case SystemMessage(content=content):
                items.append({"role": "system", "content": content})
            case UserModelMessage(content=parts):
                items.append({"role": "user", "content": [_content_part(part) for part in parts]})
            case AssistantModelMessage(content=parts):
                items.extend(_assistant_items(parts))
            case ToolModelMessage(content=results):
                items.extend(_tool_result_items(results))
    return items


def _content_part(part: TextContent | FileContent) -> dict[str, Any]:
    if isinstance(part, TextContent):
        return {"type": "input_text", "text": part.text}
    if part.mime.startswith("image/"):
        return {"type": "input_image", "image_url": part.url, "detail": "auto"}
    return {"type": "input_file", "file_data": part.url, "filename": part.filename or "file"}


def _assistant_items(parts: list[TextContent | ReasoningContent | ToolCallContent]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    text = "".join(part.text for part in parts if isinstance(part, TextContent))
    if text:
        items.append({"role": "assistant", "content": text})
    items.extend(
        {
            "type": "function_call",
            "call_id": part.call_id,
            "name": part.tool_name,
            "arguments": orjson.dumps(part.input).decode(),
        }
        for part in parts
        if isinstance(part, ToolCallContent)
    )
    return items


def _tool_result_items(results: list[ToolResultContent]) -> list[dict[str, Any]]:
    """One `function_call_output` per result; images a tool returned follow in one user message."""
    items: list[dict[str, Any]] = [
        {"type": "function_call_output", "call_id": result.call_id, "output": result.output}
        for result in results
    ]
    attachments = [file for result in results for file in result.attachments]
    if attachments:
        parts: list[TextContent | FileContent] = [TextContent(TOOL_RESULT_ATTACHMENTS_TEXT), *attachments]
        items.append({"role": "user", "content": [_content_part(part) for part in parts]})
    return items
