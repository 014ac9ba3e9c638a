"""`agentforge serve` as a child process, for what only a real process shows: signals and kill -9."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from tests.e2e.harness import fake_provider_config
from tests.fakes.openai_server import FakeOpenAI

START_TIMEOUT = 60.0


@dataclass
class ServerProcess:
    process: asyncio.subprocess.Process
    url: str
    client: httpx2.AsyncClient

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    async def exited(self, timeout: float = 30.0) -> int:
        return await asyncio.wait_for(self.process.wait(), timeout)


@dataclass
class ServerFiles:
    """Where a served process keeps its config, data and workspace (kept across restarts)."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "agentforge.json"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def database(self) -> Path:
        return self.data_dir / "agentforge.db"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    def write_config(self, fake: FakeOpenAI, **extra: Any) -> None:
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.config.write_text(json.dumps({**fake_provider_config(fake), **extra}))


@contextlib.asynccontextmanager
async def served(files: ServerFiles) -> AsyncIterator[ServerProcess]:
    """Start `agentforge serve` on a free port; on exit, kill it if it still runs."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(files.root / "xdg")}
    for name in ("AGENTFORGE_URL", "AGENTFORGE_DATABASE_URL", "AGENTFORGE_HOST", "AGENTFORGE_PORT"):
        env.pop(name, None)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentforge.cli",
        "serve",
        "--port",
        "0",
        "--config",
        str(files.config),
        "--data-dir",
        str(files.data_dir),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
        cwd=files.workspace,
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT)).decode()
        assert line.startswith("Agent Forge listening on "), f"server did not start: {line!r}"
        url = line.split()[-1]
        async with httpx2.AsyncClient(base_url=url, timeout=30) as client:
            yield ServerProcess(process, url, client)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGKILL)
            await process.wait()
