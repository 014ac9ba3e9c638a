"""The AWS event-stream decoder: framing, header types, checksums, incremental feeding, exceptions."""

from __future__ import annotations

import base64
import json
import struct
import uuid
import zlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from botocore.eventstream import EventStreamBuffer

from agentforge.llm.aws_eventstream import (
    AwsStreamException,
    EventStreamDecoder,
    EventStreamError,
    EventStreamMessage,
    messages,
    raise_for_exception,
)
from tests.fakes.eventstream import (
    chunk_message,
    encode_header,
    encode_message,
    exception_message,
)

WHEN = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
ID = uuid.UUID("12345678-1234-5678-1234-567812345678")
ALL_TYPES = b"".join(
    [
        encode_header("yes", True),
        encode_header("no", False),
        encode_header("b", -5, int_type="byte"),
        encode_header("s", 3000, int_type="short"),
        encode_header("i", -70000, int_type="integer"),
        encode_header("l", 2**40, int_type="long"),
        encode_header("raw", b"\x00\xff"),
        encode_header(":event-type", "chunk"),
        encode_header("when", WHEN),
        encode_header("id", ID),
    ]
)


def test_decodes_every_header_type_and_the_payload() -> None:
    frame = encode_message(ALL_TYPES, b'{"hello": 1}')
    [message] = EventStreamDecoder().feed(frame)
    assert message.payload == b'{"hello": 1}'
    assert message.headers == {
        "yes": True,
        "no": False,
        "b": -5,
        "s": 3000,
        "i": -70000,
        "l": 2**40,
        "raw": b"\x00\xff",
        ":event-type": "chunk",
        "when": WHEN,
        "id": ID,
    }
    assert message.event_type == "chunk" and message.header("missing") == ""


def test_the_test_encoder_agrees_with_botocore() -> None:
    """An independent decoder accepts our frames, so the decoder is not only checked against itself."""
    buffer = EventStreamBuffer()
    buffer.add_data(encode_message(ALL_TYPES, b"payload") + chunk_message({"type": "ping"}))
    first, second = list(buffer)
    assert first.payload == b"payload" and first.headers["l"] == 2**40 and first.headers["id"] == ID.bytes
    assert second.headers[":event-type"] == "chunk"


def test_messages_split_at_every_byte_and_joined_in_one_chunk() -> None:
    frames = [chunk_message({"type": "ping", "n": n}) for n in range(3)]
    body = b"".join(frames)
    decoder = EventStreamDecoder()
    byte_by_byte = [m for i in range(len(body)) for m in decoder.feed(body[i : i + 1])]
    decoder.close()
    all_at_once = EventStreamDecoder().feed(body)
    assert byte_by_byte == all_at_once
    events = [json.loads(base64.b64decode(json.loads(m.payload)["bytes"])) for m in all_at_once]
    assert events == [{"type": "ping", "n": n} for n in range(3)]


def test_empty_headers_and_payload() -> None:
    [message] = EventStreamDecoder().feed(encode_message({}, b""))
    assert message == EventStreamMessage({}, b"")


def test_prelude_checksum_mismatch_is_an_error() -> None:
    frame = bytearray(encode_message({":message-type": "event"}, b"x"))
    frame[9] ^= 0x01  # inside the prelude CRC
    with pytest.raises(EventStreamError, match="prelude checksum"):
        EventStreamDecoder().feed(bytes(frame))


def test_message_checksum_mismatch_is_an_error() -> None:
    frame = bytearray(encode_message({":message-type": "event"}, b"payload"))
    frame[-6] ^= 0x20  # a payload byte
    with pytest.raises(EventStreamError, match="message checksum"):
        EventStreamDecoder().feed(bytes(frame))


def test_headers_longer_than_the_message_are_an_error() -> None:
    prelude = struct.pack(">II", 16, 100)
    frame = prelude + struct.pack(">I", zlib.crc32(prelude))
    with pytest.raises(EventStreamError, match="cannot hold"):
        EventStreamDecoder().feed(frame)


def test_unknown_header_type_is_an_error() -> None:
    bad = struct.pack(">B", 1) + b"x" + struct.pack(">B", 42)
    with pytest.raises(EventStreamError, match="header value type 42"):
        EventStreamDecoder().feed(encode_message(bad, b""))


def test_header_running_past_the_headers_is_an_error() -> None:
    bad = struct.pack(">B", 1) + b"x" + struct.pack(">BH", 7, 50) + b"short"
    with pytest.raises(EventStreamError, match="Malformed"):
        EventStreamDecoder().feed(encode_message(bad, b""))


def test_body_ending_inside_a_message_is_an_error() -> None:
    frame = chunk_message({"type": "ping"})
    decoder = EventStreamDecoder()
    assert decoder.feed(frame + frame[:20]) != []
    with pytest.raises(EventStreamError, match="ended inside a message"):
        decoder.close()


async def test_messages_over_an_async_byte_stream() -> None:
    body = chunk_message({"type": "a"}) + chunk_message({"type": "b"})

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 7):
            yield body[i : i + 7]

    decoded = [m async for m in messages(chunks())]
    assert [m.message_type for m in decoded] == ["event", "event"]


async def test_messages_raises_on_a_truncated_body() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield chunk_message({"type": "a"})[:-1]

    with pytest.raises(EventStreamError):
        _ = [m async for m in messages(chunks())]


def test_exception_message_raises_with_its_type_and_message() -> None:
    [message] = EventStreamDecoder().feed(exception_message("throttlingException", "Too many requests"))
    with pytest.raises(AwsStreamException) as caught:
        raise_for_exception(message)
    assert caught.value.exception_type == "throttlingException"
    assert caught.value.message == "Too many requests"
    assert caught.value.payload == b'{"message": "Too many requests"}'


def test_error_message_raises_with_its_code() -> None:
    headers = {":message-type": "error", ":error-code": "InternalFailure", ":error-message": "boom"}
    [message] = EventStreamDecoder().feed(encode_message(headers, b""))  # type: ignore[arg-type]
    with pytest.raises(AwsStreamException, match="InternalFailure: boom"):
        raise_for_exception(message)


def test_event_message_does_not_raise() -> None:
    [message] = EventStreamDecoder().feed(chunk_message({"type": "ping"}))
    raise_for_exception(message)


def test_each_message_gets_its_own_headers_when_blocks_repeat_or_change() -> None:
    body = chunk_message({"type": "a"}) + exception_message("throttlingException", "slow") + chunk_message({})
    first, exception, last = EventStreamDecoder().feed(body)
    assert (first.message_type, exception.message_type, last.message_type) == ("event", "exception", "event")
    assert exception.header(":exception-type") == "throttlingException"
    first.headers[":event-type"] = "changed"
    assert last.event_type == "chunk"
