"""Our stream events: what an adapter turns a provider's stream into (named after AI-SDK's fullStream).

The processor (session/processor.py) maps each of these to part writes (KERNEL 5.3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Usage:
    """Token counts as the provider reports them. `input_tokens` includes cached tokens."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    total_tokens: int | None = None


@dataclass(slots=True)
class StreamStart:
    pass


@dataclass(slots=True)
class StepStart:
    pass


@dataclass(slots=True)
class TextStart:
    id: str
    metadata: dict[str, Any] | None = None


@dataclass(slots=True)
class TextDelta:
    id: str
    text: str


@dataclass(slots=True)
class TextEnd:
    id: str


@dataclass(slots=True)
class ReasoningStart:
    id: str
    metadata: dict[str, Any] | None = None


@dataclass(slots=True)
class ReasoningDelta:
    id: str
    text: str


@dataclass(slots=True)
class ReasoningEnd:
    id: str
    # Metadata known only at the end of the block (Anthropic's thinking signature); merged into the part.
    metadata: dict[str, Any] | None = None


@dataclass(slots=True)
class ToolInputStart:
    """A tool call began; its arguments are still streaming."""

    id: str
    tool_name: str


@dataclass(slots=True)
class ToolCall:
    """A tool call whose arguments are complete. `input_text` is the raw JSON the model produced."""

    call_id: str
    tool_name: str
    input_text: str
    metadata: dict[str, Any] | None = None


@dataclass(slots=True)
class StepFinish:
    finish_reason: str  # "stop" | "length" | "tool-calls" | "content-filter" | "error" | "other" | "unknown"
    usage: Usage = field(default_factory=Usage)
    provider_metadata: dict[str, Any] | None = None


@dataclass(slots=True)
class StreamFinish:
    pass


StreamEvent = (
    StreamStart
    | StepStart
    | TextStart
    | TextDelta
    | TextEnd
    | ReasoningStart
    | ReasoningDelta
    | ReasoningEnd
    | ToolInputStart
    | ToolCall
    | StepFinish
    | StreamFinish
)
