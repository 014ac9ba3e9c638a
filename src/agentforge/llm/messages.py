"""Provider-neutral model input: what history conversion produces and adapters translate.

Messages are read-only once built: conversions of them are kept while they live (llm/kept.py), and
history conversion shares them between requests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(slots=True)
class TextContent:
    text: str
    type: Literal["text"] = "text"


@dataclass(slots=True)
class FileContent:
    """A file or image for the model; `url` is a `data:` URL."""

    mime: str
    url: str
    filename: str | None = None
    type: Literal["file"] = "file"


@dataclass(slots=True)
class ReasoningContent:
    text: str
    metadata: dict[str, Any] | None = None
    type: Literal["reasoning"] = "reasoning"


@dataclass(slots=True)
class ToolCallContent:
    call_id: str
    tool_name: str
    input: dict[str, Any]
    # Provider metadata the call came with, keyed by provider (Gemini's `thoughtSignature`), to send back.
    metadata: dict[str, Any] | None = None
    type: Literal["tool-call"] = "tool-call"


@dataclass(slots=True)
class ToolResultContent:
    call_id: str
    tool_name: str
    output: str
    is_error: bool = False
    attachments: list[FileContent] = field(default_factory=list)
    type: Literal["tool-result"] = "tool-result"


@dataclass(slots=True, weakref_slot=True)
class SystemMessage:
    content: str
    role: Literal["system"] = "system"


@dataclass(slots=True, weakref_slot=True)
class UserModelMessage:
    content: list[TextContent | FileContent]
    role: Literal["user"] = "user"


@dataclass(slots=True, weakref_slot=True)
class AssistantModelMessage:
    content: list[TextContent | ReasoningContent | ToolCallContent]
    role: Literal["assistant"] = "assistant"


@dataclass(slots=True, weakref_slot=True)
class ToolModelMessage:
    content: list[ToolResultContent]
    role: Literal["tool"] = "tool"


ModelMessage = SystemMessage | UserModelMessage | AssistantModelMessage | ToolModelMessage


@dataclass(slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description, JSON Schema of its parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(slots=True)
class ModelRequest:
    """Everything one model call needs, already assembled by the session layer."""

    system: list[str]
    messages: list[ModelMessage]
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: Literal["auto", "required", "none"] | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
