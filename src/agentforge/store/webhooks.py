"""Webhook delivery rows: sync functions over a Connection, each scoped to one tenant (but the
start-up read of pending deliveries, which spans them all).

Writes run through `Store.mutate` (the writer's transaction); reads on the readers.
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import Connection, Row, select, update

from agentforge.model.webhook import DeliveryAttempt, DeliveryStatus, WebhookDelivery
from agentforge.store.schema import webhook_delivery as table


def insert_delivery(conn: Connection, tenant_id: str, delivery: WebhookDelivery) -> None:
    conn.execute(
        table.insert().values(
            id=delivery.id,
            tenant_id=tenant_id,
            url=delivery.url,
            event=delivery.event,
            event_id=delivery.event_id,
            payload=orjson.dumps(delivery.payload).decode(),
            status=delivery.status,
            attempts=_attempts_json(delivery.attempts),
            next_attempt=delivery.next_attempt,
            time_created=delivery.time_created,
            time_updated=delivery.time_updated,
        )
    )


def update_delivery(conn: Connection, tenant_id: str, delivery: WebhookDelivery) -> None:
    """Store the delivery's outcome so far: its status, attempts and next attempt."""
    conn.execute(
        update(table)
        .where(table.c.tenant_id == tenant_id, table.c.id == delivery.id)
        .values(
            status=delivery.status,
            attempts=_attempts_json(delivery.attempts),
            next_attempt=delivery.next_attempt,
            time_updated=delivery.time_updated,
        )
    )


def list_deliveries(
    conn: Connection, tenant_id: str, *, limit: int, status: DeliveryStatus | None = None
) -> list[WebhookDelivery]:
    """The tenant's deliveries, newest first."""
    query = select(table).where(table.c.tenant_id == tenant_id)
    if status is not None:
        query = query.where(table.c.status == status)
    rows = conn.execute(query.order_by(table.c.time_created.desc(), table.c.id.desc()).limit(limit))
    return [_delivery(row) for row in rows]


def get_delivery(conn: Connection, tenant_id: str, delivery_id: str) -> WebhookDelivery | None:
    row = conn.execute(select(table).where(table.c.tenant_id == tenant_id, table.c.id == delivery_id)).first()
    return None if row is None else _delivery(row)


def pending_deliveries(conn: Connection, limit: int) -> list[tuple[str, WebhookDelivery]]:
    """(tenant, delivery) of every delivery still to be tried, across tenants (start-up resumption)."""
    rows = conn.execute(
        select(table).where(table.c.status == "pending").order_by(table.c.time_created).limit(limit)
    )
    return [(row.tenant_id, _delivery(row)) for row in rows]


def _attempts_json(attempts: list[DeliveryAttempt]) -> str:
    return orjson.dumps([attempt.wire() for attempt in attempts]).decode()


def _delivery(row: Row[Any]) -> WebhookDelivery:
    return WebhookDelivery(
        id=row.id,
        url=row.url,
        event=row.event,
        event_id=row.event_id,
        payload=orjson.loads(row.payload),
        status=row.status,
        attempts=[DeliveryAttempt.model_validate(a) for a in orjson.loads(row.attempts)],
        next_attempt=row.next_attempt,
        time_created=row.time_created,
        time_updated=row.time_updated,
    )
