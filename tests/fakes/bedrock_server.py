"""A wire-level fake of the Amazon Bedrock runtime streaming Anthropic models.

`POST /model/{modelId}/invoke-with-response-stream` must be SigV4-signed (`Authorization:
AWS4-HMAC-SHA256 Credential=...` and `X-Amz-Date`; the signature itself is not verified), else HTTP 403
as Bedrock answers. The body is the Messages request without `model` and `stream`. The answer is an AWS
event stream (`application/vnd.amazon.eventstream`): every Anthropic stream event of the script (the
`AnthropicScript` of the Anthropic fake) as a `chunk` event whose `bytes` is the event JSON in base64.
A script's `error_event(message, type=...)` becomes an `exception` message of that type, as Bedrock
ends a failed stream; `error_status` bodies are Bedrock's `{"message": ...}` (see `http_error`).

    async with FakeBedrock() as fake:
        fake.enqueue(AnthropicScript().text("Hello"), throttled())
        ...  # base_url=fake.base_url, region and dummy AWS keys in the provider options
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from .anthropic_server import AnthropicScript, FakeAnthropic, _EventWriter
from .eventstream import chunk_message, encode_message, exception_message
from .http11 import Connection, Request

EVENTSTREAM = "application/vnd.amazon.eventstream"
_ROUTE = re.compile(r"/model/([^/]+)/invoke-with-response-stream")
_CREDENTIAL = re.compile(r"Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request")
_ERROR_TYPE_SUFFIX = ":http://internal.amazon.com/coral/com.amazon.bedrock/"


@dataclass(frozen=True, slots=True)
class SignedRequest:
    """What the SigV4 `Authorization` header of a request says."""

    access_key_id: str
    date: str
    region: str
    service: str
    signed_headers: list[str]


def throttled(message: str = "Too many requests, please wait before trying again.") -> AnthropicScript:
    """A stream that fails at once with a `throttlingException` message."""
    return AnthropicScript().error_event(message, type="throttlingException")


def http_error(
    status: int, exception_type: str, message: str, headers: dict[str, str] | None = None
) -> AnthropicScript:
    """An HTTP error as Bedrock sends it: `{"message"}` and the type in `x-amzn-ErrorType`."""
    all_headers = {"x-amzn-ErrorType": f"{exception_type}{_ERROR_TYPE_SUFFIX}", **(headers or {})}
    return AnthropicScript().error_status(status, {"message": message}, all_headers)


class FakeBedrock(FakeAnthropic):
    """`base_url` is the endpoint origin (the SDK appends `/model/...`). `frame_split` > 0 writes every
    frame in HTTP chunks of that many bytes, so frames straddle reads as they may on the network."""

    base_path = ""

    def __init__(self) -> None:
        super().__init__()
        self.model_ids: list[str] = []  # the model id of each routed request, URL-decoded
        self.frame_split = 0
        self.corrupt_frame: int | None = None  # flip a payload byte of this frame (0-based) of a stream

    def signature(self, index: int) -> SignedRequest:
        """The SigV4 credential scope of request `index` (it passed the signing check)."""
        headers = self.request_headers[index]
        authorization = headers["authorization"]
        match = _CREDENTIAL.search(authorization)
        assert match is not None, authorization
        signed = re.search(r"SignedHeaders=([^,]+)", authorization)
        return SignedRequest(
            access_key_id=match.group(1),
            date=match.group(2),
            region=match.group(3),
            service=match.group(4),
            signed_headers=signed.group(1).split(";") if signed else [],
        )

    def _routed(self, request: Request) -> bool:
        return request.method == "POST" and _ROUTE.fullmatch(request.path) is not None

    def _model(self, request: Request, body: dict[str, Any]) -> str:
        match = _ROUTE.fullmatch(request.path)
        assert match is not None
        model_id = unquote(match.group(1))
        self.model_ids.append(model_id)
        return model_id

    async def _authorized(self, conn: Connection, request: Request) -> bool:
        authorization = request.headers.get("authorization", "")
        if authorization.startswith("AWS4-HMAC-SHA256 ") and "x-amz-date" in request.headers:
            return True
        await conn.send_json(
            403,
            {"message": "Missing Authentication Token"},
            {"x-amzn-ErrorType": f"MissingAuthenticationTokenException{_ERROR_TYPE_SUFFIX}"},
        )
        return False

    async def _send_error(self, conn: Connection, status: int, message: str) -> None:
        await conn.send_json(status, {"message": message})

    def _writer(self, conn: Connection) -> _EventWriter:
        return _FrameWriter(conn, self.chunk_delay, self.frame_split, self.corrupt_frame)


class _FrameWriter(_EventWriter):
    """Writes each event as an event-stream `chunk` message."""

    content_type = EVENTSTREAM

    def __init__(self, conn: Connection, delay: float, split: int, corrupt: int | None) -> None:
        super().__init__(conn, delay)
        self._split = split
        self._corrupt = corrupt
        self._frames = 0

    async def send_error(self, data: dict[str, Any]) -> None:
        error = data["error"]
        await self._frame(exception_message(str(error["type"]), str(error["message"])))

    async def send_raw(self, data: str) -> None:
        """A `chunk` whose `bytes` decode to `data` verbatim (e.g. not JSON)."""
        payload = b'{"bytes": "%s"}' % base64.b64encode(data.encode())
        headers: dict[str, Any] = {":event-type": "chunk", ":message-type": "event"}
        await self._frame(encode_message(headers, payload))

    async def _write(self, name: str, data: str) -> None:
        await self._frame(chunk_message(data))

    async def _frame(self, frame: bytes) -> None:
        if self._frames == self._corrupt:
            damaged = bytearray(frame)
            damaged[-5] ^= 0x01  # the last payload byte: only the message checksum can catch it
            frame = bytes(damaged)
        self._frames += 1
        size = self._split or len(frame)
        for start in range(0, len(frame), size):
            await self._conn.send_chunk(frame[start : start + size])


__all__ = ["FakeBedrock", "SignedRequest", "http_error", "throttled"]
