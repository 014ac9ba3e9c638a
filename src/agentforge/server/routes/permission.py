"""Permission routes (KERNEL 1.2): list the requests waiting for a person, and answer one."""

from __future__ import annotations

from fastapi import APIRouter

from agentforge.model.base import Wire
from agentforge.model.permission import PermissionReply, PermissionRequestInfo
from agentforge.permission.service import UnknownPermissionRequestError
from agentforge.server.deps import RuntimeDep, SessionsDep, TenantDep
from agentforge.server.responses import WireResponse
from agentforge.session.runtime import Runtime
from agentforge.session.service import NotFoundError

router = APIRouter(tags=["permission"])

# Local mode has one user; with authentication this becomes the caller's identity.
LOCAL_USER = "local"


class PermissionReplyInput(Wire):
    reply: PermissionReply
    message: str | None = None


class LegacyPermissionReplyInput(Wire):
    response: PermissionReply


async def _reply(rt: Runtime, tenant_id: str, request_id: str, body: PermissionReplyInput) -> WireResponse:
    try:
        await rt.permissions.reply(tenant_id, request_id, body.reply, body.message, user=LOCAL_USER)
    except UnknownPermissionRequestError as exc:
        raise NotFoundError(str(exc)) from None
    return WireResponse(True)


@router.get(
    "/permission",
    responses={200: {"model": list[PermissionRequestInfo]}},
    summary="Permission requests waiting for an answer",
)
async def pending_permissions(rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    return WireResponse(rt.permissions.pending(tenant_id))


@router.post("/permission/{request_id}/reply", summary="Answer a permission request: once, always or reject")
async def reply(
    request_id: str, body: PermissionReplyInput, rt: RuntimeDep, tenant_id: TenantDep
) -> WireResponse:
    return await _reply(rt, tenant_id, request_id, body)


@router.post(
    "/session/{session_id}/permissions/{permission_id}",
    summary="Answer a permission request (deprecated: use POST /permission/{id}/reply)",
    deprecated=True,
)
async def legacy_reply(
    session_id: str,
    permission_id: str,
    body: LegacyPermissionReplyInput,
    rt: RuntimeDep,
    tenant_id: TenantDep,
    sessions: SessionsDep,
) -> WireResponse:
    await sessions.get(session_id)
    waiting = rt.permissions.waiting(tenant_id, permission_id)
    if waiting is None or waiting.session_id != session_id:
        raise NotFoundError(f"Permission request not found: {permission_id}")
    return await _reply(rt, tenant_id, permission_id, PermissionReplyInput(reply=body.response))
