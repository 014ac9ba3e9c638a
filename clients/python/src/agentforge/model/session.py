"""Sessions and their live status (KERNEL 3.1, 3.6)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from agentforge.model.base import Wire
from agentforge.model.message import FileDiff
from agentforge.model.part import CacheTokens


class SessionTime(Wire):
    created: int
    updated: int
    compacting: int | None = None
    archived: int | None = None


class SessionSummary(Wire):
    additions: int = 0
    deletions: int = 0
    files: int = 0
    diffs: list[FileDiff] | None = None


class SessionTokens(Wire):
    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache: CacheTokens = Field(default_factory=CacheTokens)


class SessionModel(Wire):
    id: str
    provider_id: str = Field(alias="providerID")
    variant: str | None = None


class SessionRevert(Wire):
    """Where a session was reverted to (KERNEL 1.1 `/revert`): messages from `messageID` on (from
    `partID` on within it) are hidden until the next prompt removes them or `/unrevert` brings them
    back. `snapshot` is the workspace as it was before the revert (what unrevert restores) and
    `diff` what the revert changed in the files."""

    message_id: str = Field(alias="messageID")
    part_id: str | None = Field(default=None, alias="partID")
    snapshot: str | None = None
    diff: str | None = None


class PermissionRule(Wire):
    permission: str
    pattern: str
    action: Literal["allow", "deny", "ask"]


class Session(Wire):
    id: str
    slug: str
    project_id: str = Field(default="default", alias="projectID")
    workspace_id: str | None = Field(default=None, alias="workspaceID")
    directory: str
    parent_id: str | None = Field(default=None, alias="parentID")
    title: str
    version: str
    time: SessionTime
    summary: SessionSummary | None = None
    cost: float = 0.0
    tokens: SessionTokens = Field(default_factory=SessionTokens)
    agent: str | None = None
    model: SessionModel | None = None
    metadata: dict[str, Any] | None = None
    permission: list[PermissionRule] | None = None
    revert: SessionRevert | None = None


class StatusIdle(Wire):
    type: Literal["idle"] = "idle"


class StatusBusy(Wire):
    type: Literal["busy"] = "busy"


class StatusRetry(Wire):
    type: Literal["retry"] = "retry"
    attempt: int
    message: str
    next: int


SessionStatus = Annotated[StatusIdle | StatusBusy | StatusRetry, Field(discriminator="type")]
