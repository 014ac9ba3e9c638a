"""/openapi.json: the contract (server/openapi.py) built when it is first asked for, in a worker thread.

Building it costs ~0.4 s of CPU (the schemas of every route and model), and its module ~25 ms of
imports (a model per event type) that starting a server need not pay. On the event loop the build
would hold every request and turn meanwhile; in a thread they go on beside it. Later requests answer
the one built.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def install(app: FastAPI) -> None:
    """Serve the corrected contract at the app's OpenAPI URL (`app.openapi()` builds it too)."""
    building = threading.Lock()  # one build, however many ask meanwhile

    def build() -> dict[str, Any]:
        with building:
            if app.openapi_schema is None:
                from agentforge.server.openapi import contract

                app.openapi_schema = contract(app)
            return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]
    routes = app.router.routes
    index, served = next(
        (n, route)
        for n, route in enumerate(routes)
        if isinstance(route, Route) and route.path == app.openapi_url
    )
    answer = served.endpoint  # FastAPI's: the built contract as JSON, with the request's root path

    async def openapi(request: Request) -> Response:
        if app.openapi_schema is None:
            await asyncio.to_thread(build)
        response: Response = await answer(request)
        return response

    methods = sorted(served.methods) if served.methods else None
    routes[index] = Route(served.path, openapi, methods=methods, name=served.name, include_in_schema=False)
