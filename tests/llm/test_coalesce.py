"""One socket write per request on pooled HTTP/1.1 connections (llm/coalesce.py)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore2
import httpx2
import pytest
from httpcore2 import AsyncNetworkBackend, AsyncNetworkStream

from agentforge.llm import openai_chat
from agentforge.llm.coalesce import HOLD_LIMIT, CoalescingBackend, CoalescingStream, coalesce_writes
from tests.fakes.openai_server import FakeOpenAI, reply
from tests.llm.streaming import collect, model_for


class RecordingStream(AsyncNetworkStream):
    """A stream that records what is written to it and reads from a script."""

    def __init__(self, reads: list[bytes] | None = None, fail_writes: bool = False) -> None:
        self.writes: list[tuple[bytes, float | None]] = []
        self.log: list[str] = []
        self.reads = reads or []
        self.fail_writes = fail_writes
        self.closed = False

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.log.append("write")
        if self.fail_writes:
            raise httpcore2.WriteError("peer closed")
        self.writes.append((buffer, timeout))

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self.log.append("read")
        return self.reads.pop(0) if self.reads else b""

    async def aclose(self) -> None:
        self.closed = True

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> AsyncNetworkStream:
        self.log.append("start_tls")
        return RecordingStream()

    def get_extra_info(self, info: str) -> Any:
        return None if info == "socket" else f"info:{info}"


class RecordingBackend(AsyncNetworkBackend):
    """Opens real connections through httpcore2's own backend and records every write on them."""

    def __init__(self) -> None:
        self._backend = httpcore2.AnyIOBackend()
        self.writes: list[bytes] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> AsyncNetworkStream:
        stream = await self._backend.connect_tcp(host, port, timeout, local_address, socket_options)
        return _Recorded(stream, self)

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class _Recorded(AsyncNetworkStream):
    def __init__(self, stream: AsyncNetworkStream, backend: RecordingBackend) -> None:
        self._stream, self._backend = stream, backend

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._backend.writes.append(buffer)
        await self._stream.write(buffer, timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._stream.read(max_bytes, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


async def test_a_small_write_leaves_with_the_next_one() -> None:
    inner = RecordingStream()
    stream = CoalescingStream(inner)
    await stream.write(b"HEAD\r\n\r\n", timeout=3.0)
    assert inner.writes == [], "the head waits for the body"
    await stream.write(b"body", timeout=3.0)
    assert inner.writes == [(b"HEAD\r\n\r\nbody", 3.0)]


async def test_what_is_held_goes_out_before_the_stream_reads() -> None:
    inner = RecordingStream(reads=[b"HTTP/1.1 200 OK\r\n"])
    stream = CoalescingStream(inner)
    await stream.write(b"GET / HTTP/1.1\r\n\r\n", timeout=2.0)
    assert await stream.read(1024) == b"HTTP/1.1 200 OK\r\n"
    assert inner.log == ["write", "read"]
    assert inner.writes == [(b"GET / HTTP/1.1\r\n\r\n", 2.0)]


async def test_a_large_write_is_sent_at_once_with_what_is_held() -> None:
    inner = RecordingStream()
    stream = CoalescingStream(inner)
    large = b"x" * HOLD_LIMIT
    await stream.write(large)
    assert inner.writes == [(large, None)], "nothing large is held"
    await stream.write(b"head")
    await stream.write(large)
    assert inner.writes[1:] == [(b"head" + large, None)]
    await stream.write(b"")
    await stream.read(10)
    assert len(inner.writes) == 2, "an empty write sends nothing; nothing was left to flush"


async def test_a_failed_flush_still_reads_what_the_server_answered() -> None:
    inner = RecordingStream(reads=[b"HTTP/1.1 413 Payload Too Large\r\n"], fail_writes=True)
    stream = CoalescingStream(inner)
    await stream.write(b"head")
    assert await stream.read(1024) == b"HTTP/1.1 413 Payload Too Large\r\n"


async def test_tls_starts_after_what_is_held_and_the_upgraded_stream_coalesces_too() -> None:
    inner = RecordingStream()
    stream = CoalescingStream(inner)
    await stream.write(b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
    upgraded = await stream.start_tls(ssl.create_default_context(), "example.com")
    assert inner.log == ["write", "start_tls"]
    assert isinstance(upgraded, CoalescingStream)
    assert stream.get_extra_info("ssl_object") == "info:ssl_object"


async def test_closing_drops_what_is_held() -> None:
    inner = RecordingStream()
    stream = CoalescingStream(inner)
    await stream.write(b"head")
    await stream.aclose()
    assert inner.closed and inner.writes == []


async def test_a_request_goes_out_in_one_write_on_a_real_connection(fake_openai: FakeOpenAI) -> None:
    recording = RecordingBackend()
    async with httpx2.AsyncClient() as client:
        pool = client._transport._pool  # type: ignore[attr-defined]
        pool._network_backend = recording
        coalesce_writes(client)
        assert isinstance(pool._network_backend, CoalescingBackend)
        fake_openai.enqueue(reply("hi"))
        body = b'{"model": "m", "messages": [], "stream": true}'
        response = await client.post(f"{fake_openai.base_url}/chat/completions", content=body)
        assert response.status_code == 200
    assert len(recording.writes) == 1
    assert recording.writes[0].startswith(b"POST ") and recording.writes[0].endswith(body)


def test_only_http1_pools_are_wrapped() -> None:
    http1 = httpx2.AsyncClient()
    http2 = httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(http2=True))
    proxied = httpx2.AsyncClient(proxy="http://127.0.0.1:9")
    for client in (http1, http2, proxied):
        coalesce_writes(client)
    assert isinstance(http1._transport._pool._network_backend, CoalescingBackend)  # type: ignore[attr-defined]
    assert not isinstance(http2._transport._pool._network_backend, CoalescingBackend)  # type: ignore[attr-defined]
    proxy_pools = [t._pool for t in proxied._mounts.values() if t is not None]  # type: ignore[attr-defined]
    assert proxy_pools and not any(isinstance(p._network_backend, CoalescingBackend) for p in proxy_pools)


async def test_the_openai_clients_pool_coalesces(fake_openai: FakeOpenAI) -> None:
    client = openai_chat.client_for(model_for(fake_openai))
    assert isinstance(client.http._transport._pool._network_backend, CoalescingBackend)  # type: ignore[attr-defined]
    fake_openai.enqueue(reply("Hello there"), reply("again"))
    for expected in ("Hello there", "again"):  # the second request on the pooled connection
        events = await collect(model_for(fake_openai))
        assert expected in "".join(getattr(e, "text", "") for e in events)


@pytest.mark.parametrize("size", [1, HOLD_LIMIT - 1])
async def test_held_bytes_are_sent_whole(size: int) -> None:
    inner = RecordingStream()
    stream = CoalescingStream(inner)
    await stream.write(b"a" * size)
    await stream.flush()
    await stream.flush()
    assert inner.writes == [(b"a" * size, None)]


async def test_an_idle_connection_is_readable_once_the_peer_closes_it() -> None:
    accepted: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put(writer)

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        stream = await CoalescingBackend(httpcore2.AnyIOBackend()).connect_tcp("127.0.0.1", port)
        peer = await accepted.get()
        assert stream.get_extra_info("is_readable") is False
        assert stream.get_extra_info("is_readable") is False, "asked again, from the kept socket"
        peer.close()
        await peer.wait_closed()  # on loopback the FIN is in our socket's queue once close returns
        assert stream.get_extra_info("is_readable") is True
        assert stream.get_extra_info("server_addr") == ("127.0.0.1", port)
        await stream.aclose()


async def test_a_stream_without_a_socket_answers_as_its_inner_one() -> None:
    assert CoalescingStream(RecordingStream()).get_extra_info("is_readable") == "info:is_readable"
