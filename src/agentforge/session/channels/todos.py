"""A session's todo list kept by the store (the `TodoList` the todo tools use through `ctx.extra`).

Writing is a durable `todo.updated` event: the projector keeps the latest list per session, and the
event reaches SSE clients after it commits, with the session's next seq.
"""

from __future__ import annotations

from typing import Any

from agentforge.model.events import TODO_UPDATED, Event
from agentforge.store.store import Store


class StoreTodos:
    def __init__(self, store: Store, tenant_id: str) -> None:
        self._store = store
        self._tenant_id = tenant_id

    async def read(self, session_id: str) -> list[dict[str, Any]]:
        return await self._store.todos(self._tenant_id, session_id)

    async def write(self, session_id: str, todos: list[dict[str, Any]]) -> None:
        await self._store.write(
            Event(
                type=TODO_UPDATED,
                properties={"sessionID": session_id, "todos": todos},
                session_id=session_id,
                tenant_id=self._tenant_id,
            )
        )
