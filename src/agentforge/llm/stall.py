"""Cut a provider stream that stops sending: a per-item idle timeout around an async iterator.

Adapters wrap the raw byte iterator of the response body, so keep-alive comments count as life too and
every adapter gets the same behaviour. A stall surfaces as `StreamStalledError`, which `to_named_error`
maps to a retryable APIError.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TypeVar

DEFAULT_CHUNK_TIMEOUT = 120.0  # seconds; config `provider.<id>.options.chunkTimeout`

_T = TypeVar("_T")


class StreamStalledError(Exception):
    """No chunk arrived from the provider within the idle timeout."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"Provider stream stalled: no data for {seconds:g} s")
        self.seconds = seconds


async def idle_timeout(source: AsyncIterator[_T], seconds: float) -> AsyncGenerator[_T, None]:
    """Yield from `source`, failing with `StreamStalledError` when one item takes longer than `seconds`.

    Only the wait for the next item is timed: the consumer's own time between items is not. The source
    is closed when we stop (timeout, error or the consumer leaving early), releasing the connection.
    """
    watch = _Watch(seconds)
    try:
        while True:
            watch.wait_started()
            try:
                item = await anext(source)
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                if watch.expired():
                    raise StreamStalledError(seconds) from None
                raise
            watch.waiting = False  # the consumer's time is not timed
            yield item
    finally:
        watch.stop()
        close = getattr(source, "aclose", None)
        if close is not None:
            await close()


class _Watch:
    """The idle timer of one stream. A stream has thousands of items, so a wait only notes when it
    began; the one timer fires at most once per `seconds` and re-arms itself while items keep coming
    (re-arming an asyncio timeout per item cost a tenth of the processing of a streamed delta)."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._timer: asyncio.TimerHandle | None = None
        self._fired = False
        self.waiting = False
        self._since = 0.0

    def wait_started(self) -> None:
        self._since = self._loop.time()
        self.waiting = True
        if self._timer is None:
            self._timer = self._loop.call_at(self._since + self._seconds, self._check)

    def _check(self) -> None:
        now = self._loop.time()
        due = self._since + self._seconds
        if not self.waiting:
            self._timer = self._loop.call_at(now + self._seconds, self._check)
        elif now < due:
            self._timer = self._loop.call_at(due, self._check)
        else:
            self._timer = None
            self._fired = True
            if self._task is not None:
                self._task.cancel()

    def expired(self) -> bool:
        """Whether the cancellation being handled is this timer's (and no one else's too)."""
        if not self._fired or self._task is None:
            return False
        self._fired = False
        return self._task.uncancel() == 0

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
