"""The prompt routes' lane (server/prompt_lane.py) answers as their FastAPI routes do: every request
below is answered once by the app as served and once by the same app with the lanes taken out, and
the two answers must be the same (status, headers that matter, body), and nothing may be stored."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import pytest
from fastapi import APIRouter, Body, Depends, Request, Response
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute, Route

from agentforge.identity.model import Identity
from agentforge.server import deps
from agentforge.server.deps import PromptDep
from agentforge.server.errors import ApiError
from agentforge.server.prompt_lane import prompt_lane
from agentforge.server.routes import session
from agentforge.session.inputs import PromptInput
from tests.e2e.harness import LiveServer, start_live_server
from tests.fakes.openai_server import FakeOpenAI

JSON = {"content-type": "application/json"}
GOOD = b'{"parts": [{"type": "text", "text": "hi"}]}'

# (method, path under /session/{id}, body, headers): the session id is filled in.
REQUESTS: list[tuple[str, str, bytes | None, dict[str, str]]] = [
    ("POST", "/message", None, {}),
    ("POST", "/message", b"", JSON),
    ("POST", "/message", b"{not json", JSON),
    ("POST", "/message", b"\xff\xfe{}", JSON),
    ("POST", "/message", GOOD, {}),  # no content type: FastAPI reads no JSON
    ("POST", "/message", GOOD, {"content-type": "text/plain"}),
    ("POST", "/message", b'{"parts": 5}', {"content-type": "application/merge-patch+json; charset=utf-8"}),
    ("POST", "/message", b"[]", JSON),
    ("POST", "/message", b'{"parts": "hi"}', JSON),
    ("POST", "/message", b'{"parts": [{"type": "nope"}]}', JSON),
    ("POST", "/message", b'{"parts": [{"type": "text"}], "agent": 3}', JSON),
    ("POST", "/message", b'{"parts": [], "model": {"providerID": "x"}}', JSON),
    ("POST", "/prompt_async", None, {}),
    ("POST", "/prompt_async", b'{"parts": [{"type": "text", "text": 1}]}', JSON),
    ("PUT", "/message", GOOD, JSON),
    ("DELETE", "/prompt_async", None, {}),
    ("GET", "/message", None, {}),
    ("HEAD", "/message", None, {}),
    ("OPTIONS", "/prompt_async", None, {}),
    ("POST", "/message/", b'{"parts": "hi"}', JSON),  # a trailing slash
    ("POST", "%2Fmessage", b'{"parts": "hi"}', JSON),  # the slash percent-encoded: routed as a slash
]


@contextmanager
def without_lanes(live: LiveServer) -> Iterator[None]:
    routes: list[BaseRoute] = live.app.router.routes
    lanes = [route for route in routes if type(route) is Route and route.path.startswith("/session/")]
    assert [lane.path for lane in lanes] == [route.path for route in session.prompt_routes()]
    kept = list(routes)
    routes[:] = [route for route in routes if route not in lanes]
    try:
        yield
    finally:
        routes[:] = kept


async def answers(live: LiveServer, session_id: str) -> list[tuple[int, str | None, Any]]:
    found = []
    for method, path, body, headers in REQUESTS:
        response = await live.client.request(
            method, f"/session/{session_id}{path}", content=body, headers=headers
        )
        found.append(
            (
                response.status_code,
                response.headers.get("allow"),
                response.json() if response.content else None,
            )
        )
    return found


async def test_the_lanes_answer_as_the_routes_they_serve(live: LiveServer) -> None:
    session_id = (await live.create_session())["id"]
    served = await answers(live, session_id)
    with without_lanes(live):
        assert await answers(live, session_id) == served
    assert [status for status, _, _ in served[:16]] == [400] * 14 + [405, 405]
    assert (await live.client.get(f"/session/{session_id}/message")).json() == []
    assert live.fake.requests == []


async def test_a_prompt_to_no_such_session_is_answered_alike(live: LiveServer) -> None:
    served = await live.client.post("/session/ses_none/message", content=GOOD, headers=JSON)
    with without_lanes(live):
        plain = await live.client.post("/session/ses_none/message", content=GOOD, headers=JSON)
    assert (served.status_code, served.json()) == (plain.status_code, plain.json())
    assert served.status_code == 404


async def test_without_credentials_the_lanes_answer_as_the_routes_do(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """With authentication on, a malformed body answers 400 before the missing credential (FastAPI
    reads the body before it solves dependencies), any other answers 401."""
    async with start_live_server(tmp_path, fake_openai, {"auth": {"required": True}}) as live:
        served = await answers(live, "ses_none")
        with without_lanes(live):
            assert await answers(live, "ses_none") == served
    assert {status for status, _, _ in served} == {307, 400, 401, 405}
    assert served[2][0] == 400  # not JSON
    assert served[0][0] == 401  # no body at all: the identity is asked first


def test_a_lane_refuses_what_it_would_skip() -> None:
    """A parameter or dependency the lane does not do, on the route or its router, stops the app's
    build instead of being skipped."""
    identity = [Depends(deps.identity)]
    [prompt, _] = session.prompt_routes()
    prompt_lane(prompt, identity)
    [listing] = [route for route in session.router.routes if getattr(route, "name", "") == "list_messages"]
    with pytest.raises(ValueError, match="a session id, one body and the SessionPrompt"):
        prompt_lane(listing, identity)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a session id, one body and the SessionPrompt"):
        prompt_lane(prompt, [*identity, Depends(deps.admin)])
    with pytest.raises(ValueError, match="a session id, one body and the SessionPrompt"):
        prompt_lane(prompt, [])


async def test_the_apps_dependency_overrides_stand_in_a_lane(live: LiveServer) -> None:
    """An override of the identity (FastAPI's test idiom) applies to the lanes as to the routes."""
    session_id = (await live.create_session())["id"]

    async def refused(request: Request) -> Identity:
        raise ApiError(403, "ForbiddenError", "overridden")

    live.app.dependency_overrides[deps.identity] = refused
    try:
        served = await live.client.post(f"/session/{session_id}/message", content=GOOD, headers=JSON)
        with without_lanes(live):
            plain = await live.client.post(f"/session/{session_id}/message", content=GOOD, headers=JSON)
    finally:
        live.app.dependency_overrides.clear()
    assert (served.status_code, served.json()) == (plain.status_code, plain.json())
    assert served.status_code == 403
    assert live.fake.requests == []


def test_a_lane_refuses_a_route_that_takes_more() -> None:
    """A route taking the request, an embedded body or a response model is not a lane's to serve."""
    identity = [Depends(deps.identity)]
    router = APIRouter()

    @router.post("/{session_id}/message")
    async def takes_the_request(
        session_id: str, body: PromptInput, prompts: PromptDep, request: Request
    ) -> Response:
        raise AssertionError("never called")

    @router.post("/{session_id}/prompt_async")
    async def embeds_the_body(
        session_id: str, body: Annotated[PromptInput, Body(embed=True)], prompts: PromptDep
    ) -> Response:
        raise AssertionError("never called")

    for route in router.routes:
        assert isinstance(route, APIRoute)
        with pytest.raises(ValueError, match="a session id, one body and the SessionPrompt"):
            prompt_lane(route, identity)
