"""In-process publish/subscribe.

Publishing never waits for subscribers: each subscription has a bounded buffer, and a subscriber that
falls behind by more than that is cut off with a final `stream.lagged` event (it can reconnect and
resume from its last seq) instead of slowing producers or growing memory without bound.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable

from agentforge.bus.inflight import InflightParts
from agentforge.model.events import STREAM_LAGGED, Event

EventFilter = Callable[[Event], bool]

log = logging.getLogger(__name__)

DEFAULT_BUFFER = 10_000


class Subscription:
    """One subscriber's view of the bus: an async iterator of events."""

    def __init__(self, bus: Bus, accept: EventFilter | None, buffer: int) -> None:
        self._bus = bus
        self._accept = accept
        self._buffer: deque[Event] = deque()
        self._limit = buffer
        # The reader's wait, when it waits: resolved by the next offer, close or its timeout.
        self._waiter: asyncio.Future[None] | None = None
        self._deadline: float | None = None  # of the wait on, when it has a timeout
        self._timer: asyncio.TimerHandle | None = None  # at or before that deadline
        self._closed = False
        self.lagged = False

    def offer(self, event: Event) -> None:
        if self._closed or (self._accept is not None and not self._accept(event)):
            return
        if len(self._buffer) >= self._limit:
            self._cut_off(event)
            return
        self._buffer.append(event)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def wants(self, event: Event) -> bool:
        return not self._closed and (self._accept is None or self._accept(event))

    def fall_behind(self, event: Event) -> None:
        """It missed `event` (lost before it reached this process): cut it off as lagging."""
        if not self._closed:
            self._cut_off(event)

    def _cut_off(self, event: Event) -> None:
        # Keep what is buffered (the client gets everything up to the gap), then the final event.
        self.lagged = True
        self._closed = True
        self._bus.unsubscribe(self)
        self._buffer.append(
            Event(
                type=STREAM_LAGGED,
                properties={
                    "message": "Subscriber fell too far behind and was disconnected; "
                    "reconnect with Last-Event-ID to resume.",
                    "buffered": self._limit,
                },
                session_id=event.session_id,
                tenant_id=event.tenant_id,
            )
        )
        self._wake()
        if self._bus.on_lag is not None:
            try:  # telemetry: a failing hook never keeps the client from learning it must resume
                self._bus.on_lag(event)
            except Exception:
                log.exception("the lag hook failed")

    def close(self, final: Event | None = None) -> None:
        """Stop; `final` (unfiltered) is the last event the subscriber reads."""
        if final is not None and not self._closed:
            self._buffer.append(final)
        self._closed = True
        self._bus.unsubscribe(self)
        self._wake()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def drain(self) -> list[Event]:
        """Everything buffered right now, without waiting."""
        items = list(self._buffer)
        self._buffer.clear()
        return items

    async def next_batch(self, timeout: float | None = None) -> list[Event] | None:
        """Wait for events; [] on timeout, None once closed and drained."""
        if not self._buffer:
            if self._closed:
                return None
            await self._wait(timeout)
            if not self._buffer and not self._closed:
                return []  # timed out
        if not self._buffer and self._closed:
            return None
        return self.drain()

    async def _wait(self, timeout: float | None) -> None:
        """Until the next offer or close, or `timeout` seconds. One future per wait: an
        `asyncio.wait_for` would run the wait as a task of its own, two more loop passes per wake-up
        on the path of every live event. The timeout is one timer per subscription, not one per wait:
        it fires at the deadline of the wait that armed it and then, if a later wait is on with a
        later deadline, re-arms itself for that one (a stream woken by every delta re-arms it once
        per `timeout` instead of scheduling and cancelling a timer per delta)."""
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        if timeout is not None:
            self._deadline = deadline = loop.time() + timeout
            if self._timer is None or self._timer.when() > deadline:
                if self._timer is not None:
                    self._timer.cancel()
                self._timer = loop.call_at(deadline, self._time_out)
        try:
            await waiter
        finally:
            self._waiter = None
            self._deadline = None

    def _time_out(self) -> None:
        self._timer = None
        waiter, deadline = self._waiter, self._deadline
        if waiter is None or deadline is None or waiter.done():
            return
        loop = waiter.get_loop()
        if loop.time() >= deadline:
            waiter.set_result(None)
        else:
            self._timer = loop.call_at(deadline, self._time_out)

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            batch = await self.next_batch()
            if batch is None:
                return
            for event in batch:
                yield event


class Bus:
    """Fan-out of events to subscriptions and to synchronous listeners (plugins, status trackers)."""

    def __init__(self) -> None:
        self._subscriptions: set[Subscription] = set()
        self._listeners: list[Callable[[Event], None]] = []
        self.inflight = InflightParts()
        self._positions: dict[str, int] = {}  # tenant -> position of its last published durable event
        # Told of each subscriber cut off for lagging (telemetry), with the event it could not take.
        self.on_lag: Callable[[Event], None] | None = None

    def published_position(self, tenant_id: str) -> int | None:
        """The tenant position of the last durable event published (None: none since start-up).

        Durable events are published in position order, after they commit; a subscription taken now
        gets every event after this position and none at or before it.
        """
        return self._positions.get(tenant_id)

    def subscribe(self, accept: EventFilter | None = None, *, buffer: int = DEFAULT_BUFFER) -> Subscription:
        subscription = Subscription(self, accept, buffer)
        self._subscriptions.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)

    def listen(self, listener: Callable[[Event], None]) -> None:
        self._listeners.append(listener)

    @property
    def subscriber_count(self) -> int:
        return len(self._subscriptions)

    def close_all(self, final: Event | None = None) -> None:
        """End every subscription (server shutdown): each iterator drains, reads `final` if given
        (whatever its filter), then stops."""
        for subscription in list(self._subscriptions):
            subscription.close(final)

    def publish(self, event: Event) -> None:
        if event.position is not None:
            self._positions[event.tenant_id] = event.position
        self.inflight.observe(event)
        for listener in self._listeners:
            listener(event)
        for subscription in list(self._subscriptions):
            subscription.offer(event)

    def deliver(self, events: list[Event]) -> None:
        """Hand events published by another replica to this one's subscribers only: the listeners
        (plugins, the cluster relay) already saw them where they were published."""
        for event in events:
            for subscription in list(self._subscriptions):
                subscription.offer(event)

    def missed(self, events: list[Event] | None = None) -> None:
        """Another replica's events this process cannot deliver (dropped for a slow replica, or said
        while its channel was down): every subscriber that would have taken one of them (all, when
        they are unknown) is cut off as lagging, and resumes from the event log with Last-Event-ID."""
        unknown = Event(type=STREAM_LAGGED, properties={})
        for subscription in list(self._subscriptions):
            if events is None:
                subscription.fall_behind(unknown)
                continue
            missed = next((event for event in events if subscription.wants(event)), None)
            if missed is not None:
                subscription.fall_behind(missed)

    def publish_many(self, events: list[Event]) -> None:
        for event in events:
            self.publish(event)
