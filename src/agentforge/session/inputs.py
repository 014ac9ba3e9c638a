"""Request bodies of the session routes (KERNEL 1.1 `PromptInput`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from agentforge.model.base import Wire
from agentforge.model.message import OutputFormat
from agentforge.model.part import FileSource, ModelRef, TextRange
from agentforge.model.session import PermissionRule

# A time or position the store keeps in a BIGINT column: never negative, at most 2^63-1.
StoredInt = Annotated[int, Field(ge=0, le=2**63 - 1)]


class SpanTimeInput(Wire):
    start: StoredInt
    end: StoredInt | None = None


class TextPartInput(Wire):
    id: str | None = None
    type: Literal["text"]
    text: str
    synthetic: bool | None = None
    ignored: bool | None = None
    time: SpanTimeInput | None = None
    metadata: dict[str, Any] | None = None


class FilePartInput(Wire):
    id: str | None = None
    type: Literal["file"]
    mime: str
    filename: str | None = None
    url: str
    source: FileSource | None = None


class AgentPartInput(Wire):
    id: str | None = None
    type: Literal["agent"]
    name: str
    source: TextRange | None = None


class SubtaskPartInput(Wire):
    id: str | None = None
    type: Literal["subtask"]
    prompt: str
    description: str
    agent: str
    model: ModelRef | None = None
    command: str | None = None


PartInput = Annotated[
    TextPartInput | FilePartInput | AgentPartInput | SubtaskPartInput, Field(discriminator="type")
]


class ModelInput(Wire):
    provider_id: str = Field(alias="providerID", min_length=1)
    model_id: str = Field(alias="modelID", min_length=1)


class PromptInput(Wire):
    message_id: str | None = Field(default=None, alias="messageID")
    model: ModelInput | None = None
    agent: str | None = None
    no_reply: bool = Field(default=False, alias="noReply")
    tools: dict[str, bool] | None = None
    format: OutputFormat | None = None
    system: str | None = None
    variant: str | None = None
    parts: list[PartInput] = Field(min_length=1)


class SessionCreateInput(Wire):
    parent_id: str | None = Field(default=None, alias="parentID")
    title: str | None = None
    permission: list[PermissionRule] | None = None
    directory: str | None = None
    metadata: dict[str, Any] | None = None


class SessionTimeInput(Wire):
    archived: StoredInt | None = None


class SessionUpdateInput(Wire):
    title: str | None = None
    permission: list[PermissionRule] | None = None
    time: SessionTimeInput | None = None
