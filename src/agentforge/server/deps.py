"""Request-scoped dependencies: the runtime, the caller's identity and tenant, the session service.

They are `async def` on purpose: FastAPI runs plain `def` dependencies in a thread pool, and that
hop cost about a millisecond per dependency per request.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from agentforge.identity.model import ADMIN, LOCAL_IDENTITY, Identity
from agentforge.model.events import CURRENT_ACTOR
from agentforge.server.errors import ApiError
from agentforge.session.runtime import Runtime
from agentforge.session.service import SessionService


async def runtime(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


async def identity(request: Request) -> Identity:
    """The authenticated caller. Local mode (loopback bind, no authentication configured): one
    tenant, `default`, whose local user may do everything."""
    resolved = LOCAL_IDENTITY
    # Events this request (and the turns it starts) writes are attributed to this user.
    CURRENT_ACTOR.set(resolved.user)
    return resolved


async def tenant(caller: Annotated[Identity, Depends(identity)]) -> str:
    return caller.tenant


async def admin(caller: Annotated[Identity, Depends(identity)]) -> Identity:
    """The caller, who must hold the admin role (403 otherwise)."""
    if not caller.has_role(ADMIN):
        raise ApiError(403, "ForbiddenError", "this endpoint needs the admin role")
    return caller


async def sessions(
    rt: Annotated[Runtime, Depends(runtime)], tenant_id: Annotated[str, Depends(tenant)]
) -> SessionService:
    return SessionService(rt, tenant_id)


RuntimeDep = Annotated[Runtime, Depends(runtime)]
IdentityDep = Annotated[Identity, Depends(identity)]
AdminDep = Annotated[Identity, Depends(admin)]
TenantDep = Annotated[str, Depends(tenant)]
SessionsDep = Annotated[SessionService, Depends(sessions)]
