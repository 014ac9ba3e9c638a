"""An API key's record as stored (the store keeps it; identity/apikeys.py mints and checks tokens)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ApiKey:
    """What may be shown about a key (never its secret or hash)."""

    id: str
    tenant: str
    name: str
    roles: frozenset[str]
    created_by: str
    time_created: int  # unix milliseconds
    time_revoked: int | None = None

    @property
    def revoked(self) -> bool:
        return self.time_revoked is not None


@dataclass(frozen=True, slots=True)
class StoredApiKey:
    key: ApiKey
    secret_hash: str
