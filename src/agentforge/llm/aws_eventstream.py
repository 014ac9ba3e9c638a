"""AWS event-stream decoding (`application/vnd.amazon.eventstream`), as Bedrock streams responses.

Each message is binary-framed:

    total length (uint32) | headers length (uint32) | prelude CRC32 (uint32)
    headers: name length (uint8) | name | value type (uint8) | value  (repeated)
    payload
    message CRC32 (uint32, over everything before it)

all big-endian. Messages arrive split and joined arbitrarily across HTTP chunks, so the decoder buffers
bytes and yields each message once it is whole and both checksums match. A message's `:message-type`
header says what it is: `event` (data), or `exception` / `error` (the service failed mid-stream), which
`raise_for_exception` turns into `AwsStreamException`.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

PRELUDE_LENGTH = 12  # total length, headers length, prelude CRC
CRC_LENGTH = 4
MIN_MESSAGE_LENGTH = PRELUDE_LENGTH + CRC_LENGTH
MAX_HEADERS_LENGTH = 128 * 1024  # the protocol's limits (as botocore enforces them)
MAX_PAYLOAD_LENGTH = 24 * 1024 * 1024

_PRELUDE = struct.Struct(">III")
_UINT32 = struct.Struct(">I")
_UINT16 = struct.Struct(">H")

HeaderValue = bool | int | bytes | str | datetime | uuid.UUID


class EventStreamError(Exception):
    """The bytes are not a valid event stream: a checksum mismatch, an impossible length, an unknown
    header type, or a body that ends inside a message."""


class AwsStreamException(Exception):
    """The service reported a failure inside the stream: an `exception` message (its
    `:exception-type` header, e.g. `throttlingException`, and a JSON payload with the message) or an
    `error` message (`:error-code` / `:error-message` headers)."""

    def __init__(self, exception_type: str, message: str, *, payload: bytes) -> None:
        super().__init__(f"{exception_type}: {message}")
        self.exception_type = exception_type
        self.message = message
        self.payload = payload


@dataclass(frozen=True, slots=True)
class EventStreamMessage:
    headers: dict[str, HeaderValue]
    payload: bytes

    def header(self, name: str) -> str:
        """A header as a string ("" when absent)."""
        value = self.headers.get(name)
        if value is None:
            return ""
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)

    @property
    def message_type(self) -> str:
        return self.header(":message-type")

    @property
    def event_type(self) -> str:
        return self.header(":event-type")


class EventStreamDecoder:
    """Incremental decoder: `feed` bytes as they arrive, get the messages completed so far."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        # Services repeat one header block on every event (Bedrock: `chunk`, JSON, `event`): the last
        # block is kept parsed instead of being parsed again.
        self._last_headers: tuple[bytes, dict[str, HeaderValue]] = (b"", {})

    def feed(self, data: bytes) -> list[EventStreamMessage]:
        self._buffer += data
        messages: list[EventStreamMessage] = []
        offset = 0
        while len(self._buffer) - offset >= PRELUDE_LENGTH:
            total_length, headers_length = _read_prelude(self._buffer, offset)
            if len(self._buffer) - offset < total_length:
                break  # the rest of this message is still on its way
            frame = bytes(self._buffer[offset : offset + total_length])
            messages.append(self._read_message(frame, headers_length))
            offset += total_length
        if offset:
            del self._buffer[:offset]
        return messages

    def close(self) -> None:
        """The body ended: anything still buffered is a message cut short."""
        if self._buffer:
            raise EventStreamError(f"Event stream ended inside a message ({len(self._buffer)} bytes left)")

    def _read_message(self, frame: bytes, headers_length: int) -> EventStreamMessage:
        (message_crc,) = _UINT32.unpack_from(frame, len(frame) - CRC_LENGTH)
        if zlib.crc32(memoryview(frame)[:-CRC_LENGTH]) != message_crc:
            raise EventStreamError("Event stream message checksum mismatch")
        headers_end = PRELUDE_LENGTH + headers_length
        raw_headers = frame[PRELUDE_LENGTH:headers_end]
        last_raw, last_headers = self._last_headers
        if raw_headers != last_raw:
            last_headers = _read_headers(raw_headers)
            self._last_headers = (raw_headers, last_headers)
        return EventStreamMessage(dict(last_headers), frame[headers_end:-CRC_LENGTH])


async def messages(chunks: AsyncIterator[bytes]) -> AsyncIterator[EventStreamMessage]:
    """The messages of an event-stream body read as byte chunks."""
    decoder = EventStreamDecoder()
    async for chunk in chunks:
        for message in decoder.feed(chunk):
            yield message
    decoder.close()


def raise_for_exception(message: EventStreamMessage) -> None:
    """Raise `AwsStreamException` when `message` reports a failure instead of carrying an event."""
    kind = message.message_type
    if kind == "exception":
        exception_type = message.header(":exception-type") or "UnknownException"
        raise AwsStreamException(exception_type, _payload_message(message.payload), payload=message.payload)
    if kind == "error":
        code = message.header(":error-code") or "UnknownError"
        text = message.header(":error-message") or _payload_message(message.payload)
        raise AwsStreamException(code, text, payload=message.payload)


def _payload_message(payload: bytes) -> str:
    """The `message` (or `Message`) of an exception's JSON payload, else the payload as text."""
    try:
        body: Any = orjson.loads(payload)
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, dict):
        text = body.get("message") or body.get("Message")
        if isinstance(text, str) and text:
            return text
    return payload.decode("utf-8", "replace").strip() or "Provider stream error"


def _read_prelude(buffer: bytearray, offset: int) -> tuple[int, int]:
    total_length, headers_length, prelude_crc = _PRELUDE.unpack_from(buffer, offset)
    if zlib.crc32(buffer[offset : offset + 8]) != prelude_crc:
        raise EventStreamError("Event stream prelude checksum mismatch")
    if headers_length > MAX_HEADERS_LENGTH:
        raise EventStreamError(f"Event stream headers too long: {headers_length} bytes")
    payload_length = total_length - headers_length - MIN_MESSAGE_LENGTH
    if payload_length < 0:
        raise EventStreamError(
            f"Event stream message length {total_length} cannot hold {headers_length} bytes of headers"
        )
    if payload_length > MAX_PAYLOAD_LENGTH:
        raise EventStreamError(f"Event stream payload too long: {payload_length} bytes")
    return total_length, headers_length


def _read_headers(data: bytes) -> dict[str, HeaderValue]:
    headers: dict[str, HeaderValue] = {}
    offset = 0
    try:
        while offset < len(data):
            name_length = data[offset]
            name_end = offset + 1 + name_length
            if name_end >= len(data):
                raise IndexError("header name runs past the headers")
            name = data[offset + 1 : name_end].decode("utf-8")
            offset = name_end
            value_type = data[offset]
            headers[name], offset = _read_value(value_type, data, offset + 1)
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise EventStreamError(f"Malformed event stream headers: {exc}") from None
    return headers


# Fixed-size header values: type -> (struct format, converter)
_FIXED: dict[int, tuple[struct.Struct, Any]] = {
    2: (struct.Struct(">b"), int),  # byte
    3: (struct.Struct(">h"), int),  # short
    4: (struct.Struct(">i"), int),  # integer
    5: (struct.Struct(">q"), int),  # long
    8: (struct.Struct(">q"), lambda ms: datetime.fromtimestamp(ms / 1000, UTC)),  # timestamp (ms)
}


def _read_value(value_type: int, data: bytes, offset: int) -> tuple[HeaderValue, int]:
    """One header value starting at `offset`, and the offset after it."""
    if value_type in (0, 1):  # bool true / bool false: no value bytes
        return value_type == 0, offset
    if value_type in _FIXED:
        fmt, convert = _FIXED[value_type]
        (raw,) = fmt.unpack_from(data, offset)
        return convert(raw), offset + fmt.size
    if value_type in (6, 7):  # byte array / string: uint16 length, then the bytes
        (length,) = _UINT16.unpack_from(data, offset)
        start = offset + _UINT16.size
        raw_bytes = data[start : start + length]
        if len(raw_bytes) != length:
            raise IndexError("header value runs past the headers")
        return (raw_bytes if value_type == 6 else raw_bytes.decode("utf-8")), start + length
    if value_type == 9:  # uuid
        raw_bytes = data[offset : offset + 16]
        if len(raw_bytes) != 16:
            raise IndexError("header value runs past the headers")
        return uuid.UUID(bytes=raw_bytes), offset + 16
    raise EventStreamError(f"Unknown event stream header value type {value_type}")
