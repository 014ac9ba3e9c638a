from __future__ import annotations

from typing import Any

import httpx2
import pytest

from agentforge.client.errors import AgentForgeError, error_from_response


def response(status: int, body: Any = None, *, text: str | None = None) -> httpx2.Response:
    if text is not None:
        return httpx2.Response(status, text=text)
    return httpx2.Response(status, json=body)


def test_named_error_body() -> None:
    body = {"name": "SessionBusyError", "data": {"message": "busy", "sessionID": "s"}}
    error = error_from_response(response(409, body))
    assert (error.status, error.name, error.message) == (409, "SessionBusyError", "busy")
    assert error.data["sessionID"] == "s"
    assert str(error) == "SessionBusyError (HTTP 409): busy"


def test_fastapi_validation_detail() -> None:
    detail = [{"loc": ["query", "limit"], "msg": "must be >= 0", "type": "greater_than_equal"}]
    error = error_from_response(response(422, {"detail": detail}))
    assert (error.name, error.message) == ("ValidationError", "query.limit: must be >= 0")
    assert error.data["errors"] == detail


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (response(502, text="Bad gateway from proxy"), "Bad gateway from proxy"),
        (response(500, text=""), "Internal Server Error"),
        (response(418, ["unexpected"]), "I'm a teapot"),
    ],
)
def test_bodies_that_are_not_named_errors(reply: httpx2.Response, message: str) -> None:
    error = error_from_response(reply)
    assert isinstance(error, AgentForgeError)
    assert (error.name, error.message) == ("HTTPError", message)
