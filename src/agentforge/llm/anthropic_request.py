"""Our `ModelRequest` as an Anthropic Messages request body."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from agentforge.config import deep_merge
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
from agentforge.llm.provider import ResolvedModel

DEFAULT_MAX_TOKENS = 4096  # `max_tokens` is required; used when neither the request nor the model sets one
CACHED_MESSAGES = 2  # the last messages marked as prompt-cache breakpoints (the system is one more)
_TOOL_CHOICE = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}
_EPHEMERAL = {"type": "ephemeral"}

Block = dict[str, Any]


def request_body(model: ResolvedModel, request: ModelRequest) -> dict[str, Any]:
    """The whole body but `model` and `stream`: conversation, tools, sampling, output cap, then the
    model's and the request's own options (e.g. `thinking`; later wins)."""
    system, messages = convert_messages(request)
    body: dict[str, Any] = {"messages": messages}
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [
            {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}
            for spec in request.tools
        ]
        if request.tool_choice:
            body["tool_choice"] = _TOOL_CHOICE[request.tool_choice]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    body = deep_merge(deep_merge(body, model.options), request.options)
    body["max_tokens"] = _max_tokens(model, request, body)
    if _thinking_enabled(body):
        # Extended thinking rejects sampling parameters.
        body.pop("temperature", None)
        body.pop("top_p", None)
    return body


def _max_tokens(model: ResolvedModel, request: ModelRequest, body: dict[str, Any]) -> int:
    explicit = body.get("max_tokens")
    if isinstance(explicit, int) and explicit > 0:
        return explicit
    limit = request.max_output_tokens or model.limit_output or DEFAULT_MAX_TOKENS
    budget = _thinking_budget(body)
    # The thinking budget counts against `max_tokens`, which must exceed it.
    return limit + budget if budget and limit <= budget else limit


def _thinking_enabled(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _thinking_budget(body: dict[str, Any]) -> int:
    thinking = body.get("thinking")
    budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
    return budget if isinstance(budget, int) and budget > 0 else 0


def convert_messages(request: ModelRequest) -> tuple[list[Block], list[dict[str, Any]]]:
    """System blocks and the conversation. Consecutive turns of one role merge (tool results travel in
    the user turn that follows the tool calls); the last system block and the last messages carry
    prompt-cache breakpoints."""
    system: list[Block] = [{"type": "text", "text": text} for text in request.system if text]
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        match message:
            case SystemMessage(content=content):
                if content:  # Messages has no system turn: it joins the system prompt
                    system.append({"type": "text", "text": content})
            case UserModelMessage(content=parts):
                _append(messages, "user", [block for part in parts if (block := _user_block(part))])
            case AssistantModelMessage(content=parts):
                _append(messages, "assistant", _assistant_blocks(parts))
            case ToolModelMessage(content=results):
                _append(messages, "user", [_tool_result(result) for result in results])
    _mark_cache_breakpoints(system, messages)
    return system, messages


def _append(messages: list[dict[str, Any]], role: str, blocks: list[Block]) -> None:
    if not blocks:
        return  # empty turns are rejected
    if messages and messages[-1]["role"] == role:
        messages[-1]["content"].extend(blocks)
    else:
        messages.append({"role": role, "content": blocks})


def _mark_cache_breakpoints(system: list[Block], messages: list[dict[str, Any]]) -> None:
    if system:
        system[-1]["cache_control"] = _EPHEMERAL
    for message in messages[-CACHED_MESSAGES:]:
        last = message["content"][-1]
        if last.get("type") not in ("thinking", "redacted_thinking"):  # these take no cache_control
            last["cache_control"] = _EPHEMERAL


def _user_block(part: TextContent | FileContent) -> Block | None:
    if isinstance(part, TextContent):
        return {"type": "text", "text": part.text} if part.text else None
    return file_block(part)


def file_block(part: FileContent) -> Block:
    """Images and PDFs as base64 sources, text files as their text."""
    media_type, data = _data_url(part.url)
    if part.mime.startswith("image/"):
        return {"type": "image", "source": {"type": "base64", "media_type": part.mime, "data": data}}
    if part.mime == "application/pdf":
        return {"type": "document", "source": {"type": "base64", "media_type": part.mime, "data": data}}
    text = _decoded_text(data) if media_type.endswith(";base64") else data
    return {"type": "text", "text": f"File {part.filename or 'attachment'} ({part.mime}):\n{text}"}


def _data_url(url: str) -> tuple[str, str]:
    """(`media type[;base64]`, payload) of a `data:` URL."""
    head, _, payload = url.partition(",")
    return head.removeprefix("data:"), payload


def _decoded_text(data: str) -> str:
    try:
        return base64.b64decode(data).decode("utf-8", errors="replace")
    except (binascii.Error, ValueError):
        return data


def _assistant_blocks(parts: list[TextContent | ReasoningContent | ToolCallContent]) -> list[Block]:
    blocks: list[Block] = []
    for part in parts:
        if isinstance(part, TextContent):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCallContent):
            blocks.append(
                {"type": "tool_use", "id": part.call_id, "name": part.tool_name, "input": part.input}
            )
        else:
            thinking = _thinking_block(part)
            if thinking is not None:
                blocks.append(thinking)
    return blocks


def _thinking_block(part: ReasoningContent) -> Block | None:
    """Thinking goes back only with the signature the model produced for it (the API rejects unsigned
    thinking); reasoning from another model or API carries none and is left out."""
    metadata = (part.metadata or {}).get("anthropic")
    if not isinstance(metadata, dict):
        return None
    if metadata.get("redactedData"):
        return {"type": "redacted_thinking", "data": metadata["redactedData"]}
    if metadata.get("signature"):
        return {"type": "thinking", "thinking": part.text, "signature": metadata["signature"]}
    return None


def _tool_result(result: ToolResultContent) -> Block:
    content: list[Block] = [{"type": "text", "text": result.output or "(no output)"}]
    content.extend(file_block(file) for file in result.attachments)
    block: Block = {"type": "tool_result", "tool_use_id": result.call_id, "content": content}
    if result.is_error:
        block["is_error"] = True
    return block
