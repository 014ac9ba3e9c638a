"""AWS event-stream encoding for the fakes and tests (the decoder under test is
`agentforge.llm.aws_eventstream`). Written from the format, independently of the decoder."""

from __future__ import annotations

import base64
import json
import struct
import uuid
import zlib
from datetime import datetime
from typing import Any

HeaderValue = bool | int | bytes | str | datetime | uuid.UUID

# Integer header values take the smallest of these that fits unless a type is forced.
INT_TYPES = {"byte": (2, ">b"), "short": (3, ">h"), "integer": (4, ">i"), "long": (5, ">q")}


def encode_header(name: str, value: HeaderValue, *, int_type: str = "integer") -> bytes:
    raw_name = name.encode()
    head = struct.pack(">B", len(raw_name)) + raw_name
    if isinstance(value, bool):
        return head + struct.pack(">B", 0 if value else 1)
    if isinstance(value, int):
        code, fmt = INT_TYPES[int_type]
        return head + struct.pack(">B", code) + struct.pack(fmt, value)
    if isinstance(value, bytes):
        return head + struct.pack(">BH", 6, len(value)) + value
    if isinstance(value, str):
        raw = value.encode()
        return head + struct.pack(">BH", 7, len(raw)) + raw
    if isinstance(value, datetime):
        return head + struct.pack(">Bq", 8, round(value.timestamp() * 1000))
    return head + struct.pack(">B", 9) + value.bytes


def encode_message(headers: dict[str, HeaderValue] | bytes, payload: bytes) -> bytes:
    """One framed message; `headers` may be pre-encoded bytes (to test odd value types)."""
    raw_headers = (
        headers
        if isinstance(headers, bytes)
        else b"".join(encode_header(name, value) for name, value in headers.items())
    )
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw_headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + raw_headers + payload
    return body + struct.pack(">I", zlib.crc32(body))


CHUNK_HEADERS = b"".join(
    encode_header(name, value)
    for name, value in {
        ":event-type": "chunk",
        ":content-type": "application/json",
        ":message-type": "event",
    }.items()
)


def chunk_message(event: dict[str, Any] | str) -> bytes:
    """A Bedrock `chunk` event carrying one Anthropic stream event (its JSON, base64 in `bytes`; `p`
    is the padding Bedrock adds)."""
    data = event if isinstance(event, str) else json.dumps(event)
    payload = b'{"bytes":"%s","p":"abcdefgh"}' % base64.b64encode(data.encode())
    return encode_message(CHUNK_HEADERS, payload)


def exception_message(exception_type: str, message: str) -> bytes:
    """An `exception` message, as Bedrock ends a stream that failed (e.g. `throttlingException`)."""
    headers: dict[str, HeaderValue] = {
        ":exception-type": exception_type,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return encode_message(headers, json.dumps({"message": message}).encode())
