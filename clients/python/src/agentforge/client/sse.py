"""A small Server-Sent Events reader for `GET /event`.

`LineSplitter` cuts the byte stream into lines at CR, LF or CRLF only (not at the other characters
`str.splitlines` breaks on, such as U+2028, which JSON may carry unescaped). `SSEDecoder` turns lines
into frames following the WHATWG event-stream rules (comments, `field: value` with one optional space,
multi-line `data`, `id` remembered across frames). `to_server_event` reads our envelope
`{"id", "type", "properties"}` out of a frame; the frame's own `id:` line, which the server sends only
for durable events, is the event's `seq`.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentforge.client.errors import EventStreamError

_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SSEFrame:
    """One dispatched SSE frame. `id` is the `id:` line of this frame, if it had one."""

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


@dataclass(frozen=True, slots=True)
class ServerEvent:
    """One bus event as a client sees it."""

    id: str
    type: str
    properties: dict[str, Any] = field(default_factory=dict)
    seq: int | None = None

    @property
    def session_id(self) -> str | None:
        value = self.properties.get("sessionID")
        return value if isinstance(value, str) else None


class LineSplitter:
    """Splits a byte stream into SSE lines; a line may span chunks, and so may a CRLF."""

    def __init__(self) -> None:
        self._pending = b""
        self._skip_lf = False

    def split(self, chunk: bytes) -> list[str]:
        if not chunk:
            return []
        if self._skip_lf and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._skip_lf = False
        data = self._pending + chunk
        lines: list[str] = []
        start = 0
        for match in _LINE_END.finditer(data):
            end = match.end()
            if match.group() == b"\r" and end == len(data):
                # A CR at the end of a chunk may be the first half of a CRLF.
                self._skip_lf = True
            lines.append(data[start : match.start()].decode("utf-8", errors="replace"))
            start = end
        self._pending = data[start:]
        return lines


class SSEDecoder:
    """Feed it lines (without their line ending); it returns a frame at each blank line."""

    def __init__(self) -> None:
        self.last_event_id: str | None = None
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, line: str) -> SSEFrame | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        self._apply_field(name, value)
        return None

    def _apply_field(self, name: str, value: str) -> None:
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            # The spec ignores ids containing NUL: they could not be sent back in a header.
            if "\0" not in value:
                self._id = value
                self.last_event_id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)

    def _dispatch(self) -> SSEFrame | None:
        frame = None
        if self._data:
            frame = SSEFrame(
                data="\n".join(self._data), event=self._event or "message", id=self._id, retry=self._retry
            )
        self._data, self._event, self._id, self._retry = [], "", None, None
        return frame


def to_server_event(frame: SSEFrame) -> ServerEvent:
    """Decodes our JSON envelope; a frame that is not one is a broken stream, not something to skip."""
    try:
        envelope = orjson.loads(frame.data)
    except orjson.JSONDecodeError as exc:
        raise EventStreamError(f"event data is not JSON: {frame.data[:200]!r}") from exc
    if not isinstance(envelope, dict):
        raise EventStreamError(f"event data is not an object: {frame.data[:200]!r}")
    event_type = envelope.get("type") or (frame.event if frame.event != "message" else None)
    if not isinstance(event_type, str):
        raise EventStreamError(f"event has no type: {frame.data[:200]!r}")
    properties = envelope.get("properties")
    return ServerEvent(
        id=str(envelope.get("id", "")),
        type=event_type,
        properties=properties if isinstance(properties, dict) else {},
        seq=_seq_of(frame.id),
    )


def _seq_of(frame_id: str | None) -> int | None:
    if frame_id is None:
        return None
    try:
        return int(frame_id)
    except ValueError:
        return None


def iter_events(chunks: Iterable[bytes], decoder: SSEDecoder | None = None) -> Iterator[ServerEvent]:
    decoder = decoder or SSEDecoder()
    splitter = LineSplitter()
    for chunk in chunks:
        for line in splitter.split(chunk):
            frame = decoder.feed(line)
            if frame is not None:
                yield to_server_event(frame)


async def aiter_events(
    chunks: AsyncIterable[bytes], decoder: SSEDecoder | None = None
) -> AsyncIterator[ServerEvent]:
    decoder = decoder or SSEDecoder()
    splitter = LineSplitter()
    async for chunk in chunks:
        for line in splitter.split(chunk):
            frame = decoder.feed(line)
            if frame is not None:
                yield to_server_event(frame)
