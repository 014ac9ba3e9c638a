"""`GET /metrics`: the app's Prometheus metrics. They count every tenant's work, so with authentication
on only the server operator reads them, with `telemetry.metrics_token` (see deps.metrics_reader); in
local mode the local user does."""

from __future__ import annotations

from fastapi import APIRouter, Response

from agentforge.server.deps import MetricsReaderDep, RuntimeDep
from agentforge.telemetry.metrics import CONTENT_TYPE

router = APIRouter(tags=["global"])


@router.get(
    "/metrics",
    operation_id="metrics.get",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics(rt: RuntimeDep, _reader: MetricsReaderDep) -> Response:
    return Response(rt.telemetry.metrics.render(), media_type=CONTENT_TYPE)
