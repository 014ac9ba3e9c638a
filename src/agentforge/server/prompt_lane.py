"""The prompt routes answered without FastAPI's per-request machinery.

`POST /session/{session_id}/message` and `/prompt_async` start every turn, and FastAPI's handling of
one before the endpoint ran (matching through the included routers, solving the router's and the
route's dependencies, reading and validating the body) cost ~1 M instructions, ~5% of a plain turn's
(callgrind), all of it before the turn starts. Their FastAPI routes (routes/session.py) stay the
contract: the OpenAPI spec, the SDK, the body model. A lane here is matched before them and does what
FastAPI does for them, in its order, with FastAPI's own pieces wherever they decide something: the
body read as FastAPI reads it (JSON when the content type says so), the caller's identity
(`deps.identity`, the router's dependency: 401/403), the body validated by the route's own body
field (`request_body_to_args`: the same 400 naming the field), then the route's endpoint itself. It
runs inside the app's middleware and exception handlers, as a route does.
"""

from __future__ import annotations

import email.message
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fastapi import params
from fastapi.dependencies.utils import request_body_to_args
from fastapi.exceptions import HTTPException, RequestValidationError
from fastapi.routing import APIRoute
from pydantic_core import PydanticUndefined
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentforge.server import deps


def prompt_lane(route: APIRoute, router_dependencies: Sequence[params.Depends]) -> Route:
    """A lane for one prompt route, included with `router_dependencies`: its endpoint called with the
    session id, the body validated as the route declares it and the `SessionPrompt`. A route or a
    router with any other parameter or dependency is refused when the app is built: nothing added
    to either can be skipped here."""
    dependant = route.dependant
    if (
        [dependency.call for dependency in dependant.dependencies] != [deps.prompts]
        or [dependency.dependency for dependency in router_dependencies] != [deps.identity]
        or route.dependencies
        or any(dependency.dependencies for dependency in dependant.dependencies)
        or [param.name for param in dependant.path_params] != ["session_id"]
        or dependant.query_params
        or dependant.header_params
        or dependant.cookie_params
        or len(dependant.body_params) != 1
        or getattr(dependant.body_params[0].field_info, "embed", False)
        or dependant.request_param_name
        or dependant.response_param_name
        or dependant.background_tasks_param_name
        or dependant.security_scopes_param_name
        or dependant.http_connection_param_name
        or route.response_model is not None
        or not route.methods
        or (prompts_name := dependant.dependencies[0].name) is None
    ):
        raise ValueError(f"{route.path}: a prompt lane serves a session id, one body and the SessionPrompt")
    body_fields = dependant.body_params
    endpoint: Callable[..., Awaitable[Response]] = route.endpoint

    async def answer(request: Request) -> Response:
        # The route as FastAPI's routing records it: telemetry names the request's span after it.
        request.scope["route"] = route
        # FastAPI's order: the body read (a malformed one answers at once), then the dependencies
        # (the identity: 401/403), then the body's validation errors.
        body = await _body(request)
        # The app's overrides of the two dependencies stand, as FastAPI's routing would apply them.
        overrides = request.app.dependency_overrides
        await overrides.get(deps.identity, deps.identity)(request)
        values, errors = await request_body_to_args(
            body_fields=body_fields, received_body=body, embed_body_fields=False
        )
        if errors:
            raise RequestValidationError(errors)
        values[prompts_name] = await overrides.get(deps.prompts, deps.prompts)(request)
        return await endpoint(session_id=request.path_params["session_id"], **values)

    return Route(route.path, answer, methods=sorted(route.methods), name=route.name)


async def _body(request: Request) -> Any:
    """The body as FastAPI hands it to validation: parsed when its content type is JSON
    (`application/json` or `+json`), its bytes otherwise (which fail the model), none when empty;
    invalid JSON is a validation error, and any other failure to read it a 400, as FastAPI answers."""
    try:
        raw = await request.body()
        if not raw:
            return PydanticUndefined
        # Without a content type FastAPI reads a body as JSON only when told to (strict by default).
        content_type = request.headers.get("content-type")
        if content_type is None or not _is_json(content_type):
            return raw
        return json.loads(raw)
    except HTTPException:
        raise
    except json.JSONDecodeError as error:
        raise RequestValidationError(
            [
                {
                    "type": "json_invalid",
                    "loc": ("body", error.pos),
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": error.msg},
                }
            ],
            body=error.doc,
        ) from error
    except Exception as error:
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from error


def _is_json(content_type: str) -> bool:
    parsed = email.message.Message()
    parsed["content-type"] = content_type
    subtype = parsed.get_content_subtype()
    return parsed.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))
