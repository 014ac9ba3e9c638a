"""Removing messages and parts and replacing a part (KERNEL 1.1), refused while the session is busy.

Each is one durable event (`message.removed`, `message.part.removed`, `message.part.updated`); the
projector deletes or replaces the rows and moves the session's running totals by the usage of any
step-finish part involved.
"""

from __future__ import annotations

from agentforge.model.events import MESSAGE_REMOVED, PART_REMOVED, Event
from agentforge.model.part import Part
from agentforge.session.errors import InvalidInputError, NotFoundError
from agentforge.session.service import SessionService


class MessageEdits:
    """Bound to one tenant through its session service."""

    def __init__(self, sessions: SessionService) -> None:
        self.sessions = sessions
        self.services = sessions.services
        self.tenant_id = sessions.tenant_id

    async def _writable(self, session_id: str, message_id: str) -> None:
        """The session exists and is idle, and the message is one of its own."""
        await self.sessions.get(session_id)
        await self.services.runners.assert_idle_anywhere(session_id)
        await self.sessions.message(session_id, message_id)

    async def _existing_part(self, session_id: str, message_id: str, part_id: str) -> Part:
        part = await self.services.store.get_part(self.tenant_id, session_id, message_id, part_id)
        if part is None:
            raise NotFoundError(f"Part not found: {part_id}")
        return part

    def _event(self, kind: str, session_id: str, **properties: str) -> Event:
        return Event(
            type=kind,
            properties={"sessionID": session_id, **properties},
            session_id=session_id,
            tenant_id=self.tenant_id,
        )

    async def delete_message(self, session_id: str, message_id: str) -> None:
        """Remove the message and its parts."""
        await self._writable(session_id, message_id)
        await self.services.store.write(self._event(MESSAGE_REMOVED, session_id, messageID=message_id))

    async def delete_part(self, session_id: str, message_id: str, part_id: str) -> None:
        await self._writable(session_id, message_id)
        await self._existing_part(session_id, message_id, part_id)
        event = self._event(PART_REMOVED, session_id, messageID=message_id, partID=part_id)
        await self.services.store.write(event)

    async def update_part(self, session_id: str, message_id: str, part_id: str, part: Part) -> Part:
        """Replace the stored part with `part`, whose ids must be the path's and whose type must not
        change (the projector counts usage by a part's kind)."""
        if (part.id, part.message_id, part.session_id) != (part_id, message_id, session_id):
            raise InvalidInputError(
                "The part's id, messageID and sessionID must match the path "
                f"(got {part.id}, {part.message_id}, {part.session_id})"
            )
        await self._writable(session_id, message_id)
        stored = await self._existing_part(session_id, message_id, part_id)
        if stored.type != part.type:
            raise InvalidInputError(f"A part's type cannot change (stored {stored.type}, got {part.type})")
        await self.services.events(self.tenant_id).update_part(part)
        return part
