"""Forking a session (KERNEL 1.1 `POST /session/{id}/fork`, 3.1 fork title rule).

The fork is a new root session holding copies of the source's messages (all of them, or those strictly
before a given message), each with a new ascending id, so the copies keep their order; assistant
`parentID`s, compaction `tail_start_id`s and part ids are remapped to the copies.
"""

from __future__ import annotations

import asyncio
import bisect
import re
from typing import Any

from agentforge.model import ids
from agentforge.model.events import SESSION_UPDATED, Event
from agentforge.model.message import AssistantMessage, WithParts
from agentforge.model.part import CompactionPart, Part, ToolPart, ToolStateCompleted
from agentforge.model.session import Session
from agentforge.session.errors import NotFoundError
from agentforge.session.inputs import SessionCreateInput
from agentforge.session.service import SessionService

_FORK_SUFFIX = re.compile(r"^(?P<base>.*) \(fork #(?P<n>\d+)\)$", re.DOTALL)


def fork_title(title: str) -> str:
    """ "<title> (fork #1)", and "... (fork #n)" becomes "... (fork #n+1)"."""
    found = _FORK_SUFFIX.match(title)
    if found is None:
        return f"{title} (fork #1)"
    return f"{found['base']} (fork #{int(found['n']) + 1})"


class _IdMap:
    """Old message ids to the ids of their copies, in copy (= id) order."""

    def __init__(self) -> None:
        self._old: list[str] = []
        self._new: list[str] = []

    def add(self, old: str, new: str) -> None:
        self._old.append(old)
        self._new.append(new)

    def exact(self, old: str) -> str | None:
        index = bisect.bisect_left(self._old, old)
        return self._new[index] if index < len(self._old) and self._old[index] == old else None

    def at_or_after(self, old: str) -> str | None:
        """The copy of `old`, or of the first copied message after it (when `old` was not copied)."""
        index = bisect.bisect_left(self._old, old)
        return self._new[index] if index < len(self._new) else None


def copy_messages(history: list[WithParts], session_id: str, before: str | None = None) -> list[WithParts]:
    """Copies of `history` (oldest first) for session `session_id`, stopping at message `before`.

    Assistant messages still being written (a busy source) are left out: their copy could never be
    completed. A message whose parent was not copied keeps pointing at the original id.
    """
    copied: list[WithParts] = []
    id_map = _IdMap()
    for item in history:
        info = item.info
        if before is not None and info.id >= before:
            break
        if isinstance(info, AssistantMessage) and info.time.completed is None:
            continue
        new_id = ids.ascending("msg")
        update: dict[str, Any] = {"id": new_id, "session_id": session_id}
        if isinstance(info, AssistantMessage):
            update["parent_id"] = id_map.exact(info.parent_id) or info.parent_id
        new_info = info.model_copy(update=update, deep=True)
        parts = [_copy_part(part, session_id, new_id, id_map) for part in item.parts]
        id_map.add(info.id, new_id)
        copied.append(WithParts(info=new_info, parts=parts))
    return copied


def _copy_part(part: Part, session_id: str, message_id: str, id_map: _IdMap) -> Part:
    update: dict[str, Any] = {"id": ids.ascending("prt"), "session_id": session_id, "message_id": message_id}
    if isinstance(part, CompactionPart) and part.tail_start_id is not None:
        update["tail_start_id"] = id_map.at_or_after(part.tail_start_id)
    copy: Part = part.model_copy(update=update, deep=True)
    if isinstance(copy, ToolPart) and isinstance(copy.state, ToolStateCompleted) and copy.state.attachments:
        copy.state.attachments = [
            item.model_copy(
                update={"id": ids.ascending("prt"), "session_id": session_id, "message_id": message_id}
            )
            for item in copy.state.attachments
        ]
    return copy


async def fork_session(sessions: SessionService, session_id: str, message_id: str | None) -> Session:
    """Create the fork and write its messages; returns the new session once all of it is stored."""
    services, tenant_id = sessions.services, sessions.tenant_id
    source = await sessions.get(session_id)
    if message_id is not None and await services.store.get_message(tenant_id, session_id, message_id) is None:
        raise NotFoundError(f"Message not found: {message_id}")
    history = await services.store.history(tenant_id, session_id)
    fork = await sessions.create(
        SessionCreateInput(
            title=fork_title(source.title),
            permission=source.permission,
            directory=source.directory,
            metadata=source.metadata,
        )
    )
    events = services.events(tenant_id)
    pending: list[asyncio.Future[Event]] = []
    if source.model is not None or source.agent is not None:
        # The fork goes on with the agent and model the source last used.
        fork.model = source.model.model_copy() if source.model is not None else None
        fork.agent = source.agent
        pending.append(
            services.store.submit(
                Event(
                    type=SESSION_UPDATED,
                    properties={"sessionID": fork.id, "info": fork.wire()},
                    session_id=fork.id,
                    tenant_id=tenant_id,
                )
            )
        )
    for item in copy_messages(history, fork.id, before=message_id):
        pending.append(events.submit_message(item.info))
        pending.extend(events.submit_part(part) for part in item.parts)
    await asyncio.gather(*pending)
    # Read back: the running totals now include the copied steps' usage.
    return await sessions.get(fork.id)
