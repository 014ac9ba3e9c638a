"""Resuming `GET /event`: where a client resumes from, and what it missed.

Two numberings: a session's stream is resumed by the session's `seq`, the tenant-wide stream by
the tenant's `position` (each durable event carries both). The route subscribes to the bus first and
notes the tenant position that subscription starts after (the "cut"); the replay then reads the log
from the client's point up to the cut, in pages, and the subscription delivers everything after it:
no gap, no duplicate, and no cap on how much is replayed. A point the log does not hold (pruned, or
ahead of it) gets one `stream.reset` event with the current point instead of a replay. After the
replay come snapshots of the parts streaming right now (bus/inflight.py), taken with the
subscription, so the deltas that follow continue them exactly.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Final, Protocol

from agentforge.model.events import STREAM_RESET, Event
from agentforge.session.errors import InvalidInputError

PAGE_SIZE: Final = 500
MAX_CURSOR: Final = 2**63 - 1  # what the store's BIGINT columns hold

# ASCII digits only: int() would also take "+1", " 1", "1_000" and other scripts' digits.
_DIGITS = re.compile(r"[0-9]{1,19}")


class EventLog(Protocol):
    """The store's event-log reads, as a resume uses them."""

    async def events_after(
        self,
        tenant_id: str,
        session_id: str | None,
        after: int,
        limit: int = 1000,
        *,
        up_to_position: int | None = None,
    ) -> list[Event]: ...

    async def log_span(
        self, tenant_id: str, session_id: str | None, *, up_to_position: int | None = None
    ) -> tuple[int, int]: ...


def parse_cursor(after: str | None, last_event_id: str | None) -> int | None:
    """The resume point (`after` wins over `Last-Event-ID`); InvalidInputError naming the field."""
    if after is not None:
        return _parse("after", after)
    if last_event_id is not None and last_event_id.strip():
        return _parse("Last-Event-ID", last_event_id.strip())
    return None


def _parse(name: str, raw: str) -> int:
    if _DIGITS.fullmatch(raw) is None or int(raw) > MAX_CURSOR:
        raise InvalidInputError(
            f"{name} must be an event id: an integer from 0 to {MAX_CURSOR}, got {raw[:40]!r}"
        )
    return int(raw)


@dataclass(frozen=True, slots=True)
class Resume:
    """What one stream replays before its live events: the log from `cursor` to `cut`, then `inflight`."""

    log: EventLog
    tenant_id: str
    session_id: str | None  # None: the tenant-wide stream, numbered by position
    cursor: int | None
    cut: int  # tenant position the live subscription starts after
    inflight: list[Event]

    async def events(self) -> AsyncIterator[Event]:
        if self.cursor is not None:
            async for event in self._missed(self.cursor):
                yield event
        for event in self.inflight:
            yield event

    async def _missed(self, cursor: int) -> AsyncIterator[Event]:
        first, last = await self.log.log_span(self.tenant_id, self.session_id)
        if cursor > last:
            yield await self._reset("ahead")
            return
        if first > cursor + 1:
            yield await self._reset("pruned")
            return
        after = cursor
        while True:
            page = await self.log.events_after(
                self.tenant_id, self.session_id, after, PAGE_SIZE, up_to_position=self.cut
            )
            for event in page:
                yield event
            if len(page) < PAGE_SIZE:
                return
            after = self.key(page[-1])

    def key(self, event: Event) -> int:
        """The event's id on this stream."""
        value = event.position if self.session_id is None else event.seq
        return value or 0

    async def _reset(self, reason: str) -> Event:
        if self.session_id is None:
            current = self.cut
        else:
            _, current = await self.log.log_span(self.tenant_id, self.session_id, up_to_position=self.cut)
        properties: dict[str, object] = {"position": current, "reason": reason}
        if self.session_id is not None:
            properties["sessionID"] = self.session_id
        reset = Event(
            type=STREAM_RESET, properties=properties, session_id=self.session_id, tenant_id=self.tenant_id
        )
        # Its SSE id is the current point, so a client that drops again resumes from there.
        if self.session_id is None:
            reset.position = current
        else:
            reset.seq = current
        return reset
