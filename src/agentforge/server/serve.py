"""Running the app under uvicorn, with a shutdown that drains turns and ends live event streams.

On SIGTERM, before uvicorn stops listening, the runtime drains (runtime/lifecycle.py): new turns get
503 while running ones have `server.shutdown_grace` seconds to finish, and readiness fails so a load
balancer moves traffic away. uvicorn then waits for open responses before it runs the app's
lifespan shutdown, and an SSE response never ends by itself; so the bus subscriptions are closed
(each with a last `server.shutdown` event) and each stream finishes cleanly instead of being
cancelled at the graceful-shutdown deadline.
"""

from __future__ import annotations

import asyncio
import logging
import socket

import uvicorn
from fastapi import FastAPI

from agentforge.runtime.lifecycle import drain
from agentforge.runtime.runtime import Runtime

GRACEFUL_SHUTDOWN_SECONDS = 5
_SHUTDOWN_POLL_SECONDS = 0.01

log = logging.getLogger(__name__)


class ForgeServer(uvicorn.Server):
    def __init__(self, app: FastAPI, *, host: str, port: int, log_level: str = "info") -> None:
        self.app = app
        super().__init__(
            uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level=log_level,
                # Our logging (telemetry/logs.py) renders uvicorn's lines too: no handlers of its own.
                log_config=None,
                lifespan="on",
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
                # httptools' C parser, named rather than "auto" (which falls back to h11 unnoticed):
                # h11's pure-Python state machine cost ~3% of the instructions of a plain turn
                # (its request, its response and the SSE frames it carries).
                http="httptools",
                # Named too: "auto" takes uvloop wherever it happens to be installed, under which
                # commands' stdout is a socket (`> /dev/stderr` fails), their spawn closes no
                # inherited descriptors and subprocess transports are not asyncio's classes
                # (bench/README.md, fourteenth round).
                loop="asyncio",
            )
        )

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        runtime: Runtime | None = getattr(self.app.state, "runtime", None)
        if runtime is not None:
            await drain(runtime, runtime.settings.config.server.shutdown_grace)
        await self._close_connections(sockets)
        if not self.force_exit:
            await self.lifespan.shutdown()

    async def _close_connections(self, sockets: list[socket.socket] | None) -> None:
        """uvicorn's own steps, polled every 10 ms where uvicorn sleeps 100 ms first and then polls
        every 100 ms: a stop takes as long as its open responses, not a fixed tenth of a second."""
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        try:
            async with asyncio.timeout(self.config.timeout_graceful_shutdown):
                # uvicorn's state has no event to wait on.
                while (self.server_state.connections or self.server_state.tasks) and not self.force_exit:  # noqa: ASYNC110
                    await asyncio.sleep(_SHUTDOWN_POLL_SECONDS)
        except TimeoutError:
            log.error(
                "cancelling %d response(s) still running at the graceful-shutdown deadline",
                len(self.server_state.tasks),
            )
            for task in self.server_state.tasks:
                task.cancel(msg="graceful shutdown deadline")
        for server in self.servers:
            await server.wait_closed()

    @property
    def bound_port(self) -> int:
        port: int = self.servers[0].sockets[0].getsockname()[1]
        return port
