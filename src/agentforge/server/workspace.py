"""The caller's workspace for the file, find and vcs routes: the tenant's workspace root, what inside it
is not the tenant's, and the `?directory=` a client may name (opencode's instance selector; it must
lie inside the workspace)."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import Depends, Query

from agentforge.server.deps import RuntimeDep, TenantDep
from agentforge.session.workspace import workspace_access
from agentforge.workspace.access import WorkspaceAccess


async def workspace(
    rt: RuntimeDep,
    tenant_id: TenantDep,
    directory: Annotated[
        str | None, Query(description="A directory inside the workspace that relative paths start from")
    ] = None,
) -> WorkspaceAccess:
    scope = await rt.scope(tenant_id)
    access = await asyncio.to_thread(workspace_access, scope)
    return await asyncio.to_thread(access.at, directory)


WorkspaceDep = Annotated[WorkspaceAccess, Depends(workspace)]
