"""How many refused requests reach the audit log: at most one row per (tenant, peer, reason) a window.

Without it, anyone can grow the audit chain of any tenant (the tenant a request claims is its
own choice) by one committed row per request. Refusals of a key already written within the window
are only counted; the next row for that key carries the count (`suppressed`). Memory is bounded:
with `capacity` keys held, a key whose window has passed makes room (its pending count moves to the
overflow key, written with its next row), and when none has, the refusal is counted under the
overflow key, which is itself written at most once a window. So at most `capacity + 1` rows are
written per window, whatever the request rate.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from agentforge.identity.model import SYSTEM_TENANT

WINDOW_SECONDS: Final = 60.0
CAPACITY: Final = 1024
OVERFLOW_REASON: Final = "refusals beyond the audit throttle's capacity (mixed tenants, peers and reasons)"


@dataclass(frozen=True, slots=True)
class FailureKey:
    tenant: str  # the audit chain the row goes to
    peer: str | None
    reason: str


OVERFLOW_KEY: Final = FailureKey(SYSTEM_TENANT, None, OVERFLOW_REASON)


@dataclass(frozen=True, slots=True)
class Admission:
    """Write a row now, under `key`, carrying `suppressed` earlier refusals that were not written."""

    key: FailureKey
    suppressed: int

    @property
    def overflow(self) -> bool:
        return self.key == OVERFLOW_KEY


@dataclass(slots=True)
class _Tally:
    written_at: float
    suppressed: int = 0


class FailureThrottle:
    def __init__(
        self,
        *,
        window_seconds: float = WINDOW_SECONDS,
        capacity: int = CAPACITY,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """`wall` (unix seconds) dates the window replicas share in the database (store/refusals.py)."""
        if capacity < 1:
            raise ValueError("the failure throttle needs room for at least one key")
        self._window = window_seconds
        self._capacity = capacity
        self._clock = clock
        self._wall = wall
        # Oldest row first: the first entry is the one whose window ends soonest.
        self._tallies: OrderedDict[FailureKey, _Tally] = OrderedDict()
        self._overflow: _Tally | None = None

    def __len__(self) -> int:
        return len(self._tallies)

    @property
    def window_ms(self) -> int:
        return round(self._window * 1000)

    def wall_ms(self) -> int:
        return round(self._wall() * 1000)

    def admit(self, key: FailureKey) -> Admission | None:
        """An Admission when this refusal should be written, else None (it is counted)."""
        now = self._clock()
        tally = self._tallies.get(key)
        if tally is not None:
            return self._admit_known(key, tally, now)
        if len(self._tallies) >= self._capacity and not self._evict_one(now):
            return self._admit_overflow(now)
        self._tallies[key] = _Tally(now)
        return Admission(key, 0)

    def _admit_known(self, key: FailureKey, tally: _Tally, now: float) -> Admission | None:
        suppressed = self._count(tally, now)
        if suppressed is None:
            return None
        self._tallies.move_to_end(key)
        return Admission(key, suppressed)

    def _admit_overflow(self, now: float) -> Admission | None:
        if self._overflow is None:
            self._overflow = _Tally(now)
            return Admission(OVERFLOW_KEY, 0)
        suppressed = self._count(self._overflow, now)
        return None if suppressed is None else Admission(OVERFLOW_KEY, suppressed)

    def _count(self, tally: _Tally, now: float) -> int | None:
        """The suppressed count to write if `tally`'s window has passed (restarting it), else None."""
        if now - tally.written_at < self._window:
            tally.suppressed += 1
            return None
        suppressed = tally.suppressed
        tally.written_at, tally.suppressed = now, 0
        return suppressed

    def _evict_one(self, now: float) -> bool:
        """Forget the oldest key if its window has passed. A count it still owed moves to the
        overflow key, to be written with the next overflow row rather than lost."""
        oldest_key = next(iter(self._tallies))
        oldest = self._tallies[oldest_key]
        if now - oldest.written_at < self._window:
            return False
        del self._tallies[oldest_key]
        if oldest.suppressed:
            if self._overflow is None:
                self._overflow = _Tally(now - self._window)  # already due: the next overflow writes it
            self._overflow.suppressed += oldest.suppressed
        return True
