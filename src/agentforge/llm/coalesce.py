"""One socket write per request on pooled HTTP/1.1 connections: a request's head and body go out together.

httpcore2 writes a request as h11 serialises it: the head, then the body, each its own `send` on the
socket (and its own TLS record), each a system call that drops the GIL on the event loop's thread.
(py-spy on a served process put ~2 ms per model call on the head's write, but that was mostly the wait
to take the GIL back from the store threads, which moves to the next release rather than going away;
the system call, the TLS record and the peer's extra wake-up do go away.) Here a small write is held until
the next write, read or TLS upgrade of the same stream, so the head leaves with the body. Nothing is
held past the point where the connection waits for the peer (every wait for the peer is a read), so no
byte is delayed on the wire. Only HTTP/1.1-only pools are wrapped: HTTP/2 streams of one connection can
wait on each other's reads, so a held write there could wait on another stream's response.

The same streams answer the pool's question whether an idle connection is readable (asked of every
pooled connection each time the pool hands one out or takes one back) from the socket they looked up
once: anyio answers it by building all of the socket's attributes, system calls included.
"""

from __future__ import annotations

import contextlib
import select
import ssl
from collections.abc import Iterable
from typing import Any, Protocol

import httpcore2
import httpx2
from httpcore2 import AsyncNetworkBackend, AsyncNetworkStream

# A write at least this long is sent at once (with whatever is held): holding it would only copy it.
HOLD_LIMIT = 16 * 1024


class CoalescingStream(AsyncNetworkStream):
    """A network stream whose small writes are held and sent with the next write or before a read."""

    def __init__(self, stream: AsyncNetworkStream) -> None:
        self._stream = stream
        self._held = b""
        self._held_timeout: float | None = None
        self._socket: _Socket | None = None  # the connection's socket, once asked for
        self._socket_asked = False

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        if self._held:
            buffer, self._held = self._held + buffer, b""
        elif len(buffer) < HOLD_LIMIT:
            self._held, self._held_timeout = buffer, timeout
            return
        await self._stream.write(buffer, timeout)

    async def flush(self) -> None:
        """Send what is held, if anything."""
        if self._held:
            held, self._held = self._held, b""
            await self._stream.write(held, self._held_timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        # As httpcore2 does when a request's write fails: read on, a server that closed the request
        # early may still have answered; if not, the read fails.
        with contextlib.suppress(httpcore2.WriteError):
            await self.flush()
        return await self._stream.read(max_bytes, timeout)

    async def aclose(self) -> None:
        self._held = b""  # a request given up on: nothing held is worth sending
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> AsyncNetworkStream:
        await self.flush()  # a proxy's CONNECT, say, goes out before the handshake
        return CoalescingStream(await self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            if not self._socket_asked:
                self._socket_asked = True
                found = self._stream.get_extra_info("socket")
                self._socket = found if callable(getattr(found, "fileno", None)) else None
            if self._socket is not None:
                return _readable(self._socket)
        return self._stream.get_extra_info(info)


class _Socket(Protocol):
    def fileno(self) -> int: ...


def _readable(sock: _Socket) -> bool:
    """Whether reading would not block: data, or the peer closed the connection. What httpcore2
    answers, for a socket we keep instead of looking it up each time."""
    fd = sock.fileno()
    if fd < 0:
        return True  # a closed socket: the pool drops the connection
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    return bool(poll.poll(0))


class CoalescingBackend(AsyncNetworkBackend):
    """Opens connections through another backend and wraps each in a `CoalescingStream`."""

    def __init__(self, backend: AsyncNetworkBackend) -> None:
        self._backend = backend

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> AsyncNetworkStream:
        stream = await self._backend.connect_tcp(host, port, timeout, local_address, socket_options)
        return CoalescingStream(stream)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> AsyncNetworkStream:
        return CoalescingStream(await self._backend.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


def coalesce_writes(client: httpx2.AsyncClient) -> httpx2.AsyncClient:
    """Wrap the network backend of `client`'s HTTP/1.1-only connection pools (its transport and mounted
    ones), before any connection is opened. Transports of another kind are left as they are."""
    transports = [client._transport, *client._mounts.values()]
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        if type(pool) is httpcore2.AsyncConnectionPool and not pool._http2 and not pool._connections:
            pool._network_backend = CoalescingBackend(pool._network_backend)
    return client
