"""Signing material for identity tests: RSA keys made per test run, tokens, gateway signatures."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from functools import cache
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from agentforge.identity.gateway import canonical_string, sign

HS_SECRET = "test-hs256-secret-that-is-long-enough-0123456789"
GATEWAY_SECRET = "test-gateway-secret-that-is-long-enough-012345"
ISSUER = "https://issuer.test"
AUDIENCE = "agentforge"


@dataclass(frozen=True)
class RsaKey:
    kid: str
    private_pem: str
    public_pem: str

    def jwk(self) -> dict[str, Any]:
        public = serialization.load_pem_public_key(self.public_pem.encode())
        assert isinstance(public, rsa.RSAPublicKey)
        data: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(public))
        return {**data, "kid": self.kid, "use": "sig", "alg": "RS256"}


@cache
def rsa_key(kid: str = "k1") -> RsaKey:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public_pem = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return RsaKey(kid, private_pem, public_pem)


def claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    base: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "alice",
        "tenant": "acme",
        "roles": ["member"],
        "iat": now,
        "exp": now + 300,
    }
    base.update(overrides)
    return {key: value for key, value in base.items() if value is not None}


def hs_token(secret: str = HS_SECRET, **overrides: Any) -> str:
    return jwt.encode(claims(**overrides), secret, algorithm="HS256")


def rs_token(key: RsaKey | None = None, *, kid: str | None = "default", **overrides: Any) -> str:
    key = key or rsa_key()
    headers = {"kid": key.kid if kid == "default" else kid} if kid is not None else None
    return jwt.encode(claims(**overrides), key.private_pem, algorithm="RS256", headers=headers)


def gateway_headers(
    method: str,
    target: str,
    *,
    tenant: str = "acme",
    user: str = "bob",
    roles: str | None = "member",
    timestamp: int | None = None,
    nonce: str | None = None,
    secret: str = GATEWAY_SECRET,
) -> dict[str, str]:
    """Identity headers signed as a trusted gateway would sign them."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    once = nonce or uuid.uuid4().hex
    signature = sign(secret, canonical_string(method, target, tenant, user, roles or "", stamp, once))
    headers = {
        "X-Forge-Tenant": tenant,
        "X-Forge-User": user,
        "X-Forge-Timestamp": stamp,
        "X-Forge-Nonce": once,
        "X-Forge-Signature": signature,
    }
    if roles is not None:
        headers["X-Forge-Roles"] = roles
    return headers
