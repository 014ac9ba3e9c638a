"""Session routes (KERNEL 1.1)."""

from __future__ import annotations

import urllib.parse
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response
from fastapi.routing import APIRoute

from agentforge.model.message import WithParts
from agentforge.model.session import Session, StatusBusy
from agentforge.server.deps import PromptDep, RuntimeDep, SessionsDep, TenantDep
from agentforge.server.responses import WireResponse
from agentforge.session.errors import InvalidInputError
from agentforge.session.inputs import PromptInput, SessionCreateInput, SessionUpdateInput

router = APIRouter(prefix="/session", tags=["session"])

Responses = dict[int | str, dict[str, Any]]
_SESSION: Responses = {200: {"model": Session}}
_SESSIONS: Responses = {200: {"model": list[Session]}}
_WITH_PARTS: Responses = {200: {"model": WithParts}}
_MESSAGES: Responses = {200: {"model": list[WithParts]}}


@router.get("", operation_id="session.list", responses=_SESSIONS, summary="List sessions, newest first")
async def list_sessions(
    rt: RuntimeDep,
    tenant_id: TenantDep,
    directory: str | None = None,
    roots: bool = False,
    start: Annotated[int | None, Query(ge=0, le=2**63 - 1, description="Only sessions updated since")] = None,
    search: str | None = None,
    limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
) -> WireResponse:
    found = await rt.store.list_sessions(
        tenant_id, directory=directory, roots=roots, start=start, search=search, limit=limit
    )
    return WireResponse(found)


@router.get("/status", operation_id="session.status", summary="Live status of busy sessions")
async def session_status(rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    statuses = rt.status.busy_sessions(tenant_id)
    # Sessions other replicas run: busy (their retry details stay with them). This replica's own
    # are as its tracker says: a lease it still holds while the run's last writes land is idle.
    here = rt.cluster.replica if rt.cluster is not None else None
    for session_id, replica in (await rt.store.leased_sessions(tenant_id)).items():
        if replica != here:
            statuses.setdefault(session_id, StatusBusy())
    return WireResponse(statuses)


@router.post("", operation_id="session.create", responses=_SESSION, summary="Create a session")
async def create_session(
    sessions: SessionsDep, body: Annotated[SessionCreateInput | None, Body()] = None
) -> WireResponse:
    return WireResponse(await sessions.create(body or SessionCreateInput()))


@router.get("/{session_id}", operation_id="session.get", responses=_SESSION, summary="Get a session")
async def get_session(session_id: str, sessions: SessionsDep) -> WireResponse:
    return WireResponse(await sessions.get(session_id))


@router.patch("/{session_id}", operation_id="session.update", responses=_SESSION, summary="Update a session")
async def update_session(session_id: str, body: SessionUpdateInput, sessions: SessionsDep) -> WireResponse:
    return WireResponse(await sessions.update(session_id, body))


@router.delete("/{session_id}", operation_id="session.delete", summary="Delete a session and its children")
async def delete_session(session_id: str, sessions: SessionsDep) -> WireResponse:
    await sessions.delete(session_id)
    return WireResponse(True)


@router.get(
    "/{session_id}/children", operation_id="session.children", responses=_SESSIONS, summary="Child sessions"
)
async def children(
    session_id: str, sessions: SessionsDep, rt: RuntimeDep, tenant_id: TenantDep
) -> WireResponse:
    await sessions.get(session_id)
    return WireResponse(await rt.store.children(tenant_id, session_id))


def _next_link(request: Request, cursor: str, limit: int) -> str:
    query = urllib.parse.urlencode({"limit": limit, "before": cursor})
    return f'<{request.url.replace(query=query)}>; rel="next"'


@router.get(
    "/{session_id}/message",
    operation_id="session.messages",
    responses=_MESSAGES,
    summary="Messages, oldest first",
)
async def list_messages(
    session_id: str,
    request: Request,
    sessions: SessionsDep,
    limit: Annotated[int | None, Query(ge=0, le=2**63 - 1)] = None,
    before: str | None = None,
) -> WireResponse:
    if before is not None and limit is None:
        raise InvalidInputError("before requires limit")
    items, cursor = await sessions.messages(session_id, limit=limit, before=before)
    headers: dict[str, str] = {}
    if cursor is not None and limit is not None:
        headers = {"X-Next-Cursor": cursor, "Link": _next_link(request, cursor, limit)}
    return WireResponse(items, headers=headers)


@router.get(
    "/{session_id}/message/{message_id}",
    operation_id="session.message",
    responses=_WITH_PARTS,
    summary="One message",
)
async def get_message(session_id: str, message_id: str, sessions: SessionsDep) -> WireResponse:
    return WireResponse(await sessions.message(session_id, message_id))


@router.post(
    "/{session_id}/message",
    operation_id="session.prompt",
    responses=_WITH_PARTS,
    summary="Send a message and run the turn to completion",
)
async def prompt(session_id: str, body: PromptInput, prompts: PromptDep) -> WireResponse:
    return WireResponse(await prompts.prompt(session_id, body))


@router.post(
    "/{session_id}/prompt_async",
    operation_id="session.prompt_async",
    status_code=204,
    summary="Send a message; the turn runs in the background",
)
async def prompt_async(session_id: str, body: PromptInput, prompts: PromptDep) -> Response:
    await prompts.prompt_async(session_id, body)
    return Response(status_code=204)


def prompt_routes() -> list[APIRoute]:
    """The routes server/prompt_lane.py serves ahead of FastAPI (every turn starts through them)."""
    return [r for r in router.routes if isinstance(r, APIRoute) and r.endpoint in (prompt, prompt_async)]


@router.post("/{session_id}/abort", operation_id="session.abort", summary="Cancel the running turn")
async def abort(session_id: str, sessions: SessionsDep) -> WireResponse:
    return WireResponse(await sessions.abort(session_id))
