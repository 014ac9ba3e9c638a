"""A wire-level fake of the Gemini API's `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`.

Streams scripted candidates as Gemini does: one `data: {GenerateContentResponse}` per chunk, whole parts
(thought text, text, functionCall with its `thoughtSignature`), the last chunk carrying `finishReason` and
`usageMetadata`. A script may instead answer with an HTTP error in Google's
`{"error": {"code", "message", "status"}}` shape, or fail mid-stream (an error chunk, a dropped
connection, a malformed chunk, a stall).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .http11 import Connection, Drop, FakeServer, PeerGone, Raw, Request, Sleep

_STREAM_PATH = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):streamGenerateContent$")


@dataclass(slots=True)
class _HttpError:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _ErrorChunk:
    body: dict[str, Any]


_Step = dict[str, Any] | Raw | _ErrorChunk | Sleep | Drop


def error_body(
    code: int, message: str, status: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """An error as Google sends it, in a response body or a stream chunk."""
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details is not None:
        error["details"] = details
    return {"error": error}


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))] or [""]


class GeminiScript:
    """One scripted response: parts in the order added (one per chunk), then the finish chunk."""

    def __init__(self) -> None:
        self.steps: list[_Step] = []  # parts (one chunk each) and mid-stream faults, in order
        self.usage: dict[str, Any] | None = None
        self.finish_reason = "STOP"
        self.block_reason: str | None = None
        self.http_error: _HttpError | None = None

    def text(self, text: str, *, chunk_size: int = 4) -> GeminiScript:
        self.steps.extend({"text": piece} for piece in _pieces(text, chunk_size))
        return self

    def thought(self, text: str, *, chunk_size: int = 4) -> GeminiScript:
        self.steps.extend({"text": piece, "thought": True} for piece in _pieces(text, chunk_size))
        return self

    def function_call(
        self,
        name: str,
        args: dict[str, Any],
        *,
        call_id: str | None = None,
        thought_signature: str | None = None,
    ) -> GeminiScript:
        """A functionCall part; Gemini 3 puts a `thoughtSignature` beside the first call of a step."""
        call: dict[str, Any] = {"name": name, "args": args}
        if call_id is not None:
            call["id"] = call_id
        part: dict[str, Any] = {"functionCall": call}
        if thought_signature is not None:
            part["thoughtSignature"] = thought_signature
        self.steps.append(part)
        return self

    def with_usage(self, prompt: int, candidates: int, *, thoughts: int = 0, cached: int = 0) -> GeminiScript:
        self.usage = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": candidates,
            "thoughtsTokenCount": thoughts,
            "cachedContentTokenCount": cached,
            "totalTokenCount": prompt + candidates + thoughts,
        }
        return self

    def finish(self, reason: str) -> GeminiScript:
        self.finish_reason = reason
        return self

    def blocked(self, reason: str) -> GeminiScript:
        """The prompt itself is blocked: one chunk with `promptFeedback.blockReason`, no candidate."""
        self.block_reason = reason
        return self

    def error(
        self,
        code: int,
        message: str,
        status: str,
        *,
        headers: dict[str, str] | None = None,
        details: list[dict[str, Any]] | None = None,
    ) -> GeminiScript:
        """Answer with this HTTP error instead of a stream."""
        self.http_error = _HttpError(code, error_body(code, message, status, details), dict(headers or {}))
        return self

    def error_chunk(self, code: int, message: str, status: str) -> GeminiScript:
        """Stream `data: {"error": {...}}` and end the response there."""
        self.steps.append(_ErrorChunk(error_body(code, message, status)))
        return self

    def raw(self, data: str) -> GeminiScript:
        """Stream `data: <data>` verbatim (e.g. a malformed chunk)."""
        self.steps.append(Raw(data))
        return self

    def sleep(self, seconds: float) -> GeminiScript:
        """Go silent for `seconds` (giving up early if the client leaves)."""
        self.steps.append(Sleep(seconds))
        return self

    def drop(self) -> GeminiScript:
        """Close the connection here, mid-stream, without finishing the body."""
        self.steps.append(Drop())
        return self


class FakeGemini(FakeServer[GeminiScript]):
    """The fake provider; `base_url` (the API root, without version) is valid after entering."""

    base_path = ""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []
        self.models: list[str] = []
        self.request_headers: list[dict[str, str]] = []
        self.chunks_sent = 0

    async def _respond(self, conn: Connection, request: Request) -> bool:
        """Answer one request; False when the connection must be closed afterwards."""
        match = _STREAM_PATH.match(request.path)
        if request.method != "POST" or match is None or "alt=sse" not in request.query:
            await conn.send_json(404, error_body(404, "no route", "NOT_FOUND"))
            return True
        self.requests.append(json.loads(request.body))
        self.models.append(match["model"])
        self.request_headers.append(request.headers)
        if not self._scripts:
            await conn.send_json(500, error_body(500, "fake: no script left", "INTERNAL"))
            return True
        script = self._scripts.popleft()
        if script.http_error is not None:
            error = script.http_error
            await conn.send_json(error.status, error.body, error.headers)
            return True
        try:
            return await self._stream(conn, script, match["model"])
        except PeerGone:
            return False

    async def _stream(self, conn: Connection, script: GeminiScript, model: str) -> bool:
        await conn.start_stream()
        if script.block_reason is not None:
            await self._send(conn, {"promptFeedback": {"blockReason": script.block_reason}}, model)
            await conn.end_stream()
            return True
        for step in script.steps:
            match step:
                case Raw(data):
                    await conn.send_event(data)
                case _ErrorChunk(body):
                    await conn.send_event(json.dumps(body))
                    await conn.end_stream()
                    return True
                case Sleep():
                    await conn.hold(step)
                case Drop():
                    return False
                case dict() as part:
                    await self._send(conn, {"candidates": [_candidate([part])]}, model)
        final: dict[str, Any] = {"candidates": [{**_candidate([]), "finishReason": script.finish_reason}]}
        if script.usage is not None:
            final["usageMetadata"] = script.usage
        await self._send(conn, final, model)
        await conn.end_stream()
        return True

    async def _send(self, conn: Connection, chunk: dict[str, Any], model: str) -> None:
        self.chunks_sent += 1
        await conn.send_event(json.dumps({**chunk, "modelVersion": model, "responseId": "fake"}))


def _candidate(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"content": {"role": "model", "parts": parts}, "index": 0}


__all__ = ["FakeGemini", "GeminiScript", "error_body"]
