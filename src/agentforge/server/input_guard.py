"""What every request may carry, checked before any route sees it (and so before anything is written).

A pure ASGI middleware: the body is counted as it arrives, chunked or not, and a request past
`server.max_body_bytes` answers 413 without being read further. A JSON body is then walked once: an
integer no store column holds (outside 64 bits), a non-finite number, or a string (value or key) with
a NUL (Postgres text cannot hold it) or a lone surrogate (no UTF-8 encodes it) answers 400 naming the
field. So do a NUL in the path or a query value. Everything else is the routes' own validation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any, Final
from urllib.parse import parse_qsl

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentforge.server.responses import error_body

DEFAULT_MAX_BODY_BYTES: Final = 10 * 1024 * 1024
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


class InputGuard:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = request_line_problem(scope)
        if problem is not None:
            await _answer(send, 400, "BadRequestError", problem)
            return
        if _declared_length(scope) > self.max_body_bytes:
            await _answer(send, 413, "PayloadTooLargeError", self._too_large())
            return
        body = await self._read_body(receive)
        if body is None:
            await _answer(send, 413, "PayloadTooLargeError", self._too_large())
            return
        if body and _is_json(scope):
            problem = json_problem(bytes(body))
            if problem is not None:
                await _answer(send, 400, "BadRequestError", problem)
                return
        await self.app(scope, _replay(bytes(body), receive), send)

    async def _read_body(self, receive: Receive) -> bytearray | None:
        """The whole body, or None as soon as it grows past the limit."""
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return body  # the client left: the route sees an empty body and the disconnect
            body += message.get("body", b"")
            if len(body) > self.max_body_bytes:
                return None
            if not message.get("more_body", False):
                return body

    def _too_large(self) -> str:
        return f"body: the request body is larger than server.max_body_bytes ({self.max_body_bytes} bytes)"


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # then the real channel: streaming routes watch it for the disconnect

    return replay


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0  # the server rejects a malformed length itself
    return 0


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return b"json" in value.lower()
    return False


def request_line_problem(scope: Scope) -> str | None:
    if "\x00" in scope.get("path", ""):
        return "path: must not contain NUL characters"
    query = scope.get("query_string", b"").decode("latin-1")
    for name, value in parse_qsl(query, keep_blank_values=True, errors="surrogateescape"):
        problem = _string_problem(value) or _string_problem(name)
        if problem is not None:
            return f"{name.encode('utf-8', 'replace').decode()}: {problem}"
    return None


def json_problem(body: bytes) -> str | None:
    """The first value of a JSON body no store can hold, named by its path; None when all fit (or the
    body is not JSON at all: the route's own validation answers that)."""
    try:
        # The standard parser, not orjson: it keeps integers of any size, NaN and lone surrogates
        # so the walk sees exactly what was sent and can name it.
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return next(_problems(document, ""), None)


def _problems(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            if (problem := _string_problem(key)) is not None:
                yield f"{_printable(child)}: the key {problem}"
            yield from _problems(item, child)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _problems(item, f"{path}[{index}]")
    elif isinstance(value, str):
        if (problem := _string_problem(value)) is not None:
            yield f"{_printable(path) or 'body'}: {problem}"
    elif isinstance(value, bool):
        return
    elif isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            yield f"{_printable(path) or 'body'}: {value} is out of range (-2^63 to 2^63-1)"
    elif isinstance(value, float) and not math.isfinite(value):
        yield f"{_printable(path) or 'body'}: numbers must be finite"


def _string_problem(text: str) -> str | None:
    if "\x00" in text:
        return "must not contain NUL characters"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid Unicode (it has a lone surrogate or invalid UTF-8)"
    return None


def _printable(path: str) -> str:
    return path.encode("utf-8", "backslashreplace").decode().replace("\x00", "\\x00")


async def _answer(send: Send, status: int, name: str, message: str) -> None:
    body = orjson.dumps(error_body(name, message))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
