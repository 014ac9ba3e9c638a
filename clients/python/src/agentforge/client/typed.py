"""What the typed event streams of both clients share: reading an envelope as its model, the rules
for reconnecting after a drop, and reading the turn's final message."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pydantic import ValidationError

from agentforge.client.errors import EventStreamError
from agentforge.client.routes import Page
from agentforge.client.sse import ServerEvent
from agentforge.model.event_types import EVENT_TYPES, TypedEvent, parse_event
from agentforge.model.message import WithParts

log = logging.getLogger(__name__)

# Reconnects in a row without an event in between before the drop is the caller's problem.
MAX_RECONNECTS = 5
# Seconds before each reconnect (doubling).
FIRST_BACKOFF = 0.2


def typed(event: ServerEvent) -> TypedEvent | None:
    """The event's model; None for a type this SDK does not know (a newer server), which is skipped."""
    if event.type not in EVENT_TYPES:
        log.debug("skipping event of unknown type %s", event.type)
        return None
    try:
        return parse_event({"id": event.id, "type": event.type, "properties": event.properties})
    except ValidationError as exc:
        raise EventStreamError(f"{event.type} does not match its schema: {exc}") from exc


@dataclass
class Reconnects:
    """How a stream resumes: with Last-Event-ID when it follows one session (seqs are per session);
    a tenant-wide stream reconnects from now on."""

    session_id: str | None
    last_event_id: str | None = None
    attempts: int = 0

    def seen(self, last_event_id: str | None) -> None:
        self.attempts = 0
        if last_event_id is not None:
            self.last_event_id = last_event_id

    def next_delay(self) -> float | None:
        """Seconds to wait before the next attempt, or None when it is time to give up."""
        if self.attempts >= MAX_RECONNECTS:
            return None
        self.attempts += 1
        return float(FIRST_BACKOFF * 2 ** (self.attempts - 1))

    def resume_from(self) -> str | None:
        return self.last_event_id if self.session_id is not None else None


def final_message(page: Page, session_id: str) -> WithParts:
    if not page.items:
        raise EventStreamError(f"session {session_id} went idle without a message")
    return page.items[-1]
