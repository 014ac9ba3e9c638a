"""The three write intents the loop and processor use (ARCHITECTURE "The main chain").

`update_message` and `update_part` are durable: they become sync events that the store's writer
applies through the projector and publishes after commit. `part_delta` is broadcast only. Callers await
durability only where they need it (a new part before its deltas, the loop before it re-reads history);
otherwise they `submit` and move on, and the writer's ordering does the rest.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from agentforge.bus import Bus
from agentforge.model.events import (
    MESSAGE_UPDATED,
    PART_DELTA,
    PART_REMOVED,
    PART_UPDATED,
    SESSION_ERROR,
    Event,
)
from agentforge.model.message import AssistantMessage, UserMessage
from agentforge.model.part import PartBase
from agentforge.store.batch import GroupWriteError, StoreWriteError


class EventSink(Protocol):
    """The store's writer, as the session layer sees it."""

    def submit(self, event: Event, *, linger: float = 0.0) -> asyncio.Future[Event]: ...

    def submit_group(
        self, events: Sequence[Event], *, queue_prompt: str | None = None
    ) -> asyncio.Future[list[Event]]: ...

    def publish_after_writes(self, event: Event) -> None: ...

    def submit_checkpoint(self, tenant_id: str, part: dict[str, Any]) -> asyncio.Future[Any]: ...

    @property
    def commits_off_loop(self) -> bool: ...


def now_ms() -> int:
    return int(time.time() * 1000)


class MessageIdTakenError(Exception):
    def __init__(self, message_id: str) -> None:
        super().__init__(f"messageID {message_id} cannot be used: send a new msg_ id")


class PartIdTakenError(Exception):
    def __init__(self, part_id: str, field: str = "parts[].id") -> None:
        super().__init__(f"{field}: part id {part_id} cannot be used: send a new prt_ id")
        self.part_id = part_id


class SessionEvents:
    """Write intents for one tenant."""

    def __init__(self, sink: EventSink, bus: Bus, tenant_id: str) -> None:
        self._sink = sink
        self._bus = bus
        self.tenant_id = tenant_id

    def submit_message(
        self, info: UserMessage | AssistantMessage, *, linger: float = 0.0
    ) -> asyncio.Future[Event]:
        """`linger`: the write may wait that long (seconds) for the next one, to commit with it."""
        return self._sink.submit(self._message_event(info), linger=linger)

    async def update_message(self, info: UserMessage | AssistantMessage) -> None:
        await self.submit_message(info)

    async def write_new_message(self, info: UserMessage) -> None:
        """Write a message whose id a client chose; MessageIdTakenError when another session (of any
        tenant) holds that id. The same answer either way, so it reveals nothing of other tenants."""
        try:
            await self.update_message(info)
        except StoreWriteError:
            raise MessageIdTakenError(info.id) from None

    async def write_user_message(
        self,
        info: UserMessage,
        parts: Sequence[PartBase],
        *,
        chosen_id: bool,
        then: Sequence[Event] = (),
        submitted: Callable[[asyncio.Future[list[Event]]], None] | None = None,
        queue_prompt: bool = False,
    ) -> None:
        """Write a user message with all its parts in one transaction, or nothing.

        A client may have chosen the message's id (`chosen_id`) and its parts' ids: they must be new.
        One any row holds (this session's own messages and parts too, in any tenant) refuses the whole
        message with MessageIdTakenError or PartIdTakenError (the same answer whoever holds it, so it
        reveals nothing of other tenants). `then`: events written in the same transaction after the
        parts (the session's update), so a prompt costs one commit. `submitted` is told of the write as
        soon as it is queued, before it commits. `queue_prompt`: an accepted `prompt_async`, queued
        durably in the same commit (`Store.submit_group`).
        """
        events = [self._message_event(info), *(self._part_event(part) for part in parts), *then]
        written = self._sink.submit_group(events, queue_prompt=info.id if queue_prompt else None)
        if submitted is not None:
            submitted(written)
        try:
            # Shielded: a cancelled request does not un-submit a group the writer may be committing.
            await asyncio.shield(written)
        except GroupWriteError as exc:
            failed = next((i for i, event in enumerate(events) if event is exc.event), None)
            if failed is not None and 0 < failed <= len(parts):
                raise PartIdTakenError(parts[failed - 1].id) from None
            if failed == 0 and chosen_id:
                raise MessageIdTakenError(info.id) from None
            raise

    def _message_event(self, info: UserMessage | AssistantMessage) -> Event:
        return Event(
            type=MESSAGE_UPDATED,
            properties={"sessionID": info.session_id, "info": info.wire()},
            session_id=info.session_id,
            tenant_id=self.tenant_id,
        )

    def _part_event(self, part: PartBase) -> Event:
        return Event(
            type=PART_UPDATED,
            properties={"sessionID": part.session_id, "part": part.wire(), "time": now_ms()},
            session_id=part.session_id,
            tenant_id=self.tenant_id,
        )

    def submit_part(self, part: PartBase, *, linger: float = 0.0) -> asyncio.Future[Event]:
        """`linger`: as `submit_message`'s."""
        return self._sink.submit(self._part_event(part), linger=linger)

    @property
    def commits_off_loop(self) -> bool:
        """Whether waiting for a commit lets the writer run (store.writer: SQLite's thread)."""
        return self._sink.commits_off_loop

    def remove_part(self, part: PartBase) -> asyncio.Future[Event]:
        return self._sink.submit(
            Event(
                type=PART_REMOVED,
                properties={"sessionID": part.session_id, "messageID": part.message_id, "partID": part.id},
                session_id=part.session_id,
                tenant_id=self.tenant_id,
            )
        )

    async def update_part(self, part: PartBase) -> None:
        await self.submit_part(part)

    def checkpoint_part(self, part: PartBase) -> asyncio.Future[Any]:
        """Store a streaming part's content so far, without an event (session/checkpoint.py)."""
        return self._sink.submit_checkpoint(self.tenant_id, part.wire())

    def part_delta(self, part: PartBase, field: str, delta: str) -> None:
        # Ordered behind pending writes, so it never overtakes the part's first full update.
        self._sink.publish_after_writes(
            Event(
                type=PART_DELTA,
                properties={
                    "sessionID": part.session_id,
                    "messageID": part.message_id,
                    "partID": part.id,
                    "field": field,
                    "delta": delta,
                },
                session_id=part.session_id,
                tenant_id=self.tenant_id,
            )
        )

    def session_error(self, session_id: str | None, error: dict[str, Any]) -> None:
        self._bus.publish(
            Event(
                type=SESSION_ERROR,
                properties={"sessionID": session_id, "error": error} if session_id else {"error": error},
                session_id=session_id,
                tenant_id=self.tenant_id,
            )
        )
