"""Agents as `GET /agent` lists them: the server builds them, the SDK returns them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentforge.model.base import Wire
from agentforge.model.session import PermissionRule

Mode = Literal["primary", "subagent", "all"]


class AgentModelRef(Wire):
    provider_id: str = Field(alias="providerID")
    model_id: str = Field(alias="modelID")


class AgentInfo(Wire):
    """An agent as `GET /agent` lists it; `permission` is the flat list of its rules in order."""

    name: str
    description: str | None = None
    mode: Mode
    native: bool | None = None
    hidden: bool | None = None
    top_p: float | None = Field(default=None, alias="topP")
    temperature: float | None = None
    color: str | None = None
    permission: list[PermissionRule]
    model: AgentModelRef | None = None
    variant: str | None = None
    prompt: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    steps: int | None = None
