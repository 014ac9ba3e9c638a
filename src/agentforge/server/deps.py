"""Request-scoped dependencies: the runtime, the caller's tenant, the session service.

They are `async def` on purpose: FastAPI runs plain `def` dependencies in a thread pool, and that
hop cost about a millisecond per dependency per request.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from agentforge.model.events import DEFAULT_TENANT
from agentforge.session.runtime import Runtime
from agentforge.session.service import SessionService


async def runtime(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


async def tenant(request: Request) -> str:
    # Local mode: loopback bind, no authentication configured, one tenant.
    return DEFAULT_TENANT


async def sessions(
    rt: Annotated[Runtime, Depends(runtime)], tenant_id: Annotated[str, Depends(tenant)]
) -> SessionService:
    return SessionService(rt, tenant_id)


RuntimeDep = Annotated[Runtime, Depends(runtime)]
TenantDep = Annotated[str, Depends(tenant)]
SessionsDep = Annotated[SessionService, Depends(sessions)]
