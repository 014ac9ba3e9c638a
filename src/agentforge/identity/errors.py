"""Why a request was refused: the status, a message saying what is missing, and audit facts.

Messages say what the caller must supply ("missing bearer token", "token expired"), never how close
a wrong credential came: an unknown key id and a wrong secret get the same answer.
"""

from __future__ import annotations

from typing import Final

from agentforge.identity.model import InvalidTenantId, Method, validate_tenant_id

UNAUTHORIZED: Final = 401
FORBIDDEN: Final = 403
UNAVAILABLE: Final = 503


class AuthFailure(Exception):
    """Authentication (401), authorisation (403) or a verifier that cannot work right now (503).

    `method` is the credential kind that was tried (None when nothing usable was sent);
    `claimed_tenant` is the tenant the request claimed, if it was a syntactically valid tenant id
    (for the audit log: a failure is recorded under the tenant it targeted).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = UNAUTHORIZED,
        method: Method | None = None,
        claimed_tenant: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.method = method
        self.claimed_tenant = claimed_tenant

    def claiming(self, tenant: str | None) -> AuthFailure:
        """This failure, naming `tenant` as the claimed one when it is a valid tenant id."""
        self.claimed_tenant = valid_tenant_or_none(tenant)
        return self


def valid_tenant_or_none(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return validate_tenant_id(value)
    except InvalidTenantId:
        return None
