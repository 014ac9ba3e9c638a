"""Drives an ASGI app from synchronous code: the sync SDK's in-process transport.

The app (and its lifespan: store, runtime) runs on an event loop in a background thread, through
`StreamingASGITransport`. Each request and each body chunk is handed across with
`run_coroutine_threadsafe`, so a sync reader of `/event` gets events as the app produces them, and
closing the response disconnects the app's handler just as in the async case.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import AsyncExitStack
from typing import Any, TypeVar

import httpx2

from agentforge.client.transport import ASGIApp, StreamingASGITransport

T = TypeVar("T")


class BlockingASGITransport(httpx2.BaseTransport):
    """A sync httpx2 transport onto an ASGI app running in a private event-loop thread.

    The thread and (when `lifespan` is true) the app's startup begin with the first request or an
    explicit `start()`; `close()` (which `httpx2.Client.close()` calls) runs shutdown and stops the thread.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        lifespan: bool = True,
        raise_app_exceptions: bool = True,
        disconnect_grace: float = 0.25,
    ) -> None:
        self._inner = StreamingASGITransport(
            app, raise_app_exceptions=raise_app_exceptions, disconnect_grace=disconnect_grace
        )
        self._run_lifespan = lifespan
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stack = AsyncExitStack()

    def start(self) -> None:
        # Held until the lifespan has started: a second thread's first request waits for the app.
        with self._lock:
            if self._loop is not None:
                return
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="agentforge-asgi", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
            if self._run_lifespan:
                try:
                    self.call(self._stack.enter_async_context(self._inner.lifespan()))
                except BaseException:
                    self._stop_loop()
                    raise

    @property
    def running(self) -> bool:
        return self._loop is not None

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Runs a coroutine on the app's loop and waits for its result in this thread."""
        loop = self._loop
        if loop is None:
            coroutine.close()
            raise RuntimeError("the transport is not started or already closed")
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        try:
            return future.result()
        except BaseException:
            # E.g. KeyboardInterrupt while waiting: do not leave the coroutine running behind us.
            future.cancel()
            raise

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        self.start()
        # The sync request body may be a sync-only stream: read it here, hand bytes to the loop.
        body = request.read()
        async_request = httpx2.Request(
            request.method, request.url, headers=request.headers, stream=httpx2.ByteStream(body)
        )
        response = self.call(self._inner.handle_async_request(async_request))
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code, headers=response.headers, stream=_BlockingBody(self, stream)
        )

    def close(self) -> None:
        if self._loop is None:
            return
        try:
            self.call(self._stack.aclose())
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(_cancel_leftover_tasks(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
        self._loop, self._thread = None, None


async def _cancel_leftover_tasks() -> None:
    """Cancels whatever the app left running (e.g. streams nobody closed) so the loop can stop."""
    current = asyncio.current_task()
    leftovers = [task for task in asyncio.all_tasks() if task is not current]
    for task in leftovers:
        task.cancel()
    if leftovers:
        await asyncio.wait(leftovers)
    await asyncio.get_running_loop().shutdown_asyncgens()


class _BlockingBody(httpx2.SyncByteStream):
    """A sync view of an async body: each chunk is awaited on the app's loop."""

    def __init__(self, owner: BlockingASGITransport, stream: httpx2.AsyncByteStream) -> None:
        self._owner = owner
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        chunks = self._stream.__aiter__()
        while True:
            try:
                chunk = self._owner.call(_next_chunk(chunks))
            except StopAsyncIteration:
                return
            yield chunk

    def close(self) -> None:
        # After the transport closed, its loop already cancelled the app's handlers.
        if self._owner.running:
            self._owner.call(self._stream.aclose())


async def _next_chunk(chunks: AsyncIterator[bytes]) -> bytes:
    return await chunks.__anext__()
