"""A wire-level fake of the OpenAI Chat Completions API for tests.

A real HTTP/1.1 server on 127.0.0.1 (raw `asyncio.start_server`, no framework) that streams scripted
responses chunk by chunk as server-sent events, exactly as OpenAI does: a role chunk, content /
reasoning / tool-call deltas, a finish chunk, a usage chunk (choices `[]`), then `data: [DONE]`.
Connections are kept alive between requests. Each request to `POST /v1/chat/completions` pops the next
`Script` (FIFO); when none is left it gets HTTP 500.

    async with FakeOpenAI() as fake:
        fake.enqueue(reply("Hello"), call("read", {"path": "a.txt"}))
        ...  # point a client at fake.base_url
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from .http11 import Connection, Drop, FakeServer, Pause, PeerGone, Raw, Request, Sleep

ARGUMENT_CHUNK_SIZE = 8  # tool-call arguments stream in pieces this long, like real providers
# Azure OpenAI names the deployment in the path; `?api-version=...` is recorded in `request_queries`.
_AZURE_CHAT_PATH = re.compile(r"^/openai/deployments/[^/]+/chat/completions$")


@dataclass(slots=True)
class _Delta:
    delta: dict[str, Any]


@dataclass(slots=True)
class _StreamedError:
    error: dict[str, Any]


@dataclass(slots=True)
class _HttpError:
    status: int
    body: dict[str, Any]
    headers: dict[str, str]


_Step = _Delta | Raw | _StreamedError | Pause | Sleep | Drop


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class Script:
    """One scripted response, built fluently. Steps stream in the order they were added; the finish
    chunk and then the usage chunk always come last (as OpenAI sends them). Without an explicit
    `finish()`, the default finish reason is used."""

    def __init__(self) -> None:
        self._steps: list[_Step] = []
        self._tool_calls = 0
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] | None = None
        self._http_error: _HttpError | None = None
        self.completion_id = f"chatcmpl-{secrets.token_hex(12)}"

    def text(self, text: str, *, chunk_size: int = 4) -> Script:
        self._steps.extend(_Delta({"content": piece}) for piece in _pieces(text, chunk_size))
        return self

    def reasoning(self, text: str, *, chunk_size: int = 4, field: str = "reasoning_content") -> Script:
        """Reasoning deltas; `field="reasoning"` mimics Ollama / OpenRouter instead of DeepSeek / vLLM."""
        self._steps.extend(_Delta({field: piece}) for piece in _pieces(text, chunk_size))
        return self

    def tool_call(self, name: str, arguments: dict[str, Any] | str, *, call_id: str | None = None) -> Script:
        index = self._tool_calls
        self._tool_calls += 1
        call_id = call_id or f"call_{secrets.token_hex(12)}"
        args_text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        head = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        self._steps.append(_Delta({"tool_calls": [head]}))
        for piece in _pieces(args_text, ARGUMENT_CHUNK_SIZE):
            if piece:
                self._steps.append(
                    _Delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                )
        return self

    def pause(self, gate: asyncio.Event) -> Script:
        self._steps.append(Pause(gate))
        return self

    def sleep(self, seconds: float) -> Script:
        self._steps.append(Sleep(seconds))
        return self

    def usage(self, prompt: int, completion: int, *, reasoning: int = 0, cached: int = 0) -> Script:
        self._usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0},
        }
        return self

    def finish(self, reason: str | None = None) -> Script:
        self._finish_reason = reason or self._default_finish_reason()
        return self

    def error_status(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> Script:
        """Answer with this HTTP error instead of a stream."""
        self._http_error = _HttpError(status, body, dict(headers or {}))
        return self

    def drop(self) -> Script:
        """Close the connection here, mid-stream, without finishing the body."""
        self._steps.append(Drop())
        return self

    def error_event(self, message: str, *, type: str = "server_error", code: str | None = None) -> Script:
        """Stream `data: {"error": {...}}` and end the response there (no finish, no [DONE])."""
        self._steps.append(_StreamedError({"message": message, "type": type, "code": code}))
        return self

    def raw(self, data: str) -> Script:
        """Stream `data: <data>` verbatim (e.g. a malformed chunk)."""
        self._steps.append(Raw(data))
        return self

    def _default_finish_reason(self) -> str:
        return "tool_calls" if self._tool_calls else "stop"


def reply(text: str) -> Script:
    return Script().text(text).usage(10, 5).finish()


def call(name: str, arguments: dict[str, Any]) -> Script:
    return Script().tool_call(name, arguments).usage(10, 5).finish("tool_calls")


class FakeOpenAI(FakeServer[Script]):
    """The fake provider. `base_url` is valid after `start()`."""

    def __init__(self, *, models: list[str] | None = None) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.request_paths: list[str] = []
        self.request_queries: list[str] = []
        self.chunk_delay = 0.0
        self.models = models or ["fake-model"]
        self.disconnects = 0  # streams the client abandoned before their end

    async def _respond(self, conn: Connection, request: Request) -> bool:
        """Answer one request; False when the connection must be closed afterwards."""
        if request.method == "GET" and request.path == "/v1/models":
            await conn.send_json(200, {"object": "list", "data": [self._model_entry(m) for m in self.models]})
            return True
        is_chat = request.path == "/v1/chat/completions" or _AZURE_CHAT_PATH.match(request.path)
        if request.method == "POST" and is_chat:
            return await self._chat_completions(conn, request)
        await conn.send_json(404, _error_body(f"fake provider: no route {request.method} {request.path}"))
        return True

    async def _chat_completions(self, conn: Connection, request: Request) -> bool:
        try:
            body = json.loads(request.body)
        except ValueError:
            await conn.send_json(400, _error_body("fake provider: request body is not JSON"))
            return True
        self.requests.append(body)
        self.request_headers.append(request.headers)
        self.request_paths.append(request.path)
        self.request_queries.append(request.query)
        if not self._scripts:
            await conn.send_json(500, _error_body("fake provider: no script left"))
            return True
        script = self._scripts.popleft()
        if script._http_error is not None:
            error = script._http_error
            await conn.send_json(error.status, error.body, error.headers)
            return True
        try:
            return await self._stream(conn, script, str(body.get("model", "fake-model")))
        except PeerGone:
            self.disconnects += 1
            return False

    async def _stream(self, conn: Connection, script: Script, model: str) -> bool:
        chunks = _ChunkWriter(conn, script, model, self.chunk_delay)
        await conn.start_stream()
        await chunks.send({"role": "assistant", "content": ""})
        for step in script._steps:
            match step:
                case _Delta(delta):
                    await chunks.send(delta)
                case Raw(data):
                    await chunks.send_data(data)
                case _StreamedError(error):
                    await chunks.send_data(json.dumps({"error": error}))
                    await conn.end_stream()
                    return True
                case Pause() | Sleep():
                    await conn.hold(step)
                case Drop():
                    return False
        await chunks.send({}, finish_reason=script._finish_reason or script._default_finish_reason())
        if script._usage is not None:
            await chunks.send_usage(script._usage)
        await chunks.send_data("[DONE]")
        await conn.end_stream()
        return True

    @staticmethod
    def _model_entry(model_id: str) -> dict[str, Any]:
        return {"id": model_id, "object": "model", "created": 0, "owned_by": "agentforge-fake"}


class _ChunkWriter:
    """Wraps deltas in real `chat.completion.chunk` envelopes and paces them."""

    def __init__(self, conn: Connection, script: Script, model: str, delay: float) -> None:
        self._conn = conn
        self._script = script
        self._model = model
        self._delay = delay
        self._created = int(time.time())
        self._sent = 0

    async def send(self, delta: dict[str, Any], *, finish_reason: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        await self.send_data(json.dumps(self._envelope([choice])))

    async def send_usage(self, usage: dict[str, Any]) -> None:
        await self.send_data(json.dumps({**self._envelope([]), "usage": usage}))

    async def send_data(self, data: str) -> None:
        if self._sent and self._delay > 0:
            await self._conn.wait(None, self._delay)
        self._sent += 1
        await self._conn.send_event(data)

    def _envelope(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self._script.completion_id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
            "system_fingerprint": "fp_fake",
            "choices": choices,
        }


def _error_body(message: str, *, type: str = "server_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": None, "code": None}}


__all__ = ["FakeOpenAI", "Script", "call", "reply"]
