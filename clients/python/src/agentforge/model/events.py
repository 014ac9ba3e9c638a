"""Events: the envelope every bus event uses, and the names of the durable (sync) ones (KERNEL 2)."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final

from agentforge.model import ids

DEFAULT_TENANT: Final = "default"
SYSTEM_ACTOR: Final = "system"

# Who a change is made for: the HTTP layer sets the authenticated user here for the request's task
# (tasks it starts, such as a turn's runner, inherit it); the audit log records it with each entry.
CURRENT_ACTOR: ContextVar[str] = ContextVar("agentforge_actor", default=SYSTEM_ACTOR)


def current_actor() -> str:
    return CURRENT_ACTOR.get()


# Durable events: applied by the store's projector, appended to the event log with the
# session's next `seq`, and published only after they commit.
SESSION_CREATED: Final = "session.created"
SESSION_UPDATED: Final = "session.updated"
SESSION_DELETED: Final = "session.deleted"
MESSAGE_UPDATED: Final = "message.updated"
MESSAGE_REMOVED: Final = "message.removed"
PART_UPDATED: Final = "message.part.updated"
PART_REMOVED: Final = "message.part.removed"
# Interaction records: a permission request and its decision, and a session's todo list.
PERMISSION_ASKED: Final = "permission.asked"
PERMISSION_REPLIED: Final = "permission.replied"
TODO_UPDATED: Final = "todo.updated"

DURABLE_TYPES: Final = frozenset(
    {
        SESSION_CREATED,
        SESSION_UPDATED,
        SESSION_DELETED,
        MESSAGE_UPDATED,
        MESSAGE_REMOVED,
        PART_UPDATED,
        PART_REMOVED,
        PERMISSION_ASKED,
        PERMISSION_REPLIED,
        TODO_UPDATED,
    }
)

# Broadcast-only events.
PART_DELTA: Final = "message.part.delta"
SESSION_STATUS: Final = "session.status"
SESSION_IDLE: Final = "session.idle"
SESSION_ERROR: Final = "session.error"
SERVER_CONNECTED: Final = "server.connected"
SERVER_HEARTBEAT: Final = "server.heartbeat"
# Sent as the last event to a subscriber that fell too far behind and was cut off.
STREAM_LAGGED: Final = "stream.lagged"
# Sent as the last event to a subscriber whose credentials lapsed (key revoked, token expired).
STREAM_UNAUTHORIZED: Final = "stream.unauthorized"
# Sent instead of a replay when the resume point is one the event log no longer holds (pruned) or
# never held (ahead of it): `{"position": <current>, "reason": "pruned" | "ahead"}`; the client
# refetches its state and continues from `position`.
STREAM_RESET: Final = "stream.reset"
# Sent as the last event to every subscriber when the server shuts down: reconnect (to another
# instance, or this one once restarted) and resume with Last-Event-ID.
SERVER_SHUTDOWN: Final = "server.shutdown"


@dataclass(slots=True)
class Event:
    """One bus event. `seq` (per session) and `position` (per tenant) are set on durable events once
    they have committed."""

    type: str
    properties: dict[str, Any]
    session_id: str | None = None
    tenant_id: str = DEFAULT_TENANT
    seq: int | None = None
    # Not part of the wire shape or the event log: read by the audit log when the event is written.
    actor: str = field(default_factory=current_actor)
    id: str = field(default_factory=lambda: ids.ascending("evt"))
    position: int | None = None

    @property
    def durable(self) -> bool:
        return self.type in DURABLE_TYPES

    def envelope(self) -> dict[str, Any]:
        """The JSON object clients receive: `{id, type, properties}`."""
        return {"id": self.id, "type": self.type, "properties": self.properties}
