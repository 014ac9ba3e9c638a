"""The FastAPI app factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from agentforge import __version__
from agentforge.config import Settings
from agentforge.identity.apikeys import StoredApiKey
from agentforge.identity.authenticate import Authenticator, FailureHook, log_failure
from agentforge.server import deps, errors
from agentforge.server.routes import (
    agent,
    command,
    events,
    global_,
    permission,
    provider,
    question,
    session,
    session_edit,
    summarize,
    todo,
)
from agentforge.session.runtime import Runtime


def create_app(settings: Settings, *, on_auth_failure: FailureHook = log_failure) -> FastAPI:
    """The app. `on_auth_failure` hears of every refused request (401/403) before it is answered."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = await Runtime.open(settings)
        app.state.runtime = runtime
        try:
            yield
        finally:
            runtime.bus.close_all()
            await runtime.close()
            await authenticator.aclose()

    app = FastAPI(
        title="Agent Forge",
        version=__version__,
        summary="LLM agents as durable multi-turn sessions",
        lifespan=lifespan,
    )

    async def find_key(tenant_id: str, key_id: str) -> StoredApiKey | None:
        runtime: Runtime = app.state.runtime
        return await runtime.store.find_api_key(tenant_id, key_id)

    # Built here, not in the lifespan, so a broken key in the auth config stops start-up before serving.
    authenticator = Authenticator.from_settings(settings, find_key=find_key, on_failure=on_auth_failure)
    app.state.authenticator = authenticator
    errors.install(app)
    # Health stays open (load balancers probe it); so do /docs and /openapi.json. Everything else
    # needs an identity, resolved once per request and before any response (SSE included) starts.
    app.include_router(global_.router)
    authenticated = [Depends(deps.identity)]
    guarded = (agent, session, events, permission, question, todo, command, session_edit, summarize, provider)
    for module in guarded:
        app.include_router(module.router, dependencies=authenticated)
    return app
