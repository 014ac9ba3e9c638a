"""`GET /session/{id}/todo` (KERNEL 1.1): the session's todo list."""

from __future__ import annotations

from fastapi import APIRouter

from agentforge.server.deps import RuntimeDep, SessionsDep, TenantDep
from agentforge.server.responses import WireResponse
from agentforge.session.channels.todos import StoreTodos

router = APIRouter(prefix="/session", tags=["session"])


@router.get("/{session_id}/todo", operation_id="session.todo", summary="The session's todo list")
async def todos(session_id: str, sessions: SessionsDep, rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    await sessions.get(session_id)  # 404 for an unknown session
    return WireResponse(await StoreTodos(rt.store, tenant_id).read(session_id))
