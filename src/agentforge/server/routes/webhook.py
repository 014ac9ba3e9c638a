"""`GET /webhook/delivery`: the caller's tenant webhook delivery log, newest first, for admins."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from agentforge.model.webhook import DeliveryStatus, WebhookDelivery
from agentforge.server.deps import AdminDep, RuntimeDep
from agentforge.server.responses import WireResponse
from agentforge.session.errors import NotFoundError

router = APIRouter(prefix="/webhook", tags=["webhook"])


@router.get(
    "/delivery",
    operation_id="webhook.deliveries",
    summary="Webhook deliveries of the caller's tenant, newest first, with every attempt",
    responses={200: {"model": list[WebhookDelivery]}},
)
async def deliveries(
    caller: AdminDep,
    rt: RuntimeDep,
    status: DeliveryStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> WireResponse:
    found = await rt.store.webhook_deliveries(caller.tenant, limit=limit, status=status)
    return WireResponse([delivery.wire() for delivery in found])


@router.get(
    "/delivery/{delivery_id}",
    operation_id="webhook.delivery",
    summary="One webhook delivery (its id is the webhook-id header the receiver got)",
    responses={200: {"model": WebhookDelivery}},
)
async def delivery(delivery_id: str, caller: AdminDep, rt: RuntimeDep) -> WireResponse:
    found = await rt.store.webhook_delivery(caller.tenant, delivery_id)
    if found is None:
        raise NotFoundError(f"No webhook delivery {delivery_id}")
    return WireResponse(found.wire())
