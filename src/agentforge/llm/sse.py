"""The `data` of each server-sent event, straight from a response body's bytes.

Working on bytes skips decoding every line to `str` (orjson parses bytes), and lines end only at LF, CR or
CRLF as the SSE format says: text line splitters (`str.splitlines`, httpx's `aiter_lines`) also break at
U+2028, U+2029 and U+0085, which a provider may leave unescaped inside a JSON string.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

_LINE_ENDS = (b"\n", b"\r")


class SseSplitter:
    """Feeds body chunks, returns the events they complete (their `data` lines joined with LF)."""

    def __init__(self) -> None:
        self._rest = b""  # an unfinished line, or a CR that may be half of a CRLF
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        if (
            not self._rest
            and not self._data
            and chunk.startswith(b"data: ")
            and chunk.find(b"\n") == len(chunk) - 2
            and chunk.endswith(b"\n\n")
            and b"\r" not in chunk
        ):
            return [chunk[6:-2]]  # the usual chunk: one whole event of one LF-ended `data: ` line
        buffer = self._rest + chunk
        held = b"\r" if buffer.endswith(b"\r") else b""
        complete = buffer[: len(buffer) - len(held)]
        lines = complete.splitlines()  # bytes split at LF, CR and CRLF only
        if lines and not complete.endswith(_LINE_ENDS):
            self._rest = lines.pop() + held
        else:
            self._rest = held
        return self._events(lines)

    def finish(self) -> list[bytes]:
        """The event the body ended in without a blank line, if any."""
        rest, self._rest = self._rest, b""
        events = self._events(rest.splitlines())
        if self._data:
            events.append(b"\n".join(self._data))
            self._data.clear()
        return events

    def _events(self, lines: list[bytes]) -> list[bytes]:
        events: list[bytes] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append(b"\n".join(self._data))
                    self._data.clear()
            elif line.startswith(b"data:"):
                self._data.append(line[6:] if line.startswith(b"data: ") else line[5:])
            # `event:`, `id:`, `retry:` and `:` comments carry nothing we use
        return events


async def sse_data(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The `data` of each event in a body given as byte chunks of any size."""
    splitter = SseSplitter()
    async for chunk in chunks:
        for data in splitter.feed(chunk):
            yield data
    for data in splitter.finish():
        yield data
