"""A clock tests control: time stands still until they advance it (or it jumps to the next sleeper).

`FakeClock()` starts at a fixed instant. `await clock.sleep(s)` waits until the test calls
`clock.advance(...)` past its deadline; `await clock.sleeping()` waits until something sleeps, so a
test can advance at the right moment without polling. `FakeClock(autojump=True)` never blocks: every
sleep moves the time to its own deadline at once, for tests that only care what was waited for
(`clock.slept`), such as a server's retry back-off seen through HTTP.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass, field

START = 1_700_000_000.0  # 2023-11-14T22:13:20Z


@dataclass
class FakeClock:
    now: float = START
    autojump: bool = False
    slept: list[float] = field(default_factory=list)  # every sleep's duration, in order
    _sleepers: list[tuple[float, int, asyncio.Future[None]]] = field(default_factory=list)
    _order: itertools.count[int] = field(default_factory=itertools.count)
    _changed: asyncio.Event | None = None

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        deadline = self.now + max(seconds, 0.0)
        if self.autojump or seconds <= 0:
            self.now = max(self.now, deadline)
            await asyncio.sleep(0)  # a sleep always yields, as asyncio.sleep(0) does
            return
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (deadline, next(self._order), woken))
        self._notify()
        try:
            await woken
        finally:
            if any(sleeper[2] is woken for sleeper in self._sleepers):  # cancelled while sleeping
                self._sleepers = [sleeper for sleeper in self._sleepers if sleeper[2] is not woken]
                heapq.heapify(self._sleepers)

    def advance(self, seconds: float) -> None:
        """Move the time forward and wake every sleeper whose deadline has come (they run at the
        event loop's next turn)."""
        self.now += seconds
        while self._sleepers and self._sleepers[0][0] <= self.now:
            _, _, woken = heapq.heappop(self._sleepers)
            if not woken.done():
                woken.set_result(None)

    @property
    def sleepers(self) -> int:
        """How many sleeps are waiting for the time to move."""
        return len(self._sleepers)

    async def sleeping(self, count: int = 1) -> None:
        """Wait until at least `count` sleeps wait for the time to move."""
        while len(self._sleepers) < count:
            self._changed = self._changed or asyncio.Event()
            self._changed.clear()
            await self._changed.wait()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
