"""Request-scoped dependencies: the runtime, the caller's identity and tenant, the session service.

They are `async def` on purpose: FastAPI runs plain `def` dependencies in a thread pool, and that
hop cost about a millisecond per dependency per request.
"""

from __future__ import annotations

import hmac
from typing import Annotated, Final

from fastapi import Depends, Request

from agentforge.identity.authenticate import Authenticator
from agentforge.identity.errors import FORBIDDEN, AuthFailure
from agentforge.identity.model import ADMIN, Identity
from agentforge.identity.request import RequestFacts
from agentforge.model.events import CURRENT_ACTOR
from agentforge.runtime.runtime import Runtime
from agentforge.server.errors import ApiError
from agentforge.session.prompt import SessionPrompt
from agentforge.session.service import SessionService
from agentforge.telemetry import context


async def runtime(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


def request_facts(request: Request) -> RequestFacts:
    # The raw path as sent, which is what a gateway signs (`path` is percent-decoded).
    raw_path = request.scope.get("raw_path")
    path = raw_path.decode("latin-1") if isinstance(raw_path, bytes) else request.url.path
    query = request.scope.get("query_string", b"").decode("latin-1")
    peer = request.client.host if request.client is not None else None
    return RequestFacts.of(request.method, path, query, request.headers.items(), peer)


def _authenticator(request: Request) -> Authenticator:
    authenticator: Authenticator = request.app.state.authenticator
    return authenticator


def auth_error(failure: AuthFailure) -> ApiError:
    if failure.status == 401:
        return ApiError(401, "UnauthorizedError", failure.message, headers={"WWW-Authenticate": "Bearer"})
    if failure.status == 403:
        return ApiError(403, "ForbiddenError", failure.message)
    return ApiError(failure.status, "AuthUnavailableError", failure.message, headers={"Retry-After": "5"})


async def identity(request: Request) -> Identity:
    """The authenticated caller (401 otherwise), resolved once per request. In local mode (loopback
    bind, no authentication configured) a request without credentials is tenant `default`'s local
    user, who may do everything."""
    cached: Identity | None = getattr(request.state, "identity", None)
    if cached is None:
        try:
            cached = await _authenticator(request).authenticate(request_facts(request))
        except AuthFailure as failure:
            raise auth_error(failure) from None
        request.state.identity = cached
    # Events this request (and the turns it starts) writes are attributed to this user.
    CURRENT_ACTOR.set(cached.user)
    context.bind(tenant=cached.tenant)  # and its log lines name the tenant
    return cached


async def tenant(caller: Annotated[Identity, Depends(identity)]) -> str:
    return caller.tenant


async def admin(request: Request, caller: Annotated[Identity, Depends(identity)]) -> Identity:
    """The caller, who must hold the admin role (403 otherwise)."""
    try:
        await _authenticator(request).require_role(caller, ADMIN, request_facts(request))
    except AuthFailure as failure:
        raise auth_error(failure) from None
    return caller


METRICS_TOKEN_UNSET: Final = (
    "/metrics counts every tenant's work, so with authentication on it is read with the server "
    "operator's token: set telemetry.metrics_token in the server config and send it as "
    "Authorization: Bearer <token>"
)
METRICS_TOKEN_MISSING: Final = "missing bearer token: send Authorization: Bearer <telemetry.metrics_token>"
METRICS_TOKEN_WRONG: Final = "invalid metrics token"


async def metrics_reader(request: Request, rt: Annotated[Runtime, Depends(runtime)]) -> None:
    """Let the server operator read the server-wide metrics: the caller presents the configured
    `telemetry.metrics_token` (compared in constant time). With authentication on nothing else does,
    not even a tenant's admin; in local mode the local user (an admin) still may."""
    expected = rt.settings.config.telemetry.metrics_token
    facts = request_facts(request)
    presented = _bearer(facts.header("authorization"))
    if expected is not None and presented is not None and _same(presented, expected):
        return
    authenticator = _authenticator(request)
    if not authenticator.enabled:
        await admin(request, await identity(request))
        return
    # Authentication first (401 like every route), then why no credential can do (403).
    if facts.header("authorization") is None:
        failure = AuthFailure(METRICS_TOKEN_MISSING)
    elif expected is None:
        failure = AuthFailure(METRICS_TOKEN_UNSET, status=FORBIDDEN)
    else:
        failure = AuthFailure(METRICS_TOKEN_WRONG)
    await authenticator.report(failure, facts)
    raise auth_error(failure)


def _bearer(authorization: str | None) -> str | None:
    scheme, _, token = (authorization or "").strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def _same(presented: str, expected: str) -> bool:
    return hmac.compare_digest(presented.encode(), expected.encode())


async def sessions(request: Request) -> SessionService:
    # One dependency, not a tree of them (runtime, tenant, identity): FastAPI solves each node of a
    # tree with a pass of its own, on the path of every prompt. `identity` is resolved once anyway.
    rt: Runtime = request.app.state.runtime
    return SessionService(rt.sessions, (await identity(request)).tenant)


async def prompts(request: Request) -> SessionPrompt:
    return SessionPrompt(await sessions(request))


RuntimeDep = Annotated[Runtime, Depends(runtime)]
IdentityDep = Annotated[Identity, Depends(identity)]
AdminDep = Annotated[Identity, Depends(admin)]
MetricsReaderDep = Annotated[None, Depends(metrics_reader)]
TenantDep = Annotated[str, Depends(tenant)]
SessionsDep = Annotated[SessionService, Depends(sessions)]
PromptDep = Annotated[SessionPrompt, Depends(prompts)]
