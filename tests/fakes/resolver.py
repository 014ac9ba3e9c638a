"""A resolver answering what a test needs: this event loop's `getaddrinfo`, patched."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

import pytest

Answer = Callable[[str], list[str]]


def resolve_as(monkeypatch: pytest.MonkeyPatch, answer: Answer) -> None:
    """Make this event loop's resolver answer `answer(host)` (the real one for an empty list)."""
    loop = asyncio.get_running_loop()
    real = loop.getaddrinfo

    async def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        # anyio (the HTTP client's resolver) passes the IDNA-encoded name as bytes.
        addresses = answer(host.decode("ascii") if isinstance(host, bytes) else str(host))
        if not addresses:
            return await real(host, port, *args, **kwargs)
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, int(port or 0)))
            for a in addresses
        ]

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)
