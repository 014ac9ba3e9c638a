"""Session routes that copy or rewrite stored history (KERNEL 1.1): fork, and removing or replacing
messages and parts."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body
from pydantic import Field

from agentforge.model.base import Wire
from agentforge.model.part import Part
from agentforge.model.session import Session
from agentforge.server.deps import SessionsDep
from agentforge.server.responses import WireResponse
from agentforge.session.channels.edits import MessageEdits
from agentforge.session.channels.fork import fork_session

router = APIRouter(prefix="/session", tags=["session"])

Responses = dict[int | str, dict[str, Any]]
_SESSION: Responses = {200: {"model": Session}}
_BUSY: Responses = {409: {"description": "The session is busy"}}


class ForkInput(Wire):
    message_id: str | None = Field(default=None, alias="messageID")


@router.post(
    "/{session_id}/fork",
    operation_id="session.fork",
    responses=_SESSION,
    summary="Copy the session (up to a message) into a new one",
)
async def fork(
    session_id: str, sessions: SessionsDep, body: Annotated[ForkInput | None, Body()] = None
) -> WireResponse:
    message_id = body.message_id if body is not None else None
    return WireResponse(await fork_session(sessions, session_id, message_id))


@router.delete(
    "/{session_id}/message/{message_id}",
    operation_id="session.deleteMessage",
    responses=_BUSY,
    summary="Delete a message and its parts",
)
async def delete_message(session_id: str, message_id: str, sessions: SessionsDep) -> WireResponse:
    await MessageEdits(sessions).delete_message(session_id, message_id)
    return WireResponse(True)


@router.delete(
    "/{session_id}/message/{message_id}/part/{part_id}",
    operation_id="part.delete",
    responses=_BUSY,
    summary="Delete a part",
)
async def delete_part(session_id: str, message_id: str, part_id: str, sessions: SessionsDep) -> WireResponse:
    await MessageEdits(sessions).delete_part(session_id, message_id, part_id)
    return WireResponse(True)


@router.patch(
    "/{session_id}/message/{message_id}/part/{part_id}",
    operation_id="part.update",
    responses={**_BUSY, 200: {"model": Part}},
    summary="Replace a part (its ids must match the path)",
)
async def update_part(
    session_id: str, message_id: str, part_id: str, part: Annotated[Part, Body()], sessions: SessionsDep
) -> WireResponse:
    return WireResponse(await MessageEdits(sessions).update_part(session_id, message_id, part_id, part))
