"""Permission requests (KERNEL 2.3 `permission.asked`, 1.2 `GET /permission`) and their decisions."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentforge.model.base import Wire

PermissionReply = Literal["once", "always", "reject"]
# approved / denied: somebody (or a policy) decided; expired: the deadline passed and the default
# applied was deny (a deadline that applies "allow" ends `approved`, with decision `timeout`).
PermissionStatus = Literal["pending", "approved", "denied", "expired"]
PermissionDecision = Literal["once", "always", "reject", "timeout", "policy"]


class PermissionToolRef(Wire):
    """The tool call that is waiting on the request."""

    message_id: str = Field(alias="messageID")
    call_id: str = Field(alias="callID")


class PermissionRequestTime(Wire):
    created: int
    deadline: int
    decided: int | None = None


class PermissionRequestInfo(Wire):
    """A permission request as published, listed and stored; the decision fields fill in once decided."""

    id: str
    session_id: str = Field(alias="sessionID")
    permission: str
    patterns: list[str]
    metadata: dict[str, Any] = Field(default_factory=dict)
    always: list[str] = Field(default_factory=list)
    tool: PermissionToolRef | None = None
    time: PermissionRequestTime
    status: PermissionStatus = "pending"
    decision: PermissionDecision | None = None
    decided_by: str | None = Field(default=None, alias="decidedBy")
    feedback: str | None = None
