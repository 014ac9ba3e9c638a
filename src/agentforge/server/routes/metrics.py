"""`GET /metrics`: the app's Prometheus metrics. They count every tenant's work, so with authentication
on only an admin reads them (in local mode the local user is one)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from agentforge.server.deps import AdminDep, RuntimeDep
from agentforge.telemetry.metrics import CONTENT_TYPE

router = APIRouter(tags=["global"])


@router.get(
    "/metrics",
    operation_id="metrics.get",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics(rt: RuntimeDep, _caller: AdminDep) -> Response:
    return Response(rt.telemetry.metrics.render(), media_type=CONTENT_TYPE)
