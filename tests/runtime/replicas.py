"""Server replicas as real subprocesses (`agentforge serve`) on one Postgres schema, for tests and the
bench: start, talk to over HTTP, read SSE from, kill -9."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from agentforge.client.sse import ServerEvent, aiter_events
from tests.databases import owner_url_for
from tests.e2e.harness import fake_provider_config
from tests.fakes.openai_server import FakeOpenAI

START_TIMEOUT = 90.0


@dataclass
class Replica:
    name: str
    process: asyncio.subprocess.Process
    url: str
    client: httpx2.AsyncClient

    async def prompt(self, session_id: str, text: str) -> httpx2.Response:
        body = {"parts": [{"type": "text", "text": text}]}
        return await self.client.post(f"/session/{session_id}/message", json=body)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGKILL)


@dataclass
class Cluster:
    """Replicas of one database, sharing one workspace and the fake provider."""

    tmp_path: Path
    database_url: str
    fake: FakeOpenAI
    config: dict[str, Any] = field(default_factory=dict)  # beside the fake provider's
    replicas: list[Replica] = field(default_factory=list)

    async def start(self, name: str) -> Replica:
        config = self.tmp_path / "agentforge.json"
        config.write_text(json.dumps({**fake_provider_config(self.fake), **self.config}))
        workspace = self.tmp_path / "ws"
        workspace.mkdir(exist_ok=True)
        env = {
            **os.environ,
            "XDG_CONFIG_HOME": str(self.tmp_path / "xdg"),
            "AGENTFORGE_DATABASE_OWNER_URL": owner_url_for(self.database_url) or "",
        }
        with (self.tmp_path / f"{name}.log").open("wb") as log:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "agentforge.cli",
                "serve",
                "--port",
                "0",
                "--config",
                str(config),
                "--data-dir",
                str(self.tmp_path / f"data-{name}"),
                "--db",
                self.database_url,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                env=env,
                cwd=workspace,
            )
        assert process.stdout is not None
        try:
            line = (await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT)).decode()
        except BaseException:
            process.kill()
            raise
        if not line.startswith("Agent Forge listening on "):
            process.kill()
            raise RuntimeError(f"replica {name} did not start: {line!r} {self.log(name)}")
        url = line.split()[-1]
        replica = Replica(name, process, url, httpx2.AsyncClient(base_url=url, timeout=30))
        self.replicas.append(replica)
        return replica

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text(errors="replace")[-4000:]

    async def stop(self) -> None:
        for replica in self.replicas:
            await replica.client.aclose()
            if replica.process.returncode is None:
                replica.process.send_signal(signal.SIGTERM)
        for replica in self.replicas:
            try:
                await asyncio.wait_for(replica.process.wait(), 15)
            except TimeoutError:
                replica.kill()
                await replica.process.wait()


@contextlib.asynccontextmanager
async def replicas(
    tmp_path: Path, database_url: str, fake: FakeOpenAI, *names: str, config: dict[str, Any] | None = None
) -> AsyncIterator[list[Replica]]:
    cluster = Cluster(tmp_path, database_url, fake, config or {})
    try:
        # Together, as a deployment starts them (their migrations and grants take turns).
        yield list(await asyncio.gather(*(cluster.start(name) for name in names)))
    finally:
        await cluster.stop()


@dataclass
class Stream:
    """`GET /event?sessionID=` read in the background: every event with its arrival time."""

    events: list[tuple[float, ServerEvent]] = field(default_factory=list)
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    async def _read(self, client: httpx2.AsyncClient, session_id: str) -> None:
        params = {"sessionID": session_id}
        async with client.stream("GET", "/event", params=params, timeout=None) as response:
            async for event in aiter_events(response.aiter_bytes()):
                self.events.append((asyncio.get_running_loop().time(), event))
                if event.type == "server.connected":
                    self.connected.set()
                self.changed.set()

    @classmethod
    async def open(cls, client: httpx2.AsyncClient, session_id: str) -> Stream:
        stream = cls()
        stream.task = asyncio.create_task(stream._read(client, session_id))
        await asyncio.wait_for(stream.connected.wait(), 10)
        return stream

    def of_session(self) -> list[ServerEvent]:
        return [event for _at, event in self.events if not event.type.startswith("server.")]

    async def wait_for(self, predicate: Any, timeout: float = 15.0) -> ServerEvent:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            for _at, event in self.events:
                if predicate(event):
                    return event
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise TimeoutError(f"no matching event among {[e.type for _a, e in self.events]}")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), remaining)

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
