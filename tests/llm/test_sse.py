"""Server-sent event data from raw body bytes, however the body is cut into chunks."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentforge.llm.sse import SseSplitter, sse_data


def _split(body: bytes, cuts: list[int]) -> list[bytes]:
    splitter = SseSplitter()
    events: list[bytes] = []
    for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True):
        events.extend(splitter.feed(body[start:end]))
    return events + splitter.finish()


BODY = (
    b": keep-alive comment\r\n"
    b"event: chunk\r\n"
    b'data: {"a": 1}\r\n'
    b"\r\n"
    b'data:{"b": "x\xe2\x80\xa8y"}\n'  # no space after the colon; U+2028 raw inside the string
    b"\n"
    b"data: first line\r"
    b"data: second line\r"
    b"\r"
    b"id: 7\n"
    b'data: {"last": true}'  # the body ends without a blank line
)
EXPECTED = [b'{"a": 1}', b'{"b": "x\xe2\x80\xa8y"}', b"first line\nsecond line", b'{"last": true}']


def test_events_from_one_chunk() -> None:
    assert _split(BODY, []) == EXPECTED


@pytest.mark.parametrize("cut", range(1, len(BODY)))
def test_events_whatever_the_chunk_boundary(cut: int) -> None:
    """Including a CRLF cut between its CR and its LF, which must not end an event early."""
    assert _split(BODY, [cut]) == EXPECTED


def test_events_from_single_bytes() -> None:
    assert _split(BODY, list(range(1, len(BODY)))) == EXPECTED


async def test_async_iteration_over_body_chunks() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(BODY), 5):
            yield BODY[i : i + 5]

    assert [data async for data in sse_data(chunks())] == EXPECTED


@pytest.mark.parametrize(
    "chunks",
    [
        [b'data: {"a": 1}\n\n', b'data: {"b": 2}\n\n'],  # one whole event per chunk, the usual case
        [b'data: {"a": 1}\n\ndata: {"b": 2}\n\n'],  # two in one chunk
        [b'data: {"a"', b": 1}\n\n", b'data: {"b": 2}\n\n'],  # a whole event right after a cut one
        [b'data: {"a": 1}\r\n\r\n', b'data: {"b": 2}\n\n'],  # CRLF
        [b'data: {"a": 1}\n', b'\ndata: {"b": 2}\n\n'],  # the blank line in the next chunk
        [b"data: {\n", b'data: "a": 1}\n\n', b'data: {"b": 2}\n\n'],  # two data lines, one event
    ],
)
def test_whole_events_and_their_neighbours(chunks: list[bytes]) -> None:
    splitter = SseSplitter()
    events = [data for chunk in chunks for data in splitter.feed(chunk)] + splitter.finish()
    assert events[-1] == b'{"b": 2}'
    assert events[:-1] in ([b'{"a": 1}'], [b'{\n"a": 1}'])
