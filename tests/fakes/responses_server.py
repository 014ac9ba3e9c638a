"""A wire-level fake of the OpenAI Responses API (`POST /v1/responses`, streamed) for tests.

Streams scripted responses as OpenAI does: `event: <type>` + `data: {...}` frames, from
`response.created` through output items (reasoning summary, message text, function calls) to
`response.completed` with usage, or `response.failed` / `error`. Each request pops the next `ResponsesScript`.
A script may instead answer with an HTTP error, or fail mid-stream (dropped, malformed, stalled).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from .http11 import Connection, Drop, FakeServer, PeerGone, Raw, Request, Sleep

ARGUMENT_CHUNK_SIZE = 8


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))] or [""]


@dataclass(slots=True)
class _Item:
    kind: str  # "reasoning" | "message" | "function_call"
    pieces: list[str]
    name: str = ""
    call_id: str = ""
    id: str = field(default_factory=lambda: secrets.token_hex(8))


@dataclass(slots=True)
class _HttpError:
    status: int
    body: dict[str, Any]
    headers: dict[str, str]


_Step = _Item | Raw | Sleep | Drop


class ResponsesScript:
    """One scripted response: output items in the order added, then `response.completed` (or a failure)."""

    def __init__(self) -> None:
        self.items: list[_Step] = []  # output items and mid-stream faults, in order
        self.usage: dict[str, Any] | None = None
        self.failure: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self.incomplete_reason: str | None = None
        self.http_error: _HttpError | None = None

    def text(self, text: str, *, chunk_size: int = 4) -> ResponsesScript:
        self.items.append(_Item("message", _pieces(text, chunk_size), id=f"msg_{secrets.token_hex(8)}"))
        return self

    def reasoning(self, summary: str, *, chunk_size: int = 4) -> ResponsesScript:
        self.items.append(_Item("reasoning", _pieces(summary, chunk_size), id=f"rs_{secrets.token_hex(8)}"))
        return self

    def tool_call(
        self, name: str, arguments: dict[str, Any], *, call_id: str | None = None
    ) -> ResponsesScript:
        pieces = _pieces(json.dumps(arguments), ARGUMENT_CHUNK_SIZE)
        call_id = call_id or f"call_{secrets.token_hex(8)}"
        self.items.append(_Item("function_call", pieces, name, call_id, id=f"fc_{secrets.token_hex(8)}"))
        return self

    def with_usage(self, input: int, output: int, *, reasoning: int = 0, cached: int = 0) -> ResponsesScript:
        self.usage = {
            "input_tokens": input,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": input + output,
        }
        return self

    def incomplete(self, reason: str) -> ResponsesScript:
        self.incomplete_reason = reason
        return self

    def failed(self, message: str, *, code: str = "server_error") -> ResponsesScript:
        """End with `response.failed` carrying this error."""
        self.failure = {"code": code, "message": message}
        return self

    def error_event(self, message: str, *, code: str = "rate_limit_exceeded") -> ResponsesScript:
        """End with a bare `error` event."""
        self.error = {"type": "error", "code": code, "message": message, "param": None}
        return self

    def error_status(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> ResponsesScript:
        """Answer with this HTTP error instead of a stream."""
        self.http_error = _HttpError(status, body, dict(headers or {}))
        return self

    def raw(self, data: str) -> ResponsesScript:
        """Stream `data: <data>` verbatim, without an event name (e.g. a malformed chunk)."""
        self.items.append(Raw(data))
        return self

    def sleep(self, seconds: float) -> ResponsesScript:
        """Go silent for `seconds` (giving up early if the client leaves)."""
        self.items.append(Sleep(seconds))
        return self

    def drop(self) -> ResponsesScript:
        """Close the connection here, mid-stream, without finishing the body."""
        self.items.append(Drop())
        return self


class FakeResponses(FakeServer[ResponsesScript]):
    """The fake provider; `base_url` (ending in `/v1`) is valid after `start()`."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []
        self.frames_sent = 0

    async def _respond(self, conn: Connection, request: Request) -> bool:
        """Answer one request; False when the connection must be closed afterwards."""
        if request.method != "POST" or request.path != "/v1/responses":
            await conn.send_json(404, {"error": {"message": f"no route {request.path}", "type": "not_found"}})
            return True
        body = json.loads(request.body)
        self.requests.append(body)
        if not self._scripts:
            await conn.send_json(500, {"error": {"message": "fake: no script left", "type": "server_error"}})
            return True
        script = self._scripts.popleft()
        if script.http_error is not None:
            error = script.http_error
            await conn.send_json(error.status, error.body, error.headers)
            return True
        await conn.start_stream()
        try:
            if not await _Writer(conn, self, str(body.get("model"))).run(script):
                return False
        except PeerGone:
            return False
        await conn.end_stream()
        return True


class _Writer:
    """Writes one script as Responses stream events with increasing `sequence_number`."""

    def __init__(self, conn: Connection, fake: FakeResponses, model: str) -> None:
        self._conn = conn
        self._fake = fake
        self._sequence = 0
        self._response: dict[str, Any] = {
            "id": f"resp_{secrets.token_hex(8)}",
            "object": "response",
            "model": model,
            "status": "in_progress",
            "output": [],
            "usage": None,
        }

    async def send(self, kind: str, **fields: Any) -> None:
        self._sequence += 1
        self._fake.frames_sent += 1
        payload = {"type": kind, "sequence_number": self._sequence, **fields}
        await self._conn.send_event(json.dumps(payload), event=kind)

    async def run(self, script: ResponsesScript) -> bool:
        """Write the script; False when it drops the connection mid-stream."""
        await self.send("response.created", response=self._response)
        index = 0
        for step in script.items:
            match step:
                case _Item():
                    await self._item(index, step)
                    index += 1
                case Raw(data):
                    await self._conn.send_event(data)
                case Sleep():
                    await self._conn.hold(step)
                case Drop():
                    return False
        await self._end(script)
        return True

    async def _end(self, script: ResponsesScript) -> None:
        if script.error is not None:
            await self.send("error", **{k: v for k, v in script.error.items() if k != "type"})
            return
        if script.failure is not None:
            await self.send(
                "response.failed", response={**self._response, "status": "failed", "error": script.failure}
            )
            return
        final = {**self._response, "usage": script.usage, "status": "completed"}
        if script.incomplete_reason is not None:
            final |= {"status": "incomplete", "incomplete_details": {"reason": script.incomplete_reason}}
            await self.send("response.incomplete", response=final)
            return
        await self.send("response.completed", response=final)

    async def _item(self, index: int, item: _Item) -> None:
        whole = "".join(item.pieces)
        if item.kind == "function_call":
            head = {"type": "function_call", "id": item.id, "call_id": item.call_id, "name": item.name}
            await self.send("response.output_item.added", output_index=index, item={**head, "arguments": ""})
            for piece in item.pieces:
                await self.send(
                    "response.function_call_arguments.delta", item_id=item.id, output_index=index, delta=piece
                )
            await self.send(
                "response.function_call_arguments.done", item_id=item.id, output_index=index, arguments=whole
            )
            await self.send(
                "response.output_item.done", output_index=index, item={**head, "arguments": whole}
            )
            return
        added = {"type": item.kind, "id": item.id}
        await self.send(
            "response.output_item.added", output_index=index, item={**added, "summary": [], "content": []}
        )
        delta_type = (
            "response.output_text.delta"
            if item.kind == "message"
            else "response.reasoning_summary_text.delta"
        )
        for piece in item.pieces:
            await self.send(
                delta_type, item_id=item.id, output_index=index, content_index=0, summary_index=0, delta=piece
            )
        await self.send("response.output_item.done", output_index=index, item=added)


__all__ = ["FakeResponses", "ResponsesScript"]
