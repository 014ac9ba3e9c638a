"""What a revert leaves until the next prompt: the hidden messages, and removing them for good.

A session reverted to a message keeps the messages from that point on (clients hide them, and
`/unrevert` brings them back) until the next prompt, shell command or command arrives: then they are
removed (`message.removed`, or `message.part.removed` for the parts of a message reverted from one of
its parts on) and the session's `revert` is cleared, before the new message is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentforge.model.events import MESSAGE_REMOVED, PART_REMOVED, SESSION_UPDATED, Event
from agentforge.model.message import AssistantMessage, WithParts
from agentforge.model.part import PatchPart
from agentforge.model.session import Session
from agentforge.session.events import now_ms
from agentforge.session.services import SessionServices


class RevertPointNotFoundError(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class RevertPoint:
    """Everything from message `index` of the history on is reverted; with `part_id`, only that
    message's parts from `part_id` on (and every later message)."""

    index: int
    message_id: str
    part_id: str | None = None

    def reverted_parts(self, history: Sequence[WithParts]) -> list[tuple[WithParts, list[str]]]:
        """Each message touched by the revert, with the ids of its reverted parts."""
        found: list[tuple[WithParts, list[str]]] = []
        for position, item in enumerate(history[self.index :]):
            ids = [part.id for part in item.parts]
            if position == 0 and self.part_id is not None:
                ids = ids[ids.index(self.part_id) :]
            found.append((item, ids))
        return found

    def patches(self, history: Sequence[WithParts]) -> list[PatchPart]:
        """The file changes recorded from this point on, oldest first."""
        found: list[PatchPart] = []
        for item, ids in self.reverted_parts(history):
            kept = set(ids)
            found += [p for p in item.parts if isinstance(p, PatchPart) and p.id in kept]
        return found


def find_revert_point(history: Sequence[WithParts], message_id: str, part_id: str | None) -> RevertPoint:
    """Where reverting to `message_id` (from `part_id` on) starts. A part with nothing said or done
    before it in its message reverts the whole message, and reverting a whole reply reverts its turn
    from the user message on (as opencode does)."""
    index = next((i for i, item in enumerate(history) if item.info.id == message_id), None)
    if index is None:
        raise RevertPointNotFoundError(f"Message not found: {message_id}")
    item = history[index]
    if part_id is not None:
        ids = [part.id for part in item.parts]
        if part_id not in ids:
            raise RevertPointNotFoundError(f"Part not found: {part_id}")
        before = item.parts[: ids.index(part_id)]
        if any(part.type in ("text", "tool") for part in before):
            return RevertPoint(index, message_id, part_id)
    if isinstance(item.info, AssistantMessage):
        parent = item.info.parent_id
        for i in range(index - 1, -1, -1):
            if history[i].info.id == parent:
                return RevertPoint(i, parent)
    return RevertPoint(index, message_id)


async def discard_reverted(services: SessionServices, tenant_id: str, session: Session) -> None:
    """Remove what `session` was reverted past and clear its `revert` (nothing when it is not
    reverted). Updates `session` in place."""
    if session.revert is None:
        return
    history = await services.store.history(tenant_id, session.id)
    try:
        point = find_revert_point(history, session.revert.message_id, session.revert.part_id)
    except RevertPointNotFoundError:
        point = None  # the revert point was deleted since: nothing is left to remove
    if point is not None:
        for item, part_ids in point.reverted_parts(history):
            if point.part_id is not None and item.info.id == point.message_id:
                for part_id in part_ids:
                    await services.store.write(
                        _event(tenant_id, PART_REMOVED, session.id, item.info.id, part_id)
                    )
            else:
                await services.store.write(_event(tenant_id, MESSAGE_REMOVED, session.id, item.info.id))
    session.revert = None
    session.time.updated = now_ms()
    info = {"sessionID": session.id, "info": session.wire()}
    await services.store.write(Event(SESSION_UPDATED, info, session_id=session.id, tenant_id=tenant_id))


def _event(tenant_id: str, kind: str, session_id: str, message_id: str, part_id: str | None = None) -> Event:
    properties = {"sessionID": session_id, "messageID": message_id}
    if part_id is not None:
        properties["partID"] = part_id
    return Event(kind, properties, session_id=session_id, tenant_id=tenant_id)
