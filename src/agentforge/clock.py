"""Time, as the code that waits on it reads it: a seam tests replace.

Retry back-off (session/processor.py, with llm/retry.py computing the delays) and permission deadlines
(permission/service.py) read the time and sleep through a `Clock`. The server runs on `SYSTEM_CLOCK`;
tests pass `agentforge.testing.FakeClock`, which they advance (or which jumps ahead by itself), so a
2 s back-off or a 300 s deadline costs them no wall time.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float:
        """Seconds since the epoch (wall-clock: what `time` fields and retry-after dates use)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once `seconds` have passed on this clock."""
        ...


class SystemClock:
    """The real time and `asyncio.sleep`."""

    def time(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


SYSTEM_CLOCK = SystemClock()


def now_ms(clock: Clock) -> int:
    """The clock's time in epoch milliseconds."""
    return int(clock.time() * 1000)
