"""Standard Webhooks signatures (https://www.standardwebhooks.com): `webhook-signature` is
`v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">` keyed with the secret's bytes."""

from __future__ import annotations

from datetime import UTC, datetime

from standardwebhooks.webhooks import Webhook


def signed_headers(secret: str, delivery_id: str, timestamp: float, body: bytes) -> dict[str, str]:
    """The headers of one attempt (the timestamp is the attempt's, so each retry is signed anew)."""
    when = datetime.fromtimestamp(int(timestamp), tz=UTC)
    signature = Webhook(secret).sign(delivery_id, when, body.decode())
    return {
        "content-type": "application/json",
        "webhook-id": delivery_id,
        "webhook-timestamp": str(int(timestamp)),
        "webhook-signature": signature,
    }
