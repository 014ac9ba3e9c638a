"""Running the app under uvicorn, with a shutdown that ends live event streams first.

uvicorn waits for open responses before it runs the app's lifespan shutdown, and an SSE response
never ends by itself; so the bus subscriptions are closed as soon as shutdown begins, and each
stream finishes cleanly instead of being cancelled at the graceful-shutdown deadline.
"""

from __future__ import annotations

import socket

import uvicorn
from fastapi import FastAPI

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
        runtime = getattr(self.app.state, "runtime", None)
        if runtime is not None:
            runtime.bus.close_all()
        await super().shutdown(sockets)

    @property
    def bound_port(self) -> int:
        port: int = self.servers[0].sockets[0].getsockname()[1]
        return port
