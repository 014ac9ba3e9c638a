"""What other replicas said and this one has not handled yet: bounded, and fair between tenants.

A replica whose receiving loop falls behind must drop something. Dropping the oldest notification
lets one tenant that floods the channel (many large deltas over many sessions) push every other
tenant's events out, and each event dropped cuts off the streams that would have had it. So when the
inbox is full, what goes is the oldest notification of the tenant that holds the most of it: a
flooding tenant loses its own events first. Commands (abort, input, permission replies) feed no
stream and are kept while anything else can go.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from typing import Any

Message = dict[str, Any]


class Inbox:
    """A queue of notifications, each with the tenants whose streams it feeds (None: a command)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._queue: deque[tuple[Message, frozenset[str] | None]] = deque()
        self._load: Counter[str] = Counter()  # notifications queued per tenant they feed
        self._ready = asyncio.Event()

    def __len__(self) -> int:
        return len(self._queue)

    def put(self, message: Message, tenants: frozenset[str] | None) -> Message | None:
        """Queue `message`; when full, first drop one and return it (its streams must be cut off)."""
        dropped = self._drop() if len(self._queue) >= self._limit else None
        self._queue.append((message, tenants))
        self._count(tenants, 1)
        self._ready.set()
        return dropped

    async def get(self) -> Message:
        """The oldest notification, waiting for one."""
        while not self._queue:
            self._ready.clear()
            await self._ready.wait()
        message, tenants = self._queue.popleft()
        self._count(tenants, -1)
        return message

    def _drop(self) -> Message:
        index = self._victim()
        message, tenants = self._queue[index]
        del self._queue[index]
        self._count(tenants, -1)
        return message

    def _victim(self) -> int:
        """The heaviest tenant's oldest notification that feeds it alone, else the oldest that feeds
        it among others, else the oldest that feeds any stream, else the oldest command."""
        heaviest = max(self._load, key=self._load.__getitem__) if self._load else None
        shared = droppable = None
        for index, (_message, tenants) in enumerate(self._queue):
            if tenants is None:
                continue
            if heaviest in tenants:
                if len(tenants) == 1:
                    return index
                shared = index if shared is None else shared
            droppable = index if droppable is None else droppable
        for found in (shared, droppable):
            if found is not None:
                return found
        return 0

    def _count(self, tenants: frozenset[str] | None, step: int) -> None:
        for tenant in tenants or ():
            self._load[tenant] += step
            if self._load[tenant] <= 0:
                del self._load[tenant]
