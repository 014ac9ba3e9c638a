"""`GET /agent` (KERNEL 1.4): every agent of the caller's tenant, the default first, then by name."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from agentforge.agents.agent import AgentInfo, agent_info
from agentforge.server.deps import RuntimeDep, TenantDep
from agentforge.server.responses import WireResponse

router = APIRouter(tags=["agent"])

_AGENTS: dict[int | str, dict[str, Any]] = {200: {"model": list[AgentInfo]}}


@router.get("/agent", operation_id="app.agents", responses=_AGENTS, summary="List agents")
async def list_agents(rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    scope = await rt.scope(tenant_id)
    return WireResponse([agent_info(agent) for agent in scope.agents.list()])
