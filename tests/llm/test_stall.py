"""The stream idle timeout: a silent provider is cut, a slow consumer is not (llm/stall.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from agentforge.llm import events as ev
from agentforge.llm.errors import to_named_error
from agentforge.llm.stall import StreamStalledError, idle_timeout
from agentforge.model.errors import APIError
from tests.fakes.openai_server import FakeOpenAI, Script, reply
from tests.llm.streaming import collect, failure, model_for


class _Source:
    """An async iterator that waits `gaps[i]` seconds before item i (None: forever, a silent
    provider), and records being closed."""

    def __init__(self, gaps: list[float | None]) -> None:
        self.gaps = gaps
        self.closed = False

    def __aiter__(self) -> AsyncIterator[int]:
        return self._items()

    async def _items(self) -> AsyncIterator[int]:
        try:
            for index, gap in enumerate(self.gaps):
                if gap is None:
                    await asyncio.Event().wait()  # never set
                else:
                    await asyncio.sleep(gap)
                yield index
        finally:
            self.closed = True


async def test_items_within_the_timeout_pass_through() -> None:
    source = _Source([0.0, 0.01, 0.0])
    assert [item async for item in idle_timeout(aiter(source), 0.5)] == [0, 1, 2]
    assert source.closed


async def test_a_silent_source_fails_as_stalled_and_is_closed() -> None:
    source = _Source([0.0, None])
    received: list[int] = []
    started = asyncio.get_running_loop().time()
    with pytest.raises(StreamStalledError) as caught:
        async for item in idle_timeout(aiter(source), 0.05):
            received.append(item)
    assert received == [0]
    assert asyncio.get_running_loop().time() - started < 1
    assert caught.value.seconds == 0.05 and str(caught.value).startswith("Provider stream stalled")
    assert source.closed


async def test_time_the_consumer_spends_between_items_does_not_count() -> None:
    received = []
    async for item in idle_timeout(aiter(_Source([0.0, 0.0])), 0.02):
        await asyncio.sleep(0.04)  # twice the timeout, spent by us, not by the provider
        received.append(item)
    assert received == [0, 1]


async def test_leaving_early_closes_the_source() -> None:
    source = _Source([0.0, 0.0, 0.0])
    wrapped = idle_timeout(aiter(source), 1.0)
    assert await anext(wrapped) == 0
    await wrapped.aclose()
    assert source.closed


def test_a_stall_is_a_retryable_api_error() -> None:
    error = to_named_error(StreamStalledError(120.0), provider_id="fake")
    assert isinstance(error, APIError)
    assert error.data.is_retryable and error.data.message.startswith("Provider stream stalled")


async def test_the_openai_adapter_cuts_a_stalled_stream(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Script().text("partial").sleep(30).text("never").finish())
    model = model_for(fake_openai, chunk_timeout=0.05)
    started = asyncio.get_running_loop().time()
    assert isinstance(await failure(model), StreamStalledError)
    assert asyncio.get_running_loop().time() - started < 2
    # The connection was released: the next request on the same client works.
    fake_openai.enqueue(reply("fine"))
    events = await collect(model)
    assert [e.text for e in events if isinstance(e, ev.TextDelta)] == ["fine"]
