"""A tiny HTTP/1.1 server on 127.0.0.1 for the webfetch tests: canned routes, recorded requests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

IMAGE_BYTES = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


@dataclass(slots=True)
class SeenRequest:
    path: str
    headers: dict[str, str]


Handler = Callable[[SeenRequest, asyncio.StreamWriter], Awaitable[None]]


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} Status", "connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def respond(status: int, body: bytes, content_type: str, **extra: str) -> Handler:
    async def handler(_request: SeenRequest, writer: asyncio.StreamWriter) -> None:
        headers = {"content-type": content_type, "content-length": str(len(body)), **extra}
        writer.write(_head(status, headers) + body)
        await writer.drain()

    return handler


@dataclass
class WebServer:
    routes: dict[str, Handler] = field(default_factory=dict)
    requests: list[SeenRequest] = field(default_factory=list)
    streamed_bytes: int = 0  # what the endless route managed to send before the client hung up
    endless_ended: asyncio.Event = field(default_factory=asyncio.Event)  # the client hung up
    base_url: str = ""
    handlers: set[asyncio.Task[object]] = field(default_factory=set)

    def url(self, path: str) -> str:
        return self.base_url + path

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        task.add_done_callback(self.handlers.discard)
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            request_line, *header_lines = head.split("\r\n")
            path = request_line.split(" ")[1]
            headers = {}
            for line in header_lines:
                if ":" in line:
                    name, value = line.split(":", 1)
                    headers[name.strip().lower()] = value.strip()
            request = SeenRequest(path, headers)
            self.requests.append(request)
            handler = self.routes.get(path, respond(404, b"not here", "text/plain"))
            await handler(request, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def endless(self, _request: SeenRequest, writer: asyncio.StreamWriter) -> None:
        """A chunked body that never ends: only the client's size limit stops it."""
        writer.write(_head(200, {"content-type": "text/plain", "transfer-encoding": "chunked"}))
        chunk = b"x" * 65536
        framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
        try:
            for _ in range(1000):  # bounded all the same: 64 MB
                writer.write(framed)
                await writer.drain()
                self.streamed_bytes += len(chunk)
        finally:
            self.endless_ended.set()


@contextlib.asynccontextmanager
async def web_server() -> AsyncIterator[WebServer]:
    server = WebServer()
    listener = await asyncio.start_server(server._serve, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    server.base_url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        listener.close()
        for task in list(server.handlers):
            task.cancel()
        await asyncio.gather(*server.handlers, return_exceptions=True)
        await listener.wait_closed()
