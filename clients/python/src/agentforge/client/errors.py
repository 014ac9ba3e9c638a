"""Errors the SDK raises: one class for every answer the server refused, plus the ways a call can fail
before an answer exists (no connection, an unreadable event stream)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx2


class AgentForgeError(Exception):
    """The server answered with a non-2xx status; `name` and `message` are the server's own."""

    def __init__(self, status: int, name: str, message: str, data: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{name} (HTTP {status}): {message}" if status else f"{name}: {message}")
        self.status = status
        self.name = name
        self.message = message
        self.data: dict[str, Any] = dict(data or {})


class BadRequestError(AgentForgeError):
    """400: a field is missing or invalid (the message names it)."""


class AuthenticationError(AgentForgeError):
    """401: no valid credential (API key or token)."""


class PermissionDeniedError(AgentForgeError):
    """403: the credential may not do this (role, tenant or workspace boundary)."""


class NotFoundError(AgentForgeError):
    """404: no such thing, or not visible to the caller's tenant."""


class ConflictError(AgentForgeError):
    """409: the session is busy with a turn."""


class RequestTooLargeError(AgentForgeError):
    """413: too large to send."""


class InternalServerError(AgentForgeError):
    """5xx: the server failed."""


_BY_STATUS: dict[int, type[AgentForgeError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: RequestTooLargeError,
}


def _error_class(status: int) -> type[AgentForgeError]:
    if status >= 500:
        return InternalServerError
    return _BY_STATUS.get(status, AgentForgeError)


class APIConnectionError(AgentForgeError):
    """The request never got an answer (refused connection, timeout, broken stream)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "ConnectionError", message)


AgentForgeConnectionError = APIConnectionError  # the name before error classes by kind


class EventStreamError(AgentForgeError):
    """A frame on `/event` could not be decoded as an event envelope."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "EventStreamError", message)


def error_from_response(response: httpx2.Response) -> AgentForgeError:
    """Builds the error for a non-2xx answer whose body has been read."""
    status = response.status_code
    try:
        body: Any = response.json()
    except ValueError:
        text = response.text.strip()
        return _error_class(status)(status, "HTTPError", text or response.reason_phrase or f"HTTP {status}")
    return _error_from_body(status, body, response.reason_phrase)


def _error_from_body(status: int, body: Any, reason: str) -> AgentForgeError:
    if isinstance(body, dict):
        name = body.get("name")
        data = body.get("data")
        if isinstance(name, str) and isinstance(data, dict):
            message = data.get("message")
            return _error_class(status)(status, name, str(message) if message is not None else name, data)
        # FastAPI's own validation answer, in case a route is reached before our handlers apply.
        if "detail" in body:
            detail = body["detail"]
            message = detail if isinstance(detail, str) else _describe_validation(detail)
            name = "ValidationError" if status in (400, 422) else "HTTPError"
            return _error_class(status)(status, name, message, {"errors": detail})
    return _error_class(status)(status, "HTTPError", reason or f"HTTP {status}", {"body": body})


def _describe_validation(detail: Any) -> str:
    if not isinstance(detail, list):
        return str(detail)
    problems = []
    for item in detail:
        if isinstance(item, dict):
            where = ".".join(str(piece) for piece in item.get("loc", ()))
            problems.append(f"{where}: {item.get('msg', 'invalid')}")
    return "; ".join(problems) or "invalid request"
