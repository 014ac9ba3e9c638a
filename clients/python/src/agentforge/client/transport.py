"""An httpx2 transport that calls an ASGI app in the same event loop and streams its response.

httpx2's own `ASGITransport` waits for the app to finish before returning the body, so a Server-Sent
Events route (which never finishes) cannot be read through it. Here each request runs the app in its
own task; the response is returned as soon as the app sends `http.response.start`, and body chunks
reach the reader as the app sends them. Closing the response tells the app the client went away
(`http.disconnect`) and then cancels the app's task, as a server does when a socket closes.

`lifespan()` runs the app's startup and shutdown (the store and runtime live there).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

# uvicorn's HTTP scope says 2.3: Starlette then watches `receive()` for the disconnect while streaming.
_ASGI = {"version": "3.0", "spec_version": "2.3"}
# How many body chunks may wait for the reader before the app's `send` waits (backpressure).
DEFAULT_BODY_BUFFER_CHUNKS = 64
# How long a lifespan task may take to return after answering startup failure or shutdown.
_LIFESPAN_SETTLE_SECONDS = 5.0


class LifespanError(RuntimeError):
    """The app reported that its startup or shutdown failed."""


class StreamingASGITransport(httpx2.AsyncBaseTransport):
    """Serves httpx2 requests from an ASGI app in this event loop, streaming response bodies.

    `raise_app_exceptions`: an exception the app raises is re-raised to the caller (handy in tests);
    otherwise it becomes a 500 answer or, mid-body, a broken-stream error, as over a real socket.
    `disconnect_grace`: seconds the app gets to finish on its own after `http.disconnect` before its
    task is cancelled. `body_buffer_chunks`: how far the app may run ahead of the reader.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        raise_app_exceptions: bool = True,
        client: tuple[str, int] = ("127.0.0.1", 123),
        root_path: str = "",
        disconnect_grace: float = 0.25,
        body_buffer_chunks: int = DEFAULT_BODY_BUFFER_CHUNKS,
    ) -> None:
        self.app = app
        self.body_buffer_chunks = body_buffer_chunks
        self.raise_app_exceptions = raise_app_exceptions
        self.client = client
        self.root_path = root_path
        self.disconnect_grace = disconnect_grace
        # Lifespan state (Starlette `lifespan` may yield a dict); each request gets a shallow copy.
        self._state: dict[str, Any] = {}

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        """An async context manager that runs the app's startup on entry and shutdown on exit."""
        return _run_lifespan(self.app, self._state)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        exchange = _Exchange(self, self._scope_for(request), request)
        return await exchange.start()

    def _scope_for(self, request: httpx2.Request) -> dict[str, Any]:
        url = request.url
        return {
            "type": "http",
            "asgi": dict(_ASGI),
            "http_version": "1.1",
            "method": request.method,
            "headers": [(key.lower(), value) for key, value in request.headers.raw],
            "scheme": url.scheme,
            "path": url.path,
            "raw_path": url.raw_path.split(b"?")[0],
            "query_string": url.query,
            "server": (url.host, url.port),
            "client": self.client,
            "root_path": self.root_path,
            "state": dict(self._state),
        }


@dataclass(frozen=True, slots=True)
class _BodyEnd:
    """Queued after the last body chunk; `error` is set when the body was cut short."""

    error: BaseException | None = None


class _Exchange:
    """One request/response cycle between httpx2 and the app."""

    def __init__(self, owner: StreamingASGITransport, scope: dict[str, Any], request: httpx2.Request) -> None:
        self._owner = owner
        self._scope = scope
        self._request = request
        self._request_chunks: AsyncIterator[bytes] | None = None
        self._request_complete = False
        self._status: int | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        self._started = asyncio.Event()
        self._body_complete = False
        # Set when the response is complete or the client closed it; `receive()` then says disconnect.
        self._finished = asyncio.Event()
        # Unbounded so that an end marker is queued without waiting (it must never be lost to a
        # cancelled `put`); data chunks wait for room in `_put_chunk` instead.
        self._chunks: asyncio.Queue[bytes | _BodyEnd] = asyncio.Queue()
        self._room = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._error_reported = False

    async def start(self) -> httpx2.Response:
        self._task = asyncio.create_task(
            self._run_app(), name=f"asgi {self._request.method} {self._scope['path']}"
        )
        started = asyncio.create_task(self._started.wait())
        try:
            await asyncio.wait({self._task, started}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            # The caller gave up (cancelled) before the answer started: the app must not run on.
            self._task.cancel()
            raise
        finally:
            started.cancel()
        if self._status is None:
            return await self._answer_without_start()
        return httpx2.Response(self._status, headers=self._headers, stream=_StreamingBody(self))

    async def _answer_without_start(self) -> httpx2.Response:
        assert self._task is not None and self._task.done()
        error = None if self._task.cancelled() else self._task.exception()
        if self._owner.raise_app_exceptions:
            if error is not None:
                self._error_reported = True
                raise error
            raise RuntimeError("the ASGI app returned without starting a response")
        return httpx2.Response(
            500, headers=[(b"content-type", b"text/plain")], content=b"Internal Server Error"
        )

    async def _run_app(self) -> None:
        try:
            await self._owner.app(self._scope, self._receive, self._send)
        except Exception as exc:
            if not self._body_complete:
                self._chunks.put_nowait(_BodyEnd(exc))
            raise
        if not self._body_complete:
            incomplete = httpx2.RemoteProtocolError("the app ended before completing the body")
            self._chunks.put_nowait(_BodyEnd(incomplete))

    async def _receive(self) -> Message:
        if not self._request_complete:
            return await self._next_request_message()
        await self._finished.wait()
        return {"type": "http.disconnect"}

    async def _next_request_message(self) -> Message:
        stream = self._request.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        if self._request_chunks is None:
            self._request_chunks = stream.__aiter__()
        try:
            body = await self._request_chunks.__anext__()
        except StopAsyncIteration:
            self._request_complete = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return {"type": "http.request", "body": body, "more_body": True}

    async def _send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            if self._status is not None:
                raise RuntimeError("the ASGI app started the response twice")
            self._status = int(message["status"])
            self._headers = [(bytes(key), bytes(value)) for key, value in message.get("headers", [])]
            self._started.set()
        elif message["type"] == "http.response.body":
            await self._send_body(message)

    async def _send_body(self, message: Message) -> None:
        if self._status is None:
            raise RuntimeError("the ASGI app sent a body before starting the response")
        if self._finished.is_set():
            # The client is gone or the body already ended; a server drops such writes.
            return
        body = bytes(message.get("body", b""))
        if body and self._request.method != "HEAD":
            await self._put_chunk(body)
        if not message.get("more_body", False):
            self._body_complete = True
            self._chunks.put_nowait(_BodyEnd())
            self._finished.set()

    async def _put_chunk(self, body: bytes) -> None:
        # Backpressure: a reader that falls behind makes the app wait rather than buffer without end.
        while self._chunks.qsize() >= self._owner.body_buffer_chunks:
            self._room.clear()
            await self._room.wait()
        self._chunks.put_nowait(body)

    async def read_body(self) -> AsyncIterator[bytes]:
        while True:
            item = await self._chunks.get()
            self._room.set()
            if isinstance(item, bytes):
                yield item
                continue
            if item.error is not None and not self._finished.is_set():
                raise self._reader_error(item.error)
            return

    def _reader_error(self, error: BaseException) -> BaseException:
        if self._owner.raise_app_exceptions and not isinstance(error, httpx2.HTTPError):
            self._error_reported = True
            return error
        return httpx2.RemoteProtocolError(f"the response body was cut short: {error!r}")

    async def close(self) -> None:
        """The client is done with the response: disconnect, then stop the app if it lingers."""
        if not self._finished.is_set():
            self._finished.set()
            # Wake a reader still waiting for a chunk that will never come.
            self._chunks.put_nowait(_BodyEnd())
        task = self._task
        if task is None:
            return
        if not task.done():
            try:
                await asyncio.wait({task}, timeout=self._owner.disconnect_grace)
            finally:
                # Also when this close is itself cancelled: the app must not outlive its client.
                if not task.done():
                    task.cancel()
            await asyncio.wait({task})
        self._raise_unreported_error(task)

    def _raise_unreported_error(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or self._error_reported:
            return
        error = task.exception()
        if error is not None and self._owner.raise_app_exceptions:
            # E.g. Starlette sends its 500 page and then re-raises: surface the bug, once.
            self._error_reported = True
            raise error


class _StreamingBody(httpx2.AsyncByteStream):
    def __init__(self, exchange: _Exchange) -> None:
        self._exchange = exchange

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._exchange.read_body():
            yield chunk

    async def aclose(self) -> None:
        await self._exchange.close()


@asynccontextmanager
async def _run_lifespan(app: ASGIApp, state: dict[str, Any]) -> AsyncIterator[None]:
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    outbox: asyncio.Queue[Message] = asyncio.Queue()
    scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": state}

    async def send(message: Message) -> None:
        await outbox.put(message)

    async def run_app() -> None:
        await app(scope, inbox.get, send)

    task = asyncio.create_task(run_app(), name="asgi lifespan")
    try:
        await inbox.put({"type": "lifespan.startup"})
        await _expect(task, outbox, "lifespan.startup")
    except BaseException:
        await _settle(task)
        raise
    try:
        yield
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        try:
            await _expect(task, outbox, "lifespan.shutdown")
        finally:
            await _settle(task)


async def _expect(task: asyncio.Task[None], outbox: asyncio.Queue[Message], phase: str) -> None:
    """Waits for `<phase>.complete`; raises on `<phase>.failed` or if the app stops answering."""
    reply = asyncio.create_task(outbox.get())
    try:
        await asyncio.wait({task, reply}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not reply.done():
            reply.cancel()
    if reply.done() and not reply.cancelled():
        message = reply.result()
        if message["type"] == f"{phase}.complete":
            return
        if message["type"] == f"{phase}.failed":
            raise LifespanError(f"{phase} failed: {message.get('message', '')}")
        raise LifespanError(f"unexpected lifespan message during {phase}: {message['type']}")
    error = None if task.cancelled() else task.exception()
    if error is not None:
        raise LifespanError(f"{phase} failed: {error!r}") from error
    raise LifespanError(f"the app returned during {phase} without answering")


async def _settle(task: asyncio.Task[None]) -> None:
    """Lets the lifespan task end (cancelling it if it hangs) and consumes its outcome.

    A failure has already been reported through `.failed`; what the task raises afterwards is the
    same error, so it is only retrieved here, not raised twice.
    """
    if not task.done():
        await asyncio.wait({task}, timeout=_LIFESPAN_SETTLE_SECONDS)
    if not task.done():
        task.cancel()
        await asyncio.wait({task})
    if not task.cancelled():
        task.exception()
