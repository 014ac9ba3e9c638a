"""The in-process bus: fan-out, filters, ordering, closing, and cutting off subscribers that lag."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from agentforge.bus import Bus, Subscription
from agentforge.model.events import STREAM_LAGGED, Event


def _event(n: int, *, session: str = "ses_a", tenant: str = "default") -> Event:
    return Event(type="test.event", properties={"n": n}, session_id=session, tenant_id=tenant)


def _numbers(events: list[Event]) -> list[int]:
    return [e.properties["n"] for e in events]


async def _collect(subscription: Subscription) -> list[Event]:
    return [event async for event in subscription]


async def test_every_subscriber_gets_every_event_in_publish_order() -> None:
    bus = Bus()
    first, second = bus.subscribe(), bus.subscribe()
    bus.publish_many([_event(n) for n in range(5)])
    bus.publish(_event(5))
    assert _numbers(first.drain()) == [0, 1, 2, 3, 4, 5]
    assert _numbers(second.drain()) == [0, 1, 2, 3, 4, 5]


async def test_filter_decides_what_a_subscription_sees() -> None:
    bus = Bus()
    only_b = bus.subscribe(lambda e: e.session_id == "ses_b")
    other_tenant = bus.subscribe(lambda e: e.tenant_id == "acme")
    everything = bus.subscribe()
    bus.publish(_event(1, session="ses_a"))
    bus.publish(_event(2, session="ses_b"))
    bus.publish(_event(3, session="ses_b", tenant="acme"))
    assert _numbers(only_b.drain()) == [2, 3]
    assert _numbers(other_tenant.drain()) == [3]
    assert _numbers(everything.drain()) == [1, 2, 3]


async def test_listeners_see_every_event_synchronously() -> None:
    bus = Bus()
    heard: list[int] = []
    bus.listen(lambda e: heard.append(e.properties["n"]))
    filtered = bus.subscribe(lambda e: False)
    bus.publish(_event(7))
    assert heard == [7], "listeners run inside publish, before it returns"
    assert filtered.drain() == []


async def test_waiting_subscriber_wakes_with_the_batch_published_meanwhile() -> None:
    bus = Bus()
    subscription = bus.subscribe()
    waiting = asyncio.create_task(subscription.next_batch())
    await asyncio.sleep(0)
    assert not waiting.done()
    bus.publish(_event(1))
    bus.publish(_event(2))
    batch = await asyncio.wait_for(waiting, 1)
    assert batch is not None and _numbers(batch) == [1, 2]


async def test_next_batch_times_out_with_an_empty_list() -> None:
    bus = Bus()
    subscription = bus.subscribe()
    started = asyncio.get_running_loop().time()
    assert await subscription.next_batch(timeout=0.02) == []
    assert asyncio.get_running_loop().time() - started >= 0.015
    # A timeout does not end the subscription.
    bus.publish(_event(1))
    batch = await subscription.next_batch(timeout=0.02)
    assert batch is not None and _numbers(batch) == [1]


async def test_a_wait_gets_its_whole_timeout_after_an_earlier_wake_up() -> None:
    bus = Bus()
    subscription = bus.subscribe()
    waiting = asyncio.create_task(subscription.next_batch(timeout=0.02))
    await asyncio.sleep(0)
    bus.publish(_event(1))  # woken at once: the timer this wait armed is still on
    batch = await asyncio.wait_for(waiting, 1)
    assert batch is not None and _numbers(batch) == [1]
    # The earlier wait's 0.02 s timer must not end this one.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(subscription.next_batch(timeout=60), 0.1)


async def test_a_shorter_timeout_than_an_earlier_waits_is_kept() -> None:
    bus = Bus()
    subscription = bus.subscribe()
    for number in range(3):
        waiting = asyncio.create_task(subscription.next_batch(timeout=60))
        await asyncio.sleep(0)
        bus.publish(_event(number))
        batch = await asyncio.wait_for(waiting, 1)
        assert batch is not None and _numbers(batch) == [number]
    assert await asyncio.wait_for(subscription.next_batch(timeout=0.02), 30) == []


async def test_close_wakes_a_waiting_subscriber_with_the_end() -> None:
    bus = Bus()
    subscription = bus.subscribe()
    waiting = asyncio.create_task(subscription.next_batch(timeout=60))
    await asyncio.sleep(0)
    subscription.close()
    assert await asyncio.wait_for(waiting, 1) is None


async def test_a_cancelled_wait_leaves_the_subscription_readable() -> None:
    bus = Bus()
    subscription = bus.subscribe()
    waiting = asyncio.create_task(subscription.next_batch(timeout=60))
    await asyncio.sleep(0)
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    bus.publish(_event(1))  # no reader waits: buffered, nothing to wake
    batch = await subscription.next_batch(timeout=60)
    assert batch is not None and _numbers(batch) == [1]


async def test_subscriber_count_follows_subscribe_and_close() -> None:
    bus = Bus()
    assert bus.subscriber_count == 0
    first, second = bus.subscribe(), bus.subscribe()
    assert bus.subscriber_count == 2
    first.close()
    assert bus.subscriber_count == 1
    first.close()  # idempotent
    assert bus.subscriber_count == 1
    bus.unsubscribe(second)
    assert bus.subscriber_count == 0


async def test_close_delivers_what_was_buffered_then_ends() -> None:
    bus = Bus()
    subscription = bus.subscribe()
    bus.publish(_event(1))
    subscription.close()
    bus.publish(_event(2))  # after close: not delivered
    batch = await subscription.next_batch(timeout=1)
    assert batch is not None and _numbers(batch) == [1]
    assert await subscription.next_batch(timeout=1) is None


async def test_close_wakes_a_waiting_reader() -> None:
    bus = Bus()
    subscription = bus.subscribe()
    waiting = asyncio.create_task(subscription.next_batch())
    await asyncio.sleep(0)
    subscription.close()
    assert await asyncio.wait_for(waiting, 1) is None


async def test_close_all_ends_every_iterator_after_draining() -> None:
    bus = Bus()
    subscriptions = [bus.subscribe() for _ in range(3)]
    readers = [asyncio.create_task(_collect(s)) for s in subscriptions]
    await asyncio.sleep(0)
    bus.publish(_event(1))
    bus.publish(_event(2))
    bus.close_all()
    results = await asyncio.wait_for(asyncio.gather(*readers), 1)
    assert [_numbers(r) for r in results] == [[1, 2], [1, 2], [1, 2]]
    assert bus.subscriber_count == 0


async def test_lagging_subscriber_is_cut_off_after_its_buffered_events() -> None:
    bus = Bus()
    slow = bus.subscribe(buffer=3)
    fast = bus.subscribe()
    for n in range(3):
        bus.publish(_event(n))
    assert not slow.lagged and bus.subscriber_count == 2

    # The fourth event overflows the slow buffer: publish neither blocks nor raises.
    bus.publish(_event(3, session="ses_z", tenant="acme"))
    assert slow.lagged
    assert bus.subscriber_count == 1, "the lagging subscriber is unsubscribed"
    for n in range(4, 8):
        bus.publish(_event(n))

    received = await asyncio.wait_for(_collect(slow), 1)
    assert _numbers(received[:3]) == [0, 1, 2]
    assert len(received) == 4
    lagged = received[3]
    assert lagged.type == STREAM_LAGGED
    assert lagged.properties["buffered"] == 3
    assert "reconnect" in lagged.properties["message"].lower()
    # It is addressed like the event that overflowed, so tenant/session filters still route it.
    assert (lagged.session_id, lagged.tenant_id) == ("ses_z", "acme")

    # The other subscriber got everything, unaffected.
    assert _numbers(fast.drain()) == list(range(8))
    assert not fast.lagged


async def test_consuming_subscriber_never_lags() -> None:
    bus = Bus()
    subscription = bus.subscribe(buffer=2)
    seen: list[int] = []
    for n in range(10):
        bus.publish(_event(n))
        batch = await subscription.next_batch(timeout=1)
        assert batch is not None
        seen.extend(_numbers(batch))
    assert seen == list(range(10))
    assert not subscription.lagged and bus.subscriber_count == 1


async def test_filtered_out_events_do_not_count_against_the_buffer() -> None:
    bus = Bus()
    subscription = bus.subscribe(lambda e: e.properties["n"] % 10 == 0, buffer=2)
    for n in range(20):
        bus.publish(_event(n))
    assert not subscription.lagged
    assert _numbers(subscription.drain()) == [0, 10]


async def test_a_failing_lag_hook_neither_hides_the_lag_nor_stops_the_fan_out() -> None:
    bus = Bus()

    def broken_hook(_event: Event) -> None:
        raise RuntimeError("telemetry is down")

    bus.on_lag = broken_hook
    slow = bus.subscribe(buffer=1)
    fast = bus.subscribe()
    bus.publish(_event(0))
    bus.publish(_event(1))  # overflows `slow`: the hook raises, publish goes on

    received = await asyncio.wait_for(_collect(slow), 1)
    assert [event.type for event in received] == ["test.event", STREAM_LAGGED]
    bus.close_all()
    assert _numbers(await asyncio.wait_for(_collect(fast), 1)) == [0, 1]
