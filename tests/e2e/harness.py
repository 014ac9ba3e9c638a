"""A real server on a loopback port, and an SSE collector, for end-to-end tests."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from fastapi import FastAPI

from agentforge.client.sse import aiter_events
from agentforge.clock import SYSTEM_CLOCK, Clock
from agentforge.config import Settings, load_settings
from agentforge.runtime.runtime import Runtime
from agentforge.server.app import create_app
from agentforge.server.serve import ForgeServer
from agentforge.telemetry.observer import Telemetry
from tests.databases import owner_url_for
from tests.fakes.openai_server import FakeOpenAI

# What a confined tenant's sandboxed commands need to run this checkout's Python (MCP servers and
# scripts from tests/): the repository (its virtualenv included) and the base interpreter.
REPOSITORY = Path(__file__).resolve().parents[2]
PYTHON_READABLE = [str(REPOSITORY), sys.base_prefix]


def fake_provider_config(fake: FakeOpenAI, **model: Any) -> dict[str, Any]:
    limits = model.pop("limit", {"context": 128_000, "output": 4096})
    return {
        "model": "fake/test-model",
        "provider": {
            "fake": {
                "api": "openai",
                "options": {"baseURL": fake.base_url, "apiKey": "sk-test"},
                "models": {"test-model": {"limit": limits, **model}},
            }
        },
        "retry": {"max_attempts": 2},
        # Title generation would take a scripted reply out of turn; tests that want it enable it.
        "title": False,
    }


@dataclass
class LiveServer:
    url: str
    settings: Settings
    fake: FakeOpenAI
    client: httpx2.AsyncClient
    workspace: Path
    app: FastAPI
    clock: Clock = SYSTEM_CLOCK  # what the server's back-off and deadlines wait on

    @property
    def runtime(self) -> Runtime:
        """The server's runtime (in-process servers only), for what a test must reach behind HTTP."""
        rt: Runtime = self.app.state.runtime
        return rt

    async def background_settled(self) -> None:
        """Wait until the work the server keeps running beside the requests (titles, pruning,
        background prompts) has ended, including work that work started."""
        while self.runtime.background:
            await asyncio.gather(*list(self.runtime.background), return_exceptions=True)

    async def create_session(self, **body: Any) -> dict[str, Any]:
        response = await self.client.post("/session", json=body or None)
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    async def prompt(self, session_id: str, text: str, **extra: Any) -> httpx2.Response:
        body = {"parts": [{"type": "text", "text": text}], **extra}
        return await self.client.post(f"/session/{session_id}/message", json=body)


@contextlib.asynccontextmanager
async def start_live_server(
    tmp_path: Path,
    fake: FakeOpenAI,
    config: dict[str, Any] | None = None,
    *,
    database_url: str | None = None,
    directory: Path | None = None,
    clock: Clock = SYSTEM_CLOCK,
    telemetry: Telemetry | None = None,
) -> AsyncIterator[LiveServer]:
    """`directory`: the server's own directory (the default tenant's workspace), `tmp_path/workspace`
    unless given; the data directory is `tmp_path/data` either way."""
    workspace = directory or tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    settings = load_settings(
        data_dir=tmp_path / "data",
        database_url=database_url or f"sqlite:///{tmp_path / 'forge.db'}",
        # Postgres: migrations, grants and start-up recovery run as the owner, the server as runtime.
        database_owner_url=owner_url_for(database_url) if database_url else None,
        directory=workspace,
        config_override=config or fake_provider_config(fake),
    )
    app = create_app(settings, clock=clock, telemetry=telemetry)
    server = ForgeServer(app, host="127.0.0.1", port=0, log_level="warning")
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.005)
    url = f"http://127.0.0.1:{server.bound_port}"
    client = httpx2.AsyncClient(base_url=url, timeout=30, verify=_tls_context())
    try:
        yield LiveServer(
            url=url,
            settings=settings,
            fake=fake,
            client=client,
            workspace=workspace,
            app=app,
            clock=clock,
        )
    finally:
        # The client's idle connections go first: the server's shutdown would wait for them.
        await client.aclose()
        server.should_exit = True
        await task


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """Shared by every test's client: loading the CA bundle costs ~30 ms each time."""
    return ssl.create_default_context()


@dataclass
class Frame:
    id: str | None
    type: str
    properties: dict[str, Any]
    received_at: float


@dataclass
class EventCollector:
    """Reads `GET /event` in the background and keeps every frame with its arrival time."""

    frames: list[Frame] = field(default_factory=list)
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def _read(self, client: httpx2.AsyncClient, path: str, headers: dict[str, str]) -> None:
        async with client.stream("GET", path, headers=headers, timeout=None) as response:
            async for event in aiter_events(response.aiter_bytes()):
                loop = asyncio.get_running_loop()
                frame_id = str(event.seq) if event.seq is not None else None
                self.frames.append(Frame(frame_id, event.type, event.properties, loop.time()))
                if event.type == "server.connected":
                    self.connected.set()
                self._changed.set()

    async def start(self, client: httpx2.AsyncClient, path: str = "/event", **headers: str) -> None:
        self._task = asyncio.create_task(self._read(client, path, headers))
        await asyncio.wait_for(self.connected.wait(), 5)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def of_type(self, kind: str) -> list[Frame]:
        return [f for f in self.frames if f.type == kind]

    async def wait_for(self, predicate: Any, timeout: float = 10.0, *, start: int = 0) -> Frame:
        """The first frame from index `start` on that matches, waiting for it if need be."""
        deadline = asyncio.get_running_loop().time() + timeout
        seen = start
        while True:
            for frame in self.frames[seen:]:
                if predicate(frame):
                    return frame
            seen = len(self.frames)
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise TimeoutError(f"no matching event; got {[f.type for f in self.frames]}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
