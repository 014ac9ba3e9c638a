"""The `auth` section: API keys, JWT bearer tokens and a trusted gateway's signed identity headers.

What turns authentication on is described in the package docstring (`agentforge.config`).
"""

from __future__ import annotations

import ipaddress
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# HMAC keys shorter than the hash output weaken HS256 and the gateway signature (RFC 7518 3.2).
MIN_SECRET_LENGTH = 32


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        # A host name other than localhost may resolve anywhere: not provably loopback.
        return False


def strong_secret(value: str | None, where: str) -> str | None:
    if value is not None and len(value) < MIN_SECRET_LENGTH:
        raise ValueError(
            f"{where} must be at least {MIN_SECRET_LENGTH} characters"
            " (empty? check the {env:...} or {file:...} it comes from)"
        )
    return value


JwtAlgorithm = Literal["HS256", "RS256"]
_HS256_ONLY: list[JwtAlgorithm] = ["HS256"]


class _AuthSection(BaseModel):
    # Security settings: a misspelt key must fail loudly instead of silently turning a check off.
    model_config = ConfigDict(extra="forbid")


class JwtConfig(_AuthSection):
    """Bearer JWTs: signature (HS256 with `secret`, RS256 with `public_key` PEM or `jwks_url`), `iss`,
    `aud` and `exp` are checked; tenant, user and roles come from the named claims."""

    issuer: str = Field(min_length=1)
    audience: str = Field(min_length=1)
    algorithms: list[JwtAlgorithm] = Field(default_factory=lambda: _HS256_ONLY.copy(), min_length=1)
    secret: str | None = None
    public_key: str | None = None
    jwks_url: str | None = None
    jwks_ttl_seconds: float = Field(default=300.0, gt=0)
    tenant_claim: str = Field(default="tenant", min_length=1)
    user_claim: str = Field(default="sub", min_length=1)
    roles_claim: str = Field(default="roles", min_length=1)
    leeway: float = Field(default=0.0, ge=0, le=300)  # seconds of clock skew tolerated on exp/nbf/iat

    @field_validator("secret")
    @classmethod
    def _secret_is_strong(cls, value: str | None) -> str | None:
        return strong_secret(value, "auth.jwt.secret")

    @model_validator(mode="after")
    def _one_key_matching_the_algorithms(self) -> Self:
        sources = [name for name in ("secret", "public_key", "jwks_url") if getattr(self, name)]
        if len(sources) != 1:
            raise ValueError("auth.jwt needs exactly one of secret, public_key or jwks_url")
        # One key family only: mixing them would allow algorithm-confusion forgeries.
        wanted = "HS256" if sources[0] == "secret" else "RS256"
        if set(self.algorithms) != {wanted}:
            raise ValueError(
                f"auth.jwt.{sources[0]} verifies {wanted} tokens: set algorithms to [{wanted!r}]"
            )
        if self.public_key is not None:
            _check_rsa_public_key(self.public_key)
        if self.jwks_url is not None and not self.jwks_url.startswith(("https://", "http://")):
            raise ValueError("auth.jwt.jwks_url must be an http(s) URL")
        return self


def _check_rsa_public_key(pem: str) -> None:
    # Imported here: only a config with an RSA public key pays for loading the crypto backend.
    from jwt.algorithms import RSAAlgorithm
    from jwt.exceptions import PyJWTError

    try:
        RSAAlgorithm(RSAAlgorithm.SHA256).prepare_key(pem)
    except (PyJWTError, ValueError, TypeError):
        raise ValueError("auth.jwt.public_key is not an RSA public key in PEM form") from None


class GatewayConfig(_AuthSection):
    """A trusted gateway that authenticates users itself and forwards identity headers signed with
    HMAC-SHA256 over `secret` (see identity/gateway.py for the canonical string)."""

    secret: str
    max_skew_seconds: int = Field(default=300, ge=1, le=3600)
    # Peers allowed to send identity headers (CIDRs or single addresses); empty = any peer with the key.
    trusted_addresses: list[str] = Field(default_factory=list)
    # Nonces remembered for the replay window; a gateway sending more than this per window is refused.
    max_nonces: int = Field(default=100_000, ge=1)

    @field_validator("secret")
    @classmethod
    def _secret_is_strong(cls, value: str) -> str:
        checked = strong_secret(value, "auth.gateway.secret")
        assert checked is not None
        return checked

    @field_validator("trusted_addresses")
    @classmethod
    def _networks(cls, values: list[str]) -> list[str]:
        for value in values:
            try:
                ipaddress.ip_network(value, strict=False)
            except ValueError:
                raise ValueError(f"not an IP address or CIDR network: {value!r}") from None
        return values


class AuthConfig(_AuthSection):
    """Who may call the server; what turns authentication on is described in this module's docstring."""

    # None: API keys are accepted whenever presented, but do not by themselves turn auth on for a
    # loopback bind; false: API keys are refused; true: also turns auth on for a non-loopback bind.
    api_keys: bool | None = None
    required: bool = False
    jwt: JwtConfig | None = None
    gateway: GatewayConfig | None = None

    def enabled(self, host: str) -> bool:
        """Whether requests to a server bound to `host` must carry credentials."""
        if self.required or self.jwt is not None or self.gateway is not None:
            return True
        return self.api_keys is True and not is_loopback(host)

    @property
    def accepts_api_keys(self) -> bool:
        return self.api_keys is not False
