"""Provider SDK clients pooled per event loop, shared by every runtime on the loop, and closed when the
last runtime on the loop lets go of them.

A pooled connection belongs to the loop that opened it, so each adapter keeps one SDK client per loop and
endpoint. Several runtimes may share a loop (tests, the CLI beside a server), so none of them may close
the clients on its own: each holds a lease (`acquire_clients`) from open to close, and releasing a
loop's last lease closes every adapter's clients of that loop. Code that streams without a runtime (the
adapter tests, the benchmarks) closes them itself with `close_all_clients` or an adapter's pool.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import weakref
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

import httpx2

_C = TypeVar("_C")

_pools: list[ClientPool[Any]] = []  # every adapter's pool, registered when the adapter is imported
_leases: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, int] = weakref.WeakKeyDictionary()


class ClientPool(Generic[_C]):
    """One adapter's SDK clients: one per (running loop, endpoint key). `close` closes one client."""

    def __init__(self, close: Callable[[_C], Awaitable[object]]) -> None:
        self._close = close
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, _C]] = (
            weakref.WeakKeyDictionary()
        )
        _pools.append(self)

    def get(self, key: Hashable, create: Callable[[], _C]) -> _C:
        """The running loop's client for `key`, created on first use."""
        per_loop = self._clients.setdefault(asyncio.get_running_loop(), {})
        client = per_loop.get(key)
        if client is None:
            client = per_loop[key] = create()
        return client

    def clients(self) -> list[_C]:
        """The running loop's clients."""
        return list(self._clients.get(asyncio.get_running_loop(), {}).values())

    async def close(self) -> None:
        """Close the running loop's clients."""
        await self._close_all(self._take())

    def _take(self) -> list[_C]:
        # Taken at once, before any await: a client created meanwhile belongs to a new user of the loop.
        return list(self._clients.pop(asyncio.get_running_loop(), {}).values())

    async def _close_all(self, clients: list[_C]) -> None:
        for client in clients:
            await self._close(client)


class ClientLease:
    """A runtime's hold on its loop's pooled clients, from `acquire_clients()` to `release()`."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._released = False

    async def release(self) -> None:
        """Let go (once; later calls do nothing). The loop's last lease closes its clients: nothing
        holding a lease streams any more, and whatever streams without one closes its clients itself."""
        if self._released:
            return
        if asyncio.get_running_loop() is not self._loop:
            raise RuntimeError("a client lease must be released on the event loop that acquired it")
        self._released = True
        remaining = _leases.get(self._loop, 1) - 1
        if remaining > 0:
            _leases[self._loop] = remaining
            return
        _leases.pop(self._loop, None)
        await close_all_clients()


def acquire_clients() -> ClientLease:
    """Hold the running loop's pooled clients open until the returned lease is released."""
    loop = asyncio.get_running_loop()
    _leases[loop] = _leases.get(loop, 0) + 1
    return ClientLease(loop)


def pooled_clients() -> list[Any]:
    """Every adapter's clients of the running loop."""
    return [client for pool in _pools for client in pool.clients()]


async def close_all_clients() -> None:
    """Close every adapter's clients of the running loop."""
    taken = [(pool, pool._take()) for pool in _pools]
    for pool, clients in taken:
        await pool._close_all(clients)


_ssl_context: ssl.SSLContext | None = None
_ssl_context_lock = threading.Lock()


def shared_ssl_context() -> ssl.SSLContext:
    """httpx2's default verifying context, built once per process for every pool (~30 ms each, and a
    pool builds one even for an http:// endpoint, which a redirect may still take to https). A
    runtime has it built off the event loop when it opens (`prepare_ssl_context`); a caller that
    comes while that is under way waits for it rather than building another."""
    global _ssl_context
    context = _ssl_context
    if context is None:
        with _ssl_context_lock:
            if _ssl_context is None:
                _ssl_context = httpx2.create_ssl_context()
            context = _ssl_context
    return context


async def prepare_ssl_context() -> None:
    """Build the shared SSL context in a worker thread: reading and parsing the CA bundle is file IO
    (OpenSSL's, without the GIL) the first model call would otherwise do on the event loop."""
    await asyncio.to_thread(shared_ssl_context)
