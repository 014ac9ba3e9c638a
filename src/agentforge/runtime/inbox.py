"""What other replicas said and this one has not handled yet: bounded, and fair between tenants.

A replica whose receiving loop falls behind must drop something. Dropping the oldest notification
lets one tenant that floods the channel (many large deltas over many sessions) push every other
tenant's events out, and each event dropped cuts off the streams that would have had it. So when the
inbox is full, what goes is the oldest notification of the tenant that holds the most of it: a
flooding tenant loses its own events first. Commands (abort, input, permission replies) feed no
stream and are kept while anything else can go; among commands the least important goes first, and
an abort (`URGENT`) is handed out before anything else and dropped only when the inbox holds
nothing but aborts.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from typing import Any, Final

Message = dict[str, Any]

# How much a command matters, for what goes first when the inbox holds only commands.
NOTED: Final = 0  # a lost one costs its waiter a poll (input, a run ended)
ASKED: Final = 1  # a lost one leaves a listing short (questions listed)
ANSWERED: Final = 2  # a lost one fails a reply that would have been applied (permission, question)
URGENT: Final = 3  # an abort: handed out first, dropped last


class Inbox:
    """A queue of notifications, each with the tenants whose streams it feeds (None: a command, of
    a rank above)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._queue: deque[tuple[Message, frozenset[str] | None, int]] = deque()
        self._urgent: deque[Message] = deque()  # URGENT commands: ahead of the queue
        self._load: Counter[str] = Counter()  # notifications queued per tenant they feed
        self._ready = asyncio.Event()

    def __len__(self) -> int:
        return len(self._queue) + len(self._urgent)

    def put(self, message: Message, tenants: frozenset[str] | None, rank: int = NOTED) -> Message | None:
        """Queue `message`; when full, first drop one and return it (its streams must be cut off)."""
        dropped = self._drop() if len(self) >= self._limit else None
        if tenants is None and rank >= URGENT:
            self._urgent.append(message)
        else:
            self._queue.append((message, tenants, rank))
            self._count(tenants, 1)
        self._ready.set()
        return dropped

    async def get(self) -> Message:
        """The oldest urgent command, else the oldest notification, waiting for one."""
        while not self:
            self._ready.clear()
            await self._ready.wait()
        if self._urgent:
            return self._urgent.popleft()
        message, tenants, _rank = self._queue.popleft()
        self._count(tenants, -1)
        return message

    def _drop(self) -> Message:
        if not self._queue:
            return self._urgent.popleft()
        index = self._victim()
        message, tenants, _rank = self._queue[index]
        del self._queue[index]
        self._count(tenants, -1)
        return message

    def _victim(self) -> int:
        """The heaviest tenant's oldest notification that feeds it alone, else the oldest that feeds
        it among others, else the oldest that feeds any stream, else the oldest least important
        command."""
        heaviest = max(self._load, key=self._load.__getitem__) if self._load else None
        shared = droppable = least = None
        for index, (_message, tenants, rank) in enumerate(self._queue):
            if tenants is None:
                if least is None or rank < self._queue[least][2]:
                    least = index
                continue
            if heaviest in tenants:
                if len(tenants) == 1:
                    return index
                shared = index if shared is None else shared
            droppable = index if droppable is None else droppable
        for found in (shared, droppable, least):
            if found is not None:
                return found
        return 0

    def _count(self, tenants: frozenset[str] | None, step: int) -> None:
        for tenant in tenants or ():
            self._load[tenant] += step
            if self._load[tenant] <= 0:
                del self._load[tenant]
