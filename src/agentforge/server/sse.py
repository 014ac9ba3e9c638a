"""Server-Sent Events framing and the stream of one subscriber."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable

import orjson

from agentforge.bus import Subscription
from agentforge.model.events import SERVER_CONNECTED, SERVER_HEARTBEAT, STREAM_UNAUTHORIZED, Event

SSE_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
    "X-Content-Type-Options": "nosniff",
}

Authorized = Callable[[], Awaitable[bool]]
Encode = Callable[[Event], bytes]


def frame(event: Event) -> bytes:
    """`id:` carries the session seq of durable events, so a client can resume with Last-Event-ID."""
    return _framed(event.seq, event)


def position_frame(event: Event) -> bytes:
    """The tenant-wide stream's framing: `id:` is the event's tenant position."""
    return _framed(event.position, event)


def _framed(event_id: int | None, event: Event) -> bytes:
    data = orjson.dumps(event.envelope())
    if event_id is not None:
        return b"id: %d\ndata: %s\n\n" % (event_id, data)
    return b"data: %s\n\n" % data


def _plain(kind: str, encode: Encode) -> bytes:
    return encode(Event(type=kind, properties={}))


async def event_stream(
    subscription: Subscription,
    *,
    heartbeat_seconds: float,
    replay: AsyncIterable[Event] | None = None,
    replayed_through: int = 0,
    still_authorized: Authorized | None = None,
    encode: Encode = frame,
) -> AsyncIterator[bytes]:
    """`server.connected`, then what `replay` yields, then live events with heartbeats.

    The subscription is taken before the replay is read (server/resume.py), so nothing falls between
    the two; live durable events at or before tenant position `replayed_through` (the replay covered
    them) are skipped. Every `heartbeat_seconds`
    (busy or idle) `still_authorized` is asked again; once it says no, a last `stream.unauthorized`
    event is sent and the stream ends. `encode` frames each event (opencode's `/global/event` wraps
    them in an envelope of its own).
    """
    try:
        yield _plain(SERVER_CONNECTED, encode)
        if replay is not None:
            async for event in replay:
                yield encode(event)
        loop = asyncio.get_running_loop()
        next_check = loop.time() + heartbeat_seconds
        while True:
            batch = await subscription.next_batch(timeout=heartbeat_seconds)
            if batch is None:
                return
            due = not batch or loop.time() >= next_check
            if still_authorized is not None and due:
                if not await still_authorized():
                    yield _plain(STREAM_UNAUTHORIZED, encode)
                    return
                next_check = loop.time() + heartbeat_seconds
            if not batch:
                yield _plain(SERVER_HEARTBEAT, encode)
                continue
            chunk = b"".join(encode(e) for e in batch if not _already_sent(e, replayed_through))
            if chunk:
                yield chunk
    finally:
        subscription.close()


def _already_sent(event: Event, replayed_through: int) -> bool:
    return event.position is not None and event.position <= replayed_through
