"""A webhook delivery as its log shows it: one notification to one endpoint, and its attempts."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentforge.model.base import Wire

# pending: will be (re)tried; delivered: a 2xx answer; failed: out of attempts; refused: the URL
# points somewhere the server may not call (SSRF guard), never attempted.
DeliveryStatus = Literal["pending", "delivered", "failed", "refused"]


class DeliveryAttempt(Wire):
    time: int  # unix milliseconds, when it was sent
    status_code: int | None = Field(default=None, alias="statusCode")  # None: no HTTP answer
    error: str | None = None
    duration_ms: int = Field(alias="durationMs")


class WebhookDelivery(Wire):
    id: str  # the `webhook-id` header: the same on every attempt, for the receiver's deduplication
    url: str
    event: str  # the webhook event type, e.g. session.idle
    event_id: str = Field(alias="eventID")
    payload: dict[str, Any]
    status: DeliveryStatus
    attempts: list[DeliveryAttempt] = Field(default_factory=list)
    next_attempt: int | None = Field(default=None, alias="nextAttempt")  # unix ms, while pending
    time_created: int = Field(alias="timeCreated")
    time_updated: int = Field(alias="timeUpdated")
