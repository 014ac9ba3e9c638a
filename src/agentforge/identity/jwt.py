"""Bearer JWTs: HS256 with a shared secret, or RS256 with a PEM public key or the issuer's JWKS.

The signature, `iss`, `aud` and `exp` (with `nbf`/`iat` when present) are checked, with the configured
leeway. Tenant, user and roles come from the configured claims; the tenant must be a valid tenant id.
"""

from __future__ import annotations

from typing import Any, Final

import httpx2
import jwt
from jwt.algorithms import RSAAlgorithm

from agentforge.config import JwtConfig
from agentforge.identity.errors import AuthFailure, valid_tenant_or_none
from agentforge.identity.jwks import REFETCH_INTERVAL_SECONDS, JwksCache
from agentforge.identity.model import Identity
from agentforge.identity.roles import roles_from_claim

INVALID_TOKEN: Final = "invalid token"

# PyJWT's specific errors, in the order they are told apart; anything else is plainly invalid.
_EXPLAINED: Final[tuple[tuple[type[jwt.PyJWTError], str], ...]] = (
    (jwt.ExpiredSignatureError, "token expired"),
    (jwt.ImmatureSignatureError, "token not yet valid"),
    (jwt.InvalidIssuerError, "token issuer not accepted"),
    (jwt.InvalidAudienceError, "token audience not accepted"),
)


class JwtVerifier:
    def __init__(
        self,
        config: JwtConfig,
        *,
        jwks_transport: httpx2.AsyncBaseTransport | None = None,
        jwks_refetch_interval: float = REFETCH_INTERVAL_SECONDS,
    ) -> None:
        self._config = config
        self._static_key: Any = None
        self._jwks: JwksCache | None = None
        if config.secret is not None:
            self._static_key = config.secret
        elif config.public_key is not None:
            # Parsed now so a broken PEM stops the server at start-up, not at the first request.
            self._static_key = RSAAlgorithm(RSAAlgorithm.SHA256).prepare_key(config.public_key)
        elif config.jwks_url is not None:
            self._jwks = JwksCache(
                config.jwks_url,
                ttl_seconds=config.jwks_ttl_seconds,
                refetch_interval=jwks_refetch_interval,
                transport=jwks_transport,
            )

    async def aclose(self) -> None:
        if self._jwks is not None:
            await self._jwks.aclose()

    async def verify(self, token: str) -> Identity:
        try:
            return await self._verify(token)
        except AuthFailure as failure:
            raise failure.claiming(failure.claimed_tenant or self._claimed_tenant(token)) from None

    async def _verify(self, token: str) -> Identity:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise AuthFailure(INVALID_TOKEN, method="jwt") from None
        if header.get("alg") not in self._config.algorithms:
            raise AuthFailure(INVALID_TOKEN, method="jwt")
        key = self._static_key if self._jwks is None else await self._jwks.key(_kid(header))
        claims = self._decode(token, key)
        return self._identity(claims)

    def _decode(self, token: str, key: Any) -> dict[str, Any]:
        config = self._config
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=config.algorithms,
                audience=config.audience,
                issuer=config.issuer,
                leeway=config.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.MissingRequiredClaimError as exc:
            raise AuthFailure(f"token lacks the {exc.claim!r} claim", method="jwt") from None
        except jwt.PyJWTError as exc:
            message = next((text for kind, text in _EXPLAINED if isinstance(exc, kind)), INVALID_TOKEN)
            raise AuthFailure(message, method="jwt") from None
        return claims

    def _identity(self, claims: dict[str, Any]) -> Identity:
        config = self._config
        raw_tenant = claims.get(config.tenant_claim)
        if raw_tenant is None:
            raise AuthFailure(f"token lacks the {config.tenant_claim!r} claim", method="jwt")
        tenant = valid_tenant_or_none(raw_tenant)
        if tenant is None:
            raise AuthFailure(f"token's {config.tenant_claim!r} claim is not a valid tenant id", method="jwt")
        user = claims.get(config.user_claim)
        if not isinstance(user, str) or not user:
            message = f"token lacks the {config.user_claim!r} claim"
            raise AuthFailure(message, method="jwt", claimed_tenant=tenant)
        roles = roles_from_claim(claims.get(config.roles_claim))
        # `exp` is required and was checked numeric by the decode; the leeway applies to it there too.
        expires_at = float(claims["exp"]) + config.leeway
        return Identity(tenant, user, roles, "jwt", expires_at=expires_at)

    def _claimed_tenant(self, token: str) -> str | None:
        """The tenant an unverified token names, for the audit record of its failure."""
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return None
        return valid_tenant_or_none(unverified.get(self._config.tenant_claim))


def _kid(header: dict[str, Any]) -> str | None:
    kid = header.get("kid")
    return kid if isinstance(kid, str) else None
