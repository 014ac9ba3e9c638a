"""The two routes of opencode's v2 API (`/api/...`) its terminal UI needs: where it works
(`/api/location`) and the `@` file search (`/api/fs/find`). The rest of the v2 API is not served
(server/unsupported.py says so).

The v2 routes name a directory as `location[directory]` in the query; it must lie inside the caller's
workspace, like `directory` on the other routes.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from agentforge.model.base import Wire
from agentforge.server.deps import RuntimeDep, TenantDep
from agentforge.server.responses import WireResponse
from agentforge.server.routes.project import project_id
from agentforge.session.workspace import workspace_access
from agentforge.workspace.access import WorkspaceAccess
from agentforge.workspace.search import fuzzy_filter, list_paths

router = APIRouter(prefix="/api", tags=["v2"])


class LocationProject(Wire):
    id: str
    directory: str


class LocationInfo(Wire):
    directory: str
    project: LocationProject


class FileSystemEntry(Wire):
    path: str
    type: Literal["file", "directory"]


class FoundEntries(Wire):
    location: LocationInfo
    data: list[FileSystemEntry] = Field(default_factory=list)


async def located(
    request: Request, rt: RuntimeDep, tenant_id: TenantDep
) -> tuple[WorkspaceAccess, LocationInfo]:
    """The caller's workspace at `location[directory]` (the workspace root without one)."""
    scope = await rt.scope(tenant_id)
    access = await asyncio.to_thread(workspace_access, scope)
    access = await asyncio.to_thread(access.at, request.query_params.get("location[directory]"))
    project = LocationProject(id=project_id(tenant_id, access), directory=str(access.root))
    return access, LocationInfo(directory=str(access.base or access.root), project=project)


Located = Annotated[tuple[WorkspaceAccess, LocationInfo], Depends(located)]


@router.get("/location", operation_id="v2.location.get", responses={200: {"model": LocationInfo}})
async def location(found: Located) -> WireResponse:
    """Where the caller works: a directory of its workspace, and its project."""
    return WireResponse(found[1])


@router.get("/fs/find", operation_id="v2.fs.find", responses={200: {"model": FoundEntries}})
async def fs_find(
    found: Located,
    query: Annotated[str, Query(description="Characters the path contains, in order")] = "",
    type: Annotated[Literal["file", "directory"] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 10,
) -> WireResponse:
    """Paths under the location matching `query`, best first (directories end in "/")."""
    access, info = found
    paths = await list_paths(access)
    matched = await asyncio.to_thread(fuzzy_filter, paths, query.strip(), kind=type, limit=limit)
    entries = [FileSystemEntry(path=p, type="directory" if p.endswith("/") else "file") for p in matched]
    return WireResponse(FoundEntries(location=info, data=entries))
