"""What every request may carry, checked before any route sees it (and so before anything is written).

A pure ASGI middleware: the body is counted as it arrives, chunked or not, and a request past
`server.max_body_bytes` answers 413 without being read further. A JSON body is then walked once: an
integer no store column holds (outside 64 bits), a non-finite number, or a string (value or key) with
a NUL (Postgres text cannot hold it) or a lone surrogate (no UTF-8 encodes it) answers 400 naming the
field, and so does nesting deeper than 64 levels (the walk is bounded; large bodies are parsed
and walked on a worker thread). So do a NUL in the path or a query value. Everything else is the
routes' own validation.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any, Final
from urllib.parse import parse_qsl

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentforge.server.responses import error_body

DEFAULT_MAX_BODY_BYTES: Final = 10 * 1024 * 1024
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
# Deeper JSON than any route takes; refused before the walk so it stays bounded.
MAX_DEPTH: Final = 64
MAX_KEY_SHOWN: Final = 200
# Bodies from this size on are parsed and walked on a worker thread, off the event loop.
OFF_LOOP_BYTES: Final = 64 * 1024


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
            problem = await _json_problem_of(bytes(body))
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


async def _json_problem_of(body: bytes) -> str | None:
    if len(body) < OFF_LOOP_BYTES:
        return json_problem(body)
    return await asyncio.to_thread(json_problem, body)


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
    """Whether the body may be read as JSON: said so, or not said at all (some FastAPI versions parse
    a body without a content type as JSON; the walk passes over one that is not)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return b"json" in value.lower()
    return True


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
    except RecursionError:
        return f"body: nesting is deeper than {MAX_DEPTH} levels"
    except ValueError:
        return None
    return document_problem(document)


def document_problem(document: Any) -> str | None:
    """The first problem of a parsed JSON document, named by its path."""
    return _problem(document, [], 0)


def _problem(value: Any, path: list[str | int], depth: int) -> str | None:
    # One shared list of segments, pushed and popped: a path is only spelled out when reported, so a
    # long key over deep nesting is never copied once per level.
    if depth > MAX_DEPTH:
        return f"{_spell(path)}: nesting is deeper than {MAX_DEPTH} levels"
    if isinstance(value, dict):
        for key, item in value.items():
            path.append(key)
            found = _key_problem(key, path) or _problem(item, path, depth + 1)
            path.pop()
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            path.append(index)
            found = _problem(item, path, depth + 1)
            path.pop()
            if found is not None:
                return found
    else:
        problem = _scalar_problem(value)
        if problem is not None:
            return f"{_spell(path)}: {problem}"
    return None


def _key_problem(key: str, path: list[str | int]) -> str | None:
    problem = _string_problem(key)
    return None if problem is None else f"{_spell(path)}: the key {problem}"


def _scalar_problem(value: Any) -> str | None:
    if isinstance(value, str):
        return _string_problem(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        return f"{value} is out of range (-2^63 to 2^63-1)"
    if isinstance(value, float) and not math.isfinite(value):
        return "numbers must be finite"
    return None


def _spell(path: list[str | int]) -> str:
    """`a.b[0].c`, or `body` for the document itself; a key is cut to a readable length."""
    spelled: list[str] = []
    for segment in path:
        if isinstance(segment, int):
            spelled.append(f"[{segment}]")
        else:
            key = segment if len(segment) <= MAX_KEY_SHOWN else segment[:MAX_KEY_SHOWN] + "..."
            spelled.append(f".{key}" if spelled else key)
    return _printable("".join(spelled)) or "body"


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
