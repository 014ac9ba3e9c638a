"""What a local MCP server writes to stderr: logged line by line, the last lines kept to explain a failure.

A server that cannot start usually says why on stderr ("can't open file", an import error, a
traceback); "Connection closed" alone would leave the user guessing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from typing import TextIO

log = logging.getLogger("agentforge.mcp")

_KEPT_LINES = 20
_CHUNK = 4096
_MAX_LINE = 16384


class StderrTail:
    """A pipe whose write end (`sink`) becomes the server's stderr; we read the other end."""

    def __init__(self, server: str) -> None:
        read_fd, write_fd = os.pipe()
        self.server = server
        self.sink: TextIO = open(write_fd, "w", encoding="utf-8", errors="replace")  # noqa: SIM115
        self._source = open(read_fd, "rb", buffering=0)  # noqa: SIM115
        self._lines: deque[str] = deque(maxlen=_KEPT_LINES)
        self._transport: asyncio.ReadTransport | None = None
        self._pump: asyncio.Task[None] | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), self._source
        )
        self._transport = transport
        self._pump = asyncio.create_task(self._read_all(reader), name=f"mcp-stderr:{self.server}")

    def release_sink(self) -> None:
        """Close our copy of the write end once the server is spawned: then EOF means it exited."""
        self.sink.close()

    def text(self) -> str:
        return "\n".join(line for line in self._lines if line.strip())

    async def settle(self, timeout: float) -> str:
        """The kept lines once the server closed its stderr (or `timeout` passed): after an exit,
        its last words may still be in the pipe."""
        self.release_sink()
        if self._pump is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._pump), timeout)
        return self.text()

    async def close(self) -> None:
        self.release_sink()
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
        if self._transport is not None:
            self._transport.close()
        else:
            self._source.close()

    async def _read_all(self, reader: asyncio.StreamReader) -> None:
        pending = ""
        while chunk := await reader.read(_CHUNK):
            *complete, pending = (pending + chunk.decode("utf-8", errors="replace")).split("\n")
            for line in complete:
                self._keep(line)
            if len(pending) > _MAX_LINE:  # a server that never ends its line must not grow this forever
                self._keep(pending)
                pending = ""
        self._keep(pending)

    def _keep(self, line: str) -> None:
        line = line.rstrip()
        if line:
            self._lines.append(line)
            log.debug("MCP server %s: %s", self.server, line)
