"""Process-wide routes: liveness and readiness (both open: load balancers probe them)."""

from __future__ import annotations

from fastapi import APIRouter

from agentforge.runtime.lifecycle import readiness
from agentforge.server.deps import RuntimeDep
from agentforge.server.responses import WireResponse
from agentforge.version import __version__

router = APIRouter(tags=["global"])


@router.get("/global/health", operation_id="global.health", summary="Liveness and version")
async def health() -> WireResponse:
    return WireResponse({"healthy": True, "version": __version__})


@router.get(
    "/global/ready",
    operation_id="global.ready",
    summary="Readiness: database reachable, schema at head, writer running, not shutting down",
    responses={503: {"description": "Not ready: `failed` names each check that failed and why"}},
)
async def ready(rt: RuntimeDep) -> WireResponse:
    failed = await readiness(rt)
    if failed:
        return WireResponse({"ready": False, "failed": failed}, status_code=503)
    return WireResponse({"ready": True, "version": __version__})
