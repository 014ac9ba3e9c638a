"""Which bus events are webhook notifications, and the body each one sends."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agentforge.config.webhooks import WebhookEvent
from agentforge.model.events import (
    PERMISSION_ASKED,
    SESSION_CREATED,
    SESSION_ERROR,
    SESSION_IDLE,
    SESSION_STATUS,
    Event,
)

QUESTION_ASKED = "question.asked"  # session/channels/questions.py (the session layer is above us)


def notification_type(event: Event) -> WebhookEvent | None:
    """The webhook event `event` stands for, or None."""
    if event.type == SESSION_CREATED:
        return "session.created"
    if event.type == SESSION_STATUS and event.properties.get("status", {}).get("type") == "busy":
        return "session.busy"
    if event.type == SESSION_IDLE:
        return "session.idle"
    if event.type == SESSION_ERROR:
        return "session.error"
    if event.type == PERMISSION_ASKED:
        return "permission.asked"
    if event.type == QUESTION_ASKED:
        return "question.asked"
    return None


def payload(kind: WebhookEvent, event: Event, timestamp: float) -> dict[str, Any]:
    """Standard Webhooks' recommended shape: `type`, `timestamp` (ISO 8601), `data`."""
    return {
        "type": kind,
        "timestamp": datetime.fromtimestamp(timestamp, tz=UTC).isoformat().replace("+00:00", "Z"),
        "data": {"tenant": event.tenant_id, "sessionID": event.session_id, **event.properties},
    }
