"""A TCP proxy in front of the server that can drop the browser's connections, like a network
does: `cut()` closes every open connection and refuses new ones until `restore()`. `retarget()`
points it at another server (one restarted on another port): the browser keeps its URL."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit


class DroppingProxy:
    def __init__(self, upstream: str) -> None:
        self.retarget(upstream)
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._down = False
        self._server: asyncio.Server | None = None
        self.url = ""

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def cut(self) -> None:
        self._down = True
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def restore(self) -> None:
        self._down = False

    def retarget(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._down:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self._host, self._port)
        except OSError:  # the server is down (restarting): refused, as the browser would see it
            writer.transport.abort()
            return
        self._writers.update({writer, up_writer})
        pipes = [
            asyncio.create_task(self._pipe(reader, up_writer)),
            asyncio.create_task(self._pipe(up_reader, writer)),
        ]
        self._tasks.update(pipes)
        await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        for pipe in pipes:
            pipe.cancel()
        for w in (writer, up_writer):
            w.transport.abort()
            self._writers.discard(w)
        self._tasks.difference_update(pipes)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()


@contextlib.asynccontextmanager
async def dropping_proxy(upstream: str) -> AsyncIterator[DroppingProxy]:
    proxy = DroppingProxy(upstream)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()
