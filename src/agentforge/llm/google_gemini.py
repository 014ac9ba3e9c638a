"""The Google Gemini adapter (`api: "google"`): our `ModelRequest` as `streamGenerateContent` in, our
stream events out.

As in the other adapters, the SDK (`google-genai`) does transport, auth and error types, while the
streamed body (`?alt=sse`) is read as raw bytes and each `data:` payload decoded with orjson: the SDK's
typed stream re-encodes every chunk and validates it into pydantic models, several times the cost of the
raw decoding (bench/adapters.py). The SDK's public streaming call offers no raw body, so its own api
client builds and sends the request (`_build_request`, `_async_request_once`: base URL, API version,
auth headers or Vertex credentials, per-request options) and we read the httpx response it returns.
The conversation goes out in wire form; only the generation config goes through the SDK's converter,
so options keep the SDK's field names and validation.
"""

from __future__ import annotations

import base64
import secrets
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx2
import orjson
from google import genai
from google.genai import _common, models, types
from google.genai import _transformers as transformers
from google.genai import errors as genai_errors
from google.genai._api_client import BaseApiClient

from agentforge.config import deep_merge
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
from agentforge.llm.pool import ClientPool, shared_ssl_context
from agentforge.llm.provider import ResolvedModel
from agentforge.llm.sse import sse_data
from agentforge.llm.stall import idle_timeout
from agentforge.version import __version__

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


@dataclass(frozen=True, slots=True)
class GeminiClient:
    """The SDK client and the httpx client it sends through. Ours, not the SDK's default: that one
    switches to aiohttp whenever aiohttp is installed, and the raw body is read here as httpx's."""

    sdk: genai.Client
    http: httpx2.AsyncClient

    async def close(self) -> None:
        await self.sdk.aio.aclose()
        await self.http.aclose()  # the SDK leaves a client it was given open


# One client per (base URL, key) so connections are pooled (per event loop: see pool.py).
_clients: ClientPool[GeminiClient] = ClientPool(lambda client: client.close())


def client_for(model: ResolvedModel) -> GeminiClient:
    if not model.api_key:
        raise MissingApiKeyError(model.provider_id, f"No API key configured for provider {model.provider_id}")
    return _clients.get((model.base_url, model.api_key), lambda: _new_client(model.base_url, model.api_key))


def _new_client(base_url: str, api_key: str) -> GeminiClient:
    # Timeouts come per request, from the model's config.
    http = httpx2.AsyncClient(timeout=None, verify=shared_ssl_context())
    options = types.HttpOptions(
        base_url=base_url,
        api_version=API_VERSION,
        headers={"User-Agent": f"agentforge/{__version__}"},
        httpx_async_client=http,
    )
    return GeminiClient(genai.Client(api_key=api_key, http_options=options), http)


async def close_clients() -> None:
    """Close the pooled clients of the running loop."""
    await _clients.close()


async def stream(model: ResolvedModel, request: ModelRequest) -> AsyncIterator[StreamEvent]:
    """Stream one `streamGenerateContent` call as our events. SDK errors (`google.genai.errors.APIError`,
    also for an error sent inside the stream) and transport errors propagate unchanged; an undecodable
    chunk raises `ProviderStreamError`. `to_named_error` maps them all."""
    api = client_for(model).sdk.aio._api_client
    config = generation_config(model, request)
    path = f"{transformers.t_model(api, model.request_model)}:streamGenerateContent?alt=sse"
    http_request = api._build_request("post", path, request_body(api, request, config), config.http_options)
    http_request.data = orjson.dumps(http_request.data)  # the SDK would use the slower `json.dumps`
    # No SDK retries (the client has none configured, and none implicit): the processor retries.
    response = await api._async_request_once(http_request, stream=True, implicit_retry=False)
    body = response.response_stream
    assert isinstance(body, httpx2.Response)  # sent through our httpx client (see `GeminiClient`)
    try:
        yield StreamStart()
        yield StepStart()
        decoder = GeminiDecoder()
        async for data in sse_data(idle_timeout(body.aiter_bytes(), model.chunk_timeout)):
            for event in decoder.feed(_decode_chunk(data, body)):
                yield event
        for event in decoder.finish():
            yield event
    finally:
        await body.aclose()


def request_body(
    api: BaseApiClient, request: ModelRequest, config: types.GenerateContentConfig
) -> dict[str, Any]:
    """The request JSON: our contents in wire form, the config through the SDK's converter (it puts the
    system instruction, tools and tool config beside `generationConfig`)."""
    body: dict[str, Any] = {}
    convert = (
        models._GenerateContentConfig_to_vertex if api.vertexai else models._GenerateContentConfig_to_mldev
    )
    generation = convert(api, config, body, None)
    if generation:
        body["generationConfig"] = generation
    body = _common.encode_unserializable_types(_common.convert_to_dict(body))
    body["contents"] = contents(request)
    return body


def _decode_chunk(data: bytes, response: httpx2.Response) -> dict[str, Any]:
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise ProviderStreamError(
            "Invalid JSON in provider stream", body=data.decode(errors="replace")
        ) from None
    if not isinstance(chunk, dict):
        raise ProviderStreamError("Invalid chunk in provider stream", body=data.decode(errors="replace"))
    error = chunk.get("error")
    if error:
        # Google's error object, as in an error response: the SDK's error type maps it by its code.
        code = error.get("code") if isinstance(error, dict) else None
        raise genai_errors.APIError(code if isinstance(code, int) else 500, chunk, response)
    return chunk


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
    """Turns decoded `GenerateContentResponse` chunks into our events. Gemini streams whole parts;
    consecutive thought parts form one reasoning block and consecutive text parts one text block."""

    def __init__(self) -> None:
        self._blocks = 0
        self._text_id: str | None = None
        self._reasoning_id: str | None = None
        self._called = False
        self._finish_reason: str | None = None
        self._usage = Usage()

    def feed(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        usage = chunk.get("usageMetadata")
        if isinstance(usage, dict):
            self._usage = _usage(usage)  # cumulative: the last one counts
        candidates = chunk.get("candidates")
        if candidates and isinstance(candidates, list) and isinstance(candidates[0], dict):
            candidate = candidates[0]
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, dict) else None
            for part in parts or ():
                if isinstance(part, dict):
                    self._part(part, events)
            if candidate.get("finishReason"):
                self._finish_reason = str(candidate["finishReason"])
        feedback = chunk.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason") and self._finish_reason is None:
            self._finish_reason = "SAFETY"  # the prompt itself was blocked: no candidate at all
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

    def _part(self, part: dict[str, Any], events: list[StreamEvent]) -> None:
        call = part.get("functionCall")
        text = part.get("text")
        if isinstance(call, dict):
            self._close_blocks(events)
            call_id = str(call.get("id") or f"call_{secrets.token_hex(12)}")
            name = str(call.get("name") or "")
            events.append(ToolInputStart(id=call_id, tool_name=name))
            arguments = orjson.dumps(call.get("args") or {}).decode()
            metadata = _signature_metadata(part)
            events.append(ToolCall(call_id=call_id, tool_name=name, input_text=arguments, metadata=metadata))
            self._called = True
        elif not text or not isinstance(text, str):
            return  # empty text (a lone thought signature), and part kinds we do not store
        elif part.get("thought"):
            if self._reasoning_id is None:
                self._close_text(events)
                self._reasoning_id = self._next_id("reasoning")
                events.append(ReasoningStart(id=self._reasoning_id))
            events.append(ReasoningDelta(id=self._reasoning_id, text=text))
        else:
            if self._text_id is None:
                self._close_reasoning(events)
                self._text_id = self._next_id("text")
                events.append(TextStart(id=self._text_id))
            events.append(TextDelta(id=self._text_id, text=text))

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


def _signature_metadata(part: dict[str, Any]) -> dict[str, Any] | None:
    """Gemini 3 signs its function calls (`thoughtSignature`, an opaque string beside `functionCall`, on
    the first call of a step) and rejects the next request with a 400 unless it comes back verbatim on
    the same part; we keep it on the call."""
    signature = part.get("thoughtSignature")
    if not isinstance(signature, str) or not signature:
        return None
    return {"google": {"thoughtSignature": signature}}


def _usage(raw: dict[str, Any]) -> Usage:
    # Gemini counts thoughts apart from the candidates; ours counts reasoning inside the output.
    thoughts = _int(raw.get("thoughtsTokenCount"))
    total = raw.get("totalTokenCount")
    return Usage(
        input_tokens=_int(raw.get("promptTokenCount")),
        output_tokens=_int(raw.get("candidatesTokenCount")) + thoughts,
        reasoning_tokens=thoughts,
        cached_input_tokens=_int(raw.get("cachedContentTokenCount")),
        total_tokens=_int(total) if total is not None else None,
    )


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def contents(request: ModelRequest) -> list[dict[str, Any]]:
    """The conversation as Gemini contents (wire form): `user` and `model` turns; tool results are `user`
    turns of `functionResponse` parts. Mid-conversation system messages become user text (Gemini has one
    system instruction); reasoning is not sent back, but a function call's thought signature is."""
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
        call = {"id": part.call_id, "name": part.tool_name, "args": part.input}
        wire: dict[str, Any] = {"functionCall": call}
        signature = _thought_signature(part)
        if signature is not None:
            wire["thoughtSignature"] = signature
        return wire
    return {"text": part.text}


def _thought_signature(part: ToolCallContent) -> str | None:
    google = (part.metadata or {}).get("google")
    signature = google.get("thoughtSignature") if isinstance(google, dict) else None
    return signature if isinstance(signature, str) and signature else None


def _part(part: TextContent | FileContent) -> dict[str, Any]:
    if isinstance(part, TextContent):
        return {"text": part.text}
    return {"inlineData": {"mimeType": part.mime, "data": _base64_payload(part.url)}}


def _base64_payload(data_url: str) -> str:
    """The payload of a `data:` URL in base64 (as the wire wants bytes), encoding it if it is not."""
    head, _, payload = data_url.partition(",")
    if head.endswith(";base64"):
        return payload
    return base64.b64encode(urllib.parse.unquote_to_bytes(payload)).decode()


def _tool_result_parts(results: list[ToolResultContent]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for result in results:
        response = {"error": result.output} if result.is_error else {"output": result.output}
        parts.append(
            {"functionResponse": {"id": result.call_id, "name": result.tool_name, "response": response}}
        )
    parts.extend(_part(file) for result in results for file in result.attachments)
    return parts
