"""Reverting a session's file changes and its diffs (opencode's `/session/{id}/revert`, `/unrevert`,
`/diff`); the work is in session/channels/revert.py."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import Field

from agentforge.model.base import Wire
from agentforge.model.message import FileDiff
from agentforge.model.session import Session
from agentforge.server.deps import SessionsDep
from agentforge.server.responses import WireResponse
from agentforge.session.channels.revert import SessionReverts

router = APIRouter(prefix="/session", tags=["session"])

Responses = dict[int | str, dict[str, Any]]
_SESSION: Responses = {200: {"model": Session}, 409: {"description": "The session is busy"}}


class RevertInput(Wire):
    message_id: str = Field(alias="messageID", min_length=1)
    part_id: str | None = Field(default=None, alias="partID")


@router.post("/{session_id}/revert", operation_id="session.revert", responses=_SESSION)
async def revert(session_id: str, body: RevertInput, sessions: SessionsDep) -> WireResponse:
    """Hide the messages from `messageID` (from `partID` within it) on, and put back the files the
    session changed since then; the next prompt removes the hidden messages."""
    return WireResponse(await SessionReverts(sessions).revert(session_id, body.message_id, body.part_id))


@router.post("/{session_id}/unrevert", operation_id="session.unrevert", responses=_SESSION)
async def unrevert(session_id: str, sessions: SessionsDep) -> WireResponse:
    """Undo the revert: the hidden messages come back, and so do the files as they were before it."""
    return WireResponse(await SessionReverts(sessions).unrevert(session_id))


@router.get("/{session_id}/diff", operation_id="session.diff", responses={200: {"model": list[FileDiff]}})
async def diff(
    session_id: str,
    sessions: SessionsDep,
    message_id: Annotated[
        str | None, Query(alias="messageID", description="Only the turn answering this user message")
    ] = None,
) -> WireResponse:
    """The files the session's tools changed, each from before its first change to now."""
    return WireResponse(await SessionReverts(sessions).diff(session_id, message_id))
