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
    One timeout is re-armed per item rather than a new one entered (a stream has thousands of items).
    """
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(None) as deadline:
            while True:
                deadline.reschedule(loop.time() + seconds)
                try:
                    item = await anext(source)
                except StopAsyncIteration:
                    return
                deadline.reschedule(None)  # the consumer's time is not timed
                yield item
    except TimeoutError:
        raise StreamStalledError(seconds) from None
    finally:
        close = getattr(source, "aclose", None)
        if close is not None:
            await close()
