"""User and assistant messages (KERNEL 3.2)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from agentforge.model.base import Wire
from agentforge.model.errors import NamedError
from agentforge.model.part import ModelRef, Part, Tokens


class FileDiff(Wire):
    file: str
    patch: str | None = None
    additions: int = 0
    deletions: int = 0
    status: Literal["added", "deleted", "modified"] | None = None


class OutputFormatText(Wire):
    type: Literal["text"] = "text"


class OutputFormatJsonSchema(Wire):
    type: Literal["json_schema"] = "json_schema"
    schema_: dict[str, Any] = Field(alias="schema")
    retry_count: int = Field(default=2, alias="retryCount")


OutputFormat = Annotated[OutputFormatText | OutputFormatJsonSchema, Field(discriminator="type")]


class UserTime(Wire):
    created: int


class UserSummary(Wire):
    title: str | None = None
    body: str | None = None
    diffs: list[FileDiff] = Field(default_factory=list)


class UserMessage(Wire):
    id: str
    session_id: str = Field(alias="sessionID")
    role: Literal["user"] = "user"
    time: UserTime
    agent: str
    model: ModelRef
    format: OutputFormat | None = None
    system: str | None = None
    tools: dict[str, bool] | None = None
    summary: UserSummary | None = None


class AssistantTime(Wire):
    created: int
    completed: int | None = None


class AssistantPath(Wire):
    cwd: str
    root: str


class AssistantMessage(Wire):
    id: str
    session_id: str = Field(alias="sessionID")
    role: Literal["assistant"] = "assistant"
    time: AssistantTime
    parent_id: str = Field(alias="parentID")
    model_id: str = Field(alias="modelID")
    provider_id: str = Field(alias="providerID")
    mode: str
    agent: str
    path: AssistantPath
    summary: bool | None = None
    cost: float = 0.0
    tokens: Tokens = Field(default_factory=Tokens)
    structured: Any | None = None
    variant: str | None = None
    finish: str | None = None
    error: NamedError | None = None


Message = Annotated[UserMessage | AssistantMessage, Field(discriminator="role")]

message_adapter: TypeAdapter[UserMessage | AssistantMessage] = TypeAdapter(Message)
part_adapter: TypeAdapter[Any] = TypeAdapter(Part)


class WithParts(Wire):
    info: Message
    parts: list[Part] = Field(default_factory=list)
