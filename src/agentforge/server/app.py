"""The FastAPI app factory."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi_offline import FastAPIOffline

from agentforge.bus.bus import DEFAULT_BUFFER
from agentforge.clock import SYSTEM_CLOCK, Clock
from agentforge.config import Settings
from agentforge.identity.apikeys import StoredApiKey
from agentforge.identity.authenticate import Authenticator, FailureHook, log_failure
from agentforge.identity.errors import AuthFailure
from agentforge.identity.failures import Admission, FailureKey, FailureThrottle
from agentforge.identity.model import SYSTEM_TENANT
from agentforge.identity.request import RequestFacts
from agentforge.llm.adapter import stream as provider_stream
from agentforge.runtime.checkpoints import checkpoint_periodically
from agentforge.runtime.runtime import Runtime
from agentforge.server import console, deps, errors, openapi_route
from agentforge.server.input_guard import InputGuard
from agentforge.server.prompt_lane import prompt_lane
from agentforge.server.routes import (
    agent,
    audit,
    command,
    config,
    events,
    experimental,
    file,
    find,
    global_,
    global_events,
    instance,
    location,
    mcp,
    metrics,
    permission,
    project,
    provider,
    provider_auth,
    pty,
    question,
    revert,
    session,
    session_edit,
    session_extras,
    summarize,
    todo,
    tooling,
    webhook,
)
from agentforge.server.telemetry import TelemetryMiddleware
from agentforge.session.processor import StreamFn
from agentforge.store.audit import AUTH_FAILED
from agentforge.telemetry.observer import Telemetry
from agentforge.terminal.registry import Terminals
from agentforge.version import __version__

log = logging.getLogger(__name__)


def create_app(
    settings: Settings,
    *,
    on_auth_failure: FailureHook = log_failure,
    failure_throttle: FailureThrottle | None = None,
    stream: StreamFn = provider_stream,
    clock: Clock = SYSTEM_CLOCK,
    telemetry: Telemetry | None = None,
    serving: bool = True,
) -> FastAPI:
    """The app. `serving`: a server, alone on a SQLite database (False for the CLI's in-process app,
    which may run beside one). `on_auth_failure` hears of every refused request (401/403) before it
    is answered; `failure_throttle` decides which of them become audit rows (a fresh one by default). `stream`
    (the model calls) and `clock` (back-off, deadlines, credentials' lifetimes) are the runtime's
    seams for tests (agentforge.testing: a scripted model, a fake clock). `telemetry` gets the app's
    logs, metrics and spans (tests pass one with an in-memory span exporter)."""
    throttle = FailureThrottle() if failure_throttle is None else failure_throttle
    if telemetry is None:
        telemetry = Telemetry(log_content=settings.config.telemetry.log_content)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = await Runtime.open(
            settings, stream=stream, clock=clock, serving=serving, telemetry=telemetry
        )
        app.state.runtime = runtime
        # Signed heads of the audit chains, kept outside the database (runtime/checkpoints.py).
        runtime.spawn_daemon(checkpoint_periodically(settings))
        app.state.terminals = Terminals(runtime.bus)
        try:
            yield
        finally:
            runtime.bus.close_all()
            await app.state.terminals.close()
            await runtime.close()
            await authenticator.aclose()

    # /docs and /redoc load Swagger UI and ReDoc from the installed package, not a CDN: they work offline.
    app = FastAPIOffline(
        title="Agent Forge",
        version=__version__,
        summary="LLM agents as durable multi-turn sessions",
        lifespan=lifespan,
    )

    async def find_key(tenant_id: str, key_id: str) -> StoredApiKey | None:
        runtime: Runtime = app.state.runtime
        return await runtime.store.find_api_key(tenant_id, key_id)

    async def record_failure(failure: AuthFailure, facts: RequestFacts) -> None:
        await on_auth_failure(failure, facts)
        runtime: Runtime | None = getattr(app.state, "runtime", None)
        if runtime is not None:
            await record_auth_failure(runtime, throttle, failure, facts)

    # Built here, not in the lifespan, so a broken key in the auth config stops start-up before serving.
    async def claim_nonce(tenant_id: str, nonce: str, expires_at: int) -> bool:
        # In the database, not in this process: a replica must refuse what another one accepted.
        store = app.state.runtime.store
        claimed: bool = await store.claim_nonce(tenant_id, nonce, expires_at)
        return claimed

    authenticator = Authenticator.from_settings(
        settings, find_key=find_key, on_failure=record_failure, claim_nonce=claim_nonce, clock=clock.time
    )
    app.state.authenticator = authenticator
    app.state.sse_heartbeat_seconds = events.HEARTBEAT_SECONDS  # tests shorten it
    app.state.sse_buffer = DEFAULT_BUFFER  # events a slow subscriber may fall behind; tests shrink it
    errors.install(app)
    # Size, 64-bit integers, NUL and lone surrogates: checked before any route runs (input_guard.py).
    app.add_middleware(InputGuard, max_body_bytes=settings.config.server.max_body_bytes)
    app.add_middleware(TelemetryMiddleware, tracer=telemetry.tracer)
    # Health stays open (load balancers probe it); so do /docs and /openapi.json. Everything else
    # needs an identity, resolved once per request and before any response (SSE included) starts.
    app.include_router(global_.router)
    app.include_router(console.build_router())  # the web console's page and assets (no data in them)
    authenticated = [Depends(deps.identity)]
    guarded = (
        agent,
        session,
        events,
        permission,
        question,
        todo,
        command,
        session_edit,
        summarize,
        provider,
        audit,
        # opencode's instance routes its own clients (the terminal UI) need.
        global_events,
        instance,
        location,
        project,
        config,
        experimental,
        file,
        find,
        tooling,
        provider_auth,
        mcp,
        revert,
        session_extras,
        pty,
        webhook,
    )
    for module in guarded:
        app.include_router(module.router, dependencies=authenticated)
    # Ahead of every route: the prompt routes without FastAPI's per-request machinery, doing what it
    # does for them (`authenticated` included). Their FastAPI routes stay the contract.
    app.router.routes[0:0] = [prompt_lane(route, authenticated) for route in session.prompt_routes()]
    app.include_router(pty.socket_router)  # authenticates by itself (headers or a ticket)
    # The metrics check credentials by themselves: the operator's token (deps.metrics_reader).
    app.include_router(metrics.router)
    openapi_route.install(app)  # the contract, built when first asked for
    return app


async def record_auth_failure(
    runtime: Runtime, throttle: FailureThrottle, failure: AuthFailure, facts: RequestFacts
) -> None:
    """Audit a refused request in the chain of the tenant it claimed (`_system` when none): what was
    tried and why it failed, never the credential (nor the query string, which may carry one).
    Repeats of the same refusal from the same peer are only counted, into the next row's
    `suppressed` (identity/failures.py), so refusals cannot flood the log."""
    tenant = failure.claimed_tenant or SYSTEM_TENANT
    admission = throttle.admit(FailureKey(tenant, facts.peer, failure.message))
    if admission is None:
        return
    suppressed = await _admit_shared(runtime, throttle, admission)
    if suppressed is None:
        return  # another replica audited this refusal within the window: it is counted there
    data = {
        "status": failure.status,
        "reason": failure.message,
        "method": failure.method,
        "request": f"{facts.method} {facts.target.split('?', 1)[0]}",
        "peer": facts.peer,
        "suppressed": suppressed,
    }
    if admission.overflow:
        # Too many distinct refusals to tally one by one: the count spans many tenants and peers.
        data["overflow"] = True
    try:
        await runtime.store.record_audit(admission.key.tenant, AUTH_FAILED, actor="anonymous", data=data)
    except Exception:
        log.exception("could not record an authentication failure in the audit log")


async def _admit_shared(runtime: Runtime, throttle: FailureThrottle, admission: Admission) -> int | None:
    """Replicas share the throttle's window in Postgres; if it cannot be asked, the row is written."""
    key, counted = admission.key, admission.suppressed
    try:
        return await runtime.store.admit_refusal(
            key.tenant, key.peer, key.reason, counted, now_ms=throttle.wall_ms(), window_ms=throttle.window_ms
        )
    except Exception:
        log.exception("could not consult the shared audit throttle")
        return admission.suppressed
