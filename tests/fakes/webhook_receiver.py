"""A local webhook receiver: records every POST and answers the next scripted status (200 when none
is left); `gate(event)` makes it hold its answer until the event is set (a receiver that hangs)."""

from __future__ import annotations

import asyncio

from .http11 import Connection, FakeServer, Request


class WebhookReceiver(FakeServer[int]):
    base_path = "/hook"

    def __init__(self) -> None:
        super().__init__()
        self.received: list[Request] = []
        self.hold: asyncio.Event | None = None
        self._arrived = asyncio.Condition()

    async def _respond(self, conn: Connection, request: Request) -> bool:
        async with self._arrived:
            self.received.append(request)
            self._arrived.notify_all()
        if self.hold is not None:
            await self.hold.wait()
        status = self._scripts.popleft() if self._scripts else 200
        await conn.send_json(status, {"status": status})
        return True

    async def wait_for(self, count: int, timeout: float = 15.0) -> list[Request]:
        """The first `count` requests, once they have arrived."""
        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(lambda: len(self.received) >= count), timeout)
        return self.received[:count]
