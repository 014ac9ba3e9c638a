"""MCP routes (opencode's `/mcp`): the status of the caller's MCP servers."""

from __future__ import annotations

from fastapi import APIRouter

from agentforge.server.deps import RuntimeDep, TenantDep
from agentforge.server.responses import WireResponse

router = APIRouter(prefix="/mcp", tags=["mcp"])


@router.get("", operation_id="mcp.status")
async def mcp_status(rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    """Each configured MCP server of the caller's tenant: connected, disabled or failed (with why)."""
    scope = await rt.scope(tenant_id)
    return WireResponse(scope.mcp.status() if scope.mcp is not None else {})
