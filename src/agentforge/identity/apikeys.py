"""API keys: the token format, minting, and checking a presented token against its stored record.

A token is `afk.<tenant>.<key_id>.<secret>`: the tenant comes first so the server can scope the
lookup (and, on Postgres, set the row-level-security tenant) before reading anything; the secret is
256 random bits, urlsafe base64. Only sha256(secret) is stored; the comparison is constant-time.
Every way a token can be wrong (malformed, unknown id, revoked, wrong secret) gives one message.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Final

from agentforge.identity.errors import AuthFailure, valid_tenant_or_none
from agentforge.identity.model import Identity, validate_tenant_id

# Re-exported: the records live in the model package so the store can hold them without importing us.
from agentforge.model.apikey import ApiKey as ApiKey
from agentforge.model.apikey import StoredApiKey as StoredApiKey
from agentforge.model.ids import ascending

TOKEN_PREFIX: Final = "afk"
SECRET_BYTES: Final = 32
INVALID_KEY: Final = "invalid or revoked API key"


@dataclass(frozen=True, slots=True)
class MintedApiKey:
    """A new key: the record to store and the token, shown to its creator once."""

    stored: StoredApiKey
    token: str


@dataclass(frozen=True, slots=True)
class PresentedToken:
    tenant: str
    key_id: str
    secret: str


def is_api_key_token(token: str) -> bool:
    return token.startswith(TOKEN_PREFIX + ".")


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def mint_api_key(tenant: str, name: str, roles: frozenset[str], created_by: str) -> MintedApiKey:
    validate_tenant_id(tenant)
    secret = secrets.token_urlsafe(SECRET_BYTES)
    key = ApiKey(
        id=ascending("key"),
        tenant=tenant,
        name=name,
        roles=roles,
        created_by=created_by,
        time_created=int(time.time() * 1000),
    )
    token = f"{TOKEN_PREFIX}.{tenant}.{key.id}.{secret}"
    return MintedApiKey(StoredApiKey(key, hash_secret(secret)), token)


def parse_token(token: str) -> PresentedToken:
    """The parts of an API key token; AuthFailure (the one invalid-key message) if malformed."""
    parts = token.split(".")
    if len(parts) != 4 or parts[0] != TOKEN_PREFIX or not parts[2] or not parts[3]:
        raise AuthFailure(INVALID_KEY, method="api_key")
    tenant = valid_tenant_or_none(parts[1])
    if tenant is None:
        raise AuthFailure(INVALID_KEY, method="api_key")
    return PresentedToken(tenant, parts[2], parts[3])


def verify_presented(presented: PresentedToken, stored: StoredApiKey | None) -> Identity:
    """The key's identity if `stored` is the live key `presented` names and the secret matches."""
    failure = AuthFailure(INVALID_KEY, method="api_key", claimed_tenant=presented.tenant)
    if stored is None:
        # Still hash and compare, so an unknown id costs what a wrong secret costs.
        hmac.compare_digest(hash_secret(presented.secret), "0" * 64)
        raise failure
    matches = hmac.compare_digest(hash_secret(presented.secret), stored.secret_hash)
    key = stored.key
    if not matches or key.revoked or key.tenant != presented.tenant or key.id != presented.key_id:
        raise failure
    return Identity(key.tenant, f"key:{key.id}", key.roles, "api_key", key_id=key.id)
