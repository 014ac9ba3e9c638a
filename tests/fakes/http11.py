"""The HTTP/1.1 side of the fake provider: read requests, write plain or chunked (streamed) responses.

Deliberately tiny: one request at a time per connection (no pipelining), keep-alive by default,
`Content-Length` or chunked request bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

MAX_HEADER_BYTES = 64 * 1024

ScriptT = TypeVar("ScriptT")


# Script steps every fake protocol understands, whatever its own events look like.
@dataclass(slots=True)
class Raw:
    """Send `data: <data>` verbatim (e.g. a malformed chunk)."""

    data: str


@dataclass(slots=True)
class Pause:
    """Stop streaming until `gate` is set (giving up if the client leaves)."""

    gate: asyncio.Event


@dataclass(slots=True)
class Sleep:
    """Go silent for `seconds` (giving up early if the client leaves)."""

    seconds: float


@dataclass(slots=True)
class Drop:
    """Close the connection here, mid-stream, without finishing the body."""


class PeerGone(Exception):
    """The client closed the connection while we were streaming to it."""


@dataclass(slots=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    query: str = ""

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"


class Connection:
    """One client connection: reads requests, writes plain or chunked (streamed) responses."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._eof_watch: asyncio.Future[bytes] | None = None

    async def read_request(self) -> Request | None:
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            return None
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path, _version = request_line.split(" ", 2)
        headers: dict[str, str] = {}
        for line in header_lines:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        body = await self._read_body(headers)
        route, _, query = path.partition("?")
        return Request(method, route, headers, body, query)

    async def _read_body(self, headers: dict[str, str]) -> bytes:
        if headers.get("transfer-encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while size := int((await self.reader.readuntil(b"\r\n")).strip().split(b";")[0], 16):
                parts.append(await self.reader.readexactly(size + 2))
            await self.reader.readuntil(b"\r\n")
            return b"".join(part[:-2] for part in parts)
        return await self.reader.readexactly(int(headers.get("content-length", "0")))

    async def send_json(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        lines = [f"HTTP/1.1 {status} {_phrase(status)}", "content-type: application/json"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        lines.append(f"content-length: {len(payload)}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        await self.writer.drain()

    async def start_stream(self, content_type: str = "text/event-stream; charset=utf-8") -> None:
        head = (
            f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\n"
            "cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        self.writer.write(head.encode())
        await self._drain()
        # While streaming, the client sends nothing (no pipelining); a read that returns means it left.
        self._eof_watch = asyncio.ensure_future(self.reader.read(1))

    async def send_event(self, data: str, *, event: str | None = None) -> None:
        frame = (f"event: {event}\n" if event else "").encode() + f"data: {data}\n\n".encode()
        await self.send_chunk(frame)

    async def send_chunk(self, data: bytes) -> None:
        """One chunk of a streamed body (`start_stream` first)."""
        if self.peer_gone:
            raise PeerGone
        self.writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await self._drain()

    async def end_stream(self) -> None:
        self.writer.write(b"0\r\n\r\n")
        await self._drain()
        watch, self._eof_watch = self._eof_watch, None
        if watch is not None and not watch.done():
            # Wait until the watcher has really stopped reading: the next request's read needs the stream.
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await watch

    async def wait(self, awaitable: asyncio.Future[Any] | None, seconds: float | None) -> None:
        """Wait for `awaitable` (or just `seconds`), giving up as soon as the client disconnects."""
        assert self._eof_watch is not None
        waiters: set[asyncio.Future[Any]] = {self._eof_watch}
        if awaitable is not None:
            waiters.add(awaitable)
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if awaitable is not None and not awaitable.done():
                awaitable.cancel()
        if self.peer_gone:
            raise PeerGone

    async def hold(self, step: Pause | Sleep) -> None:
        """Carry out a Pause or Sleep step."""
        if isinstance(step, Pause):
            await self.wait(asyncio.ensure_future(step.gate.wait()), None)
        else:
            await self.wait(None, step.seconds)

    @property
    def peer_gone(self) -> bool:
        return self._eof_watch is not None and self._eof_watch.done()

    def close(self) -> None:
        self._stop_watching()
        self.writer.close()

    def _stop_watching(self) -> None:
        if self._eof_watch is not None and not self._eof_watch.done():
            self._eof_watch.cancel()
        self._eof_watch = None

    async def _drain(self) -> None:
        try:
            await self.writer.drain()
        except ConnectionError as exc:
            raise PeerGone from exc


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Status"


class FakeServer(Generic[ScriptT]):
    """What every fake provider shares: a loopback server on a free port, a FIFO of scripts (one per
    request), one task per connection with keep-alive, and a clean stop. Subclasses answer requests in
    `_respond` and set `base_path` (appended to the origin to make `base_url`)."""

    base_path = "/v1"

    def __init__(self) -> None:
        self.origin = ""
        self.base_url = ""
        self.connections = 0  # TCP connections accepted (keep-alive reuses them)
        self._scripts: deque[ScriptT] = deque()
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        server = await asyncio.start_server(self._handle_connection, "127.0.0.1", 0, limit=MAX_HEADER_BYTES)
        self._server = server
        self.origin = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self.base_url = f"{self.origin}{self.base_path}"

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def enqueue(self, *turns: ScriptT) -> None:
        self._scripts.extend(turns)

    def pending(self) -> int:
        """Scripts not yet consumed."""
        return len(self._scripts)

    async def _handle_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self.connections += 1
        conn = Connection(reader, writer)
        try:
            while (request := await conn.read_request()) is not None:
                if not await self._respond(conn, request) or not request.keep_alive:
                    break
        except (PeerGone, ConnectionError, asyncio.CancelledError):
            pass  # only `stop()` cancels handlers; ending quietly keeps asyncio's callback silent
        finally:
            conn.close()
            self._handlers.discard(task)

    async def _respond(self, conn: Connection, request: Request) -> bool:
        """Answer one request; False when the connection must be closed afterwards."""
        raise NotImplementedError
