"""A wire-level fake of the Gemini API's `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`.

Streams scripted candidates as Gemini does: one `data: {GenerateContentResponse}` per chunk, whole parts
(thought text, text, functionCall), the last chunk carrying `finishReason` and `usageMetadata`. A script
may instead answer with an HTTP error in Google's `{"error": {"code", "message", "status"}}` shape.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .http11 import Connection, FakeServer, Request

_STREAM_PATH = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):streamGenerateContent$")


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(1, size))] or [""]


class GeminiScript:
    """One scripted response: parts in the order added (one per chunk), then the finish chunk."""

    def __init__(self) -> None:
        self.parts: list[dict[str, Any]] = []
        self.usage: dict[str, Any] | None = None
        self.finish_reason = "STOP"
        self.http_error: tuple[int, dict[str, Any]] | None = None

    def text(self, text: str, *, chunk_size: int = 4) -> GeminiScript:
        self.parts.extend({"text": piece} for piece in _pieces(text, chunk_size))
        return self

    def thought(self, text: str, *, chunk_size: int = 4) -> GeminiScript:
        self.parts.extend({"text": piece, "thought": True} for piece in _pieces(text, chunk_size))
        return self

    def function_call(self, name: str, args: dict[str, Any], *, call_id: str | None = None) -> GeminiScript:
        call: dict[str, Any] = {"name": name, "args": args}
        if call_id is not None:
            call["id"] = call_id
        self.parts.append({"functionCall": call})
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

    def error(self, code: int, message: str, status: str) -> GeminiScript:
        self.http_error = (code, {"error": {"code": code, "message": message, "status": status}})
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
        await self._answer(conn, request)
        return True

    async def _answer(self, conn: Connection, request: Request) -> None:
        match = _STREAM_PATH.match(request.path)
        if request.method != "POST" or match is None or "alt=sse" not in request.query:
            await conn.send_json(404, {"error": {"code": 404, "message": "no route", "status": "NOT_FOUND"}})
            return
        self.requests.append(json.loads(request.body))
        self.models.append(match["model"])
        self.request_headers.append(request.headers)
        if not self._scripts:
            error = {"error": {"code": 500, "message": "fake: no script left", "status": "INTERNAL"}}
            await conn.send_json(500, error)
            return
        script = self._scripts.popleft()
        if script.http_error is not None:
            await conn.send_json(*script.http_error)
            return
        await conn.start_stream()
        for part in script.parts:
            await self._send(conn, {"candidates": [_candidate([part])]}, match["model"])
        final: dict[str, Any] = {"candidates": [{**_candidate([]), "finishReason": script.finish_reason}]}
        if script.usage is not None:
            final["usageMetadata"] = script.usage
        await self._send(conn, final, match["model"])
        await conn.end_stream()

    async def _send(self, conn: Connection, chunk: dict[str, Any], model: str) -> None:
        self.chunks_sent += 1
        await conn.send_event(json.dumps({**chunk, "modelVersion": model, "responseId": "fake"}))


def _candidate(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"content": {"role": "model", "parts": parts}, "index": 0}


__all__ = ["FakeGemini", "GeminiScript"]
