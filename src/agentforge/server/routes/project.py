"""Project routes (opencode's `/project`): a tenant has one project, its workspace.

The project id is derived from the tenant and its workspace, so it names nothing another tenant can
use: another tenant's project id answers 404 like an id that never existed.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import Field

from agentforge.model.base import Wire
from agentforge.server.deps import RuntimeDep, TenantDep
from agentforge.server.responses import WireResponse
from agentforge.session.errors import NotFoundError
from agentforge.session.workspace import workspace_access
from agentforge.workspace.access import WorkspaceAccess
from agentforge.workspace.git_reader import git_view

router = APIRouter(tags=["project"])


class ProjectTime(Wire):
    created: int
    updated: int


class Project(Wire):
    id: str
    worktree: str
    vcs: Literal["git"] | None = None
    name: str
    time: ProjectTime
    sandboxes: list[str] = Field(default_factory=list)


class ProjectDirectory(Wire):
    directory: str


def project_id(tenant_id: str, access: WorkspaceAccess) -> str:
    """Stable for a tenant's workspace, and different for every tenant (40 hex digits, like opencode's)."""
    seed = f"{tenant_id}\0{access.root}".encode()
    return hashlib.sha1(seed, usedforsecurity=False).hexdigest()


def _describe(tenant_id: str, access: WorkspaceAccess, has_git: bool) -> Project:
    stat = access.root.stat()
    return Project(
        id=project_id(tenant_id, access),
        worktree=str(access.root),
        vcs="git" if has_git else None,
        name=access.root.name or str(access.root),
        time=ProjectTime(
            created=int(min(stat.st_ctime, stat.st_mtime) * 1000), updated=int(stat.st_mtime * 1000)
        ),
    )


async def current_project(rt: RuntimeDep, tenant_id: TenantDep) -> Project:
    scope = await rt.scope(tenant_id)
    access = await asyncio.to_thread(workspace_access, scope)
    has_git = await (await git_view(access)).has_repo()
    return await asyncio.to_thread(_describe, tenant_id, access, has_git)


_PROJECT: dict[int | str, dict[str, Any]] = {200: {"model": Project}}


@router.get("/project", operation_id="project.list", responses={200: {"model": list[Project]}})
async def list_projects(rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    """The caller's projects: its workspace."""
    return WireResponse([await current_project(rt, tenant_id)])


@router.get("/project/current", operation_id="project.current", responses=_PROJECT)
async def get_current_project(rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    """The project the caller works in: its workspace."""
    return WireResponse(await current_project(rt, tenant_id))


@router.get(
    "/project/{project_id}/directories",
    operation_id="project.directories",
    responses={200: {"model": list[ProjectDirectory]}},
)
async def project_directories(project_id: str, rt: RuntimeDep, tenant_id: TenantDep) -> WireResponse:
    """The directories of a project: the workspace (no worktrees or sandboxes)."""
    project = await current_project(rt, tenant_id)
    if project_id != project.id:
        raise NotFoundError(f"Project not found: {project_id}")
    return WireResponse([ProjectDirectory(directory=project.worktree)])
