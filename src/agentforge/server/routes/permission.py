"""Permission routes (KERNEL 1.2): list the requests waiting for a person, and answer one."""

from __future__ import annotations

from fastapi import APIRouter

from agentforge.identity.model import Identity
from agentforge.model.base import Wire
from agentforge.model.permission import PermissionReply, PermissionRequestInfo
from agentforge.permission.service import UnknownPermissionRequestError
from agentforge.runtime.runtime import Runtime
from agentforge.server.deps import IdentityDep, RuntimeDep, SessionsDep
from agentforge.server.responses import WireResponse
from agentforge.session.errors import NotFoundError

router = APIRouter(tags=["permission"])


class PermissionReplyInput(Wire):
    reply: PermissionReply
    message: str | None = None


class LegacyPermissionReplyInput(Wire):
    response: PermissionReply


async def _reply(rt: Runtime, caller: Identity, request_id: str, body: PermissionReplyInput) -> WireResponse:
    # The decision records who answered (the audit log keeps it too).
    try:
        await rt.permissions.reply(caller.tenant, request_id, body.reply, body.message, user=caller.user)
    except UnknownPermissionRequestError as exc:
        raise NotFoundError(str(exc)) from None
    return WireResponse(True)


@router.get(
    "/permission",
    operation_id="permission.list",
    responses={200: {"model": list[PermissionRequestInfo]}},
    summary="Permission requests waiting for an answer",
)
async def pending_permissions(rt: RuntimeDep, caller: IdentityDep) -> WireResponse:
    return WireResponse(await rt.permissions.listed(caller.tenant))


@router.post(
    "/permission/{request_id}/reply",
    operation_id="permission.reply",
    summary="Answer a permission request: once, always or reject",
)
async def reply(
    request_id: str, body: PermissionReplyInput, rt: RuntimeDep, caller: IdentityDep
) -> WireResponse:
    return await _reply(rt, caller, request_id, body)


@router.post(
    "/session/{session_id}/permissions/{permission_id}",
    operation_id="permission.respond",
    summary="Answer a permission request (deprecated: use POST /permission/{id}/reply)",
    deprecated=True,
)
async def legacy_reply(
    session_id: str,
    permission_id: str,
    body: LegacyPermissionReplyInput,
    rt: RuntimeDep,
    caller: IdentityDep,
    sessions: SessionsDep,
) -> WireResponse:
    await sessions.get(session_id)
    waiting = rt.permissions.waiting(caller.tenant, permission_id)
    if waiting is None or waiting.session_id != session_id:
        raise NotFoundError(f"Permission request not found: {permission_id}")
    return await _reply(rt, caller, permission_id, PermissionReplyInput(reply=body.response))
