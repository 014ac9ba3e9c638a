"""opencode's `/experimental` routes that its clients read at start-up: capabilities, the hosted console
state (none here), the tools a model gets, MCP resources and remote workspaces (none offered)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import Field

from agentforge.llm.provider import UnknownModelError
from agentforge.model.base import Wire
from agentforge.server.deps import RuntimeDep, TenantDep
from agentforge.server.responses import WireResponse
from agentforge.session.errors import InvalidInputError

router = APIRouter(prefix="/experimental", tags=["experimental"])


class Capabilities(Wire):
    background_subagents: bool = Field(alias="backgroundSubagents")


class ConsoleState(Wire):
    console_managed_providers: list[str] = Field(alias="consoleManagedProviders")
    switchable_org_count: int = Field(alias="switchableOrgCount")


class ToolListItem(Wire):
    id: str
    description: str
    parameters: dict[str, Any]


@router.get(
    "/capabilities", operation_id="experimental.capabilities.get", responses={200: {"model": Capabilities}}
)
async def capabilities() -> WireResponse:
    """What this server offers beyond the stable API: no background subagents."""
    return WireResponse(Capabilities(background_subagents=False))


@router.get("/console", operation_id="experimental.console.get", responses={200: {"model": ConsoleState}})
async def console() -> WireResponse:
    """opencode's hosted console: not used here, so no provider is managed by it."""
    return WireResponse(ConsoleState(console_managed_providers=[], switchable_org_count=0))


@router.get("/tool/ids", operation_id="tool.ids", responses={200: {"model": list[str]}})
async def tool_ids(rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    """Every tool of the caller's tenant: built-ins, plugin tools and its MCP servers' tools."""
    scope = await rt.scope(tenant_id)
    return WireResponse(scope.tools.names())


@router.get("/tool", operation_id="tool.list", responses={200: {"model": list[ToolListItem]}})
async def tool_list(
    rt: RuntimeDep,
    tenant_id: TenantDep,
    provider: Annotated[str, Query(description="The provider of the model")],
    model: Annotated[str, Query(description="The model, whose tools differ (apply_patch or edit/write)")],
) -> WireResponse:
    """The tools a model gets, with the description and parameters it is told about."""
    scope = await rt.scope(tenant_id)
    try:
        scope.catalog.resolve(provider, model)
    except UnknownModelError as exc:
        raise InvalidInputError(str(exc)) from exc
    tools = scope.tools.for_model(provider, model)
    return WireResponse(
        [
            ToolListItem(id=tool.id, description=tool.description, parameters=tool.json_schema())
            for tool in tools
        ]
    )


@router.get("/resource", operation_id="experimental.resource.list")
async def resources() -> WireResponse:
    """MCP resources by key: none are offered to clients (MCP servers contribute tools only)."""
    return WireResponse({})


@router.get("/workspace", operation_id="experimental.workspace.list")
async def workspaces() -> WireResponse:
    """Remote workspaces: none (each tenant works in its one workspace)."""
    return WireResponse([])


@router.get("/workspace/status", operation_id="experimental.workspace.status")
async def workspace_status() -> WireResponse:
    return WireResponse([])
