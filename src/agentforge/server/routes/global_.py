"""Process-wide routes."""

from __future__ import annotations

from fastapi import APIRouter

from agentforge import __version__
from agentforge.server.responses import WireResponse

router = APIRouter(tags=["global"])


@router.get("/global/health", operation_id="global.health", summary="Liveness and version")
async def health() -> WireResponse:
    return WireResponse({"healthy": True, "version": __version__})
