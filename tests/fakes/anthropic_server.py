"""A wire-level fake of the Anthropic Messages API for tests.

A real HTTP/1.1 server on 127.0.0.1 (on `http11.py`) that streams scripted responses as Anthropic does:
`message_start` (with the input and cache usage), then per content block `content_block_start`, its
deltas and `content_block_stop`, a `ping`, `message_delta` (stop reason, output usage) and
`message_stop`, each frame an `event:` line plus a `data:` line. Each `POST /v1/messages` pops the next
`AnthropicScript` (FIFO); when none is left it gets HTTP 500.

    async with FakeAnthropic() as fake:
        fake.enqueue(AnthropicScript().thinking("Hmm", signature="sig").text("Hello"))
        ...  # point a client at fake.base_url
"""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import dataclass
from typing import Any

from .http11 import Connection, Drop, FakeServer, Pause, PeerGone, Raw, Request, Sleep

ARGUMENT_CHUNK_SIZE = 8  # tool input JSON streams in pieces this long, like the real API


@dataclass(slots=True)
class _Event:
    name: str
    data: dict[str, Any]


@dataclass(slots=True)
class _HttpError:
    status: int
    body: dict[str, Any]
    headers: dict[str, str]


_Step = _Event | Raw | Pause | Sleep | Drop


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def error_body(message: str, *, type: str = "api_error") -> dict[str, Any]:
    """An error body as Anthropic sends it."""
    return {"type": "error", "error": {"type": type, "message": message}}


class AnthropicScript:
    """One scripted response, built fluently. Content blocks stream in the order they were added, each
    with the next index; `message_delta` and `message_stop` always come last. Without `stop()`, the stop
    reason is `tool_use` when the script has a tool call, else `end_turn`."""

    def __init__(self) -> None:
        self._steps: list[_Step] = []
        self._blocks = 0
        self._tool_calls = 0
        self._stop_reason: str | None = None
        self._usage = {"input_tokens": 10, "output_tokens": 5}
        self._http_error: _HttpError | None = None
        self.message_id = f"msg_{secrets.token_hex(12)}"

    def text(self, text: str, *, chunk_size: int = 4) -> AnthropicScript:
        index = self._open({"type": "text", "text": ""})
        for piece in _pieces(text, chunk_size):
            self._delta(index, {"type": "text_delta", "text": piece})
        return self._close(index)

    def thinking(self, text: str, *, signature: str = "", chunk_size: int = 4) -> AnthropicScript:
        index = self._open({"type": "thinking", "thinking": "", "signature": ""})
        for piece in _pieces(text, chunk_size):
            self._delta(index, {"type": "thinking_delta", "thinking": piece})
        if signature:
            self._delta(index, {"type": "signature_delta", "signature": signature})
        return self._close(index)

    def redacted_thinking(self, data: str) -> AnthropicScript:
        return self._close(self._open({"type": "redacted_thinking", "data": data}))

    def tool_use(
        self, name: str, arguments: dict[str, Any] | str, *, call_id: str | None = None
    ) -> AnthropicScript:
        self._tool_calls += 1
        call_id = call_id or f"toolu_{secrets.token_hex(12)}"
        index = self._open({"type": "tool_use", "id": call_id, "name": name, "input": {}})
        args_text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        for piece in _pieces(args_text, ARGUMENT_CHUNK_SIZE):
            self._delta(index, {"type": "input_json_delta", "partial_json": piece})
        return self._close(index)

    def usage(self, input: int, output: int, *, cache_read: int = 0, cache_write: int = 0) -> AnthropicScript:
        """Anthropic's counts: `input` excludes the cache reads and writes."""
        self._usage = {
            "input_tokens": input,
            "output_tokens": output,
            "cache_read_input_tokens": cache_read,
            "cache_creation_input_tokens": cache_write,
        }
        return self

    def stop(self, reason: str) -> AnthropicScript:
        self._stop_reason = reason
        return self

    def error_status(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> AnthropicScript:
        """Answer with this HTTP error instead of a stream."""
        self._http_error = _HttpError(status, body, dict(headers or {}))
        return self

    def error_event(self, message: str, *, type: str = "overloaded_error") -> AnthropicScript:
        """Stream an `error` event and end the response there (no `message_stop`)."""
        self._steps.append(_Event("error", error_body(message, type=type)))
        return self

    def raw(self, data: str) -> AnthropicScript:
        """Stream `data: <data>` verbatim, without an event name (e.g. a malformed chunk)."""
        self._steps.append(Raw(data))
        return self

    def pause(self, gate: asyncio.Event) -> AnthropicScript:
        self._steps.append(Pause(gate))
        return self

    def sleep(self, seconds: float) -> AnthropicScript:
        self._steps.append(Sleep(seconds))
        return self

    def drop(self) -> AnthropicScript:
        """Close the connection here, mid-stream, without finishing the body."""
        self._steps.append(Drop())
        return self

    @property
    def stop_reason(self) -> str:
        return self._stop_reason or ("tool_use" if self._tool_calls else "end_turn")

    def _open(self, block: dict[str, Any]) -> int:
        index = self._blocks
        self._blocks += 1
        self._steps.append(_Event("content_block_start", {"index": index, "content_block": block}))
        return index

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        self._steps.append(_Event("content_block_delta", {"index": index, "delta": delta}))

    def _close(self, index: int) -> AnthropicScript:
        self._steps.append(_Event("content_block_stop", {"index": index}))
        return self


class FakeAnthropic(FakeServer[AnthropicScript]):
    """The fake provider. `base_url` (ending in `/v1`, as configured for Anthropic) is valid after
    `start()`."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.chunk_delay = 0.0
        self.disconnects = 0  # streams the client abandoned before their end

    async def _respond(self, conn: Connection, request: Request) -> bool:
        """Answer one request; False when the connection must be closed afterwards."""
        if not self._routed(request):
            await self._send_error(conn, 404, f"fake: no route {request.method} {request.path}")
            return True
        try:
            body = json.loads(request.body)
        except ValueError:
            await self._send_error(conn, 400, "fake: request body is not JSON")
            return True
        self.requests.append(body)
        self.request_headers.append(request.headers)
        model = self._model(request, body)
        if not await self._authorized(conn, request):
            return True
        if not self._scripts:
            await self._send_error(conn, 500, "fake: no script left")
            return True
        script = self._scripts.popleft()
        if script._http_error is not None:
            error = script._http_error
            await conn.send_json(error.status, error.body, error.headers)
            return True
        try:
            return await self._stream(conn, script, model)
        except PeerGone:
            self.disconnects += 1
            return False

    # Hooks for the same API behind another route and framing (Bedrock, Vertex).

    def _routed(self, request: Request) -> bool:
        return request.method == "POST" and request.path == "/v1/messages"

    def _model(self, request: Request, body: dict[str, Any]) -> str:
        return str(body.get("model", "claude-fake"))

    async def _authorized(self, conn: Connection, request: Request) -> bool:
        """Checked after the request is recorded; False once a rejection has been sent."""
        return True

    async def _send_error(self, conn: Connection, status: int, message: str) -> None:
        await conn.send_json(status, error_body(message))

    def _writer(self, conn: Connection) -> _EventWriter:
        return _EventWriter(conn, self.chunk_delay)

    async def _stream(self, conn: Connection, script: AnthropicScript, model: str) -> bool:
        writer = self._writer(conn)
        await writer.start()
        await writer.send("message_start", {"message": _message(script, model)})
        for step in script._steps:
            match step:
                case _Event(name="error", data=data):
                    await writer.send_error(data)
                    await conn.end_stream()
                    return True
                case _Event(name=name, data=data):
                    await writer.send(name, data)
                case Raw(data):
                    await writer.send_raw(data)
                case Pause() | Sleep():
                    await conn.hold(step)
                case Drop():
                    return False
        await writer.send("ping", {})
        delta = {"stop_reason": script.stop_reason, "stop_sequence": None}
        await writer.send("message_delta", {"delta": delta, "usage": script._usage})
        await writer.send("message_stop", {})
        await conn.end_stream()
        return True


def _message(script: AnthropicScript, model: str) -> dict[str, Any]:
    """The `message_start` message: its usage has the input and cache counts, output only so far."""
    return {
        "id": script.message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**script._usage, "output_tokens": 1},
    }


class _EventWriter:
    """Writes `event:` + `data:` frames (the event's `type` repeated in the data, as Anthropic does)."""

    content_type = "text/event-stream; charset=utf-8"

    def __init__(self, conn: Connection, delay: float) -> None:
        self._conn = conn
        self._delay = delay
        self._sent = 0

    async def start(self) -> None:
        await self._conn.start_stream(self.content_type)

    async def send(self, name: str, data: dict[str, Any]) -> None:
        if self._sent and self._delay > 0:
            await self._conn.wait(None, self._delay)
        self._sent += 1
        await self._write(name, json.dumps({"type": name, **data}))

    async def send_error(self, data: dict[str, Any]) -> None:
        await self.send("error", data)

    async def send_raw(self, data: str) -> None:
        await self._conn.send_event(data)

    async def _write(self, name: str, data: str) -> None:
        await self._conn.send_event(data, event=name)


__all__ = ["AnthropicScript", "FakeAnthropic", "error_body"]
