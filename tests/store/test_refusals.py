"""The refused-request audit throttle replicas share (store/refusals.py), driven through the store
with explicit times: one admission per (tenant, peer, reason) a window, counts carried to the next."""

from __future__ import annotations

from agentforge.store import Store

WINDOW = 60_000
T0 = 1_800_000_000_000


async def _admit(store: Store, counted: int, now: int, *, peer: str | None = "10.0.0.1") -> int | None:
    return await store.admit_refusal(
        "acme", peer, "invalid or revoked API key", counted, now_ms=now, window_ms=WINDOW
    )


async def test_one_admission_a_window_carrying_every_refusal_counted_meanwhile(store: Store) -> None:
    if store.dialect == "sqlite":
        # One process: its in-process throttle decides alone; the store admits what it is asked.
        assert await _admit(store, 3, T0) == 3
        assert await _admit(store, 0, T0 + 1) == 0
        return
    assert await _admit(store, 0, T0) == 0
    # Another replica's first refusal in the window, and a third one's with 2 it counted itself.
    assert await _admit(store, 0, T0 + 10) is None
    assert await _admit(store, 2, T0 + 20) is None
    # Other keys and tenants have their own windows.
    assert await _admit(store, 0, T0 + 30, peer="10.0.0.2") == 0
    assert (
        await store.admit_refusal(
            "other", "10.0.0.1", "invalid or revoked API key", 0, now_ms=T0 + 30, window_ms=WINDOW
        )
        == 0
    )
    # The window has passed: the next row carries all 4 (1 + 3) plus what this replica counted.
    assert await _admit(store, 5, T0 + WINDOW) == 9
    assert await _admit(store, 0, T0 + WINDOW + 1) is None
    assert await _admit(store, 0, T0 + 2 * WINDOW) == 1
