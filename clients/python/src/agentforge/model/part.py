"""Message parts, discriminated by `type` (KERNEL 3.4), and the tool state machine (3.5)."""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import Field

from agentforge.model.base import Wire
from agentforge.model.errors import APIError


class PartBase(Wire):
    id: str
    session_id: str = Field(alias="sessionID")
    message_id: str = Field(alias="messageID")


class SpanTime(Wire):
    start: int
    end: int | None = None


class TextPart(PartBase):
    type: Literal["text"] = "text"
    text: str = ""
    synthetic: bool | None = None
    ignored: bool | None = None
    time: SpanTime | None = None
    metadata: dict[str, Any] | None = None


class ReasoningPart(PartBase):
    type: Literal["reasoning"] = "reasoning"
    text: str = ""
    time: SpanTime
    metadata: dict[str, Any] | None = None


class TextRange(Wire):
    value: str
    start: int
    end: int


class FileSource(Wire):
    type: Literal["file", "symbol", "resource"]
    path: str | None = None
    text: TextRange | None = None
    # symbol / resource sources carry more fields; keep them as given.
    model_config = {**Wire.model_config, "extra": "allow"}


class FilePart(PartBase):
    type: Literal["file"] = "file"
    mime: str
    filename: str | None = None
    url: str
    source: FileSource | None = None


class AgentPart(PartBase):
    type: Literal["agent"] = "agent"
    name: str
    source: TextRange | None = None


class ModelRef(Wire):
    provider_id: str = Field(alias="providerID")
    model_id: str = Field(alias="modelID")
    variant: str | None = None


class SubtaskPart(PartBase):
    type: Literal["subtask"] = "subtask"
    prompt: str
    description: str
    agent: str
    model: ModelRef | None = None
    command: str | None = None


class ToolStatePending(Wire):
    status: Literal["pending"] = "pending"
    input: dict[str, Any] = Field(default_factory=dict)
    raw: str = ""


class RunningTime(Wire):
    start: int


class ToolStateRunning(Wire):
    status: Literal["running"] = "running"
    input: dict[str, Any]
    title: str | None = None
    metadata: dict[str, Any] | None = None
    time: RunningTime


class CompletedTime(Wire):
    start: int
    end: int
    compacted: int | None = None


class ToolStateCompleted(Wire):
    status: Literal["completed"] = "completed"
    input: dict[str, Any]
    output: str
    title: str
    metadata: dict[str, Any]
    time: CompletedTime
    attachments: list[FilePart] | None = None


class ErrorTime(Wire):
    start: int
    end: int


# In a failed tool state's metadata: what refused the call without asking anyone ("rule", "fence",
# "workspace"), for the audit log's `tool.denied`.
REFUSED_BY: Final = "refusedBy"


class ToolStateError(Wire):
    status: Literal["error"] = "error"
    input: dict[str, Any]
    error: str
    metadata: dict[str, Any] | None = None
    time: ErrorTime


ToolState = Annotated[
    ToolStatePending | ToolStateRunning | ToolStateCompleted | ToolStateError,
    Field(discriminator="status"),
]
# The states a call ends in: a part in one never moves to another state.
TOOL_FINISHED: Final = frozenset({"completed", "error"})


class ToolPart(PartBase):
    type: Literal["tool"] = "tool"
    call_id: str = Field(alias="callID")
    tool: str
    state: ToolState
    metadata: dict[str, Any] | None = None


class StepStartPart(PartBase):
    type: Literal["step-start"] = "step-start"
    snapshot: str | None = None


class CacheTokens(Wire):
    read: int = 0
    write: int = 0


class Tokens(Wire):
    total: int | None = None
    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache: CacheTokens = Field(default_factory=CacheTokens)


class StepFinishPart(PartBase):
    type: Literal["step-finish"] = "step-finish"
    reason: str
    snapshot: str | None = None
    cost: float = 0.0
    tokens: Tokens = Field(default_factory=Tokens)


class SnapshotPart(PartBase):
    type: Literal["snapshot"] = "snapshot"
    snapshot: str


class PatchPart(PartBase):
    type: Literal["patch"] = "patch"
    hash: str
    files: list[str] = Field(default_factory=list)


class CreatedTime(Wire):
    created: int


class RetryPart(PartBase):
    type: Literal["retry"] = "retry"
    attempt: int
    error: APIError
    time: CreatedTime


class CompactionPart(PartBase):
    type: Literal["compaction"] = "compaction"
    auto: bool
    overflow: bool | None = None
    tail_start_id: str | None = None


Part = Annotated[
    TextPart
    | ReasoningPart
    | FilePart
    | AgentPart
    | SubtaskPart
    | ToolPart
    | StepStartPart
    | StepFinishPart
    | SnapshotPart
    | PatchPart
    | RetryPart
    | CompactionPart,
    Field(discriminator="type"),
]
