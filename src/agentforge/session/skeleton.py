"""The assistant skeleton: the empty reply written before anything streams into it (seed doc)."""

from __future__ import annotations

from typing import Protocol

from agentforge.model import ids
from agentforge.model.message import AssistantMessage, AssistantPath, AssistantTime
from agentforge.session.events import now_ms


class ModelIds(Protocol):
    """A resolved model or a stored model reference: all a skeleton needs is the two ids."""

    @property
    def provider_id(self) -> str: ...

    @property
    def model_id(self) -> str: ...


def assistant_skeleton(
    *,
    session_id: str,
    directory: str,
    parent_id: str,
    model: ModelIds,
    agent: str,
    variant: str | None = None,
    summary: bool | None = None,
) -> AssistantMessage:
    """A new assistant message answering `parent_id`: no parts, zero cost and tokens, no finish."""
    return AssistantMessage(
        id=ids.ascending("msg"),
        session_id=session_id,
        parent_id=parent_id,
        model_id=model.model_id,
        provider_id=model.provider_id,
        mode=agent,
        agent=agent,
        variant=variant,
        summary=summary,
        path=AssistantPath(cwd=directory, root=directory),
        time=AssistantTime(created=now_ms()),
    )
