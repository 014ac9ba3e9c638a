"""The throttle between refused requests and the audit log: one row per key a window, with counts."""

from __future__ import annotations

import pytest

from agentforge.identity.failures import OVERFLOW_KEY, Admission, FailureKey, FailureThrottle

BAD_KEY = FailureKey("acme", "10.0.0.1", "invalid or revoked API key")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _throttle(clock: Clock, capacity: int = 8) -> FailureThrottle:
    return FailureThrottle(window_seconds=60, capacity=capacity, clock=clock)


def test_repeats_within_the_window_are_counted_into_the_next_row() -> None:
    clock = Clock()
    throttle = _throttle(clock)
    admissions = [throttle.admit(BAD_KEY) for _ in range(50)]
    assert admissions[0] == Admission(BAD_KEY, 0)
    assert admissions[1:] == [None] * 49
    clock.now += 59.9
    assert throttle.admit(BAD_KEY) is None
    clock.now += 0.1
    assert throttle.admit(BAD_KEY) == Admission(BAD_KEY, 50)
    # The count restarts with each row.
    clock.now += 60
    assert throttle.admit(BAD_KEY) == Admission(BAD_KEY, 0)


def test_each_tenant_peer_and_reason_gets_its_own_row() -> None:
    throttle = _throttle(Clock())
    keys = [
        BAD_KEY,
        FailureKey("globex", "10.0.0.1", BAD_KEY.reason),
        FailureKey("acme", "10.0.0.2", BAD_KEY.reason),
        FailureKey("acme", "10.0.0.1", "token expired"),
    ]
    assert [throttle.admit(key) for key in keys] == [Admission(key, 0) for key in keys]
    assert [throttle.admit(key) for key in keys] == [None] * 4


def test_a_full_table_counts_new_keys_into_one_overflow_row_per_window() -> None:
    clock = Clock()
    throttle = _throttle(clock, capacity=2)
    first, second = FailureKey("a", "p", "r"), FailureKey("b", "p", "r")
    assert throttle.admit(first) and throttle.admit(second)
    flood = [throttle.admit(FailureKey(f"t{n}", "p", "r")) for n in range(100)]
    assert flood[0] == Admission(OVERFLOW_KEY, 0) and flood[0].overflow
    assert flood[1:] == [None] * 99
    assert len(throttle) == 2
    # Once the window has passed, stale keys make room again; their owed counts are not lost.
    clock.now += 60
    assert throttle.admit(first) == Admission(first, 0)  # still held: its window restarts
    assert throttle.admit(second) == Admission(second, 0)
    assert throttle.admit(second) is None
    clock.now += 60
    newcomer = FailureKey("c", "p", "r")
    assert throttle.admit(newcomer) == Admission(newcomer, 0)  # evicts `first`, which owed nothing
    assert throttle.admit(FailureKey("d", "p", "r")) == Admission(FailureKey("d", "p", "r"), 0)
    assert len(throttle) == 2
    # `second` (evicted, owing 1) and the 99 earlier overflow refusals come out in the next overflow row.
    assert throttle.admit(FailureKey("e", "p", "r")) == Admission(OVERFLOW_KEY, 100)


def test_a_throttle_needs_room() -> None:
    with pytest.raises(ValueError, match="at least one key"):
        FailureThrottle(capacity=0)
