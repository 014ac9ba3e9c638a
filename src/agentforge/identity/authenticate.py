"""One `Authenticator` per server: picks the credential a request carries and resolves its Identity.

Order: identity headers (any `X-Forge-*` identity or signing header) are a gateway request, verified
only when a gateway is configured, and then any Authorization header is not consulted (a gateway may
pass the user's own header through); otherwise `Authorization: Bearer` carries an API key (`afk.`
prefix) or a JWT; with no credentials, local mode answers as the local user and an authenticated
server answers 401. Presented credentials are always verified, whatever the mode.

`Authorization: Basic` is accepted only with an API key as its password (any user name), verified
exactly like the same key as a bearer token: that is how opencode's clients authenticate
(`opencode attach URL --password <key>` sends `opencode:<key>`).

Every refusal goes to `on_failure` (the audit log's seam) before the caller sees it. A long-lived
request (the event stream) asks `still_valid` from time to time, so it ends once its credential lapses.
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

import httpx2

from agentforge.config import AuthConfig, Settings
from agentforge.identity.apikeys import StoredApiKey, is_api_key_token, parse_token, verify_presented
from agentforge.identity.errors import FORBIDDEN, AuthFailure
from agentforge.identity.gateway import (
    NONCE_HEADER,
    TENANT_HEADER,
    UNTRUSTED,
    GatewayVerifier,
    has_gateway_headers,
)
from agentforge.identity.model import LOCAL_IDENTITY, Identity
from agentforge.identity.request import RequestFacts

if TYPE_CHECKING:
    from agentforge.identity.jwt import JwtVerifier

KeyLookup = Callable[[str, str], Awaitable[StoredApiKey | None]]
FailureHook = Callable[[AuthFailure, RequestFacts], Awaitable[None]]

MISSING_TOKEN: Final = "missing bearer token: send Authorization: Bearer <API key or JWT>"
NOT_BEARER: Final = (
    "the Authorization header must be 'Bearer <token>' (or 'Basic' with an API key as the password)"
)

log = logging.getLogger(__name__)


async def log_failure(failure: AuthFailure, facts: RequestFacts) -> None:
    """The default hook: a log line with no credential in it (the query string may hold one too)."""
    log.warning(
        "refused %s %s from %s: %s (method=%s, tenant=%s)",
        facts.method,
        facts.target.split("?", 1)[0],
        facts.peer,
        failure.message,
        failure.method,
        failure.claimed_tenant,
    )


# (tenant, nonce, expires_at unix seconds) -> False when the nonce was already claimed.
NonceClaim = Callable[[str, str, int], Awaitable[bool]]


class Authenticator:
    def __init__(
        self,
        config: AuthConfig,
        *,
        enabled: bool,
        find_key: KeyLookup,
        on_failure: FailureHook = log_failure,
        jwt: JwtVerifier | None = None,
        gateway: GatewayVerifier | None = None,
        claim_nonce: NonceClaim | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.enabled = enabled
        self.on_failure = on_failure
        self._accepts_api_keys = config.accepts_api_keys
        self._find_key = find_key
        self._jwt = jwt
        self._gateway = gateway
        self._claim_nonce = claim_nonce
        self._clock = clock

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        find_key: KeyLookup,
        on_failure: FailureHook = log_failure,
        jwks_transport: httpx2.AsyncBaseTransport | None = None,
        claim_nonce: NonceClaim | None = None,
        clock: Callable[[], float] = time.time,
    ) -> Authenticator:
        auth = settings.config.auth
        jwt = None
        if auth.jwt is not None:
            # Imported only when JWTs are configured: PyJWT brings `cryptography` (several MB).
            from agentforge.identity.jwt import JwtVerifier

            jwt = JwtVerifier(auth.jwt, jwks_transport=jwks_transport)
        return cls(
            auth,
            enabled=auth.enabled(settings.host),
            find_key=find_key,
            on_failure=on_failure,
            jwt=jwt,
            gateway=GatewayVerifier(auth.gateway, clock=clock) if auth.gateway is not None else None,
            claim_nonce=claim_nonce,
            clock=clock,
        )

    async def aclose(self) -> None:
        if self._jwt is not None:
            await self._jwt.aclose()

    async def authenticate(self, facts: RequestFacts) -> Identity:
        """The caller's identity, or AuthFailure (reported to `on_failure` first)."""
        try:
            return await self._resolve(facts)
        except AuthFailure as failure:
            await self.report(failure, facts)
            raise

    async def still_valid(self, caller: Identity) -> bool:
        """Whether `caller`'s credential would still be accepted: not past its expiry and, for an API
        key, still stored and not revoked (read afresh, like every request's key)."""
        if caller.expires_at is not None and self._clock() >= caller.expires_at:
            return False
        if caller.key_id is None:
            return True
        stored = await self._find_key(caller.tenant, caller.key_id)
        return stored is not None and not stored.key.revoked and stored.key.tenant == caller.tenant

    async def require_role(self, caller: Identity, role: str, facts: RequestFacts) -> None:
        """403 (reported like any refusal) unless `caller` holds `role`."""
        if caller.has_role(role):
            return
        failure = AuthFailure(
            f"this endpoint needs the {role} role",
            status=FORBIDDEN,
            method=caller.method,
            claimed_tenant=caller.tenant,
        )
        await self.report(failure, facts)
        raise failure

    async def _resolve(self, facts: RequestFacts) -> Identity:
        if has_gateway_headers(facts):
            if self._gateway is None:
                raise AuthFailure(UNTRUSTED, method="gateway").claiming(facts.header(TENANT_HEADER))
            identity = self._gateway.verify(facts)
            await self._claim_gateway_nonce(identity, facts)
            return identity
        authorization = facts.header("authorization")
        if authorization is None:
            if self.enabled:
                raise AuthFailure(MISSING_TOKEN)
            return LOCAL_IDENTITY
        token = _presented_token(authorization)
        if is_api_key_token(token):
            return await self._api_key(token)
        if self._jwt is not None:
            return await self._jwt.verify(token)
        raise AuthFailure("the bearer token is not an API key, and this server accepts no JWTs")

    async def _claim_gateway_nonce(self, identity: Identity, facts: RequestFacts) -> None:
        """Replicas: the verifier's window is this process's; the shared store is everyone's."""
        if self._claim_nonce is None:
            return
        nonce = facts.header(NONCE_HEADER) or ""
        if not await self._claim_nonce(identity.tenant, nonce, int(identity.expires_at or 0)):
            raise AuthFailure(
                f"replayed gateway request: {NONCE_HEADER} was already used", method="gateway"
            ).claiming(identity.tenant)

    async def _api_key(self, token: str) -> Identity:
        if not self._accepts_api_keys:
            raise AuthFailure("this server does not accept API keys", method="api_key")
        presented = parse_token(token)
        # Looked up on every request, never cached: a key revoked anywhere stops working at once.
        stored = await self._find_key(presented.tenant, presented.key_id)
        return verify_presented(presented, stored)

    async def report(self, failure: AuthFailure, facts: RequestFacts) -> None:
        try:
            await self.on_failure(failure, facts)
        except Exception:
            # Recording the refusal must not turn it into a 500 or let the request through.
            log.exception("the authentication failure hook failed")


def _presented_token(authorization: str) -> str:
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() == "basic" and token:
        password = _basic_password(token)
        if password is not None and is_api_key_token(password):
            return password
    if scheme.lower() != "bearer" or not token:
        raise AuthFailure(NOT_BEARER)
    return token


def _basic_password(encoded: str) -> str | None:
    """The password of `user:password` in base64, or None when it is not that."""
    try:
        decoded = base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    _, colon, password = decoded.partition(":")
    return password if colon else None
