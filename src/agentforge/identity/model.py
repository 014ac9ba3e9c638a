"""The resolved caller of a request: tenant, user and roles.

Tenant ids are restricted to a small alphabet so they can appear in API key tokens, paths and
Postgres settings without quoting; ids starting with `_` are reserved for the server itself
(`_system` holds audit entries that belong to no tenant, such as failed authentications).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Literal

from agentforge.model.events import DEFAULT_TENANT

ADMIN: Final = "admin"
MEMBER: Final = "member"
KNOWN_ROLES: Final = frozenset({ADMIN, MEMBER})

SYSTEM_TENANT: Final = "_system"
LOCAL_USER: Final = "local"

TENANT_ID_PATTERN: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")

Method = Literal["local", "api_key", "jwt", "gateway"]


class InvalidTenantId(ValueError):
    pass


def validate_tenant_id(value: str) -> str:
    """`value` if it is a usable tenant id, else InvalidTenantId saying what a valid one looks like."""
    if not TENANT_ID_PATTERN.fullmatch(value):
        raise InvalidTenantId(
            f"invalid tenant id {value!r}: use 1-63 lowercase letters, digits, '-' or '_', "
            "starting with a letter or digit"
        )
    return value


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is calling, plus what can lapse while a long request (an event stream) stays open:
    `key_id` names the API key to look up again, `expires_at` (unix seconds) is when the credential
    stops being accepted (a JWT's `exp` plus leeway; a gateway request's freshness window)."""

    tenant: str
    user: str
    roles: frozenset[str] = field(default_factory=frozenset)
    method: Method = "local"
    key_id: str | None = None
    expires_at: float | None = None

    def has_role(self, role: str) -> bool:
        return role in self.roles


LOCAL_IDENTITY: Final = Identity(DEFAULT_TENANT, LOCAL_USER, frozenset({ADMIN, MEMBER}), "local")
