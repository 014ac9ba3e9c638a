"""`GET /metrics`: the app's Prometheus metrics (behind authentication whenever it is on)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from agentforge.server.deps import RuntimeDep
from agentforge.telemetry.metrics import CONTENT_TYPE

router = APIRouter(tags=["global"])


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(rt: RuntimeDep) -> Response:
    return Response(rt.telemetry.metrics.render(), media_type=CONTENT_TYPE)
