"""The FastAPI app factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from agentforge import __version__
from agentforge.config import Settings
from agentforge.server import errors
from agentforge.server.routes import (
    agent,
    audit,
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


def create_app(settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = await Runtime.open(settings)
        app.state.runtime = runtime
        try:
            yield
        finally:
            runtime.bus.close_all()
            await runtime.close()

    app = FastAPI(
        title="Agent Forge",
        version=__version__,
        summary="LLM agents as durable multi-turn sessions",
        lifespan=lifespan,
    )
    errors.install(app)
    app.include_router(global_.router)
    app.include_router(agent.router)
    app.include_router(session.router)
    app.include_router(events.router)
    app.include_router(permission.router)
    app.include_router(question.router)
    app.include_router(todo.router)
    app.include_router(command.router)
    app.include_router(session_edit.router)
    app.include_router(summarize.router)
    app.include_router(provider.router)
    app.include_router(audit.router)
    return app
