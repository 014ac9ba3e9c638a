"""MCP routes (opencode's `/mcp`): the status of the caller's MCP servers, and connecting or
disconnecting one of them (admins only: it changes the tools every session of the tenant gets;
audited). Adding servers is a config change, which is not made over HTTP (see routes/config.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from agentforge.server.deps import AdminDep, RuntimeDep, TenantDep
from agentforge.server.errors import ApiError
from agentforge.server.responses import WireResponse
from agentforge.session.errors import NotFoundError
from agentforge.session.scope import TenantScope
from agentforge.tools.mcp import McpManager

router = APIRouter(prefix="/mcp", tags=["mcp"])

MCP_CONNECTED = "mcp.connected"
MCP_DISCONNECTED = "mcp.disconnected"
ADD_REFUSED = (
    "MCP servers cannot be added over HTTP: they are part of the server's config (`mcp` in "
    "agentforge.json, or the tenant's overlay), which the operator edits."
)
_DONE: dict[int | str, dict[str, Any]] = {
    200: {"model": bool},
    403: {"description": "Only an admin may connect or disconnect the tenant's MCP servers"},
    404: {"description": "No MCP server of that name is configured"},
}


def _manager(scope: TenantScope, name: str) -> McpManager:
    manager = scope.mcp
    if manager is None or not manager.knows(name):
        raise NotFoundError(f"MCP server not found: {name}")
    return manager


@router.get("", operation_id="mcp.status")
async def mcp_status(rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    """Each configured MCP server of the caller's tenant: connected, disabled or failed (with why)."""
    scope = await rt.scope(tenant_id)
    return WireResponse(scope.mcp.status() if scope.mcp is not None else {})


@router.post("", operation_id="mcp.add", responses={403: {"description": "Refused: a config change"}})
async def add_server() -> WireResponse:
    raise ApiError(403, "ForbiddenError", ADD_REFUSED)


@router.post("/{name}/connect", operation_id="mcp.connect", responses=_DONE)
async def connect(name: str, rt: RuntimeDep, caller: AdminDep) -> WireResponse:
    """Connect the server again; the tools it lists join the tenant's."""
    scope = await rt.scope(caller.tenant)
    manager = _manager(scope, name)
    for tool in await manager.connect(name):
        if scope.tools.get(tool.id) is None:  # never let a server shadow a built-in
            scope.tools.register(tool)
    status = manager.status()[name]
    await rt.store.record_audit(
        caller.tenant, MCP_CONNECTED, actor=caller.user, data={"server": name, **status}
    )
    return WireResponse(True)


@router.post("/{name}/disconnect", operation_id="mcp.disconnect", responses=_DONE)
async def disconnect(name: str, rt: RuntimeDep, caller: AdminDep) -> WireResponse:
    """Close the server's connection; its tools answer that it is not connected until it is again."""
    scope = await rt.scope(caller.tenant)
    await _manager(scope, name).disconnect(name)
    await rt.store.record_audit(caller.tenant, MCP_DISCONNECTED, actor=caller.user, data={"server": name})
    return WireResponse(True)
