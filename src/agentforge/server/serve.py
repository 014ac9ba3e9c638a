"""Running the app under uvicorn, with a shutdown that drains turns and ends live event streams.

On SIGTERM, before uvicorn stops listening, the runtime drains (runtime/lifecycle.py): new turns get
503 while running ones have `server.shutdown_grace` seconds to finish, and readiness fails so a load
balancer moves traffic away. uvicorn then waits for open responses before it runs the app's
lifespan shutdown, and an SSE response never ends by itself; so the bus subscriptions are closed
(each with a last `server.shutdown` event) and each stream finishes cleanly instead of being
cancelled at the graceful-shutdown deadline.
"""

from __future__ import annotations

import socket

import uvicorn
from fastapi import FastAPI

from agentforge.runtime.lifecycle import drain
from agentforge.runtime.runtime import Runtime

GRACEFUL_SHUTDOWN_SECONDS = 5


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
            )
        )

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        runtime: Runtime | None = getattr(self.app.state, "runtime", None)
        if runtime is not None:
            await drain(runtime, runtime.settings.config.server.shutdown_grace)
        await super().shutdown(sockets)

    @property
    def bound_port(self) -> int:
        port: int = self.servers[0].sockets[0].getsockname()[1]
        return port
