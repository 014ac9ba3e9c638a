"""Identity headers from a trusted gateway, signed with a shared HMAC-SHA256 key.

The gateway authenticates the user itself and forwards who it is in `X-Forge-Tenant`, `X-Forge-User`
and (optionally) `X-Forge-Roles`, with `X-Forge-Timestamp` (unix seconds), `X-Forge-Nonce` (16-128
characters of letters, digits, `-`, `_`; unique per request) and `X-Forge-Signature`: the lowercase
hex HMAC-SHA256, keyed with `auth.gateway.secret` (UTF-8), of these lines joined by `\\n`:

    agentforge-gateway-v1
    <METHOD, upper case>
    <request target: the raw path as sent, plus "?" and the raw query string when there is one>
    <X-Forge-Tenant>
    <X-Forge-User>
    <X-Forge-Roles, or empty when absent>
    <X-Forge-Timestamp>
    <X-Forge-Nonce>

A timestamp more than `max_skew_seconds` away from the server's clock is refused, and each nonce is
remembered until its timestamp leaves that window, so a captured request cannot be replayed. With
`trusted_addresses` set, identity headers from any other peer address are refused outright.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import ipaddress
import re
import time
from collections.abc import Callable
from typing import Final

from agentforge.config import GatewayConfig
from agentforge.identity.errors import UNAVAILABLE, AuthFailure, valid_tenant_or_none
from agentforge.identity.model import Identity
from agentforge.identity.request import RequestFacts
from agentforge.identity.roles import roles_from_claim

TENANT_HEADER: Final = "X-Forge-Tenant"
USER_HEADER: Final = "X-Forge-User"
ROLES_HEADER: Final = "X-Forge-Roles"
TIMESTAMP_HEADER: Final = "X-Forge-Timestamp"
NONCE_HEADER: Final = "X-Forge-Nonce"
SIGNATURE_HEADER: Final = "X-Forge-Signature"
GATEWAY_HEADERS: Final = (
    TENANT_HEADER,
    USER_HEADER,
    ROLES_HEADER,
    TIMESTAMP_HEADER,
    NONCE_HEADER,
    SIGNATURE_HEADER,
)
SIGNATURE_VERSION: Final = "agentforge-gateway-v1"
UNTRUSTED: Final = "identity headers are only accepted from a trusted gateway"

_NONCE = re.compile(r"[A-Za-z0-9_-]{16,128}")
_TIMESTAMP = re.compile(r"[0-9]{1,12}")


def has_gateway_headers(facts: RequestFacts) -> bool:
    return any(facts.header(name) is not None for name in GATEWAY_HEADERS)


def canonical_string(
    method: str, target: str, tenant: str, user: str, roles: str, timestamp: str, nonce: str
) -> str:
    return "\n".join((SIGNATURE_VERSION, method.upper(), target, tenant, user, roles, timestamp, nonce))


def sign(secret: str, canonical: str) -> str:
    return hmac.new(secret.encode(), canonical.encode(), hashlib.sha256).hexdigest()


class NonceWindow:
    """Nonces seen within the replay window, each forgotten once its request could no longer pass the
    timestamp check. Bounded: when `capacity` live nonces are held, new requests are refused (503)
    rather than forgetting a nonce early, which would reopen the replay."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._expiry: dict[str, float] = {}
        self._queue: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._expiry)

    def remember(self, nonce: str, *, expires_at: float, now: float) -> bool:
        """False if `nonce` was already seen (a replay); else remember it until `expires_at`."""
        self._forget_expired(now)
        if nonce in self._expiry:
            return False
        if len(self._expiry) >= self._capacity:
            raise AuthFailure(
                "too many gateway requests in the replay window; retry later",
                status=UNAVAILABLE,
                method="gateway",
            )
        self._expiry[nonce] = expires_at
        heapq.heappush(self._queue, (expires_at, nonce))
        return True

    def _forget_expired(self, now: float) -> None:
        while self._queue and self._queue[0][0] < now:
            _, nonce = heapq.heappop(self._queue)
            self._expiry.pop(nonce, None)


class GatewayVerifier:
    def __init__(self, config: GatewayConfig, *, clock: Callable[[], float] = time.time) -> None:
        self._secret = config.secret
        self._skew = config.max_skew_seconds
        self._networks = [ipaddress.ip_network(value, strict=False) for value in config.trusted_addresses]
        self._nonces = NonceWindow(config.max_nonces)
        self._clock = clock

    def verify(self, facts: RequestFacts) -> Identity:
        try:
            return self._verify(facts)
        except AuthFailure as failure:
            raise failure.claiming(facts.header(TENANT_HEADER)) from None

    def _verify(self, facts: RequestFacts) -> Identity:
        if not self._trusted_peer(facts.peer):
            raise AuthFailure(UNTRUSTED, method="gateway")
        tenant, user, timestamp, nonce, signature = (
            _required(facts, name)
            for name in (TENANT_HEADER, USER_HEADER, TIMESTAMP_HEADER, NONCE_HEADER, SIGNATURE_HEADER)
        )
        roles = facts.header(ROLES_HEADER) or ""
        if not _TIMESTAMP.fullmatch(timestamp):
            raise AuthFailure(f"{TIMESTAMP_HEADER} must be unix seconds", method="gateway")
        if not _NONCE.fullmatch(nonce):
            raise AuthFailure(f"{NONCE_HEADER} must be 16-128 letters, digits, '-' or '_'", method="gateway")
        canonical = canonical_string(facts.method, facts.target, tenant, user, roles, timestamp, nonce)
        expected = sign(self._secret, canonical)
        if not hmac.compare_digest(expected, signature.strip().lower()):
            raise AuthFailure("invalid gateway signature", method="gateway")
        self._check_fresh(int(timestamp), nonce)
        valid_tenant = valid_tenant_or_none(tenant)
        if valid_tenant is None:
            raise AuthFailure(f"{TENANT_HEADER} is not a valid tenant id", method="gateway")
        # The gateway vouches for the user only while its signature is fresh: a stream opened with
        # it ends then, and the client reconnects through the gateway, which checks the user again.
        expires_at = float(int(timestamp) + self._skew)
        return Identity(valid_tenant, user, roles_from_claim(roles or None), "gateway", expires_at=expires_at)

    def _check_fresh(self, timestamp: int, nonce: str) -> None:
        now = self._clock()
        if abs(now - timestamp) > self._skew:
            raise AuthFailure(
                f"stale gateway request: {TIMESTAMP_HEADER} is more than {self._skew}s"
                " from the server's clock",
                method="gateway",
            )
        if not self._nonces.remember(nonce, expires_at=timestamp + self._skew, now=now):
            raise AuthFailure(f"replayed gateway request: {NONCE_HEADER} was already used", method="gateway")

    def _trusted_peer(self, peer: str | None) -> bool:
        if not self._networks:
            return True
        if peer is None:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in network for network in self._networks)


def _required(facts: RequestFacts, name: str) -> str:
    value = facts.header(name)
    if value is None or not value.strip():
        raise AuthFailure(f"missing {name} header", method="gateway")
    return value.strip()
