"""Webhooks: where a tenant's lifecycle notifications go (`webhooks`), and how they are delivered
(`webhook_delivery`, server-wide).

    "webhooks": [
      {"url": "https://hooks.example.com/forge", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
       "events": ["session.idle", "session.error"]}          # default: every event
    ],
    "webhook_delivery": {
      "allow_private": ["127.0.0.1", "10.0.0.0/8", "hooks.internal"],  # default: none
      "max_attempts": 6, "initial_backoff": 5, "timeout": 10
    }

A tenant sets its own `webhooks` (in its overlay). The SSRF guard is the server's: a URL whose host
resolves to a loopback, private, link-local or otherwise non-global address is refused unless
`webhook_delivery.allow_private` names that host or a network holding the address, which no tenant
overlay may set.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import urllib.parse
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

WebhookEvent = Literal[
    "session.created", "session.busy", "session.idle", "session.error", "permission.asked", "question.asked"
]
WEBHOOK_EVENTS: Final[tuple[WebhookEvent, ...]] = (
    "session.created",
    "session.busy",
    "session.idle",
    "session.error",
    "permission.asked",
    "question.asked",
)
SECRET_PREFIX: Final = "whsec_"


class WebhookEndpoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str
    secret: str = Field(repr=False)
    events: list[WebhookEvent] = Field(default_factory=lambda: list(WEBHOOK_EVENTS))

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parsed = urllib.parse.urlsplit(value)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"must be an http(s) URL with a host, got {value!r}")
        return value

    @field_validator("secret")
    @classmethod
    def _whsec(cls, value: str) -> str:
        """Standard Webhooks secrets: `whsec_` and base64 of 24 to 64 random bytes."""
        if not value.startswith(SECRET_PREFIX):
            raise ValueError(f"must start with {SECRET_PREFIX!r} (Standard Webhooks)")
        try:
            raw = base64.b64decode(value[len(SECRET_PREFIX) :], validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("must be whsec_ followed by base64") from None
        if not 24 <= len(raw) <= 64:
            raise ValueError(f"must hold 24 to 64 bytes of key, got {len(raw)}")
        return value


class WebhookDeliveryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    allow_private: list[str] = Field(default_factory=list)
    max_attempts: int = Field(default=6, ge=1, le=20)
    initial_backoff: float = Field(default=5.0, gt=0)  # seconds; each retry waits 4x the previous
    timeout: float = Field(default=10.0, gt=0)  # seconds per attempt

    @field_validator("allow_private")
    @classmethod
    def _hosts_or_networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            if "/" in entry:
                try:
                    ipaddress.ip_network(entry, strict=False)
                except ValueError:
                    raise ValueError(f"not a network: {entry!r}") from None
        return value

    def allows(self, host: str, address: str) -> bool:
        """Whether a private `address` (that `host` resolved to) may be called anyway."""
        ip = ipaddress.ip_address(address)
        for entry in self.allow_private:
            if "/" in entry:
                if ip in ipaddress.ip_network(entry, strict=False):
                    return True
            elif entry.lower() in (host.lower(), address):
                return True
        return False
